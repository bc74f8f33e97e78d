"""Notice at once when a prefork child dies holding a lock.

The worker's main process learns that a pool process died from billiard, which
usually reacts in milliseconds but, when the exit races its bookkeeping, only at
the next pool maintenance (every 5 s). A lock held by the dead child would wait
that long. This watch opens a pidfd for each child running a locked task and
releases the task's lock as soon as the kernel reports the process gone.

Releasing is by the request's token, so a child that finished (and released)
before it exited makes the release a harmless no-op. Linux only (``os.pidfd_open``);
elsewhere billiard's own detection applies.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any, Dict, Set, Tuple

__all__ = ["ChildWatch"]

logger = logging.getLogger("celery_singleton_lock")


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

    A child's pidfd stays open for the child's whole life, so a task only adds or
    removes itself from a set: no syscall and no thread wake-up per task.
    """

    supported = hasattr(os, "pidfd_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: Dict[int, Tuple[int, Set[Any]]] = {}  # pid -> (pidfd, running requests)
        self._not_children: Set[int] = set()  # ids that green pools report: never processes of ours
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()

    def watch(self, pid: int, request: Any) -> None:
        """Release ``request``'s lock if process ``pid`` exits before :meth:`forget`."""
        if not self.supported:
            return
        with self._lock:
            entry = self._watched.get(pid)
            if entry is not None:
                entry[1].add(request)
                return
        if pid in self._not_children or not _is_our_child(pid):
            self._not_children.add(pid)  # a greenlet id, not a process: nothing to watch
            return
        try:
            pidfd = os.pidfd_open(pid)  # type: ignore[attr-defined]
        except (OSError, OverflowError):  # already gone, or not permitted: billiard will tell
            return
        with self._lock:
            self._watched.setdefault(pid, (pidfd, set()))[1].add(request)
            if self._watched[pid][0] != pidfd:
                os.close(pidfd)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="singleton-lock-childwatch", daemon=True)
                self._thread.start()
        os.write(self._wake_w, b"w")

    def forget(self, pid: int, request: Any) -> None:
        """The request ended through the normal callbacks: nothing to do for it any more."""
        with self._lock:
            entry = self._watched.get(pid)
            if entry is not None:
                entry[1].discard(request)

    def _run(self) -> None:
        while True:
            with self._lock:
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
            requests = list(entry[1])
        for request in requests:
            try:
                request.release_for_child(f"pool process {pid} exited")
            except Exception:
                logger.exception("singleton lock: releasing for exited pool process %s failed", pid)
