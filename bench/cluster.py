"""One task with many arguments on a Redis Cluster: do its locks spread over the masters?

Why this section exists: with one hash tag per task, all of a task's locks would share one
Cluster slot, so one busy task would load one master while the others idle. The key layout
spreads a task's keys over sixteen buckets, ``{<task>:<b>}`` (``store/keys.py``). Here the
same client load (P processes x T threads, each cycle an acquire and a release of a fresh
argument digest) runs against a 1-master and a 3-master local cluster, and, for contrast,
against the 3 masters with every key under one hash tag. Per round it counts the distinct
slots the keys used and each master's share of the commands executed (``INFO commandstats``
before and after). The clients and every redis-server share this machine's cores, so
throughput need not grow with masters here: the shares are the evidence that the load spreads.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import redis
from redis.crc import key_slot

from celery_singleton_lock.store import Grant, Holder, KeyLayout, LockBackend, new_token, open_store
from celery_singleton_lock.store.keys import BUCKETS

from .stats import Series, Summary, interleave

__all__ = ["run_cluster", "ONE", "THREE", "HOT", "VARIANTS", "TASK"]

ONE = "1 master, 16 buckets"
THREE = "3 masters, 16 buckets"
HOT = "3 masters, one hash tag {hot} (contrast)"
VARIANTS = (ONE, THREE, HOT)
#: The bench's own guarded task's name: a name users would write, not one picked for its slots.
TASK = "bench.locked_running"
TTL_MS = 30000
_LAYOUT = KeyLayout("bench")
#: What the cluster client's discovery and the bench's own queries send: not lock work.
_NOT_LOCK_WORK = ("cmdstat_info", "cmdstat_cluster", "cmdstat_command", "cmdstat_hello", "cmdstat_ping",
                  "cmdstat_client", "cmdstat_config")


def lock_key(variant: str, digest: str) -> str:
    """The lock key of one call: the library's layout, or every key under one tag for HOT."""
    return f"bench:{{hot}}:{digest}" if variant == HOT else _LAYOUT.lock(TASK, digest)


def _cycles(store: LockBackend, variant: str, cycles: int, holder: Holder, start: threading.Barrier,
            out: List[Any]) -> None:
    """One client thread: ``cycles`` acquire + release of fresh digests; appends (refused, slots) or the error."""
    refused, slots = 0, set()
    try:
        start.wait()
        for _ in range(cycles):
            key, token = lock_key(variant, uuid.uuid4().hex), new_token()
            if not isinstance(store.acquire(key, token, TTL_MS, holder), Grant) or not store.release(key, token):
                refused += 1
            slots.add(key_slot(key.encode()))
        out.append((refused, slots))
    except Exception as exc:  # reported to the parent, which raises it
        out.append(exc)


def _client(conn: Connection, urls: Dict[str, str], threads: int) -> None:
    """A client process: one store per cluster, shared by its threads; runs each order it is sent."""
    stores = {url: open_store(url, {}) for url in set(urls.values())}
    holder = Holder(task_id="bench-cluster", host=socket.gethostname(), pid=os.getpid(),
                    since_ms=int(time.time() * 1000), heartbeat_ms=10000)
    try:
        while True:
            order = conn.recv()
            if order is None:
                return
            variant, cycles = order
            start, out = threading.Barrier(threads), []  # type: Tuple[threading.Barrier, List[Any]]
            workers = [threading.Thread(target=_cycles, args=(stores[urls[variant]], variant, cycles, holder,
                                                              start, out)) for _ in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            errors = [repr(o) for o in out if isinstance(o, Exception)]
            refused = sum(o[0] for o in out if not isinstance(o, Exception))
            slots = set().union(*(o[1] for o in out if not isinstance(o, Exception)))
            conn.send((errors, refused, slots))
    finally:
        for store in stores.values():
            store.close()


class _Clients:
    """P spawned client processes (no fork: the bench process may run threads by now)."""

    def __init__(self, urls: Dict[str, str], processes: int, threads: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.conns: List[Connection] = []
        self.procs: List[Any] = []
        for _ in range(processes):
            parent, child = context.Pipe()
            proc = context.Process(target=_client, args=(child, urls, threads), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def run(self, variant: str, cycles: int) -> Tuple[float, int, Set[int]]:
        """Every process runs ``cycles`` per thread at once; (wall seconds, refused, slots used)."""
        began = time.perf_counter()
        for conn in self.conns:
            conn.send((variant, cycles))
        replies = [conn.recv() for conn in self.conns]
        elapsed = time.perf_counter() - began
        errors = [e for reply in replies for e in reply[0]]
        if errors:
            raise RuntimeError(f"cluster bench client failed: {errors[0]}")
        return elapsed, sum(r[1] for r in replies), set().union(*(r[2] for r in replies))

    def stop(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)


def _lock_calls(nodes: Sequence[redis.Redis]) -> List[int]:
    """Commands each node has executed, the cluster client's discovery and the bench's queries aside."""
    return [sum(int(s["calls"]) for name, s in node.info("commandstats").items() if not name.startswith(_NOT_LOCK_WORK))
            for node in nodes]


def _owners(node: redis.Redis, ports: Sequence[int]) -> List[Tuple[int, int, int]]:
    """(first slot, last slot, master index) from CLUSTER SLOTS, the masters in ``ports`` order."""
    return [(int(first), int(last), ports.index(int(primary[1])))
            for first, last, primary, *_ in node.execute_command("CLUSTER", "SLOTS")]


def _master_of(slot: int, owners: Sequence[Tuple[int, int, int]]) -> int:
    return next(index for first, last, index in owners if first <= slot <= last)


def _name_spread(owners: Sequence[Tuple[int, int, int]], masters: int, names: int = 1000) -> Summary:
    """Over ``names`` task names, the busiest master's share of a task's 16 buckets."""
    shares = []
    for n in range(names):
        counts = [0] * masters
        for b in "0123456789abcdef"[:BUCKETS]:
            counts[_master_of(key_slot(_LAYOUT.lock(f"task{n}", b).encode()), owners)] += 1
        shares.append(max(counts) / BUCKETS)
    return Summary.of(shares)


def _split(used: Set[int], owners: Sequence[Tuple[int, int, int]], masters: int) -> Tuple[int, List[int]]:
    """(distinct slots used, how many of them each master serves)."""
    counts = [0] * masters
    for slot in used:
        counts[_master_of(slot, owners)] += 1
    return len(used), counts


def _start_clusters(counts: Sequence[int]) -> Tuple[List[Any], Optional[str]]:
    """Start one local cluster per master count at once; (clusters, None) or ([], why not)."""
    try:
        from tests.support.topologies import LocalCluster

        clusters = [LocalCluster(masters=n) for n in counts]
    except Exception as exc:  # the test support (and its server binary lookup) is not here
        return [], f"{type(exc).__name__}: {exc}"
    try:
        with ThreadPoolExecutor(len(clusters)) as pool:
            for future in [pool.submit(cluster.start) for cluster in clusters]:
                future.result()
    except Exception as exc:
        for cluster in clusters:
            cluster.stop()
        return [], f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return clusters, None


def run_cluster(cycles: int, rounds: int, processes: int, threads: int,
                log: Callable[[str], None] = print) -> dict:
    """``{"series": cycles/s, "busiest": busiest master's share, "shares": {variant: [per master]}, ...}``,
    or ``{"skipped": why}`` when no local cluster could start."""
    clusters, why = _start_clusters((1, 3))
    if why is not None:
        log(f"cluster: skipped, clusters did not start ({why})")
        return {"skipped": why}
    one, three = clusters
    urls = {ONE: one.url, THREE: three.url, HOT: three.url}
    nodes = {ONE: [one.node(m) for m in one.masters], THREE: [three.node(m) for m in three.masters]}
    nodes[HOT] = nodes[THREE]
    owners = {ONE: _owners(nodes[ONE][0], [m.port for m in one.masters]),
              THREE: _owners(nodes[THREE][0], [m.port for m in three.masters])}
    owners[HOT] = owners[THREE]
    clients: Optional[_Clients] = None
    try:
        clients = _Clients(urls, processes, threads)
        for variant in VARIANTS:  # warm up: connections open in every thread, scripts loaded
            clients.run(variant, max(cycles // 10, 5))
        series, busiest = Series.declared(VARIANTS), Series.declared(VARIANTS)
        shares: Dict[str, List[List[float]]] = {v: [] for v in VARIANTS}
        per_cycle = Series.declared(VARIANTS)
        slots: Dict[str, Set[int]] = {v: set() for v in VARIANTS}
        refused = 0
        for _, variant in interleave(VARIANTS, rounds):
            before = _lock_calls(nodes[variant])
            elapsed, no, used = clients.run(variant, cycles)
            done = [a - b for a, b in zip(_lock_calls(nodes[variant]), before)]
            total, n = sum(done), processes * threads * cycles
            series.add(variant, n / elapsed)
            shares[variant].append([d / total for d in done])
            busiest.add(variant, max(done) / total)
            per_cycle.add(variant, total / n)
            slots[variant] |= used
            refused += no
        spread = {v: _split(slots[v], owners[v], len(nodes[v])) for v in VARIANTS}
        names = _name_spread(owners[THREE], len(three.masters))
    finally:
        if clients is not None:
            clients.stop()
        for cluster in clusters:
            cluster.stop()
    log(f"cluster: {len(VARIANTS)} variants x {rounds} rounds x {processes}x{threads} clients x {cycles} cycles done")
    return {"series": series, "busiest": busiest, "shares": shares, "per_cycle": per_cycle, "slots": spread,
            "masters": {v: len(nodes[v]) for v in VARIANTS}, "refused": refused, "names": names,
            "cycles": cycles, "rounds": rounds, "clients": (processes, threads), "task": TASK,
            "baseline": ONE, "spread": THREE, "hot": HOT}
