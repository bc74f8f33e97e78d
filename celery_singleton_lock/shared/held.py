"""The place a block holds, as the block sees it: what ``self.lock`` is to a task.

A hold is kept as a task's lock is (one lease, renewed by the process's heartbeat), so its
handle is a task's :class:`~.run.handle.ExecutionLock` that also names the shared lock it
belongs to: the heartbeat's loss report and every release send their signals with the
shared lock as sender, and the metrics count it under its name.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..exceptions import LockLostError
from ..run.handle import ExecutionLock
from ..store import Lease

__all__ = ["HeldPlace"]


class HeldPlace(ExecutionLock):
    """One block's place: ``key``, ``token``, ``fencing_token``, ``lost``, ``check()``."""

    __slots__ = ("sender",)

    def __init__(self, sender: Any, key: str, token: str, ask_fence: Callable[[], Optional[int]],
                 task_id: str, lease: Lease, description: Optional[str] = None) -> None:
        super().__init__(key, token, ask_fence, sender.name, task_id, lease, description)
        #: The shared lock: the sender of the signals about this place.
        self.sender = sender

    @property
    def who(self) -> str:
        """The shared lock, and the task the block runs in, if any (a block outside a task has no id)."""
        inside = f" in task {self.task_id}" if self.task_id else " (a block outside a task)"
        return f"shared lock {self.task_name!r}{inside}"

    @property
    def unguarded(self) -> str:
        return "the block keeps running unguarded (check held.lost or held.check(), held being what the with gave)"

    def _lost_error(self) -> LockLostError:
        inside = f" in task {self.task_id}" if self.task_id else ""
        return LockLostError(f"shared lock {self.task_name!r}: the place {self.key}{inside} was lost: another "
                             "holder may have it", task=self.task_name, key=self.key)

    def __repr__(self) -> str:
        return f"<HeldPlace {self.key} lost={self.lost}>"
