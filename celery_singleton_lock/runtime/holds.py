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
is the user's alone (mode 0700): a token lets its bearer release the place.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import signals
from ..store import STORE_ERRORS, LockBackend, error_text

__all__ = ["enable", "note", "drop", "release_holds_of", "forget_all", "prune_dead", "directory", "Named"]

logger = logging.getLogger("celery_singleton_lock")

_MUTEX = threading.Lock()
#: This process's holds, by token: (key, name); the file, once :func:`enable` named one.
_HOLDS: Dict[str, Tuple[str, str]] = {}
_PATH: Optional[str] = None


def _after_fork() -> None:
    """A forked process has none of its parent's holds, and a mutex another thread held at the fork
    would never be let go of: both start afresh (its own file is named by :func:`enable`)."""
    global _MUTEX, _PATH
    _MUTEX = threading.Lock()
    _HOLDS.clear()
    _PATH = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Named:
    """A signal's sender for a hold the main process releases: what receivers read of a ``SharedLock``."""

    def __init__(self, name: str, app: Any) -> None:
        self.name = name
        self._app = app


def directory(main_pid: int) -> str:
    """Where the pool processes of the worker whose main process is ``main_pid`` keep their holds."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"celery-singleton-lock-{uid}", str(main_pid))


def _private(path: str) -> bool:
    """Make ``path`` (and its parent) a directory only this user reads; ``False`` when it is another's."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.makedirs(path, mode=0o700, exist_ok=True)
        for where in (os.path.dirname(path), path):
            status = os.stat(where)
            if status.st_uid != os.getuid():
                return False
            if status.st_mode & 0o077:  # made by an older version, or under another umask
                os.chmod(where, 0o700)
        return True
    except OSError:
        return False


def enable(main_pid: int) -> None:
    """In a pool process: keep this process's holds in a file its main process reads."""
    global _PATH
    where = directory(main_pid)
    with _MUTEX:
        _PATH = os.path.join(where, str(os.getpid())) if _private(where) else None
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
    if _PATH is None:
        return
    text = "".join(f"{name}\t{key}\t{token}\n" for token, (key, name) in _HOLDS.items())
    try:
        with open(os.open(_PATH + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
                  encoding="utf-8") as handle:
            handle.write(text)
        os.replace(_PATH + ".tmp", _PATH)
    except OSError as exc:
        logger.warning("singleton lock: cannot note the shared holds of this process in %s (%s); if it dies "
                       "inside a hold, the hold ends within its ttl", _PATH, exc)


def _read(path: str) -> List[Tuple[str, str, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    return [tuple(line.split("\t", 2)) for line in lines if line.count("\t") >= 2]  # type: ignore[misc]


def release_holds_of(store: LockBackend, app: Any, pid: int, why: str,
                     sender: Callable[[str, Any], Any] = Named) -> int:
    """In the main process: release what pool process ``pid`` held when it died; how many were released."""
    path = os.path.join(directory(os.getpid()), str(pid))
    holds = _read(path)
    for leftover in (path, path + ".tmp"):
        try:
            os.unlink(leftover)
        except OSError:
            pass
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
    return sum(bool(done) for done in released)


def prune_dead() -> None:
    """Remove the notes of workers whose main process is gone (killed: nobody removed them)."""
    parent = os.path.dirname(directory(os.getpid()))
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if name.isdigit() and int(name) != os.getpid() and not os.path.exists(f"/proc/{name}"):
            forget_all(int(name))


def forget_all(main_pid: int) -> None:
    """The worker's main process is done: remove its pool processes' files."""
    where = directory(main_pid)
    try:
        names = os.listdir(where)
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(where, name))
        except OSError:
            pass
    try:
        os.rmdir(where)
    except OSError:
        pass
