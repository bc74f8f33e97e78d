"""A TLS-only lock store, as ``docs/security.md`` sets it up: verified against a CA, client certificates.

Given a redis-server that listens only on a TLS port, with certificates made here
by a test CA, when real prefork workers run a duplicate storm whose lock store is
that server (the broker stays on the suite's Redis), then the storm behaves as on
plain Redis; and a client that does not trust the CA, that reaches the server under
another name, or that has no certificate when one is required, is refused. A
certificate that does not verify is a misconfiguration, not an outage: a worker
refuses to start against it (exit status 78), a task meeting it at run time fails
with ConfigurationError whatever its ``on_lock_error``; a worker told to verify
nothing (``ssl_cert_reqs=none``) starts, and says what that exposes.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest
import redis

from celery_singleton_lock import ConfigurationError
from celery_singleton_lock.store import Holder, KeyLayout, is_permanent
from celery_singleton_lock.store.connect import open_store
from tests.integration.helpers import records, wait_unlocked
from tests.integration.test_misconfigured_store import EXIT_CONFIG, refused_start, the_one_line
from tests.integration.storm import run_storm, worker_env
from tests.integration.topo import app_on
from tests.support.certs import make_certificates, openssl_binary
from tests.support.servers import RedisServer, TlsFiles, free_port, redis_server_binary

TASK = "tls.job"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: Any) -> TlsFiles:
    if not openssl_binary():
        pytest.skip("the openssl command is needed to make the test certificates")
    return make_certificates(str(tmp_path_factory.mktemp("tls")))


def _tls_server(certificates: TlsFiles, auth_clients: bool, **kwargs: Any) -> Iterator[RedisServer]:
    server = RedisServer(tls=certificates, tls_auth_clients=auth_clients, **kwargs)
    try:
        server.start()
    except RuntimeError as exc:
        if "Bad directive" in str(exc):  # what a build without TLS says of --tls-port
            pytest.skip(f"{redis_server_binary()} was built without TLS support ({exc})")
        raise
    try:
        yield server
    finally:
        server.__exit__()


@pytest.fixture
def tls_server(certificates: TlsFiles) -> Iterator[RedisServer]:
    """TLS only, clients not asked for a certificate; also reachable as 127.0.0.2 (not in its certificate)."""
    yield from _tls_server(certificates, False, extra_args=["--bind", "127.0.0.1", "127.0.0.2"])


@pytest.fixture
def mutual_tls_server(certificates: TlsFiles) -> Iterator[RedisServer]:
    """TLS only, every client must show a certificate signed by the CA."""
    yield from _tls_server(certificates, True)


def _refusal(url: str, options: Dict[str, Any]) -> str:
    """Why the library's store cannot take a lock there (the error's text); a refused certificate is no outage."""
    store = open_store(url, options)
    layout = KeyLayout("csltest")
    try:
        with pytest.raises(redis.ConnectionError) as refused:
            store.acquire(layout.lock(TASK, "a" * 32), "t", 5000, Holder("i", "h", 1, 0, 1000))
        if "CERTIFICATE_VERIFY_FAILED" in str(refused.value):
            assert is_permanent(refused.value), refused.value
        return str(refused.value)
    finally:
        store.close()


def test_a_storm_through_rediss_verified_against_the_ca(certificates, tls_server, proj, start_worker, events_redis):
    url = tls_server.tls_url()  # rediss://127.0.0.1:port/0?ssl_ca_certs=...
    lock_store = redis.Redis.from_url(url, decode_responses=True)
    try:
        with app_on(proj, url):
            start_worker(concurrency=3, env=worker_env(url))

            run_storm(proj, events_redis, lock_store)
    finally:
        lock_store.close()


def test_verification_is_on_by_default(certificates, tls_server):
    # Without the CA: the server's certificate is not trusted.
    assert "CERTIFICATE_VERIFY_FAILED" in _refusal(tls_server.url, {})
    # With it, under a name its certificate does not carry (checked by default from redis-py 6 on; the doc
    # tells users of older versions to ask for it).
    other_name = tls_server.url.replace("127.0.0.1", "127.0.0.2")
    options: Dict[str, Any] = dict(certificates.client_options())
    if int(redis.__version__.split(".")[0]) < 6:
        options["ssl_check_hostname"] = True
    assert "mismatch" in _refusal(other_name, options)


def test_a_storm_with_client_certificates_required(certificates, mutual_tls_server, proj, start_worker,
                                                     events_redis):
    url = mutual_tls_server.url + "/0"
    options = dict(certificates.client_options(with_certificate=True), ssl_check_hostname=True)
    assert _refusal(url, certificates.client_options())  # trusting the CA is not enough: no certificate
    lock_store = redis.Redis.from_url(url, decode_responses=True, **options)
    try:
        with app_on(proj, url, options):
            start_worker(concurrency=3, env=worker_env(url, options))

            run_storm(proj, events_redis, lock_store)

            # queued_or_running: the publisher (this process) takes the lock over TLS, the worker adopts it
            first = proj.qor_job.delay("qor", duration=1.0)
            assert proj.qor_job.delay("qor").id == first.id
            assert first.get(timeout=30)["key"] == "qor"
            wait_unlocked(lock_store, 5)
    finally:
        lock_store.close()


@pytest.mark.parametrize("how", ["the CA not trusted", "another name"])
def test_a_worker_refuses_to_start_against_a_certificate_that_does_not_verify(test_env, certificates, tls_server,
                                                                              how):
    if how == "the CA not trusted":
        url = f"{tls_server.url}/0"  # verified against the system's CAs, which never signed it
    else:
        url = tls_server.tls_url().replace("127.0.0.1", "127.0.0.2")

    status, log = refused_start(test_env, url)

    assert status == EXIT_CONFIG
    line = the_one_line(log)
    assert "TLS verification of the lock store failed" in line and "CERTIFICATE_VERIFY_FAILED" in line
    assert "unreachable" not in log


def test_a_rogue_lock_store_met_at_run_time_fails_tasks_never_runs_them(test_env, certificates, tmp_path, proj,
                                                                       start_worker, events_redis):
    """The worker starts while the lock store is down; then a server whose certificate another CA signed
    answers on its address: every task fails with ConfigurationError, also with on_lock_error="run"."""
    port = free_port()
    worker = start_worker(concurrency=1, env=worker_env(f"rediss://127.0.0.1:{port}/0", certificates.client_options()))
    assert "unreachable at worker start" in worker.log()
    rogue = _tls_server(make_certificates(str(tmp_path)), False, port=port)
    next(rogue)
    try:
        outcomes = [proj.error_run.delay("run"), proj.error_retry.delay("retry"), proj.error_raise.delay("raise")]

        for result in outcomes:
            with pytest.raises(ConfigurationError, match="TLS verification of the lock store failed"):
                result.get(timeout=30)
        assert records(events_redis, "started") == []
    finally:
        rogue.close()


def test_a_worker_that_verifies_nothing_says_so_at_start(certificates, tls_server, start_worker):
    worker = start_worker(concurrency=1, env=worker_env(f"{tls_server.url}/0", {"ssl_cert_reqs": "none"}))

    assert "verifies no certificate (ssl_cert_reqs is none)" in worker.log()
