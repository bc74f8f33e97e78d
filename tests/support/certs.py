"""Test certificates made with the ``openssl`` command: a CA, a server certificate and a client one.

Each certificate carries the extensions a strict verifier asks for (key identifiers,
key usage, the server's ``127.0.0.1`` and ``localhost`` names), so the tests verify
TLS exactly as a production client would: against the CA, hostname included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import List

from tests.support.servers import TlsFiles

__all__ = ["make_certificates", "openssl_binary"]

_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

_CA_EXTENSIONS = ["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign",
                  "subjectKeyIdentifier=hash"]

_LEAF_EXTENSIONS = {
    "server": ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
               "extendedKeyUsage=serverAuth", "subjectAltName=IP:127.0.0.1,DNS:localhost",
               "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid"],
    "client": ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
               "extendedKeyUsage=clientAuth", "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid"],
}


def openssl_binary() -> str:
    """The ``openssl`` command, or ``""`` when the machine has none."""
    return shutil.which("openssl") or ""


def _run(args: List[str]) -> None:
    proc = subprocess.run([openssl_binary(), *args], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def _leaf(directory: str, name: str, ca_cert: str, ca_key: str, serial: int) -> None:
    key, csr, cert = (os.path.join(directory, f"{name}.{ext}") for ext in ("key", "csr", "crt"))
    extensions = os.path.join(directory, f"{name}.ext")
    with open(extensions, "w") as handle:
        handle.write("\n".join(_LEAF_EXTENSIONS[name]) + "\n")
    _run(["req", "-new", *_KEY, "-keyout", key, "-out", csr, "-subj", f"/CN=csl-test-{name}"])
    _run(["x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-set_serial", str(serial),
          "-days", "2", "-sha256", "-extfile", extensions, "-out", cert])


def make_certificates(directory: str) -> TlsFiles:
    """A fresh CA in ``directory``, with a server and a client certificate it signed (valid 2 days)."""
    ca_key, ca_cert = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.crt")
    ca_extensions = [arg for ext in _CA_EXTENSIONS for arg in ("-addext", ext)]
    _run(["req", "-x509", *_KEY, "-keyout", ca_key, "-out", ca_cert, "-days", "2", "-sha256",
          "-subj", "/CN=csl-test-ca", *ca_extensions])
    _leaf(directory, "server", ca_cert, ca_key, 1001)
    _leaf(directory, "client", ca_cert, ca_key, 1002)
    return TlsFiles(ca=ca_cert,
                    server_cert=os.path.join(directory, "server.crt"),
                    server_key=os.path.join(directory, "server.key"),
                    client_cert=os.path.join(directory, "client.crt"),
                    client_key=os.path.join(directory, "client.key"))
