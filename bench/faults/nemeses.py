"""The nemeses: each a loop that breaks one thing at random moments until told to stop.

Every nemesis takes the run's :class:`~.topology.Topology`, a ``stop`` event, a seeded
random generator and a log function, and leaves everything running when it returns
(paused processes continued, killed ones restarted).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Callable, Dict

import redis

from .topology import Topology

__all__ = ["NEMESES"]

Log = Callable[[str], None]
Nemesis = Callable[[Topology, threading.Event, random.Random, Log], int]


def none(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    stop.wait()
    return 0


def kill_child(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """SIGKILL one pool process every 2-5 s; its prefork parent starts another."""
    done = 0
    while not stop.wait(rng.uniform(2, 5)):
        worker = rng.choice(topology.workers)
        children = worker.children()
        if children:
            topology.signal_worker_child(rng.choice(children), signal.SIGKILL)
            done += 1
    return done


def kill_worker(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """SIGKILL a whole worker (parent and children) every 6-10 s, then start a new one."""
    done = 0
    while not stop.wait(rng.uniform(6, 10)):
        with topology.mutex:
            topology.kill_worker(rng.choice(topology.workers))
            topology.start_worker()
        done += 1
    return done


def pause_worker(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """SIGSTOP a whole worker for 4.5-6 s (longer than lock_ttl), SIGCONT, run 2-4 s."""
    done = 0
    while not stop.wait(rng.uniform(2, 4)):
        worker = rng.choice(topology.workers)
        topology.signal_worker(worker, signal.SIGSTOP)
        time.sleep(rng.uniform(4.5, 6))
        topology.signal_worker(worker, signal.SIGCONT)
        done += 1
    return done


def pause_store(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """SIGSTOP the lock store for 2-6 s, then let it run 3-6 s."""
    done = 0
    while not stop.wait(rng.uniform(3, 6)):
        topology.locks[0].pause()
        time.sleep(rng.uniform(2, 6))
        topology.locks[0].resume()
        done += 1
    return done


def kill_clients(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """Drop every normal client connection of the lock store every 1-3 s."""
    done = 0
    admin = redis.Redis.from_url(topology.lock_urls[0], socket_timeout=5)
    try:
        while not stop.wait(rng.uniform(1, 3)):
            done += int(admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"))
    finally:
        admin.close()
    return done


def restart_store(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """Restart the lock store empty every 8-14 s."""
    done = 0
    while not stop.wait(rng.uniform(8, 14)):
        topology.restart_lock_store(0)
        done += 1
    return done


def restart_store_long(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """Restart the lock store empty, about 1 s down, every 5-9 s: during the long bodies."""
    done = 0
    while not stop.wait(rng.uniform(5, 9)):
        topology.restart_lock_store(0, down=rng.uniform(0.8, 1.2))
        done += 1
    return done


def quorum_kill(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """Kill one master of the quorum every 5-9 s, keep it down 2-4 s, restart it empty."""
    done = 0
    while not stop.wait(rng.uniform(5, 9)):
        topology.restart_lock_store(rng.randrange(len(topology.locks)), down=rng.uniform(2, 4))
        done += 1
    return done


def kill_publisher(topology: Topology, stop: threading.Event, rng: random.Random, log: Log) -> int:
    """SIGKILL a publisher process every 1-4 s and start another in its place (the latest-wins rows)."""
    done = 0
    publishers = topology.publishers
    while not stop.wait(rng.uniform(1, 4)):
        alive = publishers.alive()
        if alive:
            slot = rng.choice(alive)
            if publishers.kill(slot):
                done += 1
                publishers.start(slot)
    return done


NEMESES: Dict[str, Nemesis] = {f.__name__: f for f in (none, kill_child, kill_worker, pause_worker, pause_store,
                                                         kill_clients, restart_store, restart_store_long,
                                                         quorum_kill, kill_publisher)}
