"""``singleton_lock_describe``: the call behind a lock, in ``celery locks`` and in the signals.

Given a worker whose app describes its calls (and one whose app does not), when a task holds its
lock and a duplicate meets it, then ``locks list`` (table and JSON) and ``locks show`` name the
call (``account_id=42``) and the ``lock_*`` signals carry it; with the setting off, nothing of the
arguments is stored or sent.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.helpers import wait_started
from tests.integration.test_cli import run_cli
from tests.support.waits import wait_for


def _signals(events_redis, name):
    return [s for s in (json.loads(e) for e in events_redis.lrange("signals", 0, -1)) if s["signal"] == name]


@pytest.mark.parametrize("app, described", [("tests.integration.proj_describe", "account_id=42"),
                                            ("tests.integration.proj_signals", None)])
def test_the_call_is_shown_only_when_the_app_describes_it(proj, start_worker, events_redis, app, described):
    start_worker(app=app)
    # Long enough that it still holds its lock after a duplicate and three CLI runs on a loaded machine
    holder = proj.sync.delay(42, payload="secret", duration=12.0)
    wait_started(events_redis, 1)
    assert proj.sync.delay(42).get(timeout=20) is None  # a duplicate, skipped

    listed = run_cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    (record,) = json.loads(listed.stdout)
    assert record["describe"] == (described or "")
    table = run_cli("list").stdout
    assert ("CALL" in table and "account_id=42" in table) if described else "CALL" not in table
    shown = run_cli("show", record["digest"][:8]).stdout
    assert ("call: account_id=42" in shown) if described else "call: - (not described" in shown
    assert "secret" not in listed.stdout + table + shown  # lock_key names account_id only

    acquired = wait_for(lambda: _signals(events_redis, "lock_acquired"), 10, what="lock_acquired")
    conflicts = _signals(events_redis, "lock_conflict")
    assert [s.get("description") for s in acquired + conflicts] == [described, described]
    holder.get(timeout=30)
    released = wait_for(lambda: _signals(events_redis, "lock_released"), 10, what="lock_released")
    assert [s.get("description") for s in released] == [described]
