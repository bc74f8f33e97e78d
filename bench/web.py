"""``python -m bench web``: the operator's web view over 10,000 held locks.

Three figures, over a private redis-server holding ``--locks`` live locks of 20 tasks:

* building ``GET /api/locks`` (the WSGI app called in this process: SCAN, pipelined reads, judging,
  JSON), the median of ``--rounds`` refreshes, and its size;
* the store's round trips per refresh: SCAN calls (from ``INFO commandstats``) plus pipelined reads
  (counted at redis-py's ``Pipeline.execute``), and the commands they carry;
* the page's first paint in headless Chromium (Debian's, when installed): from navigation start to
  the page's ``csl-first-render`` mark, after its first ``/api/locks`` answer is drawn (and to its
  ``csl-first-answer`` mark, when that answer is parsed).

The page keeps its timeline's history in the browser, so a refresh writes nothing to the store.
It prints a Markdown section; ``--write`` puts it in docs/benchmarks.md in place of the last one.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import statistics
import sys
import threading
import time
import uuid
from typing import Dict, List, Optional, Tuple

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = "## The operator's web view"


def _fill(client, prefix: str, count: int) -> None:
    from celery_singleton_lock.store import Holder, KeyLayout
    from celery_singleton_lock.store.record import encode  # the bench writes values as the protocol does

    layout, now = KeyLayout(prefix), int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        task, digest = f"bench.web.task{i % 20}", uuid.uuid4().hex
        holder = Holder(task_id=str(uuid.uuid4()), host="bench-host", pid=1000 + i, since_ms=now, heartbeat_ms=60_000,
                        describe=f"account_id={i}")
        pipe.set(layout.lock(task, digest), encode(uuid.uuid4().hex, "running", 600_000, holder), px=600_000)
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()


def _call(wsgi, path: str) -> Tuple[str, bytes]:
    seen: Dict[str, str] = {}
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "wsgi.input": io.BytesIO(b"")}
    body = b"".join(wsgi(environ, lambda status, headers: seen.update(status=status)))
    return seen["status"], body


def _scans(client) -> int:
    return int(client.info("commandstats").get("cmdstat_scan", {}).get("calls", 0))


def _first_paint(url: str, rounds: int) -> Optional[List[Tuple[float, float]]]:
    """(first render, first answer) of each page load, in ms from navigation start."""
    try:
        from selenium import webdriver
    except ImportError:
        return None
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"),
                              options=options)
    found = []
    try:
        for _ in range(rounds):
            driver.get(url)
            deadline = time.monotonic() + 60
            mark = None
            while mark is None and time.monotonic() < deadline:
                mark = driver.execute_script(
                    "var m = performance.getEntriesByName('csl-first-render'); return m.length ? m[0].startTime : null")
                time.sleep(0.02)
            if mark is not None:
                answer = driver.execute_script(
                    "var m = performance.getEntriesByName('csl-first-answer'); return m.length ? m[0].startTime : null")
                found.append((float(mark), float(answer or 0)))
    finally:
        driver.quit()
    return found


def run(count: int, rounds: int) -> str:
    import redis
    from celery import Celery

    from celery_singleton_lock.web import wsgi_app
    from celery_singleton_lock.web.serve import make_web_server
    from tests.support.servers import RedisServer

    with RedisServer() as server:
        url = server.url + "/0"
        client = redis.Redis.from_url(url)
        _fill(client, "bench", count)
        app = Celery("bench-web", set_as_current=False)
        app.conf.update(singleton_lock_url=url, singleton_lock_prefix="bench")
        wsgi = wsgi_app(app)
        _call(wsgi, "/api/locks")  # the first builds the app's runtime and registers the scripts

        import redis.client as redis_client

        executes = [0]
        original = redis_client.Pipeline.execute

        def counted(self, *args, **kwargs):
            executes[0] += 1
            return original(self, *args, **kwargs)

        times, size, scans, reads = [], 0, [], []
        redis_client.Pipeline.execute = counted
        try:
            for _ in range(rounds):
                before_scans, executes[0] = _scans(client), 0
                started = time.perf_counter()
                status, body = _call(wsgi, "/api/locks")
                times.append(time.perf_counter() - started)
                assert status.startswith("200"), status
                size = len(body)
                scans.append(_scans(client) - before_scans - 0)
                reads.append(executes[0])
        finally:
            redis_client.Pipeline.execute = original
        listed = body.count(b'"key"')

        web = make_web_server(wsgi, "127.0.0.1", 0)
        thread = threading.Thread(target=web.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        try:
            paints = _first_paint(f"http://127.0.0.1:{web.server_port}/", max(3, rounds))
        finally:
            web.shutdown()
            web.server_close()
            thread.join()
        from celery_singleton_lock.runtime import peek_runtime

        runtime = peek_runtime(app)
        if runtime is not None:
            runtime.close()
        client.close()
    trips = statistics.median(scans) + statistics.median(reads)
    if paints:
        drawn, answered = [p[0] for p in paints], [p[1] for p in paints]
        paint = (f"{statistics.median(drawn):.0f} ms (median of {len(drawn)} loads, a fresh browser's first "
                 f"included; min {min(drawn):.0f}, max {max(drawn):.0f}), of which "
                 f"{statistics.median(answered):.0f} ms until the first `/api/locks` answer was parsed")
    else:
        paint = "not measured (no chromium/chromedriver or selenium)"
    return "\n".join([
        HEADING, "",
        f"`python -m bench web --locks {count} --rounds {rounds}` on this machine (2 cores shared with the other "
        f"engineers' work, so the figures carry its load), {time.strftime('%Y-%m-%d')}: {count} live locks of 20 "
        "tasks in a private redis-server; the page refreshes every second.", "",
        "| figure | value |", "|---|---|",
        f"| `GET /api/locks` built (SCAN, pipelined reads, judging, JSON), median of {rounds} | "
        f"{statistics.median(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}) |",
        f"| its size | {size / 1e6:.1f} MB for {listed} locks |",
        f"| store round trips per refresh | {trips:.0f}: {statistics.median(scans):.0f} SCAN calls (COUNT 500) + "
        f"{statistics.median(reads):.0f} pipelined reads (GET + PTTL of 500 keys each) |",
        f"| first paint in headless Chromium (navigation start to the first drawn list) | {paint} |",
        "| store writes per refresh | 0 (the timeline's history is kept in the page) |", "",
        "The round trips grow with the number of locks, one SCAN and one pipelined read per 500 keys; "
        "a key with places (a limit or a window) adds one script call. The page draws 100 rows per lock "
        "name until asked for all, so its paint grows with the names, not with the locks.", "",
    ])


_SECTION = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
def _splice(path: str, section: str) -> None:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    text = (_SECTION.sub(lambda _: section.rstrip("\n") + "\n\n", text) if _SECTION.search(text)
            else text.rstrip("\n") + "\n\n" + section)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.rstrip("\n") + "\n")


def _write(section: str) -> None:
    _splice(os.path.join(_ROOT, "docs", "benchmarks.md"), section)


def keep_section(path: str) -> None:
    """After the full report rewrote ``path``: put back the web view's section it had (read from git's
    copy of docs/benchmarks.md when the file itself no longer has it)."""
    import subprocess

    old = subprocess.run(["git", "show", "HEAD:docs/benchmarks.md"], cwd=_ROOT, capture_output=True, text=True)
    found = _SECTION.search(old.stdout) if old.returncode == 0 else None
    if found is not None:
        _splice(path, found.group(0))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench web", description=__doc__.split("\n\n")[0])
    parser.add_argument("--locks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    section = run(args.locks, args.rounds)
    print(section)
    if args.write:
        _write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
