"""Which PID namespace a process lives in, so that a holder's pid is judged only where it means something.

A lock records its holder's host and pid; ``celery locks`` calls a lock *lost* when its
holder's pid is not running on this host. A pid names a process only inside one PID
namespace: two containers of one host (host networking, a ``hostNetwork`` pod, ``unshare
-p``) share the host name but not their pids. So the lock also records the holder's
namespace, the inode of ``/proc/self/ns/pid`` with the kernel's boot id (an inode is unique
per running kernel only), and a pid counts as evidence only where the reader's namespace is
the same. Where it cannot be told (no ``/proc``), the answer is ``""``: never the same.
"""

from __future__ import annotations

import functools
import os
import sys

__all__ = ["current", "HOST"]

#: The namespace of every process on a system without PID namespaces: one pid space per host.
HOST = "host"


def current() -> str:
    """This process's PID namespace, as a lock records it (``""`` when it cannot be told)."""
    return _of(os.getpid())  # by pid: a child forked into a new namespace asks again


@functools.lru_cache(maxsize=1)
def _of(pid: int) -> str:
    if not sys.platform.startswith("linux"):
        return HOST
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            boot_id = boot.read().strip()
    except OSError:
        return ""
    inode = link.rpartition("[")[2].rstrip("]")
    return f"{inode}@{boot_id[:8]}" if inode.isdigit() and boot_id else ""
