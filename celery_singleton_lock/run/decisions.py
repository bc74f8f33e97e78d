"""What the duplicate policy decides for one execution that found its lock held.

Policies return one of these values; :mod:`.run` turns it into the task's
outcome (and :mod:`.publish` turns :data:`EnqueueDecision` into what
``apply_async`` does). Nothing in between raises to steer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ..store import Conflict, Grant

__all__ = ["Run", "Skip", "Superseded", "Requeue", "Fail", "Ignored", "Decision", "SkipAtEnqueue", "PublishUnlocked",
           "Refuse", "EnqueueDecision"]


@dataclass(frozen=True)
class Run:
    """The lock is ours after all: run the body (``started``: when the winning ask was sent)."""

    grant: Grant
    started: float


@dataclass(frozen=True)
class Skip:
    """End in SUCCESS with result ``None`` without running the body."""


@dataclass(frozen=True)
class Superseded:
    """A newer call of the key took this one's place (``on_locked="replace"``, ``lock_debounce``):
    end as a skipped duplicate does, SUCCESS with result ``None``. ``by`` is the newer call's task id."""

    by: str


@dataclass(frozen=True)
class Requeue:
    """Publish the message again for later; ``counted`` against ``lock_retry_max`` unless the
    copy only waits its turn. ``conflict`` is the holder it met (``None``: the call waits a quiet
    period, ``countdown`` seconds, instead of a holder)."""

    conflict: Optional[Conflict]
    counted: bool = True
    countdown: Optional[float] = None


@dataclass(frozen=True)
class Fail:
    """End in FAILURE with ``error``."""

    error: BaseException


@dataclass(frozen=True)
class Ignored:
    """Store nothing: another delivery of this very message ran, or runs, the body."""


Decision = Union[Run, Skip, Superseded, Requeue, Fail, Ignored]


@dataclass(frozen=True)
class SkipAtEnqueue:
    """Publish nothing; the caller gets the holder's result."""


@dataclass(frozen=True)
class PublishUnlocked:
    """Publish without an enqueue lock: the worker re-queues the call until the lock is free.

    ``duplicate`` is False for the newest call of a key (``on_locked="replace"``): it takes
    the waiting copy's place rather than repeating it, so it is no ``lock_conflict``."""

    duplicate: bool = True


@dataclass(frozen=True)
class Refuse:
    """Raise ``error`` to the caller; nothing is published."""

    error: BaseException


EnqueueDecision = Union[SkipAtEnqueue, PublishUnlocked, Refuse]
