"""Uncontended acquire+release cycles per second: our protocol, the raw floor and the peers.

Every variant does what its users would do for one guarded task: take a fresh
lock on a free key, then release it. The raw floor is the least any correct
token lock can do with redis-py: one ``SET NX PX`` and one compare-and-delete
``EVALSHA`` (2 round trips). ``PING`` (1 round trip) and ``redis-benchmark -c 1``
show what the connection and the server can do at all.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import redis

from celery_singleton_lock.store import KeyLayout, RedisBackend, connect
from celery_singleton_lock.store import Holder, new_token

from .blocks import block_variants
from .stats import Series, interleave

__all__ = ["run_micro", "RAW_FLOOR", "OURS", "OURS_FENCED", "OURS_QOR", "count_sends"]

RAW_FLOOR = "raw floor: SET NX PX + EVALSHA del"
OURS = "ours: running (acquire + release)"
OURS_FENCED = "ours: running, fencing token read (acquire + fence + release)"
OURS_QOR = "ours: queued_or_running (enqueue lock + adopt + release)"

_CAD = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

Cycle = Callable[[], None]


@contextmanager
def count_sends() -> Iterator[List[int]]:
    """Count request packets written (1 per command or pipeline) and round trips waited for.

    ``box[0]``: packets written to any Redis connection. ``box[1]``: round trips, i.e. the
    times the client went from writing to waiting for a reply. Commands written back to
    back and read afterwards (a pipeline, or a release whose reply is read with the next
    acquire's) share one round trip.
    """
    box = [0, 0, 0]  # sends, round trips, "the last thing done was a write"
    send = redis.connection.AbstractConnection.send_packed_command
    read = redis.connection.AbstractConnection.read_response

    def counting_send(self, command, check_health=True):  # type: ignore[no-untyped-def]
        box[0] += 1
        box[2] = 1
        return send(self, command, check_health)

    def counting_read(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if box[2]:
            box[1] += 1
            box[2] = 0
        return read(self, *args, **kwargs)

    redis.connection.AbstractConnection.send_packed_command = counting_send  # type: ignore[assignment]
    redis.connection.AbstractConnection.read_response = counting_read  # type: ignore[assignment]
    try:
        yield box
    finally:
        redis.connection.AbstractConnection.send_packed_command = send  # type: ignore[assignment]
        redis.connection.AbstractConnection.read_response = read  # type: ignore[assignment]


def _variants(url: str, extra_urls: Sequence[str]) -> Dict[str, Tuple[Cycle, Callable[[], None]]]:
    """name -> (one acquire+release cycle, cleanup)."""
    out: Dict[str, Tuple[Cycle, Callable[[], None]]] = {}
    plain = redis.Redis.from_url(url)
    nothing = lambda: None  # noqa: E731

    out["PING (1 round trip)"] = (lambda: plain.ping() and None, nothing)

    cad = plain.register_script(_CAD)

    def raw() -> None:
        token = new_token()
        plain.set("bench:raw", token, nx=True, px=30000)
        cad(keys=("bench:raw",), args=(token,))

    out[RAW_FLOOR] = (raw, nothing)

    store = RedisBackend(connect(url), connect(url, gated=True))  # as open_store builds it
    layout = KeyLayout("bench")
    key, fence = layout.lock("micro", "0" * 32), layout.fence("micro", "0" * 32)
    holder = Holder(task_id="bench-task-id", host="bench-host", pid=1, since_ms=int(time.time() * 1000),
                    heartbeat_ms=10000)

    def ours() -> None:
        token = new_token()
        store.acquire(key, token, 30000, holder)
        store.release(key, token)

    def ours_fenced() -> None:
        token = new_token()
        store.acquire(key, token, 30000, holder)
        store.fence(key, fence, token)
        store.release(key, token)

    def ours_qor() -> None:
        queued, token = new_token(), new_token()
        store.acquire(key, queued, 30000, holder, state="queued")  # at apply_async
        store.adopt(key, key, queued, token, 30000, holder)  # in the worker
        store.release(key, token)

    out[OURS] = (ours, nothing)
    out[OURS_FENCED] = (ours_fenced, nothing)
    out[OURS_QOR] = (ours_qor, store.close)

    def redis_py() -> None:
        lock = plain.lock("bench:redis-py", timeout=30, thread_local=False)
        lock.acquire(blocking=False)
        lock.release()

    out["redis-py Lock"] = (redis_py, nothing)
    out.update(block_variants(url, plain))  # a lock held as a block in a body, SharedLock's beside the peers'

    try:
        import redis_lock
    except ImportError:  # pragma: no cover - the bench extra installs it
        redis_lock = None
    if redis_lock is not None:
        def prl() -> None:
            lock = redis_lock.Lock(plain, "bench:prl", expire=30)
            lock.acquire(blocking=False)
            lock.release()

        def prl_renew() -> None:
            lock = redis_lock.Lock(plain, "bench:prl-renew", expire=30, auto_renewal=True)
            lock.acquire(blocking=False)
            lock.release()

        out["python-redis-lock"] = (prl, nothing)
        out["python-redis-lock auto_renewal"] = (prl_renew, nothing)

    try:
        from pottery import Redlock
    except ImportError:  # pragma: no cover
        Redlock = None
    if Redlock is not None:
        one = frozenset({plain})

        def pottery1() -> None:
            lock = Redlock(key="bench:pottery1", masters=one, auto_release_time=30)
            lock.acquire(blocking=False)
            lock.release()

        out["pottery Redlock, 1 master"] = (pottery1, nothing)
        if len(extra_urls) >= 2:
            three = frozenset({plain, *(redis.Redis.from_url(u) for u in extra_urls[:2])})

            def pottery3() -> None:
                lock = Redlock(key="bench:pottery3", masters=three, auto_release_time=30)
                lock.acquire(blocking=False)
                lock.release()

            out["pottery Redlock, 3 masters"] = (pottery3, nothing)

    try:
        from celery_once.backends.redis import Redis as OnceRedis
    except ImportError:  # pragma: no cover
        OnceRedis = None
    if OnceRedis is not None:
        once = OnceRedis({"url": url})

        def celery_once() -> None:
            once.raise_or_lock("qo_bench", timeout=30)
            once.clear_lock("qo_bench")

        out["celery-once backend"] = (celery_once, nothing)

    try:
        from celery_singleton.backends.redis import RedisBackend as SingletonBackend
    except ImportError:  # pragma: no cover
        SingletonBackend = None
    if SingletonBackend is not None:
        single = SingletonBackend(url)

        def celery_singleton() -> None:
            single.lock("SINGLETONLOCK_bench", "bench-task-id", expiry=30)
            single.unlock("SINGLETONLOCK_bench")

        out["celery-singleton backend"] = (celery_singleton, nothing)
    return out


def _redis_benchmark(url: str, requests: int) -> Optional[float]:
    """``redis-benchmark -c 1`` PING (multi-bulk) requests per second, or ``None`` without the binary."""
    binary = shutil.which("redis-benchmark")
    if binary is None:
        return None
    parts = redis.connection.parse_url(url)
    cmd = [binary, "-h", str(parts.get("host", "127.0.0.1")), "-p", str(parts.get("port", 6379)), "-c", "1",
           "-n", str(requests), "-t", "ping", "--csv"]
    try:
        output = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in output.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0] == "PING_MBULK":
            return float(cells[1])
    return None


SERVER_LIMIT = "redis-benchmark -c 1 PING (server limit)"


def _server_usec(clients: Sequence["redis.Redis"]) -> float:
    """Microseconds the servers have spent executing commands (INFO commandstats), bench queries aside."""
    total = 0.0
    for client in clients:
        for name, stats in client.info("commandstats").items():
            if not name.startswith(("cmdstat_info", "cmdstat_config")):
                total += float(stats["usec"])
    return total


def _server_time(variants: Dict[str, Tuple[Cycle, Callable[[], None]]], servers: Sequence["redis.Redis"],
                 cycles: int, chunks: int) -> Series:
    """Server µs per cycle of each variant: ``cycles`` cycles each, in ``chunks`` interleaved chunks."""
    names = list(variants)
    series = Series.declared(names)
    size = max(cycles // chunks, 1)
    for _, name in interleave(names, chunks):
        cycle = variants[name][0]
        spent = _server_usec(servers)
        for _ in range(size):
            cycle()
        series.add(name, (_server_usec(servers) - spent) / size)
    return series


def run_micro(url: str, extra_urls: Sequence[str], cycles: int, rounds: int,
              log: Callable[[str], None] = print, server_cycles: int = 0) -> dict:
    """``{"series": cycles/s, "sends": {variant: requests per cycle}, "trips": {variant: round trips per cycle},
    "server_us": {variant: server µs per cycle (median of chunks)}, "server_series": the chunks}``.

    Server time is measured over ``server_cycles`` cycles per variant (``cycles`` when 0), in 20
    chunks taken in turns with the other variants, so a burst of other work on the machine
    lands on every variant alike; the median chunk is reported.
    """
    variants = _variants(url, extra_urls)
    names = list(variants)
    sends: Dict[str, float] = {}
    trips: Dict[str, float] = {}
    servers = [redis.Redis.from_url(u) for u in (url, *extra_urls)]
    for name, (cycle, _) in variants.items():
        for _ in range(max(cycles // 20, 5)):  # warm up: scripts loaded, connections open
            cycle()
        with count_sends() as box:
            for _ in range(20):
                cycle()
        sends[name], trips[name] = box[0] / 20, box[1] / 20
    chunks = 20 if (server_cycles or cycles) >= 20 else 1
    server_series = _server_time(variants, servers, server_cycles or cycles, chunks)
    server_us = {name: server_series.summary(name).median for name in names}
    for server in servers:
        server.close()
    with_server = shutil.which("redis-benchmark") is not None
    order = names + ([SERVER_LIMIT] if with_server else [])
    series = Series.declared(order)
    for r, name in interleave(order, rounds):
        if name == SERVER_LIMIT:
            rps = _redis_benchmark(url, max(cycles * 2, 1000))
            if rps is not None:
                series.add(name, rps)
            continue
        cycle = variants[name][0]
        started = time.perf_counter()
        for _ in range(cycles):
            cycle()
        elapsed = time.perf_counter() - started
        series.add(name, cycles / elapsed)
    for _, cleanup in variants.values():
        cleanup()
    log(f"micro: {len(order)} variants x {rounds} rounds x {cycles} cycles done")
    return {"series": series, "sends": sends, "trips": trips, "server_us": server_us,
            "server_series": server_series}
