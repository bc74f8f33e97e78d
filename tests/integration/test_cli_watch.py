"""``celery locks``: the refreshing view with per-task counts, and a digest prefix too short to name a lock.

Given a worker running a storm of locked tasks, when an operator runs ``locks list --watch``, then
it redraws the table and the per-task counts at each refresh and ends with status 0 on Ctrl-C;
when ``locks show`` is given fewer digest characters than a lock needs, it says so and names the
minimum instead of calling the lock released.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

from celery_singleton_lock.store import MIN_PREFIX
from tests.integration.helpers import wait_started
from tests.integration.test_cli import ROOT, run_cli
from tests.support.waits import stretched, wait_for

FRAME = "celery locks list, every"


def test_a_short_prefix_names_the_minimum(proj):
    proc = run_cli("show", "9")
    assert proc.returncode == 1
    assert f"at least {MIN_PREFIX} characters" in proc.stderr and "released already" not in proc.stderr


def _ctrl_c_as_in_a_terminal() -> None:
    """Give the CLI the SIGINT of a terminal's command: a suite started in the background (``cmd &`` in
    a script, as CI and the flake finder's callers may) ignores SIGINT, its children inherit that, and
    Python then raises no KeyboardInterrupt on Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_redraws_under_a_storm_and_stops_cleanly_on_ctrl_c(proj, start_worker, events_redis):
    start_worker(concurrency=2)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
               PYTHONFAULTHANDLER="1")
    with tempfile.TemporaryFile("w+") as out:
        cli = subprocess.Popen([sys.executable, "-m", "celery", "-A", "tests.integration.proj", "locks", "list",
                                "--watch", "0.3"], stdout=out, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env=env, preexec_fn=_ctrl_c_as_in_a_terminal)
        storm = []
        try:
            # The watch is drawing before the storm begins: on a loaded machine its start (an
            # interpreter, Celery, the app) can take longer than a storm of a few seconds lasts.
            wait_for(lambda: (out.seek(0), FRAME in out.read())[1], 30, interval=0.1, what="the watch's first frame")
            storm.extend(proj.storm.delay(f"w{i % 3}", seq=i, duration=0.6) for i in range(12))
            wait_started(events_redis, 1)

            def frames():
                out.seek(0)
                shown = out.read().split(FRAME)[1:]
                held = [f for f in shown if "tests.integration.proj.storm" in f and "LOCKS" in f]
                return held if len(held) >= 2 else None

            held = wait_for(frames, 20, interval=0.1, what="two refreshes showing the storm's locks")
            cli.send_signal(signal.SIGINT)
            try:
                _, err = cli.communicate(timeout=stretched(10))
            except subprocess.TimeoutExpired:
                cli.send_signal(signal.SIGABRT)  # faulthandler writes where each thread stood
                _, err = cli.communicate(timeout=stretched(5))
                raise AssertionError(f"the watch did not end on Ctrl-C within {stretched(10):g} s:\n{err}") from None
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait(10)
    assert cli.returncode == 0 and "Traceback" not in err, err
    counts = held[0].split("LOCKS", 1)[1]
    assert "tests.integration.proj.storm" in counts
    for result in storm:
        result.get(timeout=30)
