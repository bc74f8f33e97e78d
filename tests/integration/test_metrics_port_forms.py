"""Every documented form of ``singleton_lock_metrics_port`` serves a real worker's metrics.

Given a prefork worker whose setting is a bare number (``9808``), ``":9808"``,
``"127.0.0.1:9808"`` or ``"[::1]:9808"``, when it runs two calls, then its port answers /metrics with
exactly those two runs counted: on the address named, and for the bare forms on IPv4 and, where the
host has a dual-stack IPv6 socket, on IPv6 too (a bare port serves every interface).
"""

from __future__ import annotations

import pytest

from celery_singleton_lock.metrics.serve import all_interfaces
from tests.support.scrape import free_port, scrape
from tests.support.waits import wait_for

APP = "tests.integration.proj_metrics"


@pytest.mark.parametrize("form", ["{port}", ":{port}", "127.0.0.1:{port}", "[::1]:{port}"])
def test_every_documented_form_serves_the_worker_metrics(proj, start_worker, form, monkeypatch):
    if form.startswith("[") and all_interfaces() != "::":
        pytest.skip("this host has no dual-stack IPv6")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    port = free_port()
    start_worker(pool="prefork", concurrency=1, app=APP, env={"CSL_METRICS_PORT": form.format(port=port)})
    runs = [proj.storm.delay(f"form-{form}-{i}", duration=0) for i in range(2)]
    assert [r.get(timeout=30)["key"] for r in runs] == [f"form-{form}-{i}" for i in range(2)]
    hosts = ["::1"] if form.startswith("[") else ["127.0.0.1"]
    if form.startswith(("{", ":")) and all_interfaces() == "::":
        hosts.append("::1")
    for host in hosts:
        got = wait_for(lambda: (lambda s: s if s.value("singleton_lock_released_total") >= 2 else None)(
            scrape(port, host)), 10, what=f"both releases to be counted on {host}")
        assert got.value("singleton_lock_acquired_total") == 2
        assert got.by("singleton_lock_released_total", "exit") == {"success": 2}
