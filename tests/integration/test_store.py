"""The lock protocol and the heartbeat against a real redis-server (no Celery involved)."""

from __future__ import annotations

import time

import pytest
import redis

from celery_singleton_lock.store import Conflict, Grant, Holder, KeyLayout, Lease, Limit, RedisBackend, Renewer
from celery_singleton_lock.store import RestartWait
from celery_singleton_lock.store import connect, new_token, open_store
from tests.support.servers import RedisServer
from tests.support.waits import wait_for

LAYOUT = KeyLayout("t")


def fence_of(key: str) -> str:
    """The fencing counter of a test lock key (its bucket's)."""
    return LAYOUT.fence("job", key.rsplit(":", 1)[-1])


def gated(url: str) -> RedisBackend:
    """A store as open_store builds it: grants through a client that waits out a server's start."""
    return RedisBackend(redis.Redis.from_url(url), connect(url, gated=True))


def holder(task_id="id-1"):
    return Holder(task_id=task_id, host="h", pid=1, since_ms=int(time.time() * 1000), heartbeat_ms=100)


@pytest.fixture(scope="module")
def module_server():
    """One private server for the tests that neither stop nor pause it (flushed for each)."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def store(module_server):
    client = redis.Redis.from_url(module_server.url)
    client.flushall()
    yield RedisBackend(client)
    client.close()


def evalsha_calls(server_url: str) -> int:
    client = redis.Redis.from_url(server_url)
    try:
        return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    finally:
        client.close()


@pytest.mark.parametrize("pool_class", [redis.ConnectionPool, redis.BlockingConnectionPool])
def test_the_installed_redis_py_hands_the_store_its_connections(module_server, pool_class):
    # Each redis-py release the package declares checks connections out of its pools in its own
    # way (before 6 a command name is required); both pool kinds a URL or a user may choose work.
    client = redis.Redis(connection_pool=pool_class.from_url(module_server.url))
    try:
        store = RedisBackend(client)
        key = LAYOUT.lock("job", "pool")
        assert isinstance(store.acquire(key, "a", 5000, holder()), Grant)
        assert store.release(key, "a")
        assert client.exists(key) == 0
    finally:
        client.close()


def test_acquire_conflict_reports_the_holder(store):
    key = LAYOUT.lock("job", "d1")
    assert isinstance(store.acquire(key, "a", 5000, holder("first")), Grant)

    conflict = store.acquire(key, "b", 5000, holder("second"))

    assert isinstance(conflict, Conflict)
    assert (conflict.task_id, conflict.host, conflict.pid) == ("first", "h", 1)
    assert 0 < conflict.pttl_ms <= 5000
    info = store.holder(key)
    assert info["task_id"] == "first" and info["state"] == "running"


def test_release_needs_the_token_even_after_expiry_and_retake(store):
    key = LAYOUT.lock("job", "d2")
    store.acquire(key, "old", 50, holder("old"))
    assert not store.release(key, "someone-else")
    wait_for(lambda: store.holder(key) is None, 2, what="expiry")
    assert isinstance(store.acquire(key, "new", 5000, holder("new")), Grant)

    assert store.release(key, "old") is False  # the expired holder cannot delete the new lock
    assert store.holder(key)["task_id"] == "new"
    assert store.release(key, "new") and store.release(key, "new") is False  # twice is harmless


def test_scripts_survive_script_flush_and_a_restart(redis_server):
    store = RedisBackend(redis.Redis.from_url(redis_server.url))
    key = LAYOUT.lock("job", "d3")
    store.client.script_flush()
    first = store.acquire(key, "a", 5000, holder())
    assert isinstance(first, Grant)
    redis_server.stop()
    redis_server.start(settle=False)
    store.client.connection_pool.disconnect()
    # An empty server, scripts reloaded: the live holder takes its lock back at its renewal, and
    # asking again under its token is the same grant.
    assert store.renew([(key, "a", 5000)]) == [True]
    assert isinstance(store.acquire(key, "a", 5000, holder()), Grant)


def test_a_restart_without_data_between_two_holders_gives_the_second_a_larger_fence(redis_server):
    # Given a holder of a key that released it, and a server that then restarted empty
    store = gated(redis_server.url)
    key = LAYOUT.lock("job", "restart")
    assert isinstance(store.acquire(key, "a", 1000, holder("a")), Grant)
    first = store.fence(key, fence_of(key), "a")
    assert first and store.release(key, "a")
    redis_server.stop()
    redis_server.start(settle=False)
    store.close()
    try:
        # When the next holder asks: grants wait after the start (the server cannot know that
        # the lost locks were released), then it is granted, with a fence larger than the first's
        with pytest.raises(RestartWait):
            store.acquire(key, "b", 1000, holder("b"))
        wait_for(lambda: _granted(store, key, "b"), 5, interval=0.1, what="a grant after the wait")
        assert store.fence(key, fence_of(key), "b") > first
    finally:
        store.close()


def test_a_live_holder_takes_its_lock_back_after_a_restart_and_nobody_else_gets_it(redis_server):
    holder_store, rival = gated(redis_server.url), gated(redis_server.url)
    key = LAYOUT.lock("job", "retake")
    wait_for(lambda: not _waits(holder_store, LAYOUT.lock("job", "warm")), 4, interval=0.1, what="a grant")
    assert isinstance(holder_store.acquire(key, "a", 1500, holder("a")), Grant)
    redis_server.stop()
    redis_server.start(settle=False)
    holder_store.close()
    try:
        with pytest.raises(RestartWait):  # for 3 s after the start, nobody is granted
            rival.acquire(key, "b", 1500, holder("b"))
        lease = Lease(key, "a", ttl=5.0, heartbeat=0.3, confirmed_at=time.monotonic(), holder=holder("a"))
        assert holder_store.renew([lease.renewal]) == [True]  # taken back under its token
        wait_for(lambda: not _waits(rival, key), 5, interval=0.1, what="the wait after the restart")
        conflict = rival.acquire(key, "b", 1500, holder("b"))
        assert isinstance(conflict, Conflict)  # still the first holder's, and named so
        assert conflict.task_id == "a" and conflict.host == "h"
    finally:
        holder_store.close()
        rival.close()


def test_a_place_taken_back_after_a_restart_names_its_holder(redis_server):
    holder_store, rival = gated(redis_server.url), gated(redis_server.url)
    key = LAYOUT.lock("job", "retake") + ":places"
    limit = Limit(count=1, room=True)
    wait_for(lambda: not _waits(holder_store, LAYOUT.lock("job", "warm")), 4, interval=0.1, what="a grant")
    assert isinstance(holder_store.acquire(key, "a", 1500, holder("a"), limit=limit), Grant)
    redis_server.stop()
    redis_server.start(settle=False)
    holder_store.close()
    try:
        lease = Lease(key, "a", ttl=5.0, heartbeat=0.3, confirmed_at=time.monotonic(), holder=holder("a"))
        assert holder_store.renew([lease.renewal]) == [True]
        wait_for(lambda: not _waits(rival, LAYOUT.lock("job", "warm")), 5, interval=0.1,
                 what="the wait after the restart")
        conflict = rival.acquire(key, "b", 1500, holder("b"), limit=limit)
        assert isinstance(conflict, Conflict) and conflict.task_id == "a" and conflict.host == "h"
    finally:
        holder_store.close()
        rival.close()


def _granted(store, key, token):
    try:
        outcome = store.acquire(key, token, 1000, holder(token))
    except RestartWait:
        return None
    return outcome if isinstance(outcome, Grant) else None


def _waits(store, key):
    try:
        outcome = store.acquire(key, "probe", 1500, holder("probe"))
    except RestartWait:
        return True
    if isinstance(outcome, Grant):
        store.release(key, "probe")
    return False


def test_fencing_tokens_strictly_increase_across_holders(store):
    key = LAYOUT.lock("job", "d4")
    fences = []
    for i in range(1000):
        token = new_token()
        assert isinstance(store.acquire(key, token, 5000, holder(f"id-{i}")), Grant)
        fences.append(store.fence(key, fence_of(key), token))
        store.release(key, token)
    assert all(b > a for a, b in zip(fences, fences[1:]))


def _calls_and_trips(renewer: Renewer, server_url: str) -> tuple:
    """The server's EVALSHA count and the renewer's round trips, read with no renewal between them
    (a slow machine can fit one in, and its call would be counted on one side only)."""
    while True:
        trips = renewer.round_trips
        calls = evalsha_calls(server_url)
        if renewer.round_trips == trips:
            return calls, trips


@pytest.mark.parametrize("count", [1, 1000])
def test_one_round_trip_renews_every_held_lock(store, module_server, count):
    renewer = Renewer(store)
    leases = []
    now = time.monotonic()
    for i in range(count):
        key = LAYOUT.lock("job", f"many-{i}")
        store.acquire(key, f"tok-{i}", 1200, holder())
        leases.append(Lease(key, f"tok-{i}", ttl=1.2, heartbeat=0.3, confirmed_at=now))
    try:
        for lease in leases:
            renewer.hold(lease)
        # The second renewal starts only when the first has ended: its NOSCRIPT, SCRIPT LOAD and
        # second EVALSHA are behind us, and every call counted below is one renewal's.
        wait_for(lambda: renewer.round_trips >= 2, 5, what="the first renewal (it loads the script)")
        before, first = _calls_and_trips(renewer, module_server.url)
        wait_for(lambda: renewer.round_trips >= first + 5, 5, what="five renewal periods")
        renewer.close()
        periods = renewer.round_trips - first
        calls = evalsha_calls(module_server.url) - before
        # one script call per period, whatever the count (+1: a call in flight at the first reading)
        assert periods <= calls <= periods + 1
        print(f"[measured] {count} held lock(s): {calls} EVALSHA for {periods} renewal periods")
        assert all(store.holder(lease.key) for lease in leases)  # 1.2 s TTL kept alive for > 1.5 s
        assert not any(lease.lost.is_set() for lease in leases)
    finally:
        renewer.close()


def test_a_vanished_lock_is_marked_lost_and_the_thread_stops_when_idle(store):
    lost = []
    renewer = Renewer(store, on_lost=lambda lease, reason: lost.append((lease.key, reason)))
    renewer.idle_linger = 0.1
    key = LAYOUT.lock("job", "gone")
    # A lock missing from a server that started less than a lease ago is taken back by its
    # holder (the server may have lost it in a restart): this server is older than the lease.
    wait_for(lambda: store.client.info("server")["uptime_in_seconds"] >= 1, 3, what="the server to be 1 s old")
    store.acquire(key, "tok", 1000, holder())
    lease = Lease(key, "tok", ttl=1.0, heartbeat=0.1, confirmed_at=time.monotonic())
    renewer.hold(lease)
    assert renewer.running
    store.client.delete(key)  # taken away behind the holder's back

    wait_for(lease.lost.is_set, 2, what="the loss to be noticed")
    assert lost and lost[0][0] == key and "token" in lost[0][1]
    wait_for(lambda: not renewer.running, 2, what="the idle heartbeat thread to exit")


def test_redis_down_is_retried_and_lost_only_after_the_ttl(redis_server):
    client = redis.Redis.from_url(redis_server.url, socket_timeout=0.2, socket_connect_timeout=0.2)
    store = RedisBackend(client)
    key = LAYOUT.lock("job", "outage")
    store.acquire(key, "tok", 1500, holder())
    renewer = Renewer(store)
    started = time.monotonic()
    lease = Lease(key, "tok", ttl=1.5, heartbeat=0.2, confirmed_at=started)
    renewer.hold(lease)
    try:
        redis_server.pause()
        time.sleep(0.7)  # the scenario: a short outage, well inside the TTL
        assert not lease.lost.is_set()
        wait_for(lease.lost.is_set, 3, what="the lock to be declared lost after its TTL")
        assert time.monotonic() - started >= 1.5
    finally:
        redis_server.resume()
        renewer.close()
        client.close()


def test_asking_again_with_the_same_token_is_a_grant_not_a_conflict_with_ourselves(store):
    # After a reply lost to a broken connection the call is repeated: it must not find itself a duplicate.
    key = LAYOUT.lock("job", "again")
    assert isinstance(store.acquire(key, "tok", 5000, holder()), Grant)
    assert isinstance(store.acquire(key, "tok", 5000, holder()), Grant)
    assert isinstance(store.acquire(key, "other", 5000, holder("other")), Conflict)
    # the same token under another state (an enqueue lock being asked for as a run lock) is no grant
    queued = LAYOUT.lock("job", "again-q")
    store.acquire(queued, "q", 5000, holder(), state="queued")
    assert isinstance(store.acquire(queued, "q", 5000, holder()), Conflict)

    store.acquire(queued + "x", "q2", 5000, holder(), state="queued")
    adopted = store.adopt(queued + "x", queued + "x", "q2", "run", 5000, holder())
    assert isinstance(adopted, Grant)
    assert store.adopt(queued + "x", queued + "x", "q2", "run", 5000, holder()) == adopted


def publish_calls(client: redis.Redis) -> int:
    return client.info("commandstats").get("cmdstat_publish", {}).get("calls", 0)


def test_a_release_publishes_only_when_a_waiter_asked(store):
    # Given a subscriber on a lock's channel that never asked to be told
    key = LAYOUT.lock("job", "quiet")
    listener = store.client.pubsub()
    listener.subscribe(key)
    assert listener.get_message(timeout=2.0)["type"] == "subscribe"
    before = publish_calls(store.client)
    # When the lock is taken and released, uncontended, a hundred times
    for i in range(100):
        assert isinstance(store.acquire(key, f"t{i}", 5000, holder()), Grant)
        assert store.release(key, f"t{i}")
    # Then the server ran no PUBLISH and the subscriber heard nothing
    assert publish_calls(store.client) == before
    assert listener.get_message(timeout=0.2) is None
    # When a waiter asks before the next release, then that release (and only it) is published
    assert isinstance(store.acquire(key, "held", 5000, holder()), Grant)
    with store.release_events(key) as events:
        assert events.ask() is True
        assert store.release(key, "held")
        assert events.wait(2.0) is True
    assert publish_calls(store.client) == before + 1
    message = listener.get_message(timeout=2.0)
    assert message is not None and message["type"] == "message"
    listener.close()


def test_connections_redis_dropped_are_replaced_under_a_release_and_an_acquire(store):
    # Redis dropped the idle connections (a restart, a client timeout): the next calls reconnect.
    key, other = LAYOUT.lock("job", "broken"), LAYOUT.lock("job", "broken2")
    store.acquire(key, "a", 5000, holder())
    store.client.client_kill_filter(_type="normal", skipme=True)

    assert store.release(key, "a") is True
    assert isinstance(store.acquire(other, "b", 5000, holder()), Grant)
    assert store.holder(key) is None and store.release(other, "b")


def test_threads_share_the_store_and_each_gets_its_own_answer(store):
    import threading

    results, errors = {}, []

    def work(n):
        try:
            for i in range(200):
                key = LAYOUT.lock("job", f"t{n}-{i}")
                token = f"{n}-{i}"
                outcome = store.acquire(key, token, 5000, holder(token))
                assert isinstance(outcome, Grant)
                assert isinstance(store.acquire(key, "x", 5000, holder("x")), Conflict)
                results[key] = store.release(key, token)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors and len(results) == 800 and all(r is True for r in results.values())


def test_an_exception_raised_into_a_blocked_read_keeps_later_replies_in_step(redis_server):
    # Billiard raises a soft time limit from a signal handler, wherever the child is: here in the
    # middle of waiting for a reply. That reply is lost with the connection; the next command
    # must get its own reply, never one meant for an earlier caller.
    import signal

    class Interrupted(Exception):
        pass

    def interrupt(signum, frame):
        raise Interrupted()

    client = redis.Redis.from_url(redis_server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    store = RedisBackend(client)
    first, second, third = (LAYOUT.lock("job", f"step-{i}") for i in range(3))
    store.acquire(first, "a", 5000, holder())
    store.acquire(second, "b", 5000, holder("b"))
    previous = signal.signal(signal.SIGALRM, interrupt)
    redis_server.pause()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Interrupted):
            store.acquire(second, "c", 5000, holder("c"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        redis_server.resume()
    try:
        assert isinstance(store.acquire(third, "d", 5000, holder("d")), Grant)
        conflict = store.acquire(second, "e", 5000, holder("e"))
        assert isinstance(conflict, Conflict) and conflict.task_id == "b"
        assert store.release(first, "a") and store.holder(first) is None
    finally:
        store.close()


# -- a release posted without waiting for its answer ----------------------------------------------

@pytest.fixture(params=["one client", "open_store"])
def posting(module_server, request):
    """A store whose kept connections go straight to the socket (RESP2): on one client, and as
    :func:`open_store` builds it, with grants on a client of their own (the start gate), where
    the release is posted on the granting connection so the next acquire's read takes its answer."""
    client = redis.Redis.from_url(module_server.url, protocol=2)
    client.flushall()
    store = RedisBackend(client) if request.param == "one client" else open_store(module_server.url)
    yield store
    store.close()
    client.close()


def test_a_posted_release_lets_go_at_once_and_its_answer_comes_with_the_next_call(posting, module_server):
    key, other = LAYOUT.lock("job", "posted"), LAYOUT.lock("job", "next")
    assert isinstance(posting.acquire(key, "a", 60_000, holder("a")), Grant)
    answers = []
    # the first release waits for its answer: it is the one that finds out the script is loaded
    assert not posting.post_release(key, "a", None, answers.append)
    assert posting.release(key, "a")
    assert isinstance(posting.acquire(key, "a", 60_000, holder("a")), Grant)
    assert posting.post_release(key, "a", None, answers.append)
    outside = redis.Redis.from_url(module_server.url)
    wait_for(lambda: not outside.exists(key), 5, interval=0.005, what="the posted release applied")
    assert answers == []
    assert isinstance(posting.acquire(other, "b", 60_000, holder("b")), Grant)
    assert answers == [True]
    # a token that no longer holds the lock is answered False, by settle_posted this time
    assert isinstance(posting.acquire(key, "c", 60_000, holder("c")), Grant)
    assert posting.post_release(key, "not-c", None, answers.append)
    posting.settle_posted()
    assert answers == [True, False] and outside.exists(key)
    outside.close()


def test_a_posted_release_after_the_script_cache_was_flushed_is_asked_again(posting, module_server):
    key = LAYOUT.lock("job", "noscript")
    assert isinstance(posting.acquire(key, "a", 60_000, holder("a")), Grant)
    assert posting.release(key, "a")  # the script is loaded...
    assert isinstance(posting.acquire(key, "a", 60_000, holder("a")), Grant)
    outside = redis.Redis.from_url(module_server.url)
    outside.script_flush()  # ...and forgotten, as after a restart or a failover
    answers = []
    assert posting.post_release(key, "a", None, answers.append)
    posting.settle_posted()
    assert answers == [True] and not outside.exists(key)
    outside.close()


def test_the_heartbeat_thread_reads_a_posted_answer_when_no_call_follows(posting):
    key = LAYOUT.lock("job", "idle")
    renewer = Renewer(posting)
    renewer.restart_check = 0.2
    try:
        assert isinstance(posting.acquire(key, "a", 5000, holder("a")), Grant)
        assert posting.release(key, "a")  # the first release finds the script loaded
        assert isinstance(posting.acquire(key, "a", 5000, holder("a")), Grant)
        lease = Lease(key, "a", ttl=5.0, heartbeat=1.5, confirmed_at=time.monotonic(), holder=holder("a"))
        renewer.hold(lease)
        renewer.drop(lease)
        answers = []
        assert posting.post_release(key, "a", None, answers.append)
        wait_for(lambda: answers == [True], 3, interval=0.02, what="the heartbeat's tick to read the answer")
    finally:
        renewer.close()


def test_a_store_without_kept_connections_does_not_post(module_server):
    from redis.cluster import RedisCluster  # noqa: F401 - the kind of client that has no kept connection

    backend = RedisBackend(redis.Redis.from_url(module_server.url))
    backend._ask = None  # as for a Redis Cluster client (direct_for answers None)
    assert backend.post_release(LAYOUT.lock("job", "x"), "a", None, lambda answer: None) is False
    places_key = LAYOUT.lock("job", "room") + ":places"
    assert RedisBackend(redis.Redis.from_url(module_server.url)).post_release(places_key, "a", None,
                                                                               lambda answer: None) is False
