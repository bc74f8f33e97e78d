"""What a publisher chose is printed escaped: no forged rows, no escape sequences on the operator's terminal.

Given a holder whose task id (anyone who can publish picks it) holds a newline, a
terminal escape sequence that retitles the window and a right-to-left override,
when a duplicate meets it and an operator runs ``celery locks list`` and ``show``,
then the worker's log line and the CLI show those characters as escapes: the
table has one row per lock, and nothing reaches the terminal that it would obey.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from typing import Dict

from tests.integration.helpers import records
from tests.support.waits import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: A fake table row on a line of its own, then OSC 0 (set the window title) and a bidi override.
HOSTILE = "\nproj.fake  0123456789ab  running  forged  evil  1  1s  1s  -\x1b]0;pwned\x07\u202e"
SHOWN = "\\nproj.fake  0123456789ab  running  forged  evil  1  1s  1s  -\\x1b]0;pwned\\x07\\u202e"
#: What a terminal obeys or hides: C0 and C1 controls but tab, DEL, bidi and other invisible formatting.
_OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f]")


def _cli(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "celery", "-A", "tests.integration.proj", "locks", *args],
                          capture_output=True, text=True, cwd=ROOT, env=full, timeout=60)


def test_a_hostile_task_id_is_escaped_in_the_cli_and_the_log(test_env, proj, start_worker, events_redis):
    worker = start_worker(concurrency=2)
    holder_id = f"holder-{uuid.uuid4().hex[:6]}{HOSTILE}"
    holder = proj.long_running.apply_async(("hostile",), {"duration": 30}, task_id=holder_id)
    wait_for(lambda: records(events_redis, "started"), 20, what="the hostile holder to start")
    duplicate = proj.long_running.apply_async(("hostile",), {"duration": 30}, task_id=f"dup{HOSTILE}")
    duplicate.get(timeout=20)

    [lock] = json.loads(_cli(test_env, "list", "--json").stdout)  # JSON escapes them by itself
    listed, shown = _cli(test_env, "list"), _cli(test_env, "show", lock["digest"])

    assert listed.returncode == 0 and shown.returncode == 0, (listed.stderr, shown.stderr)
    table = listed.stdout.split("\n\n")[0]  # the per-task counts follow, after a blank line
    assert len(table.rstrip("\n").splitlines()) == 2, listed.stdout  # the header and one row
    assert f"{holder_id.split(chr(10))[0]}{SHOWN}" in listed.stdout and SHOWN in shown.stdout
    assert not _OBEYED.search(listed.stdout + shown.stdout)
    [line] = [line for line in worker.log().splitlines() if "is a duplicate" in line]
    assert f"dup{SHOWN}" in line and "held by task holder-" in line and line.count(SHOWN) == 2, line
    assert not _OBEYED.search(line)
    holder.revoke(terminate=True, signal="SIGKILL")
