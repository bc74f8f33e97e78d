"""The metrics extra in one process: what eager runs count, and the settings refused.

Given an app with its own ``CollectorRegistry`` (``singleton_lock_metrics_registry``) on the
in-memory store, when executions run, meet a held lock or fail, then the registry's series say
so; a wrong metrics setting is refused with an error naming it. (The worker's port, under every
pool, is ``tests/integration/test_metrics.py``.)
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest
import redis
from celery import Celery
from prometheus_client import CollectorRegistry

from celery_singleton_lock import ConfigurationError, LockedTask
from celery_singleton_lock.metrics import mark_process_dead, metrics_address, metrics_for
from celery_singleton_lock.runtime import peek_runtime
from celery_singleton_lock.store import MemoryBackend


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def app(registry: CollectorRegistry) -> Iterator[Celery]:
    app = Celery("metrics_unit", set_as_current=False)
    app.conf.update(singleton_lock_backend=MemoryBackend(), singleton_lock_metrics_registry=registry)
    yield app
    runtime = peek_runtime(app)
    if runtime is not None:
        runtime.close()


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_a_run_a_duplicate_and_a_failure_are_counted(app: Celery, registry: CollectorRegistry) -> None:
    @app.task(base=LockedTask, bind=True, name="t.nest", lock_key=("key",), shared=False)
    def nest(self, key, inner=False):
        # A second call of the same key while this one holds it: a duplicate, skipped.
        return None if inner else self.apply(args=(key,), kwargs={"inner": True}).get()

    @app.task(base=LockedTask, name="t.boom", shared=False)
    def boom(key):
        raise ValueError(key)

    assert nest.apply(args=("a",)).get() is None
    boom.apply(args=("b",))

    assert _value(registry, "singleton_lock_acquired_total", task="t.nest") == 1
    assert _value(registry, "singleton_lock_duplicates_total", task="t.nest", outcome="skipped", at="run") == 1
    assert _value(registry, "singleton_lock_released_total", task="t.nest", exit="success") == 1
    assert _value(registry, "singleton_lock_released_total", task="t.boom", exit="failure") == 1
    assert _value(registry, "singleton_lock_held", task="t.nest") == 0
    assert _value(registry, "singleton_lock_held_seconds_count", task="t.boom") == 1
    assert _value(registry, "singleton_lock_acquire_seconds_count", task="t.nest") == 1


def test_the_settings_are_checked() -> None:
    conf = {"singleton_lock_metrics_port": "127.0.0.1:9808"}
    assert metrics_address(conf) == ("127.0.0.1", 9808)
    assert metrics_address({"singleton_lock_metrics_port": 9808}) == ("", 9808)
    for wrong in ("nine", 70000, True, "host:"):
        with pytest.raises(ConfigurationError, match="singleton_lock_metrics_port"):
            metrics_address({"singleton_lock_metrics_port": wrong})


@pytest.mark.parametrize("conf, says", [
    ({"singleton_lock_metrics_port": 9808, "singleton_lock_metrics_registry": CollectorRegistry()}, "not both"),
    ({"singleton_lock_metrics_registry": object()}, "CollectorRegistry"),
])
def test_a_wrong_combination_is_refused(conf: dict, says: str) -> None:
    app = Celery("metrics_wrong", set_as_current=False)
    app.conf.update(conf)
    with pytest.raises(ConfigurationError, match=says):
        metrics_for(app)


def test_metrics_are_off_unless_asked_for() -> None:
    assert metrics_for(Celery("metrics_off", set_as_current=False)) is None


class _Refusing(MemoryBackend):
    """An in-memory store that answers every ask for a lock with ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def acquire(self, *args, **kwargs):  # type: ignore[override]
        raise self.error


@pytest.mark.parametrize("error, kind", [
    (redis.ConnectionError("Connection refused"), "outage"),
    (redis.ResponseError("NOPERM this user has no permissions to run the 'set' command"), "misconfiguration"),
])
def test_a_store_error_is_counted_by_kind(registry: CollectorRegistry, error: BaseException, kind: str) -> None:
    app = Celery("metrics_store_errors", set_as_current=False)
    app.conf.update(singleton_lock_backend=_Refusing(error), singleton_lock_metrics_registry=registry)

    @app.task(base=LockedTask, name="t.refused", on_lock_error="raise", shared=False)
    def refused():
        return "ran"

    try:
        assert refused.apply().failed()
    finally:
        runtime = peek_runtime(app)
        if runtime is not None:
            runtime.close()
    assert _value(registry, "singleton_lock_store_errors_total", task="t.refused", kind=kind) == 1
    assert _value(registry, "singleton_lock_acquired_total", task="t.refused") == 0


def test_places_in_use_count_the_runs_holding_places_of_keys_with_a_limit(app: Celery,
                                                                             registry: CollectorRegistry) -> None:
    seen = {}

    @app.task(base=LockedTask, bind=True, name="t.limited", lock_key=("key",), lock_limit=3, shared=False)
    def limited(self, key, depth=0):
        # Each run calls the next while it holds its place: three places of one key taken at once
        seen[depth] = _value(registry, "singleton_lock_places_in_use", task="t.limited")
        if depth < 2:
            self.apply(args=(key,), kwargs={"depth": depth + 1}).get()

    @app.task(base=LockedTask, name="t.single", shared=False)
    def single(key):
        seen["single"] = _value(registry, "singleton_lock_places_in_use", task="t.single")

    limited.apply(args=("a",)).get()
    single.apply(args=("b",)).get()
    assert seen == {0: 1, 1: 2, 2: 3, "single": 0}
    assert _value(registry, "singleton_lock_places_in_use", task="t.limited") == 0
    assert _value(registry, "singleton_lock_held", task="t.single") == 0


def test_the_tally_counts_exactly_what_prometheus_clients_own_metrics_count() -> None:
    # Given a histogram, counter and gauge kept in a tally, and a prometheus_client twin of each
    from prometheus_client import Counter, Gauge, Histogram

    from celery_singleton_lock.metrics.families import TallyCollector
    from celery_singleton_lock.metrics.instruments import _Family
    from celery_singleton_lock.metrics.tally import Tally

    tally, ours, public = Tally(None), CollectorRegistry(), CollectorRegistry()
    ours.register(TallyCollector(tally))
    families = (_Family("histogram", "h", "h", ["t"], (0.001, 0.5, 1, 10)), _Family("counter", "c", "c", ["t"]),
                _Family("gauge_livesum", "g", "g", ["t"]))
    with tally.lock:
        histogram, counter, gauge = (family.index(tally, ["x"]) for family in families)
    twins = (Histogram("h", "h", ["t"], buckets=(0.001, 0.5, 1, 10), registry=public).labels("x"),
             Counter("c", "c", ["t"], registry=public).labels("x"), Gauge("g", "g", ["t"], registry=public).labels("x"))
    # When the same amounts are observed: on a bound, between bounds, past the last, zero
    for amount in (0.0, 0.001, 0.0011, 0.5, 0.75, 1.0, 9.99, 10.0, 10.01, 1e6):
        with tally.lock:
            histogram.observe(tally.histograms.values, amount)
            tally.counters.values[counter] += 1
            tally.gauges.values[gauge] += 1
        twins[0].observe(amount)
        twins[1].inc()
        twins[2].inc()
    with tally.lock:
        tally.gauges.values[gauge] -= 1
    twins[2].dec()

    # then every sample is the same
    def samples(registry: CollectorRegistry) -> dict:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in registry.collect()
                for s in family.samples if not s.name.endswith("_created")}

    assert samples(ours) == samples(public)


def test_the_files_a_process_writes_read_as_its_registry_does(tmp_path, monkeypatch) -> None:
    # Given metrics kept in a multiprocess directory, and the same events counted in memory
    from prometheus_client.multiprocess import MultiProcessCollector

    from celery_singleton_lock.metrics.instruments import LockMetrics

    in_memory, registry = LockMetrics(CollectorRegistry()), CollectorRegistry()
    in_files = LockMetrics(None, str(tmp_path))
    shown_by_memory = CollectorRegistry()
    from celery_singleton_lock.metrics.families import TallyCollector

    shown_by_memory.register(TallyCollector(in_memory.tally))
    MultiProcessCollector(registry, str(tmp_path))
    # When each meets the same events, more series than the first buffer holds included
    for metrics in (in_memory, in_files):
        for n in range(300):
            metrics.on_acquired(f"task{n}", f"k{n}", "id", 0.002)
            metrics.on_conflict(f"task{n}", "skip", "run")
        for n in range(0, 300, 2):
            metrics.on_released(f"task{n}", f"k{n}", "id", "success")
        metrics.on_store_error("task0", "outage")
        metrics.on_waited("task1", 0.3, True)

    # then prometheus_client's MultiProcessCollector reads the files as the registry shows the memory
    def samples(registry: CollectorRegistry) -> dict:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in registry.collect()
                for s in family.samples if not s.name.startswith("singleton_lock_held_seconds")}

    assert samples(registry) == samples(shown_by_memory)
    assert samples(registry)[("singleton_lock_held", (("task", "task1"),))] == 1
    # and once the process is marked dead its gauges go, its counters stay
    in_files.tally.close()
    mark_process_dead(os.getpid(), str(tmp_path))
    assert ("singleton_lock_held", (("task", "task1"),)) not in samples(registry)
    assert samples(registry)[("singleton_lock_acquired_total", (("task", "task1"),))] == 1


def test_two_sets_of_metrics_of_one_process_keep_files_of_their_own(tmp_path) -> None:
    # Given two apps of one process whose metrics both go to the multiprocess directory
    from prometheus_client.multiprocess import MultiProcessCollector

    from celery_singleton_lock.metrics.instruments import LockMetrics

    first, second = LockMetrics(None, str(tmp_path)), LockMetrics(None, str(tmp_path))
    # When each takes a lock of the same task
    first.on_acquired("t", "k1", "a", 0.001)
    second.on_acquired("t", "k2", "b", 0.001)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(tmp_path))
    # then both are counted: neither file overwrote the other
    assert registry.get_sample_value("singleton_lock_acquired_total", {"task": "t"}) == 2
    assert registry.get_sample_value("singleton_lock_held", {"task": "t"}) == 2
    for metrics in (first, second):
        metrics.tally.close()


def test_a_scrape_that_asks_for_some_names_finds_the_librarys(app: Celery, registry: CollectorRegistry) -> None:
    # Given an app counting into a registry, and one run of a locked task
    @app.task(base=LockedTask, shared=False)
    def job(x: int) -> int:
        return x

    job.apply(args=(1,))
    # When a scrape asks for one name only (Prometheus' name[] parameter)
    restricted = registry.restricted_registry(["singleton_lock_acquired_total", "singleton_lock_held"])
    shown = {s.name: s.value for family in restricted.collect() for s in family.samples}
    # then the library's series of that name are there
    assert shown["singleton_lock_acquired_total"] == 1 and shown["singleton_lock_held"] == 0
    # and a name the registry already has from the library is refused, as for any clash
    from prometheus_client import Counter

    with pytest.raises(ValueError):
        Counter("singleton_lock_acquired", "clash", registry=registry)


def test_a_shared_lock_is_counted_under_its_name_each_of_its_places_apart(app: Celery,
                                                                         registry: CollectorRegistry) -> None:
    from celery_singleton_lock import LockedError, SharedLock

    lock = SharedLock("payments-api", limit=2, on_locked="raise", app=app)
    # Given two places of one key held by one process (outside any task), and a third refused
    with lock.hold():
        with lock.hold():
            assert _value(registry, "singleton_lock_held", task="payments-api") == 2
            assert _value(registry, "singleton_lock_places_in_use", task="payments-api") == 2
            with pytest.raises(LockedError):
                with lock.hold():
                    pass
        assert _value(registry, "singleton_lock_held", task="payments-api") == 1
    # then each is counted under the lock's name, and given back one by one
    assert _value(registry, "singleton_lock_held", task="payments-api") == 0
    assert _value(registry, "singleton_lock_acquired_total", task="payments-api") == 2
    assert _value(registry, "singleton_lock_released_total", task="payments-api", exit="success") == 2
    assert _value(registry, "singleton_lock_duplicates_total", task="payments-api", outcome="raised", at="hold") == 1
    assert _value(registry, "singleton_lock_held_seconds_count", task="payments-api") == 2
