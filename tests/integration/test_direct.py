"""Kept connections (``store/direct.py``) against a real redis-server: replies go to the caller
that asked, broken connections are replaced, a timed-out one never answers the next call."""

from __future__ import annotations

import threading

import pytest
import redis

from celery_singleton_lock.store.direct import Direct, direct_for
from tests.support.servers import RedisServer


@pytest.fixture
def server():
    with RedisServer() as started:
        yield started


def _client(server, **options) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True, **options)


def _connections(admin: redis.Redis, name: str) -> int:
    return sum(1 for client in admin.client_list() if client.get("name") == name)


def test_connections_are_kept_and_a_reply_error_keeps_its_connection(server):
    client, admin = _client(server, client_name="kept"), _client(server)
    ask = Direct(client)
    assert ask("SET", "k", "v") == "OK"
    with pytest.raises(redis.exceptions.ResponseError):
        ask("INCR", "k")
    assert ask("GET", "k") == "v"
    assert _connections(admin, "kept") == 1
    ask.discard()


def test_a_killed_connection_is_replaced_and_the_call_answered(server):
    client, admin = _client(server), _client(server)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    assert ask("GET", "k") == "1"
    ask.discard()


def test_a_timed_out_call_leaves_no_reply_for_the_next_one(server):
    client = _client(server, socket_timeout=0.3)
    ask = Direct(client)
    ask("SET", "a", "first")
    server.pause()
    try:
        with pytest.raises(redis.exceptions.TimeoutError):
            ask("GET", "a")
    finally:
        server.resume()
    assert ask("SET", "b", "second") == "OK"  # not the late "first" of the timed-out GET
    assert ask("GET", "b") == "second"
    ask.discard()


def test_a_script_flushed_from_the_server_is_loaded_again(server):
    client, admin = _client(server), _client(server)
    script = client.register_script("return ARGV[1] .. KEYS[1]")
    ask = Direct(client)
    assert ask.script(script, ["k"], ["x"]) == "xk"
    admin.script_flush()
    assert ask.script(script, ["k"], ["y"]) == "yk"
    ask.discard()


def test_each_thread_reads_its_own_replies(server):
    client = _client(server)
    ask = Direct(client)
    wrong = []

    def work(n: int) -> None:
        for i in range(200):
            value = f"{n}-{i}"
            ask("SET", f"t:{n}", value)
            if ask("GET", f"t:{n}") != value:
                wrong.append(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert wrong == []
    ask.discard()


def test_a_cluster_client_is_asked_through_redis_py_itself():
    assert direct_for(object()) is None
