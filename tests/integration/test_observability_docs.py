"""docs/observability.md's "Renewal health" probe runs as written: against a real Redis holding a
lock, it sets the gauges for that lock's name (it read a store attribute that does not exist)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from celery import Celery
from prometheus_client import REGISTRY

from celery_singleton_lock import SharedLock
from celery_singleton_lock.runtime import runtime_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def _probe_source() -> str:
    section = DOC.read_text(encoding="utf-8").split("### Renewal health", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_renewal_health_probe_reads_a_held_lock(test_env, suite_servers):
    app = Celery("probe", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = test_env["CSL_LOCK_URL"]
    app.conf.singleton_lock_prefix = test_env["CSL_TEST_PREFIX"]  # the run's keys: the suite deletes them
    name = f"probe-{uuid.uuid4().hex[:6]}"
    namespace: dict = {}
    exec(compile(_probe_source(), str(DOC), "exec"), namespace)
    try:
        with SharedLock(name, ttl=30, app=app).hold():
            namespace["probe"](app)
        assert REGISTRY.get_sample_value("singleton_lock_stale", {"task": name}) == 0
        since = REGISTRY.get_sample_value("singleton_lock_since_renewal_seconds", {"task": name})
        assert since is not None and 0 <= since < 30
    finally:
        for gauge in (namespace.get("SINCE_RENEWAL"), namespace.get("STALE")):
            if gauge is not None:
                REGISTRY.unregister(gauge)
        runtime_for(app).close()
        suite_servers.clean()
