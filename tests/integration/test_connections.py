"""Lock URLs behave as in redis-py: passwords, ACL users, unix sockets, TLS (rediss://)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest
from celery import Celery

from celery_singleton_lock.runtime import runtime_for
from celery_singleton_lock.store import Grant, Holder
from tests.support.servers import RedisServer, free_port


def _round_trip(url: str, transport_options=None) -> None:
    """A real app with this lock URL takes and releases a lock."""
    app = Celery("conn", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = url
    app.conf.singleton_lock_transport_options = transport_options or {}
    runtime = runtime_for(app)
    try:
        key = runtime.layout.lock("conn.job", "d")
        holder = Holder("id", "h", os.getpid(), int(time.time() * 1000), 1000)
        assert isinstance(runtime.store.acquire(key, "tok", 5000, holder), Grant)
        assert runtime.store.release(key, "tok")
    finally:
        runtime.close()


def _started(server: RedisServer, url: str) -> str:
    server.start(probe_url=url)
    return url


def test_password():
    server = RedisServer(extra_args=["--requirepass", "s3cret"])
    try:
        _round_trip(_started(server, f"redis://:s3cret@127.0.0.1:{server.port}/0"))
    finally:
        server.stop()


def test_acl_user():
    server = RedisServer(extra_args=["--user", "alice", "on", ">pw", "~*", "&*", "+@all",
                                     "--user", "default", "off"])
    try:
        _round_trip(_started(server, f"redis://alice:pw@127.0.0.1:{server.port}/0"))
    finally:
        server.stop()


def test_unix_socket():
    socket_path = os.path.join(tempfile.mkdtemp(prefix="csl-sock-"), "redis.sock")
    with RedisServer(extra_args=["--unixsocket", socket_path, "--unixsocketperm", "700"]):
        _round_trip(f"unix://{socket_path}?db=0")


@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl is needed to make test certificates")
def test_tls_with_a_ca_certificate():
    directory = tempfile.mkdtemp(prefix="csl-tls-")
    key, cert = os.path.join(directory, "server.key"), os.path.join(directory, "server.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    server = RedisServer(extra_args=["--port", "0", "--tls-port", str(port), "--tls-cert-file", cert,
                                     "--tls-key-file", key, "--tls-auth-clients", "no"])
    server.port = port
    try:
        try:
            server.start_tls(cert)
        except RuntimeError as exc:
            pytest.skip(f"this redis-server cannot serve TLS: {exc}")
        _round_trip(f"rediss://127.0.0.1:{port}/0", {"ssl_ca_certs": cert, "ssl_cert_reqs": "required"})
    finally:
        server.stop()
