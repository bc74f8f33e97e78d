"""A TLS certificate that does not verify is a misconfiguration; verifying nothing is told (no Redis needed).

The errors are built as redis-py builds them: its ``ConnectionError`` raised while
handling the ``ssl`` module's error.
"""

from __future__ import annotations

import ssl

import pytest
import redis.exceptions as rex

from celery_singleton_lock.store import permanent_problem, unverified_tls


def _wrapped(error: BaseException) -> rex.ConnectionError:
    try:
        try:
            raise error
        except OSError as exc:
            raise rex.ConnectionError(f"Error 1 connecting to 127.0.0.1:6380. {exc}.")
    except rex.ConnectionError as wrapped:
        return wrapped


@pytest.mark.parametrize("error", [
    ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                    "self-signed certificate in certificate chain (_ssl.c:1006)"),
    ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                    "IP address mismatch, certificate is not valid for '127.0.0.2'. (_ssl.c:1006)"),
])
def test_a_certificate_that_does_not_verify_is_no_outage(error):
    problem = permanent_problem(_wrapped(error))
    assert problem is not None and "TLS verification of the lock store failed" in problem
    assert "ssl_ca_certs" in problem


def test_a_connection_cut_during_the_handshake_is_an_outage():
    assert permanent_problem(_wrapped(ConnectionResetError(104, "Connection reset by peer"))) is None
    assert permanent_problem(_wrapped(ssl.SSLEOFError(8, "EOF occurred in violation of protocol"))) is None


@pytest.mark.parametrize("url, options, unverified", [
    ("rediss://h:6380/0", {"ssl_cert_reqs": "none"}, True),
    ("rediss://h:6380/0", {"ssl_cert_reqs": None}, True),
    ("rediss://h:6380/0", {"ssl_cert_reqs": ssl.CERT_NONE}, True),
    ("rediss://h:6380/0?ssl_cert_reqs=none", {}, True),
    ("rediss+cluster://h:1,h:2/0?ssl_cert_reqs=NONE", {}, True),
    ("redis://h:6380/0", {"ssl": True, "ssl_cert_reqs": "none"}, True),
    ("rediss://h:6380/0", {}, False),
    ("rediss://h:6380/0?ssl_cert_reqs=none", {"ssl_cert_reqs": "required"}, False),
    ("redis://h:6379/0", {"ssl_cert_reqs": "none"}, False),  # no TLS at all: the docs say so elsewhere
])
def test_verifying_nothing_is_noticed(url, options, unverified):
    assert unverified_tls(url, options) is unverified
