"""One block's hold on a shared lock: take a place, keep it while the block runs, give it back.

From the moment the place is granted the block's exit, however it comes (a return, an
exception, a ``Retry``, the process's shutdown), gives it back by token, so a place is
never deleted from under a later holder. While it is held the process's one heartbeat
renews it (:class:`~.store.Renewer`), reports its loss (log, ``lock_lost``, ``held.lost``),
and a pool process notes it where its worker's main process reads it if the process dies
(:mod:`.runtime.holds`): the main process then gives it back at once, not at the lease's end.
The note is written before the place is asked for and erased only after it was given back,
so there is no instant at which the process holds a place its note does not name.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Tuple

from .. import signals
from ..calls.describe import describe_values
from ..run.exits import TERMINATED, exit_of, release_after_run
from ..runtime import holds
from ..runtime.lock_runtime import LockRuntime
from ..store import Holder, Lease, new_token
from .held import HeldPlace
from .requeue import refuse_outside_a_task, running_task
from .take import Ask, take

__all__ = ["Hold"]


class Hold:
    """A context manager for one place: ``with lock.hold(*key_values) as held:``. One block each."""

    __slots__ = ("lock", "values", "runtime", "_lease", "_held")

    def __init__(self, lock: Any, values: Tuple[Any, ...], runtime: LockRuntime) -> None:
        self.lock = lock
        self.values = values
        self.runtime = runtime
        self._lease: Optional[Lease] = None
        self._held: Optional[HeldPlace] = None

    def __enter__(self) -> HeldPlace:
        if self._lease is not None:
            raise RuntimeError(f"{self.lock.where}: a hold is one block; call hold() again for another")
        lock, runtime = self.lock, self.runtime
        tuning = lock.tuning(runtime.app)
        task = running_task()
        if lock.on_locked == "retry" and task is None:
            refuse_outside_a_task(lock)
        keys = lock.keys(runtime, self.values)
        description = describe_values(self.values) if runtime.describe else None
        task_id = task.request.id if task is not None else ""
        holder = Holder(task_id=task_id, host=runtime.hostname, pid=os.getpid(), since_ms=int(time.time() * 1000),
                        heartbeat_ms=int(tuning.heartbeat * 1000), describe=description or "",
                        task=task.name if task is not None else "", twins=False)
        token = new_token()
        ask = Ask(lock, runtime.store, keys.lock, token, holder, tuning, description)
        # Noted before it is asked for: a process killed as the place is granted leaves a note its
        # main process releases by token (a no-op when the place never came).
        holds.note(keys.lock, token, lock.name)
        try:
            started = take(ask, task)
        except BaseException:
            holds.drop(token)
            raise
        lease = Lease(keys.lock, token, tuning.ttl, tuning.heartbeat, confirmed_at=started, holder=holder)
        held = HeldPlace(lock, keys.lock, token, lambda: runtime.store.fence(keys.lock, keys.fence, token),
                         task_id, lease, description)
        lease.context = held
        self._lease, self._held = lease, held
        try:  # from the grant on, the place is given back however the block ends
            runtime.renewer.hold(lease)
            signals.lock_acquired.send(sender=lock, key=keys.lock, task_id=task_id or None, lock=held,
                                       acquire_seconds=time.monotonic() - started, description=description)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return held

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        lease, held = self._lease, self._held
        if lease is None or held is None or lease.released:
            return
        exit = exit_of(exc)
        try:
            release_after_run(self.runtime, lease, self.lock, held.task_id or None, None, exit)
        finally:
            # Erased once the place is given back, so no instant leaves it unnoted; kept when the pool is
            # ending this process: its main process gives the place back.
            if exit != TERMINATED:
                holds.drop(lease.token)

    @property
    def held(self) -> Optional[HeldPlace]:
        """The place, once the block holds it."""
        return self._held
