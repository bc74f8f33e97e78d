"""Enqueue-time locks (``queued`` and ``queued_or_running``) with a real broker, workers and beat.

Given a real Redis broker, when tasks are published, then what the broker holds
(queue lengths), what ran (intervals recorded by the bodies) and what Redis
locks show the contract.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from tests.integration.helpers import lock_field, lock_keys, overlaps, records, wait_started, wait_unlocked
from tests.support.suite_redis import broker_key
from tests.support.waits import wait_for


def queued_messages(broker_redis) -> int:
    """Messages waiting in the broker's queues (kombu keeps each queue as a Redis list)."""
    return sum(broker_redis.llen(k) for k in broker_redis.scan_iter(broker_key("celery*"))
               if broker_redis.type(k) == "list")


def copies_in_flight(broker_redis, events_redis) -> int:
    """Waiting + delivered-but-unacked + running copies."""
    return queued_messages(broker_redis) + broker_redis.hlen(broker_key("unacked")) + events_redis.scard("running")


def test_five_calls_publish_one_message_until_it_has_run(proj, start_worker, broker_redis, events_redis):
    results = [proj.qor_job.delay("k") for _ in range(5)]

    assert queued_messages(broker_redis) == 1
    assert len({r.id for r in results}) == 1

    start_worker()
    assert results[0].get(timeout=20)["key"] == "k"
    again = proj.qor_job.delay("k")
    assert again.id != results[0].id
    assert again.get(timeout=20)["key"] == "k"
    assert len(records(events_redis)) == 2


def test_raise_at_enqueue_publishes_nothing(proj, broker_redis):
    from celery_singleton_lock import LockedError

    first = proj.qor_raise.delay("k")
    with pytest.raises(LockedError) as info:
        proj.qor_raise.delay("k")

    assert info.value.holder == first.id
    assert queued_messages(broker_redis) == 1


SAMPLE_EVERY = 0.05


def _longest_run(values: list, at_least: int) -> int:
    """The most consecutive values at or above ``at_least``."""
    longest = current = 0
    for value in values:
        current = current + 1 if value >= at_least else 0
        longest = max(longest, current)
    return longest


def _run_beat(proj, start_worker, broker_redis, events_redis, task: str, seconds: float = 12.5):
    start_worker(concurrency=2)
    start_worker(concurrency=2)
    beat = start_worker.beat(env={"CSL_BEAT_TASK": task})
    samples = []
    begin = time.monotonic()
    while time.monotonic() - begin < seconds:
        samples.append((queued_messages(broker_redis), broker_redis.hlen(broker_key("unacked")),
                        events_redis.scard("running")))
        time.sleep(SAMPLE_EVERY)
    elapsed = time.monotonic() - begin
    beat.stop()
    return samples, elapsed


def _executions_within(events_redis, lock_redis, elapsed: float, queued_after: int = 0) -> list:
    """Back-to-back 3.5 s runs while beat ran, plus the copies still queued when it stopped."""
    wait_unlocked(lock_redis, 15)  # nothing queued or running any more
    wait_for(lambda: events_redis.scard("running") == 0, 10, what="the last run to finish")
    intervals = records(events_redis)
    assert abs(len(intervals) - elapsed / 3.5 - queued_after) <= 1, (len(intervals), elapsed)
    assert overlaps(intervals) == []
    return intervals


def test_beat_job_never_piles_up_with_queued_or_running(proj, start_worker, broker_redis, events_redis, lock_redis):
    samples, elapsed = _run_beat(proj, start_worker, broker_redis, events_redis, "beat_qor")

    # Never more than one copy queued or running. A delivered copy stays unacknowledged until the
    # worker's main process hears that a pool process accepted it, by when its body may already
    # run: counted in both, it is still one copy.
    assert max(queued + max(unacked, running) for queued, unacked, running in samples) <= 1
    assert max(s[2] for s in samples) == 1
    _executions_within(events_redis, lock_redis, elapsed)


def test_beat_job_never_runs_twice_at_once_with_queued(proj, start_worker, broker_redis, events_redis, lock_redis):
    samples, elapsed = _run_beat(proj, start_worker, broker_redis, events_redis, "beat_queued")

    assert max(s[2] for s in samples) == 1  # never two running
    # Never two waiting. The waiting copy goes back to the queue until the running one is done: its
    # new message is published before its delivery is acknowledged, so for that instant it counts
    # twice; a second copy would stay.
    waiting = [queued + unacked for queued, unacked, _ in samples]
    assert max(waiting) <= 2 and _longest_run(waiting, 2) * SAMPLE_EVERY < 0.5, waiting
    _executions_within(events_redis, lock_redis, elapsed, queued_after=1)  # the waiting copy runs after the last one


def test_revoking_a_waiting_message_frees_its_lock(proj, start_worker, events_redis, lock_redis, broker_redis):
    worker = start_worker(concurrency=1)
    proj.qor_job.delay("busy", duration=4)
    wait_started(events_redis, 1)
    waiting = proj.qor_job.delay("x")
    wait_for(lambda: broker_redis.hlen(broker_key("unacked")) >= 1 or queued_messages(broker_redis) == 0, 5,
             what="the worker to reserve the message")
    key = next(k for k in lock_keys(lock_redis) if lock_field(lock_redis, k, "task_id") == waiting.id)

    revoked_at = time.monotonic()
    waiting.revoke()
    wait_for(lambda: not lock_redis.exists(key), 1.5, interval=0.01, promise=True,
             what="the revoked message's lock to go")
    assert time.monotonic() - revoked_at <= 1.0

    wait_for(lambda: "Discarding revoked task" in worker.log(), 10, what="the worker to discard it")
    assert waiting.id not in {e["id"] for e in records(events_redis, "started")}


def test_send_task_by_name_is_still_guarded_at_run_time(proj, start_worker, events_redis):
    start_worker(concurrency=2)
    holder = proj.qor_job.delay("k", duration=2)
    wait_started(events_redis, 1)
    by_name = proj.app.send_task("tests.integration.proj.qor_job", ("k",), {"duration": 0.1})

    assert by_name.get(timeout=20) is None  # skipped at run time: no enqueue lock, still no overlap
    holder.get(timeout=20)
    assert len(records(events_redis)) == 1


def test_self_retry_keeps_the_lock_for_the_logical_task(proj, start_worker, events_redis, lock_redis):
    start_worker(concurrency=2)
    first = proj.qor_self_retry.delay("k")  # retries once with countdown=1.5
    wait_for(lambda: first.state == "RETRY", 10, what="RETRY")

    assert lock_keys(lock_redis), "the lock must be kept during the retry countdown"
    during = proj.qor_self_retry.delay("k")
    assert during.id == first.id  # a new call joins the logical task instead of queuing
    assert first.get(timeout=20) == 1
    fences = [e["fence"] for e in records(events_redis, "started")]
    assert len(fences) == 2 and fences[1] > fences[0]
    wait_unlocked(lock_redis, 1)


def test_queued_scope_keeps_one_running_and_one_waiting(proj, start_worker, events_redis, broker_redis):
    start_worker(concurrency=2)
    running = proj.queued_wait.delay("k", duration=2)
    wait_started(events_redis, 1)
    waiting = proj.queued_wait.delay("k", duration=0.2)  # queued behind the running one
    third = proj.queued_wait.delay("k", duration=0.2)  # a queued copy exists already

    assert third.id == waiting.id
    assert running.get(timeout=20) and waiting.get(timeout=30)
    intervals = records(events_redis)
    assert len(intervals) == 2 and overlaps(intervals) == []


def test_the_copy_queued_behind_a_running_one_runs_after_it(proj, start_worker, events_redis):
    start_worker(concurrency=2)  # a free slot: the queued copy starts while the first still runs
    running = proj.queued_job.delay("k", duration=1.5)
    wait_started(events_redis, 1)
    queued = proj.queued_job.delay("k", duration=0.1)
    assert proj.queued_job.delay("k").id == queued.id  # one copy queued already

    assert running.get(timeout=20)["key"] == "k"
    assert queued.get(timeout=20)["key"] == "k"  # it waited its turn instead of being skipped
    intervals = records(events_redis)
    assert len(intervals) == 2 and overlaps(intervals) == []


def test_a_failed_publish_leaves_no_lock(proj, lock_redis, broker_redis):
    from kombu.exceptions import EncodeError

    with pytest.raises(EncodeError):  # msgpack cannot carry a datetime
        proj.qor_job.apply_async(("k",), {"duration": dt.datetime(2026, 1, 1)}, serializer="msgpack")

    assert lock_keys(lock_redis) == []
    assert queued_messages(broker_redis) == 0


def test_a_publish_that_fails_before_the_lock_is_read_leaves_no_lock(proj, lock_redis, broker_redis):
    # The enqueue lock is asked for first and its answer read when the message goes out;
    # a call Celery refuses before that point still leaves nothing locked.
    with pytest.raises(TypeError):
        proj.qor_job.apply_async(("k",), countdown="soon")

    assert lock_keys(lock_redis) == []
    assert queued_messages(broker_redis) == 0
    assert proj.qor_job.delay("k").id  # and the call can be made afterwards


def test_refused_duplicates_keep_the_broker_connection(proj, broker_redis):
    # kombu replaces a pooled connection whose producer block ends in an exception; a refusal
    # must not look like a broker failure (a reconnect per refused duplicate costs milliseconds).
    first = proj.qor_job.delay("k")
    proj.qor_job.delay("other")
    assert proj.qor_job.delay("k").id == first.id  # the first refusal opens the store's reading connection
    opened = broker_redis.info("stats")["total_connections_received"]

    for _ in range(20):
        assert proj.qor_job.delay("k").id == first.id
    proj.qor_job.delay("third")

    assert broker_redis.info("stats")["total_connections_received"] == opened


def test_a_refused_duplicate_is_never_announced_to_before_task_publish(proj, broker_redis):
    from celery.signals import before_task_publish

    announced = []

    def receiver(headers=None, **_):
        announced.append(headers["id"])

    before_task_publish.connect(receiver, weak=False)
    try:
        first = proj.qor_job.delay("k")
        again = proj.qor_job.delay("k")
        with proj.app.connection_for_write() as connection:  # the path that cannot defer the answer
            third = proj.qor_job.apply_async(("k",), connection=connection)
    finally:
        before_task_publish.disconnect(receiver)

    assert again.id == first.id == third.id
    assert announced == [first.id]
    assert queued_messages(broker_redis) == 1


def test_unencodable_arguments_are_refused_before_publishing(proj, lock_redis, broker_redis):
    from kombu.exceptions import EncodeError

    from celery_singleton_lock import UnencodableArgumentError

    with pytest.raises(UnencodableArgumentError) as info:
        proj.qor_job.delay(object())
    assert info.value.parameter == "key" and "qor_job" in str(info.value)
    assert isinstance(info.value, EncodeError)  # JSON cannot carry it either: what Celery raises
    with pytest.raises(UnencodableArgumentError):
        proj.storm.delay(object())  # running scope: refused at publish too
    with pytest.raises(EncodeError):
        proj.storm.delay({1, 2})  # a set has a key, but JSON cannot carry it: Celery's own error
    assert lock_keys(lock_redis) == [] and queued_messages(broker_redis) == 0


def test_eager_mode_runs_under_the_run_lock(proj, lock_redis, events_redis):
    proj.app.conf.task_always_eager = True
    try:
        result = proj.qor_job.delay("k", duration=0)
    finally:
        proj.app.conf.task_always_eager = False

    assert result.get()["fence"] is not None  # ran in-process, holding the lock
    assert lock_keys(lock_redis) == []


def test_signatures_groups_and_chains_take_the_enqueue_lock(proj, broker_redis):
    from celery import group

    proj.qor_job.s("k").apply_async()  # a signature takes the lock: the next "k" calls are duplicates
    in_group = group(proj.qor_job.s("k"), proj.qor_job.s("other")).apply_async()

    assert queued_messages(broker_redis) == 2  # "k" once, "other" once
    assert in_group.results[0].get(timeout=5) is None  # the skipped member is ready, not PENDING


def test_a_duplicate_that_heads_a_chain_or_joins_a_chord_lets_them_finish(proj, start_worker, broker_redis,
                                                                          events_redis):
    from celery import chain, chord

    holder = proj.qor_job.delay("k", duration=1.0)
    chained = chain(proj.qor_job.s("k"), proj.storm.si("after-the-head")).apply_async()
    chorded = chord([proj.qor_job.s("c", duration=1.0), proj.qor_job.s("c")], proj.collect.s()).apply_async()
    waiting = proj.queued_job.apply_async(("q",), countdown=2)  # the one copy "queued" lets wait
    queued_chain = chain(proj.queued_job.si("q"), proj.storm.si("after-the-queued")).apply_async()
    assert queued_messages(broker_redis) == 6  # the duplicates go out too, marked as skipped

    start_worker(concurrency=2)
    assert chained.get(timeout=30)["key"] == "after-the-head"  # the skipped head moved the chain on
    assert queued_chain.get(timeout=30)["key"] == "after-the-queued"
    results = chorded.get(timeout=30)
    assert sorted(results, key=lambda r: r is None)[0]["key"] == "c" and None in results  # one ran, one skipped
    assert holder.get(timeout=10)["key"] == "k" and waiting.get(timeout=10)["key"] == "q"
    ran = [e["key"] for e in records(events_redis)]
    assert sorted(k for k in ran if k in ("k", "c", "q")) == ["c", "k", "q"]  # no skipped body ran


def test_a_lock_key_function_sees_the_arguments_as_the_worker_will(proj, start_worker, lock_redis, events_redis):
    first = proj.qor_pair.delay((1, 2))  # a tuple here, a list in the worker's body
    assert proj.qor_pair.delay([1, 2]).id == first.id  # the same call once delivered

    start_worker()
    assert first.get(timeout=20)["key"] == [1, 2]
    wait_unlocked(lock_redis, 2)  # the worker adopted the enqueue lock and released it
    again = proj.qor_pair.delay((1, 2))
    assert again.id != first.id and again.get(timeout=20)["key"] == [1, 2]


def test_the_enqueue_lock_outlives_a_countdown_or_an_eta(proj, lock_redis):
    proj.qor_job.apply_async(("later",), countdown=600)
    proj.qor_job.apply_async(("at",), eta=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=900))

    ttls = sorted(lock_redis.pttl(k) for k in lock_keys(lock_redis))
    queue_ttl_ms = 3600 * 1000  # lock_queue_ttl, counted from when the message is due
    assert queue_ttl_ms + 590_000 < ttls[0] <= queue_ttl_ms + 600_000
    assert queue_ttl_ms + 890_000 < ttls[1] <= queue_ttl_ms + 900_000
