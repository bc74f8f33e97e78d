"""Where each lock lives in Redis.

A task's keys are spread over :data:`BUCKETS` buckets by the first hex digit of the
argument digest, and each bucket is a hash tag, ``{<task>:<b>}``: a lock key, its enqueue
key and the bucket's fencing counter sit in one Redis Cluster slot (one script may touch
them all), while one task's locks spread over sixteen slots. The bookkeeping stays
bounded: sixteen counters per task, whatever the number of arguments.

``<prefix>:{<task>:<b>}:<digest>``        the lock (a string, see record.py); gone when released
``<prefix>:{<task>:<b>}:<digest>:queued`` the enqueue lock of a ``queued``-scope task
``<prefix>:{<task>:<b>}:fence``           fencing counter of the bucket: the last fence handed out
``<prefix>:{<task>:<b>}:<digest>:gen``    which call of the key is the newest (``on_locked="replace"``,
                                          ``lock_debounce``; see generations.py), with a TTL
``<prefix>:{<task>:<b>}:<digest>[:places]:line``  the key's waiters in line (see line.py), with a TTL
``<prefix>:{<task>:<b>}:done``            ids of the bucket's executions that ran to the end while a
                                          redelivery of their message was possible (``acks_late``),
                                          each kept for a while

The lock key doubles as the Pub/Sub channel on which its release is announced.

Redis Cluster hashes only what lies between a key's first ``{`` and the next ``}``, and the
whole key when that is empty. A task name starting with ``}`` would leave it empty, and
scatter one lock's keys over several slots; such a name is written with a backslash in front
(:func:`tag_name`), as is one that starts with a backslash, so that no two names meet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Optional, Tuple

__all__ = ["KeyLayout", "LockKeys", "DEFAULT_PREFIX", "BUCKETS", "tag_name"]

DEFAULT_PREFIX = "singleton_lock"

#: Buckets per task: the first hex digit of the argument digest.
BUCKETS = 16

#: Put in front of a task name that would leave the hash tag empty (see the module docstring).
_ESCAPE = "\\"

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def tag_name(task: str) -> str:
    """The task name as the hash tag holds it: never starting with ``}``, one to one."""
    return _ESCAPE + task if task.startswith(("}", _ESCAPE)) else task


def _task_name(tagged: str) -> str:
    return tagged[len(_ESCAPE):] if tagged.startswith(_ESCAPE) else tagged


def bucket(digest: str) -> str:
    """The bucket of an argument digest (a hex digest: its first digit; anything else: ``0``)."""
    first = digest[:1].lower()
    return first if first and first in "0123456789abcdef" else "0"


class LockKeys(NamedTuple):
    """Every key one call's lock touches, derived once per call (a named tuple: every task makes one)."""

    #: The run lock: held while an execution runs.
    lock: str
    #: Where the call's enqueue lock lives: a key of its own for ``queued`` (one copy queued
    #: beside one running), the run lock itself for ``queued_or_running`` and ``running``.
    queued: str
    #: The fencing counter of the lock's bucket.
    fence: str
    #: The bucket's set of executions that ran to the end (see the module docstring).
    done: str
    #: Which call of the key is the newest (see generations.py).
    generation: str = ""


@lru_cache(maxsize=4096)
def _tag(prefix: str, task: str, bucket: str) -> str:
    """A bucket's key prefix: sixteen per task name, made once each."""
    return f"{prefix}:{{{tag_name(task)}:{bucket}}}"


# Each key's name under its bucket's tag (:meth:`KeyLayout.tag`), written once here.
def _lock(tag: str, digest: str) -> str:
    return f"{tag}:{digest}"


def _queued(tag: str, digest: str) -> str:
    return f"{tag}:{digest}:queued"


def _enqueue(tag: str, digest: str, scope: str) -> str:
    return _queued(tag, digest) if scope == "queued" else _lock(tag, digest)


def _generation(tag: str, digest: str) -> str:
    return f"{tag}:{digest}:gen"


def _fence(tag: str) -> str:
    return f"{tag}:fence"


def _done(tag: str) -> str:
    return f"{tag}:done"


@dataclass(frozen=True)
class KeyLayout:
    """Key names under one prefix."""

    prefix: str = DEFAULT_PREFIX

    def keys(self, task: str, digest: str, scope: str, queued_digest: Optional[str] = None) -> LockKeys:
        """The keys of one call; ``queued_digest`` names the enqueue lock when a message names
        one that differs from ``digest``."""
        tag = self.tag(task, digest)  # every task runs this: one tag for all five names
        queued_tag = tag if not queued_digest or queued_digest == digest else self.tag(task, queued_digest)
        return LockKeys(lock=_lock(tag, digest), queued=_enqueue(queued_tag, queued_digest or digest, scope),
                        fence=_fence(tag), done=_done(tag), generation=_generation(tag, digest))

    def tag(self, task: str, digest: str) -> str:
        """The key prefix of the digest's bucket, hash tag included."""
        return _tag(self.prefix, task, bucket(digest))

    def lock(self, task: str, digest: str) -> str:
        return _lock(self.tag(task, digest), digest)

    def queued(self, task: str, digest: str) -> str:
        return _queued(self.tag(task, digest), digest)

    def enqueue(self, task: str, digest: str, scope: str) -> str:
        """Where a ``queued*`` task's enqueue lock lives: a key of its own for ``queued`` (one
        copy queued beside one running), the run lock itself for ``queued_or_running``."""
        return _enqueue(self.tag(task, digest), digest, scope)

    def generation(self, task: str, digest: str) -> str:
        """The hash naming the newest call of the key (see :mod:`.generations`)."""
        return _generation(self.tag(task, digest), digest)

    def fence(self, task: str, digest: str) -> str:
        return _fence(self.tag(task, digest))

    def done(self, task: str, digest: str) -> str:
        return _done(self.tag(task, digest))

    def pattern(self, task: Optional[str] = None) -> str:
        """A SCAN pattern for the keys of one task (or all tasks). A glob: it also matches the keys
        of a task whose name continues with ``:<b>}:...``; :meth:`split` tells them apart."""
        name = "*" if task is None else _GLOB_SPECIAL.sub(r"\\\1", tag_name(task))
        return f"{self.prefix}:{{{name}:?}}:*"

    def split(self, key: str) -> Optional[Tuple[str, str]]:
        """``(task, rest)`` of a key of this layout, ``rest`` being what follows the hash tag
        (``digest``, ``digest:queued``, ``fence``...); ``None`` for a key of another shape."""
        head = f"{self.prefix}:{{"
        if not key.startswith(head) or "}:" not in key:
            return None
        tag, rest = key[len(head):].rsplit("}:", 1)
        task, _, bucket_ = tag.rpartition(":")
        return (_task_name(task), rest) if task and len(bucket_) == 1 else None

    @staticmethod
    def is_bookkeeping(key: str) -> bool:
        return key.endswith((":fence", ":done", ":gen", ":line"))
