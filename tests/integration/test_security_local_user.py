"""Another local user and the hold-file directory (docs/security.md, local users).

Pool processes note their shared holds, with the tokens that release them, in
``$TMPDIR/celery-singleton-lock-<uid>``; ``$TMPDIR`` (``/tmp``) is shared by every local user. Given
a second user (``nobody``, acting in a subprocess through ``setuid``: the suite runs as root) who
made that directory before the worker, or planted a symbolic link in its place, a worker refuses
to start with one line naming the directory and what is wrong (exit 78, as for a lock store set
up wrong), and nothing outside the directory is read or deleted. A worker whose directory is its
own cleans the notes of processes that are gone (the directory of a killed worker, a solo
worker's file under its parent's pid), removes a link it finds there as a link, and a solo
worker writes none.

Each test runs in a ``TMPDIR`` of its own (world-writable and sticky, as ``/tmp`` is), never in
the machine's ``/tmp``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from typing import Iterator

import pytest

from tests.support.waits import wait_for

UID = os.getuid()
DEAD_PID = "4194000"  # above the kernel's pid_max default: never a live process


def _nobody() -> pwd.struct_passwd:
    if UID != 0:
        pytest.skip("acting as a second local user needs root (setuid); this run is not root")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' on this machine to act as the second local user")


def _as(user: pwd.struct_passwd, *commands: list) -> None:
    """Run each command (the system's own ``mkdir``, ``chmod``, ``ln``) as ``user``."""
    for command in commands:
        done = subprocess.run(command, user=user.pw_uid, group=user.pw_gid, extra_groups=[], capture_output=True,
                              text=True, timeout=60, cwd="/")
        assert done.returncode == 0, (command, done.stderr)


@pytest.fixture
def shared_tmp() -> Iterator[str]:
    """A TMPDIR like /tmp (mode 1777) that this test alone uses."""
    where = tempfile.mkdtemp(prefix="csl-shared-tmp-", dir="/tmp")
    os.chmod(where, 0o1777)
    yield where
    shutil.rmtree(where, ignore_errors=True)  # removes links, never follows them


@pytest.fixture
def victim(tmp_path) -> str:
    """A folder of the worker's user, outside the hold-file directory, with files nobody may delete."""
    folder = tmp_path / "victim"
    (folder / DEAD_PID).mkdir(parents=True)
    for path in (folder / "precious.txt", folder / DEAD_PID / "12345", folder / DEAD_PID / "67890"):
        path.write_text("keep me")
    return str(folder)


def _victim_files(victim: str) -> list:
    return sorted(os.path.relpath(os.path.join(root, name), victim)
                  for root, _, names in os.walk(victim) for name in names)


def _refused(start_worker, shared_tmp: str):
    worker_error = None
    try:
        start_worker(pool="prefork", concurrency=1, env={"TMPDIR": shared_tmp})
    except RuntimeError as exc:
        worker_error = str(exc)
    assert worker_error is not None, "the worker started"
    return worker_error


def test_a_directory_another_user_made_first_refuses_the_worker_and_nothing_outside_is_deleted(
        start_worker, shared_tmp, victim):
    nobody = _nobody()
    base = os.path.join(shared_tmp, f"celery-singleton-lock-{UID}")
    # nobody's directory, with a "dead worker" in it that is a link to the victim's folder
    _as(nobody, ["mkdir", "-m", "0777", base], ["ln", "-s", os.path.join(victim, DEAD_PID), os.path.join(base, DEAD_PID)])
    before = _victim_files(victim)

    error = _refused(start_worker, shared_tmp)

    assert "exited with 78" in error, error
    lines = [line for line in error.splitlines() if "refuses to start" in line]
    assert len(lines) == 1 and base in lines[0] and "is owned by uid" in lines[0] and "(nobody)" in lines[0], error
    assert "Traceback" not in error, error
    assert _victim_files(victim) == before and len(before) == 3


def test_a_link_planted_in_place_of_the_directory_refuses_the_worker_and_nothing_outside_is_deleted(
        start_worker, shared_tmp, victim):
    nobody = _nobody()
    base = os.path.join(shared_tmp, f"celery-singleton-lock-{UID}")
    os.chmod(victim, 0o700)  # the victim's folder is the worker user's own: only the link is nobody's
    _as(nobody, ["ln", "-s", victim, base])
    before = _victim_files(victim)

    error = _refused(start_worker, shared_tmp)

    assert "exited with 78" in error, error
    lines = [line for line in error.splitlines() if "refuses to start" in line]
    assert len(lines) == 1 and base in lines[0] and "is a symbolic link" in lines[0], error
    assert _victim_files(victim) == before and len(before) == 3
    assert os.path.islink(base)


def test_a_workers_own_directory_is_checked_marked_and_cleaned_of_dead_processes_notes(start_worker, shared_tmp,
                                                                                       victim):
    base = os.path.join(shared_tmp, f"celery-singleton-lock-{UID}")
    os.mkdir(base, 0o700)
    os.mkdir(os.path.join(base, DEAD_PID), 0o700)  # a killed worker's directory
    open(os.path.join(base, DEAD_PID, "4194001"), "w").close()
    parent = str(os.getpid())  # a live process that is no worker: a solo worker's note under its parent's pid
    os.mkdir(os.path.join(base, parent), 0o700)
    open(os.path.join(base, parent, "4194002"), "w").close()
    os.symlink(victim, os.path.join(base, "4194003"))  # a link in our own directory: removed as a link
    before = _victim_files(victim)

    worker = start_worker(pool="prefork", concurrency=1, env={"TMPDIR": shared_tmp})

    own = os.path.join(base, str(worker.pid))
    assert stat.S_IMODE(os.lstat(base).st_mode) == 0o700
    assert os.path.isfile(os.path.join(own, "main"))
    wait_for(lambda: set(os.listdir(own)) >= {"main", *map(str, worker.children())}, 30,
             what="each pool process's note")
    assert not os.path.exists(os.path.join(base, DEAD_PID))
    assert os.listdir(os.path.join(base, parent)) == []
    assert not os.path.lexists(os.path.join(base, "4194003"))
    assert _victim_files(victim) == before
    worker.stop()
    assert not os.path.exists(own)  # warm shutdown removes the worker's own directory


def test_a_solo_worker_writes_no_note_under_its_parents_pid(start_worker, shared_tmp):
    worker = start_worker(pool="solo", concurrency=1, env={"TMPDIR": shared_tmp})
    base = os.path.join(shared_tmp, f"celery-singleton-lock-{UID}")
    assert sorted(os.listdir(base)) == [str(worker.pid)]
    assert os.listdir(os.path.join(base, str(worker.pid))) == ["main"]
    worker.stop()
    assert os.listdir(base) == []
