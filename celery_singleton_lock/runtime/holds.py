"""The shared holds a pool process has, written where its worker's main process finds them.

A task's lock is released for a dead pool child by the worker's main process, which
knows the lock from the request it handed out (:mod:`.childwatch`). A ``SharedLock``
hold is taken inside the body, in any task, and the main process cannot derive it: so
each prefork pool process keeps its holds (key, token and the lock's name) in a small file
of its own, ``<tmp>/celery-singleton-lock-<uid>/<main pid>/<pid>``, rewritten (write, then
rename) as a hold starts and ends. When the process dies, the main process reads the file
and releases each hold by its token: a hold the process gave back already is a harmless
no-op. Only pool processes keep the file (:func:`enable` runs at ``worker_process_init``);
a script or a web process, which no main process watches, writes nothing. The directory
is the user's alone (mode 0700): a token lets its bearer release the place. Every process
reaches it through :mod:`.hold_dir`, which refuses a directory another user could control
and follows no link out of it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import signals
from ..store import STORE_ERRORS, LockBackend, error_text
from . import hold_dir
from .hold_dir import UntrustedDirectory

__all__ = ["enable", "note", "drop", "release_holds_of", "forget_all", "claim", "directory", "Named"]

logger = logging.getLogger("celery_singleton_lock")

_MUTEX = threading.Lock()
#: This process's holds, by token: (key, name); once :func:`enable` named one, the file's name and
#: its directory's descriptor (checked once, then every write goes through it).
_HOLDS: Dict[str, Tuple[str, str]] = {}
_PATH: Optional[str] = None
_DIR: Optional[int] = None


def _after_fork() -> None:
    """A forked process has none of its parent's holds, and a mutex another thread held at the fork
    would never be let go of: both start afresh (its own file is named by :func:`enable`)."""
    global _MUTEX, _PATH, _DIR
    _MUTEX = threading.Lock()
    _HOLDS.clear()
    if _DIR is not None:
        try:
            os.close(_DIR)
        except OSError:
            pass
    _PATH = _DIR = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Named:
    """A signal's sender for a hold the main process releases: what receivers read of a ``SharedLock``."""

    def __init__(self, name: str, app: Any) -> None:
        self.name = name
        self._app = app


def directory(main_pid: int) -> str:
    """Where the pool processes of the worker whose main process is ``main_pid`` keep their holds."""
    return os.path.join(hold_dir.base_path(), str(main_pid))


def claim(main_pid: int) -> None:
    """The worker's main process at start: its directory checked and marked, stale notes cleaned;
    :class:`~.hold_dir.UntrustedDirectory` when another user could control it."""
    hold_dir.claim(main_pid)


def enable(main_pid: int) -> None:
    """In a pool process: keep this process's holds in a file its main process reads."""
    global _PATH, _DIR
    with _MUTEX:
        try:
            fd = hold_dir.open_own(main_pid, create=True)
        except (UntrustedDirectory, OSError) as exc:
            logger.error("singleton lock: this pool process does not note its shared holds: %s; if it dies "
                         "inside a hold, the hold ends within its ttl", exc)
            return
        if _DIR is not None:
            os.close(_DIR)
        _DIR, _PATH = fd, directory(main_pid)
        _write()


def note(key: str, token: str, name: str) -> None:
    """A hold started: written before the block runs."""
    with _MUTEX:
        _HOLDS[token] = (key, name)
        _write()


def drop(token: str) -> None:
    """A hold ended (given back, or found gone)."""
    with _MUTEX:
        if _HOLDS.pop(token, None) is not None:
            _write()


def _write() -> None:
    if _DIR is None:
        return
    own = str(os.getpid())
    text = "".join(f"{name}\t{key}\t{token}\n" for token, (key, name) in _HOLDS.items())
    try:
        handle = os.open(own + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600,
                         dir_fd=_DIR)
        with open(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(own + ".tmp", own, src_dir_fd=_DIR, dst_dir_fd=_DIR)
    except OSError as exc:
        logger.warning("singleton lock: cannot note the shared holds of this process in %s (%s); if it dies "
                       "inside a hold, the hold ends within its ttl", _PATH, exc)


def _read(text: str) -> List[Tuple[str, str, str]]:
    return [tuple(line.split("\t", 2)) for line in text.splitlines() if line.count("\t") >= 2]  # type: ignore[misc]


def release_holds_of(store: LockBackend, app: Any, pid: int, why: str,
                     sender: Callable[[str, Any], Any] = Named) -> int:
    """In the main process: release what pool process ``pid`` held when it died; how many were released."""
    try:
        where = hold_dir.open_own(os.getpid())
    except FileNotFoundError:
        return 0
    except (UntrustedDirectory, OSError) as exc:
        logger.error("singleton lock: the shared holds of pool process %s after %s are not read: %s; they end "
                     "within their ttl", pid, why, exc)
        return 0
    try:
        holds = _read(hold_dir.read_file(where, str(pid)) or "")
        for leftover in (str(pid), f"{pid}.tmp"):
            hold_dir.unlink(where, leftover)
    finally:
        os.close(where)
    if not holds:
        return 0
    try:
        released = store.release_many([(key, token) for _, key, token in holds])
    except STORE_ERRORS as exc:
        logger.warning("singleton lock: releasing the shared holds of pool process %s after %s failed (%s); "
                       "they end within their ttl", pid, why, error_text(exc))
        return 0
    for (name, key, _), done in zip(holds, released):
        if done:
            logger.info("singleton lock: released shared lock %s (%s) from the worker's main process after %s",
                        name, key, why)
            signals.lock_released.send(sender=sender(name, app), key=key, task_id=None, released=True,
                                       exit="child_death", description=None)
    _leave_lines(store, [(key, token) for (_, key, token), done in zip(holds, released) if not done])
    return sum(bool(done) for done in released)


def _leave_lines(store: LockBackend, waiting: List[Tuple[str, str]]) -> None:
    """A hold noted but holding no place died waiting for one: it leaves its key's line now, so the next
    waiter is told at once rather than when its place in line lapses."""
    line = getattr(store, "line", None)
    if line is None:
        return
    for key, token in waiting:
        try:
            line.leave(key, token)
        except STORE_ERRORS:
            pass  # its place in line ends with its lease


def forget_all(main_pid: int) -> None:
    """The worker's main process is done: its pool processes' files go, and its directory."""
    try:
        base = hold_dir.open_base()
    except FileNotFoundError:
        return
    except (UntrustedDirectory, OSError) as exc:
        logger.error("singleton lock: the hold files of this worker are not removed at shutdown: %s", exc)
        return
    try:
        hold_dir.remove_tree(base, str(main_pid))
    finally:
        os.close(base)
