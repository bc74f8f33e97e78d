"""Notice at once when a prefork child dies holding a lock.

The worker's main process learns that a pool process died from billiard, which
usually reacts in milliseconds but, when the exit races its bookkeeping, only at
the next pool maintenance (every 5 s). A lock held by the dead child would wait
that long. This watch opens a pidfd for each child running a locked task and
releases the task's lock as soon as the kernel reports the process gone.

A child runs one task at a time, so the watch keeps only the request a child
accepted last: the next acceptance replaces it, and nothing per task has to be
forgotten (Celery's worker answers a success through its own fast path, which
never reaches the request class's ``on_success``). Releasing is by the request's
token, so a child that finished (and released) before it exited makes the release
a harmless no-op. Linux only (``os.pidfd_open``); elsewhere billiard's own
detection applies.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any, Callable, Dict, List, Optional, Set

__all__ = ["ChildWatch"]

logger = logging.getLogger("celery_singleton_lock")


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 1 << 22  # Linux's ceiling


#: Green pools (gevent, eventlet) report the greenlet's id, a memory address, as the "pid".
_PID_MAX = _pid_max()


def _is_our_child(pid: object) -> bool:
    """Whether ``pid`` is a live child process of this one (read from /proc)."""
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    # The parent pid is the 2nd field after the parenthesised command name.
    fields = stat[stat.rfind(b")") + 2:].split()
    return len(fields) > 1 and fields[1] == str(os.getpid()).encode()


class ChildWatch:
    """One thread in the worker's main process, waiting on the pidfds of pool children.

    A child's pidfd stays open for the child's whole life, so a task only puts itself
    in its child's slot: no syscall and no thread wake-up per task.
    """

    supported = hasattr(os, "pidfd_open")

    def __init__(self, on_exit: Optional[Callable[[int], None]] = None) -> None:
        #: Called with the pid of every watched child that exits, whatever it ran (its shared holds).
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._watched: Dict[int, List[Any]] = {}  # pid -> [pidfd, the request it accepted last or None]
        self._not_children: Set[int] = set()  # pids that are not processes of ours
        self._thread: threading.Thread | None = None
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()

    def watch(self, pid: int, request: Any) -> None:
        """Release ``request``'s lock if process ``pid`` exits before its next task or :meth:`forget`."""
        if not self.supported or pid > _PID_MAX:
            return
        with self._lock:
            entry = self._watched.get(pid)
            if entry is not None:
                entry[1] = request  # the child's previous task has ended: it runs one at a time
                return
        if pid in self._not_children or not _is_our_child(pid):
            self._not_children.add(pid)
            return
        try:
            pidfd = os.pidfd_open(pid)  # type: ignore[attr-defined]
        except (OSError, OverflowError):  # already gone, or not permitted: billiard will tell
            return
        with self._lock:
            entry = self._watched.setdefault(pid, [pidfd, None])
            entry[1] = request
            if entry[0] != pidfd:
                os.close(pidfd)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="singleton-lock-childwatch", daemon=True)
                self._thread.start()
        os.write(self._wake_w, b"w")

    def watch_child(self, pid: int) -> None:
        """Watch pool process ``pid`` from its start, whatever tasks it runs (its shared holds)."""
        with self._lock:
            if pid in self._watched:
                return
        self.watch(pid, None)

    def forget(self, pid: int, request: Any) -> None:
        """The request ended and its lock was dealt with: nothing to do for it any more."""
        with self._lock:
            entry = self._watched.get(pid)
            if entry is not None and entry[1] is request:
                entry[1] = None

    def close(self) -> None:
        """Stop the thread and close every pidfd (worker shutdown, tests)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._closed = True
        os.write(self._wake_w, b"x")
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
        with self._lock:
            for fd, _ in self._watched.values():
                os.close(fd)
            self._watched.clear()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                by_fd = {fd: pid for pid, (fd, _) in self._watched.items()}
            try:
                readable, _, _ = select.select([self._wake_r, *by_fd], [], [])
            except (OSError, ValueError):  # an fd closed meanwhile: look again
                continue
            if self._wake_r in readable:
                os.read(self._wake_r, 4096)
            for fd in readable:
                if fd in by_fd:
                    self._exited(by_fd[fd], fd)

    def _exited(self, pid: int, fd: int) -> None:
        with self._lock:
            entry = self._watched.get(pid)
            if entry is None or entry[0] != fd:
                return
            del self._watched[pid]
            os.close(fd)
            request: Optional[Any] = entry[1]
        if self._on_exit is not None:
            try:
                self._on_exit(pid)
            except Exception:
                logger.exception("singleton lock: releasing the shared holds of exited pool process %s failed", pid)
        if request is None:
            return
        try:
            request.release_for_child(f"pool process {pid} exited")
        except Exception:
            logger.exception("singleton lock: releasing for exited pool process %s failed", pid)

    def watched(self) -> Dict[int, Optional[Any]]:
        """Each watched child's pid and the request it accepted last (``None`` once forgotten)."""
        with self._lock:
            return {pid: entry[1] for pid, entry in self._watched.items()}
