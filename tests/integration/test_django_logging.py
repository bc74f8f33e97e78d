"""The library's worker lines reach the worker's log file under docs/django.md's ``LOGGING`` recipe.

Given the test project's ``LOGGING`` (the library's logger propagates, with no handler of its own),
a prefork worker started with ``--logfile`` writes a skipped duplicate's line into that file, in
Celery's format (with its timestamp), as it writes its own. Under the recipe it replaces
(``propagate: False`` and a bare ``StreamHandler``) the line went to the stderr the worker had at
start, and not one reached the file. In the web process the recipe's root handler writes them, with
a timestamp.
"""

from __future__ import annotations

import os
import re
import uuid

import pytest

from tests.integration.test_django import _manage, _scenario, django_env  # noqa: F401 - the project's fixture
from tests.support.workers import Worker


class LogFileWorker(Worker):
    """A worker whose log lines go to the file ``--logfile`` names (its own stdout keeps the rest)."""

    def __init__(self, *args, logfile: str, **kwargs) -> None:
        super().__init__(*args, extra_args=["--logfile", logfile], **kwargs)
        self.logfile = logfile

    def file_text(self) -> str:
        try:
            with open(self.logfile, errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def log(self) -> str:  # readiness ("ready.") is written to the file
        return super().log() + self.file_text()


@pytest.fixture
def file_worker(django_env, tmp_path):  # noqa: F811
    worker = LogFileWorker("proj", django_env, name=f"django-log-{uuid.uuid4().hex[:6]}", pool="prefork",
                           concurrency=2, logfile=str(tmp_path / "worker.log"))
    try:
        yield worker.start()
    finally:
        worker.stop()


def test_a_skipped_duplicates_line_is_in_the_workers_log_file(django_env, file_worker):  # noqa: F811
    seen = _scenario(django_env, "duplicate")

    text = file_worker.file_text()
    lines = [line for line in text.splitlines() if f"[{seen['dup']}] is a duplicate (skip)" in line]
    assert len(lines) == 1, f"{len(lines)} duplicate lines in {file_worker.logfile}:\n{text}"
    assert re.match(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}: INFO/ForkPoolWorker-\d+\]", lines[0]), lines[0]
    assert seen["holder"] in lines[0]
    assert os.path.getsize(file_worker.logfile) > 0


def test_in_the_web_process_the_librarys_lines_reach_the_root_handler_with_a_timestamp(django_env):  # noqa: F811
    code = ("import logging; log = logging.getLogger('celery_singleton_lock'); "
            "log.info('singleton lock: a web-process line'); log.debug('singleton lock: not shown')")
    done = _manage(django_env, "shell", "-c", code)
    lines = [line for line in done.stderr.splitlines() if "singleton lock:" in line]
    assert len(lines) == 1 and "a web-process line" in lines[0], done.stderr
    assert re.match(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}: INFO/MainProcess\]", lines[0]), lines[0]
