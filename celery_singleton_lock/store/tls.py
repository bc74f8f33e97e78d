"""TLS to the lock store: a certificate that does not verify is a misconfiguration, no verification a risk.

A server whose certificate does not chain to the trusted CA, or does not carry
the name the client reached it by, answers the same way on every try: it is a
lock store set up wrong (the CA not given, the wrong host) or someone posing as
it. Either way, retrying, or running a task unguarded meanwhile, is wrong: such
an error is *permanent* (see :mod:`.errors`). ``ssl_cert_reqs="none"`` makes the
client accept any certificate at all, so anyone on the path can pose as the lock
store: allowed, but worth a warning when a worker starts.
"""

from __future__ import annotations

import ssl
from typing import Any, Iterator, Mapping, Optional
from urllib.parse import parse_qsl, urlsplit

__all__ = ["verification_failure", "unverified_tls"]

#: OpenSSL's reasons for a certificate the client, or the server, refused.
_REFUSED_CERTIFICATE = ("CERTIFICATE_VERIFY_FAILED", "TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE",
                        "TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_CERTIFICATE_UNKNOWN")

#: Spellings of ``ssl_cert_reqs`` that verify nothing (redis-py reads ``None`` as ``CERT_NONE``).
_NO_VERIFICATION = (None, "none", ssl.CERT_NONE)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the errors it was raised from or while handling (redis-py wraps the socket's error)."""
    seen = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def verification_failure(exc: BaseException) -> Optional[str]:
    """What was refused, when ``exc`` (or what it wraps) is a TLS certificate refused; ``None`` otherwise."""
    for error in _chain(exc):
        reason = getattr(error, "reason", None)
        if isinstance(error, ssl.SSLCertVerificationError) or (
                isinstance(error, ssl.SSLError) and reason in _REFUSED_CERTIFICATE):
            return f"{type(error).__name__}: {error}"
    text = str(exc)
    if any(reason in text for reason in _REFUSED_CERTIFICATE) or "certificate verify failed" in text.lower():
        return text  # wrapped by a client that kept the text only (a Cluster's "cannot be connected")
    return None


def unverified_tls(url: str, options: Optional[Mapping[str, Any]] = None) -> bool:
    """Whether a client of ``url`` with ``options`` would talk TLS without verifying the server's certificate."""
    options = options or {}
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if not (scheme.startswith("rediss") or options.get("ssl")):
        return False
    if "ssl_cert_reqs" in options:
        value = options["ssl_cert_reqs"]
    else:
        try:
            query = dict(parse_qsl(urlsplit(url).query))
        except ValueError:
            return False
        if "ssl_cert_reqs" not in query:
            return False
        value = query["ssl_cert_reqs"]
    return (value.lower() if isinstance(value, str) else value) in _NO_VERIFICATION
