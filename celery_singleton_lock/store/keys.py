"""Where each lock lives in Redis.

Every key of one task shares the ``{task}`` hash tag, so a lock key and the
task's fencing counter sit in one Redis Cluster slot and one script may touch both.

``<prefix>:{<task>}:<digest>``        the lock (a hash: token, holder, fence); gone when released
``<prefix>:{<task>}:<digest>:queued`` the enqueue lock of a ``queued``-scope task
``<prefix>:{<task>}:fence``           fencing counter: one per task, whatever the arguments
``<prefix>:{<task>}:done``            ids of the task's executions that ran to the end while a
                                      redelivery of their message was possible (``acks_late``),
                                      each kept for a while: one per task, whatever the arguments

The lock key doubles as the Pub/Sub channel on which its release is announced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["KeyLayout", "LockKeys", "DEFAULT_PREFIX"]

DEFAULT_PREFIX = "singleton_lock"


@dataclass(frozen=True)
class LockKeys:
    """Every key one call's lock touches, derived once per call."""

    #: The run lock: held while an execution runs.
    lock: str
    #: Where the call's enqueue lock lives: a key of its own for ``queued`` (one copy queued
    #: beside one running), the run lock itself for ``queued_or_running`` and ``running``.
    queued: str
    #: The task's fencing counter.
    fence: str
    #: The task's set of executions that ran to the end (see the module docstring).
    done: str


@dataclass(frozen=True)
class KeyLayout:
    """Key names under one prefix."""

    prefix: str = DEFAULT_PREFIX

    def keys(self, task: str, digest: str, scope: str, queued_digest: Optional[str] = None) -> LockKeys:
        """The keys of one call; ``queued_digest`` names the enqueue lock when a message names
        one that differs from ``digest``."""
        queued = self.enqueue(task, queued_digest or digest, scope)
        return LockKeys(lock=self.lock(task, digest), queued=queued, fence=self.fence(task), done=self.done(task))

    def lock(self, task: str, digest: str) -> str:
        return f"{self.prefix}:{{{task}}}:{digest}"

    def queued(self, task: str, digest: str) -> str:
        return f"{self.prefix}:{{{task}}}:{digest}:queued"

    def enqueue(self, task: str, digest: str, scope: str) -> str:
        """Where a ``queued*`` task's enqueue lock lives: a key of its own for ``queued`` (one
        copy queued beside one running), the run lock itself for ``queued_or_running``."""
        return self.queued(task, digest) if scope == "queued" else self.lock(task, digest)

    def fence(self, task: str) -> str:
        return f"{self.prefix}:{{{task}}}:fence"

    def done(self, task: str) -> str:
        return f"{self.prefix}:{{{task}}}:done"

    def pattern(self, task: str = "*") -> str:
        """A SCAN pattern for the keys of one task (or all tasks)."""
        return f"{self.prefix}:{{{task}}}:*"

    @staticmethod
    def is_bookkeeping(key: str) -> bool:
        return key.endswith((":fence", ":done"))
