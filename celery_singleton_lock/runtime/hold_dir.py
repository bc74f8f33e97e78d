"""The hold-file directory, trusted only when it is this user's own.

Pool processes note their shared holds (with the tokens that release them) in
``<tmp>/celery-singleton-lock-<uid>/<main pid>/<pid>`` (:mod:`.holds`), and the worker's main
process reads and deletes them. ``<tmp>`` is shared by every local user: one who made
``celery-singleton-lock-<uid>`` first, or planted a symbolic link there or inside it, would
read the tokens, or have the worker delete files wherever the link points. So every process
that reads or deletes there goes through this module: a directory is used only when
``lstat`` finds a real directory (no link), owned by this user, mode 0700, and it is then
opened with ``O_NOFOLLOW`` and worked on through its descriptor (``dir_fd``), so no name in
it is followed out of it. Anything else is an :class:`UntrustedDirectory`, which says what is
wrong with which directory: the worker refuses to start on it, and a pool process or the
main process at a child's exit or at shutdown logs it at ERROR (never a silent skip: a hold
nobody releases keeps its place for the ttl).

Stale notes are cleaned when a worker starts: the directory of a main process that is gone
(killed: nobody removed it), and in a directory that no live worker claimed, the files of
processes that are gone (older versions let a solo worker write under its parent's pid).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import Iterator, List, Optional

from ..exceptions import ConfigurationError
from ..store import pid_running

__all__ = ["UntrustedDirectory", "base_path", "open_trusted", "open_base", "open_own", "entries", "remove_tree",
           "read_file", "unlink", "claim", "prune_stale", "MARKER"]

#: The file a worker's main process writes in its own directory: a live worker's directory, whose
#: dead pool processes are its own to release (another worker's clean-up leaves them alone).
MARKER = "main"

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


class UntrustedDirectory(ConfigurationError):
    """The hold-file directory is not this user's own (another owner, a link, a looser mode)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"the hold-file directory {path} {problem}; another local user may control it, so "
                         "nothing in it is read or deleted: remove it (or point TMPDIR at a directory of your "
                         "own) and start again (docs/security.md, local users)")


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def base_path() -> str:
    """``<tmp>/celery-singleton-lock-<uid>``: this user's directory of hold files."""
    return os.path.join(tempfile.gettempdir(), f"celery-singleton-lock-{_uid()}")


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def open_trusted(name: str, *, parent: Optional[int] = None, create: bool = False, shown: Optional[str] = None) -> int:
    """A descriptor of directory ``name`` (under the descriptor ``parent``), or :class:`UntrustedDirectory`.

    ``create`` makes it (mode 0700) when it is missing. ``shown`` is the path the error names.
    """
    shown = shown or name
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
    try:
        status = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UntrustedDirectory(shown, f"cannot be examined ({exc.strerror})") from None
    if stat.S_ISLNK(status.st_mode):
        raise UntrustedDirectory(shown, "is a symbolic link")
    if not stat.S_ISDIR(status.st_mode):
        raise UntrustedDirectory(shown, "is not a directory")
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:  # swapped for a link between the lstat and the open
        raise UntrustedDirectory(shown, "is a symbolic link" if exc.errno in (errno.ELOOP, errno.ENOTDIR)
                                 else f"cannot be opened ({exc.strerror})") from None
    problem = _not_own(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise UntrustedDirectory(shown, problem)
    return fd


def _not_own(status: os.stat_result) -> Optional[str]:
    """What makes an opened directory not this user's alone; ``None`` when it is."""
    if status.st_uid != _uid():
        return f"is owned by {_owner(status.st_uid)}, not by this user ({_owner(_uid())})"
    if stat.S_IMODE(status.st_mode) != 0o700:
        return f"has mode {stat.S_IMODE(status.st_mode):04o}, not 0700"
    return None


def open_base(create: bool = False) -> int:
    """This user's directory of hold files, checked (see :func:`open_trusted`)."""
    path = base_path()
    return open_trusted(path, create=create, shown=path)


def open_own(main_pid: int, create: bool = False) -> int:
    """The directory of the worker whose main process is ``main_pid``, checked with its parent."""
    base = open_base(create=create)
    try:
        return open_trusted(str(main_pid), parent=base, create=create,
                            shown=os.path.join(base_path(), str(main_pid)))
    finally:
        os.close(base)


def entries(fd: int) -> List[str]:
    """The names in a directory opened by :func:`open_trusted`."""
    return os.listdir(fd)


def read_file(fd: int, name: str) -> Optional[str]:
    """The text of regular file ``name`` in directory ``fd``; ``None`` when it is missing, a link or not ours."""
    try:
        handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
    except OSError:
        return None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != _uid():
            return None
        with os.fdopen(os.dup(handle), "r", encoding="utf-8", errors="replace") as text:
            return text.read()
    finally:
        os.close(handle)


def unlink(fd: int, name: str) -> None:
    """Remove ``name`` from directory ``fd`` (a link is removed, never followed); gone already is fine."""
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        pass


def remove_tree(parent: int, name: str, *, only_dead: bool = False) -> None:
    """Empty and remove directory ``name`` of ``parent`` (one level: pool processes' files); with
    ``only_dead``, remove only the files of processes that are gone, and keep the directory.

    A link named ``name`` is removed as a link. A directory that is not trusted is left as it is.
    """
    try:
        fd = open_trusted(name, parent=parent)
    except FileNotFoundError:
        return
    except UntrustedDirectory:
        if _is_link(parent, name):  # in our own directory: the link goes, what it points to stays
            unlink(parent, name)
        return
    try:
        for entry in entries(fd):
            pid = entry.split(".", 1)[0]
            if only_dead and (not pid.isdigit() or pid_running(int(pid))):
                continue
            unlink(fd, entry)
    finally:
        os.close(fd)
    if not only_dead:
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError:
            pass


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
    except OSError:
        return False


def _workers(base: int) -> Iterator[str]:
    for name in entries(base):
        if name.isdigit():
            yield name


def claim(main_pid: int) -> None:
    """The worker's main process at start: its directory made (or checked) and marked, stale notes cleaned.

    Raises :class:`UntrustedDirectory` when this user's directory, or the worker's own, is not
    this user's alone.
    """
    base = open_base(create=True)
    try:
        own = open_trusted(str(main_pid), parent=base, create=True, shown=os.path.join(base_path(), str(main_pid)))
        try:
            marker = os.open(MARKER, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600, dir_fd=own)
            os.close(marker)
        finally:
            os.close(own)
        prune_stale(base, main_pid)
    finally:
        os.close(base)


def prune_stale(base: int, main_pid: int) -> None:
    """Remove the directories of main processes that are gone, and in a directory no live worker
    marked, the files of processes that are gone."""
    for name in _workers(base):
        if int(name) == main_pid:
            continue
        if not pid_running(int(name)):
            remove_tree(base, name)
        elif not _marked(base, name):
            remove_tree(base, name, only_dead=True)


def _marked(base: int, name: str) -> bool:
    try:
        fd = open_trusted(name, parent=base)
    except (FileNotFoundError, UntrustedDirectory):
        return False
    try:
        return MARKER in entries(fd)
    finally:
        os.close(fd)
