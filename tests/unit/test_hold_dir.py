"""The hold-file directory is used only when it is this user's own (mode 0700, no link, this owner).

The second local user's side (a directory made by ``nobody``) is in
tests/integration/test_security_local_user.py; here, what this user alone can set up.
"""

from __future__ import annotations

import logging
import os

import pytest

from celery_singleton_lock.exceptions import ConfigurationError
from celery_singleton_lock.runtime import hold_dir, holds


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(hold_dir.tempfile, "gettempdir", lambda: str(tmp_path))
    yield tmp_path
    holds._after_fork()  # no notes of this process stay named


def test_a_directory_with_a_looser_mode_is_refused_naming_it(tmp):
    os.mkdir(hold_dir.base_path(), 0o700)
    os.chmod(hold_dir.base_path(), 0o755)
    with pytest.raises(ConfigurationError, match=f"{hold_dir.base_path()} has mode 0755, not 0700"):
        hold_dir.claim(os.getpid())


def test_a_link_in_place_of_the_directory_is_refused_and_not_followed(tmp):
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, hold_dir.base_path())
    with pytest.raises(hold_dir.UntrustedDirectory, match="is a symbolic link"):
        hold_dir.claim(os.getpid())
    assert list(elsewhere.iterdir()) == []


def test_a_file_in_place_of_the_directory_is_refused(tmp):
    open(hold_dir.base_path(), "w").close()
    with pytest.raises(hold_dir.UntrustedDirectory, match="is not a directory"):
        hold_dir.claim(os.getpid())


def test_a_pool_process_facing_an_untrusted_directory_says_so_and_notes_nothing(tmp, caplog):
    os.mkdir(hold_dir.base_path(), 0o777)
    os.chmod(hold_dir.base_path(), 0o777)
    with caplog.at_level(logging.ERROR, "celery_singleton_lock"):
        holds.enable(os.getpid())
    assert "does not note its shared holds" in caplog.text and "has mode 0777" in caplog.text
    assert os.listdir(hold_dir.base_path()) == []


def test_the_claim_marks_the_workers_directory_and_removes_links_and_dead_workers_as_they_are(tmp):
    victim = tmp / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    os.mkdir(hold_dir.base_path(), 0o700)
    os.symlink(victim, os.path.join(hold_dir.base_path(), "4194301"))
    os.mkdir(os.path.join(hold_dir.base_path(), "4194302"), 0o700)
    open(os.path.join(hold_dir.base_path(), "4194302", "4194303"), "w").close()

    hold_dir.claim(os.getpid())

    assert sorted(os.listdir(hold_dir.base_path())) == [str(os.getpid())]
    assert os.listdir(holds.directory(os.getpid())) == [hold_dir.MARKER]
    assert (victim / "keep").read_text() == "x"
    holds.forget_all(os.getpid())
    assert os.listdir(hold_dir.base_path()) == []
