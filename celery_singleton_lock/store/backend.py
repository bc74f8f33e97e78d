"""The store seam: what the Celery layer may ask of a lock store, and what it answers.

Every store (one Redis, a Redis Cluster, Sentinel's master with replica
acknowledgements, a quorum of masters, and the in-memory backend for unit
tests) implements :class:`LockBackend`. The Celery layer sees nothing else: it
never builds a script call, a key or a connection of its own, and a store's
capabilities are declared attributes, not probed names.

A lock is held under a *token* (unique per execution); every change to a held
lock compares that token first, so no caller can renew, hand back or delete a
lock it does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import urandom
from typing import (TYPE_CHECKING, Any, Callable, ContextManager, List, Mapping, Optional, Protocol, Sequence,
                    Tuple, Union)

if TYPE_CHECKING:  # pragma: no cover
    from .generations import GenerationStore

from . import pid_namespace

__all__ = ["LockBackend", "PostsReleases", "ReleaseAnswer", "ReleaseEvents", "Holder", "Grant", "GRANT", "Conflict", "NotOurs", "NOT_OURS",
           "Outcome", "Completion", "Limit", "SINGLETON", "MAX_LIMIT", "MAX_DURATION_MS",
           "new_token"]


def new_token() -> str:
    """A unique per-execution token (128 random bits)."""
    return urandom(16).hex()


@dataclass(frozen=True)
class Holder:
    """Who asks for (or holds) a lock, as written beside its token for diagnostics."""

    task_id: str
    host: str
    pid: int
    since_ms: int
    heartbeat_ms: int
    #: The PID namespace ``pid`` belongs to (:mod:`.pid_namespace`); this process's by default.
    pid_ns: str = field(default_factory=pid_namespace.current)
    #: The call behind the lock, when the app stores one (``singleton_lock_describe``); written
    #: after the task id.
    describe: str = ""
    #: The task that made the call, when its keys are made under another name (``lock_name``, a
    #: shared lock held in a task's body); written after the description. ``""``: the key's name.
    task: str = ""
    #: Whether another place of the key under the same task id is this call's twin (a second
    #: delivery of one message: refused, see :mod:`.places`). A shared hold (``SharedLock``) is
    #: not its task's delivery: one task may hold several places of a key, from nested blocks or threads.
    twins: bool = True

    @property
    def twin_id(self) -> str:
        """The task id a places key compares against its other places' (``""``: none)."""
        return self.task_id if self.twins else ""


#: The longest duration the store keeps (ms): its times are the server's clock in ms plus a
#: duration, counted by Lua's doubles, which hold integers exactly only below 2**53, and printed
#: by ``%d``. About 31 years keeps every such sum far inside both.
MAX_DURATION_MS = 10 ** 12
#: The most holders one key admits at once: a room keeps one entry per place.
MAX_LIMIT = 10 ** 6


@dataclass(frozen=True)
class Limit:
    """How many holders one key admits at once (``count``), and how long a place is kept
    after it was taken (``window_ms``). ``room`` keeps a limit of one with no window in the
    key's places all the same: the calls of a key whose limit varies per call (a ``lock_limit``
    function) must all count in one room, whatever each one's limit."""

    count: int = 1
    window_ms: int = 0
    room: bool = False
    #: Whether a call refused by full windows is handed a turn (it comes back for it: a re-queue).
    turns: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= MAX_LIMIT:
            raise ValueError(f"a limit is an int from 1 to {MAX_LIMIT}, not {self.count!r}")
        if (isinstance(self.window_ms, bool) or not isinstance(self.window_ms, int)
                or not 0 <= self.window_ms <= MAX_DURATION_MS):
            raise ValueError(f"a window is an int of ms from 0 to {MAX_DURATION_MS}, not {self.window_ms!r}")

    @property
    def singleton(self) -> bool:
        """Whether this is the plain lock (one holder, no window, no room asked for): no room of places."""
        return self.count == 1 and self.window_ms == 0 and not self.room


#: The singleton lock's limit.
SINGLETON = Limit()


@dataclass(frozen=True)
class Grant:
    """The lock is ours. Its fencing token is asked for separately (:meth:`LockBackend.fence`),
    by the holders that use one: most never do, and then it costs nothing."""


#: The one :class:`Grant` value.
GRANT = Grant()


@dataclass(frozen=True)
class Conflict:
    """Someone else holds the lock: who, since when, for how long still, in which state.

    ``state`` is ``"running"`` (an execution holds it), ``"queued"`` (an enqueue lock
    waiting for its message) or ``"foreign"`` (the key holds something this library did not
    write: see :mod:`.foreign`); ``same_token`` is true when the holder runs under the
    token the caller handed in (a ``self.retry()`` that has not handed the lock over yet).
    For a key with a limit or a window (:mod:`.places`) it describes the place that frees
    soonest: ``held`` places of ``limit`` are taken, and ``window_ms`` is how long until the
    soonest window of the taken places ends, released or held: no place frees before it
    (``None`` when one is a run past its window's end, which may free at any moment).
    A place names its holder's token (``holder_token``): one execution of a task id may meet
    another's place while places are free (a redelivery, a ``self.retry()``), and which one
    it met decides what it does. A call handed a turn by a full window learns when it comes
    (``turn_ms``), to come back then.
    """

    task_id: str
    host: str
    pid: Optional[int]
    since_ms: Optional[int]
    pttl_ms: int
    heartbeat_ms: Optional[int]
    state: str
    same_token: bool = False
    held: int = 1
    limit: int = 1
    window_ms: Optional[int] = None
    holder_token: Optional[str] = None
    #: For a call that holds a turn (:mod:`.places`): ms until it may take a place (<= 0: it may
    #: now, and waits for a window that ends late); ``None`` when it holds none.
    turn_ms: Optional[int] = None
    #: For a waiter in line (:mod:`.line`): how many live waiters came before it; ``None`` elsewhere.
    ahead: Optional[int] = None


@dataclass(frozen=True)
class NotOurs:
    """An enqueue lock handed over by token is not that token's any more (expired, revoked,
    or adopted by another delivery of the same message)."""


#: The one :class:`NotOurs` value.
NOT_OURS = NotOurs()

Outcome = Union[Grant, Conflict]


@dataclass(frozen=True)
class Completion:
    """What a release notes for later redeliveries of the holder's message.

    ``done_key`` is the task's set of completed task ids, ``remember_ms`` how long the
    note lasts, and ``always`` whether to note it even if no redelivered copy met the lock.
    """

    done_key: str
    task_id: str
    remember_ms: int
    always: bool


class ReleaseEvents(Protocol):
    """A subscription to one lock's release announcements.

    A release is announced only when a waiter asked for it (an uncontended release costs
    nothing more): :meth:`wait` asks before it blocks, so a release after the caller's last
    look at the lock is not missed.
    """

    def ask(self) -> bool:
        """Ask the lock's holder to announce its release; ``False`` when the lock is free."""

    def wait(self, timeout: float) -> bool:
        """Ask, then block up to ``timeout`` seconds; ``True`` when a release was announced
        (``False`` at once when the lock is free: nothing will be)."""

    def listen(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds without asking (a waiter in line asks with its own ask,
        :mod:`.line`); ``True`` when a release was announced."""


class LockBackend(Protocol):
    """The operations of the lock protocol; each answers from the store, none keeps lock state."""

    #: Whether :meth:`release` can note a :class:`Completion` and :meth:`completed` find it.
    records_completions: bool
    #: Whether a key may have more than one place (:mod:`.places`): a quorum's masters each count
    #: their own holders, so it keeps one at most.
    counts_places: bool
    #: Which call of a key is the newest (see :mod:`.generations`); ``None`` where the store
    #: cannot tell it safely (a quorum: its masters' clocks and histories differ).
    generations: Optional["GenerationStore"]

    def acquire(self, key: str, token: str, ttl_ms: int, holder: Holder, state: str = "running",
                limit: Optional[Limit] = None) -> Outcome:
        """Take ``key`` if free (or already ours under ``token`` in ``state``: a repeated ask).
        A places key (:mod:`.places`) takes one of ``limit``'s places instead."""

    def adopt(self, queued_key: str, key: str, queued_token: str, token: str, ttl_ms: int,
              holder: Holder, limit: Optional[Limit] = None) -> Union[Grant, Conflict, NotOurs]:
        """Turn the enqueue lock ``queued_key`` held under ``queued_token`` into the running lock ``key``
        (for places keys: the enqueue place into one of ``limit``'s running places)."""

    def fence(self, key: str, fence_key: str, token: str) -> Optional[int]:
        """A fencing token for the holder of ``key`` under ``token``, from the counter ``fence_key``:
        larger than every fence handed to an earlier holder of ``key``. ``None`` when ``token``
        does not hold ``key`` (any more)."""

    def requeue(self, key: str, token: str, ttl_ms: int) -> bool:
        """Hand a running lock back to the queue under the same token (for a retry to adopt)."""

    def renew(self, items: Sequence[Tuple[Any, ...]]) -> List[bool]:
        """Extend each running ``(key, token, ttl_ms, heartbeat_ms)`` still held; ``False`` where it
        is gone. (The heartbeat may be left out: a third of the ttl.) A lock a restarted server lost
        is taken back within its heartbeat of the start (see :mod:`.start_gate`)."""

    def release(self, key: str, token: str, completion: Optional[Completion] = None,
                state: str = "running") -> bool:
        """Compare-and-delete, announced to the waiters that asked; ``False`` when the lock was
        gone, held under another token, or not in ``state``. ``"queued"`` gives up an enqueue
        lock: it never deletes a running lock, not even one under that token (a ``self.retry()``
        message carries its running predecessor's token as its enqueue token)."""

    def release_many(self, items: Sequence[Tuple[str, ...]]) -> List[bool]:
        """:meth:`release` for several ``(key, token[, state])`` at once (state: ``"running"``)."""

    def mark_redelivered(self, key: str, task_id: str) -> bool:
        """Note on the lock that a redelivered copy of its holder's message met it."""

    def completed(self, done_key: str, task_id: str) -> bool:
        """Whether a release noted that ``task_id`` ran to the end (and it is still remembered)."""

    def holder(self, key: str) -> Optional[Mapping[str, str]]:
        """The lock's fields (``token``, ``task_id``, ``state``...) and ``pttl``; ``None`` when free."""

    def release_events(self, key: str) -> ContextManager[ReleaseEvents]:
        """Subscribe to ``key``'s release announcements for the block and ask the holder to announce
        its release (subscribe, then look, then wait)."""

    def epoch(self) -> Optional[str]:
        """A value that changes when the store starts afresh (a restart); ``None``: cannot tell."""

    def close(self) -> None:
        """Drop connections and threads."""


#: Told what a posted release's store answered: whether it released, or the exception that
#: stood for the answer.
ReleaseAnswer = Callable[[Union[bool, BaseException]], None]


class PostsReleases(Protocol):
    """A store that can send a release and read its answer later (one sleep for a reply fewer per
    task). Optional: a caller looks for :meth:`post_release` and releases as usual without it."""

    def post_release(self, key: str, token: str, completion: Optional[Completion],
                     answer: ReleaseAnswer, hold_back: bool = False) -> bool:
        """Send :meth:`LockBackend.release` now, the store applying it as it arrives; ``answer`` is
        told its result when this process's next call on that connection reads it (in a worker,
        the next task's acquire), or at :meth:`settle_posted`. ``False``, with nothing sent,
        where it cannot. ``hold_back``: sent with that next call instead, in one write, unless
        :meth:`flush_posted` (which the caller must make sure comes soon) sends it first."""

    def settle_posted(self) -> None:
        """Read every posted release's answer now (sending any still held back) and tell its ``answer``."""

    def flush_posted(self) -> None:
        """Send every posted release still held back; the answers are read as usual."""

