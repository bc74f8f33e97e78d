"""A lock held as a block in a body: a ``SharedLock`` hold beside redis-py's and python-redis-lock's.

Each variant is one ``with`` block around nothing, as a task body guarding a call to a
shared resource holds one: take, then give back. The ``SharedLock`` goes through its app's
runtime (its store, its heartbeat's registration, the signals); the peers are their plain
context managers. :mod:`.micro` runs them beside the raw floor and the other variants.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import redis

__all__ = ["block_variants", "OURS_SHARED", "REDIS_PY_BLOCK", "PRL_BLOCK"]

OURS_SHARED = "ours: SharedLock hold (with lock.hold(): take + give back)"
REDIS_PY_BLOCK = "redis-py Lock in a block (with lock:)"
PRL_BLOCK = "python-redis-lock in a block (with lock:)"

Cycle = Callable[[], None]


def _shared_hold(url: str) -> Tuple[Cycle, Callable[[], None]]:
    from celery import Celery

    from celery_singleton_lock import SharedLock
    from celery_singleton_lock.runtime import peek_runtime

    app = Celery("bench-shared", set_as_current=False)
    app.conf.update(singleton_lock_url=url, singleton_lock_prefix="bench")
    lock = SharedLock("bench-shared", on_locked="raise", app=app)

    def hold() -> None:
        with lock.hold():
            pass

    def close() -> None:
        runtime = peek_runtime(app)
        if runtime is not None:
            runtime.close()

    return hold, close


def block_variants(url: str, plain: "redis.Redis") -> Dict[str, Tuple[Cycle, Callable[[], None]]]:
    """name -> (one block, cleanup)."""
    nothing = lambda: None  # noqa: E731
    out: Dict[str, Tuple[Cycle, Callable[[], None]]] = {OURS_SHARED: _shared_hold(url)}

    def redis_py_block() -> None:
        with plain.lock("bench:redis-py-block", timeout=30, thread_local=False):
            pass

    out[REDIS_PY_BLOCK] = (redis_py_block, nothing)
    try:
        import redis_lock
    except ImportError:  # pragma: no cover - the bench extra installs it
        return out

    def prl_block() -> None:
        with redis_lock.Lock(plain, "bench:prl-block", expire=30):
            pass

    out[PRL_BLOCK] = (prl_block, nothing)
    return out
