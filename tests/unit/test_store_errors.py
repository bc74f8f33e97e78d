"""Telling an outage of the lock store from a lock store that is set up wrong (no Redis needed).

The errors are built as redis-py builds them from Redis's replies; the integration
tests meet the same ones from real servers.
"""

from __future__ import annotations

import pytest
import redis.exceptions as rex

from celery_singleton_lock.store import redact
from celery_singleton_lock.store.errors import SCRIPT_COMMANDS, error_text, is_permanent, permanent_problem
from celery_singleton_lock.store.quorum import QuorumUnavailable

SCRIPT_NOPERM = ("The user executing the script can't run this command or subcommand script: "
                 "c85fd9c8fd90fa4bb75b35ea920ff577800e373d, on @user_script:21.")


@pytest.mark.parametrize("error, words", [
    (rex.AuthenticationError("invalid username-password pair or user is disabled."), "authentication failed"),
    (rex.AuthenticationError("Authentication required."), "user and password"),
    (rex.NoPermissionError("this user has no permissions to run the 'evalsha' command"), "lacks a permission"),
    (rex.ResponseError(SCRIPT_NOPERM), "lacks a permission"),
    (rex.ReadOnlyError("You can't write against a read only replica."), "read-only replica"),
    (rex.ResponseError("DB index is out of range"), "database index"),
    (rex.ConnectionError("Invalid Database"), "database index"),
    (rex.ResponseError("unknown command 'EVALSHA', with args beginning with: "), "does not run a command"),
    (rex.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), "singleton_lock_prefix"),
])
def test_a_misconfigured_store_is_permanent_and_says_what_to_do(error, words):
    problem = permanent_problem(error)
    assert problem is not None and is_permanent(error)
    assert words in problem
    assert str(error).strip() in problem  # the server's own words travel with ours


@pytest.mark.parametrize("error", [
    rex.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
    rex.TimeoutError("Timeout reading from socket"),
    ConnectionResetError(104, "Connection reset by peer"),
    rex.BusyLoadingError("Redis is loading the dataset in memory"),
    rex.TryAgainError("Multiple keys request during rehashing of slot"),
    rex.ClusterDownError("The cluster is down"),
    rex.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
    rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
    rex.ResponseError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."),
    rex.ResponseError("NOREPLICAS Not enough good replicas to write."),
])
def test_an_outage_is_not_permanent(error):
    assert permanent_problem(error) is None


def test_a_command_refused_inside_a_script_names_the_script_and_its_commands():
    problem = permanent_problem(rex.ResponseError(SCRIPT_NOPERM), "adopt")
    assert "adopt script" in problem
    assert all(command in problem for command in SCRIPT_COMMANDS["adopt"])
    assert {"get", "set", "del"} <= set(SCRIPT_COMMANDS["adopt"])
    assert {"get", "time", "set"} <= set(SCRIPT_COMMANDS["fence"])
    assert {"del", "publish", "zadd"} <= set(SCRIPT_COMMANDS["release"])


def test_a_quorum_is_misconfigured_only_when_misconfigured_masters_leave_no_majority():
    auth = rex.AuthenticationError("invalid username-password pair or user is disabled.")
    down = rex.ConnectionError("Connection refused.")
    one_wrong = QuorumUnavailable("lock k", {0: auth, 1: down}, size=3, quorum=2)
    two_wrong = QuorumUnavailable("lock k", {0: auth, 2: auth}, size=3, quorum=2)
    assert permanent_problem(one_wrong) is None  # the master that is down may come back
    problem = permanent_problem(two_wrong)
    assert problem is not None and "master 0: authentication failed" in problem and "master 2" in problem


def test_error_text_keeps_the_message_that_redis_py_8_repr_drops():
    error = rex.AuthenticationError("invalid username-password pair or user is disabled.")
    assert error_text(error) == "AuthenticationError: invalid username-password pair or user is disabled."
    assert error_text(rex.ConnectionError()) == "ConnectionError"


@pytest.mark.parametrize("url, shown", [
    ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
    ("rediss://alice:s3cret@h:6380/1?ssl_ca_certs=/ca.pem", "rediss://alice:***@h:6380/1?ssl_ca_certs=/ca.pem"),
    ("unix:///run/redis.sock?password=s3cret&db=2", "unix:///run/redis.sock?password=***&db=2"),
    ("sentinel://:s3cret@h1:26379;sentinel://:s3cret@h2:26379", "sentinel://:***@h1:26379;sentinel://:***@h2:26379"),
    (("redis://:s3cret@a:1", "redis://b:2"), "redis://:***@a:1, redis://b:2"),
    ("redis://h:6379/0", "redis://h:6379/0"),
])
def test_urls_are_shown_without_their_password(url, shown):
    assert redact(url) == shown
