"""Certificates made for the tests (trustme): a CA, a server certificate for localhost and
127.0.0.1, and client certificates. Nothing here is a key for a real host."""

from __future__ import annotations

import datetime
import hashlib
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    # alice@example.com (e-mail SAN), CN=alice
    alice_cert: Path
    alice_key: Path
    # CN=bob,OU=Eng,O=Acme, DNS bob.example.com: mapped by its subject
    bob_cert: Path
    bob_key: Path
    # alice's names, but expired yesterday
    expired_cert: Path
    expired_key: Path
    # a client certificate from a CA the servers do not trust
    stranger_cert: Path
    stranger_key: Path
    other_ca: Path

    def client_context(
        self, who: str | None = None, ca: Path | None = None, *, check_hostname: bool = True
    ) -> ssl.SSLContext:
        """A client's context trusting our CA (or ``ca``), showing ``who``'s certificate."""
        ctx = ssl.create_default_context(cafile=str(ca or self.ca))
        ctx.check_hostname = check_hostname
        if who is not None:
            cert = getattr(self, f"{who}_cert")
            key = getattr(self, f"{who}_key")
            ctx.load_cert_chain(str(cert), str(key))
        return ctx

    def spki_sha256(self, who: str) -> str:
        """The ``pinned_certs`` key of ``who``'s certificate."""
        cert = x509.load_pem_x509_certificate(getattr(self, f"{who}_cert").read_bytes())
        spki = cert.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return hashlib.sha256(spki).hexdigest()

    def tls_block(self, **extra: object) -> str:
        """A ``tls {}`` block with the server's files and CA, plus ``extra`` keys."""
        lines = [
            f'cert_file: "{self.server_cert}"',
            f'key_file: "{self.server_key}"',
            f'ca_file: "{self.ca}"',
        ]
        for k, v in extra.items():
            if isinstance(v, bool):
                lines.append(f"{k}: {str(v).lower()}")
            elif isinstance(v, list):
                lines.append(f"{k}: [" + ", ".join(f'"{x}"' for x in v) + "]")
            elif isinstance(v, str):
                lines.append(f'{k}: "{v}"')
            else:
                lines.append(f"{k}: {v}")
        return "tls {\n  " + "\n  ".join(lines) + "\n}\n"


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    other = trustme.CA()
    paths: dict[str, Path] = {}

    def write(name: str, issued: trustme.LeafCert) -> None:
        cert = directory / f"{name}.pem"
        key = directory / f"{name}-key.pem"
        issued.cert_chain_pems[0].write_to_path(str(cert))
        issued.private_key_pem.write_to_path(str(key))
        paths[f"{name}_cert"] = cert
        paths[f"{name}_key"] = key

    write("server", ca.issue_cert("localhost", "127.0.0.1", common_name="localhost"))
    write("alice", ca.issue_cert("alice@example.com", common_name="alice"))
    write(
        "bob",
        ca.issue_cert(
            "bob.example.com",
            common_name="bob",
            organization_name="Acme",
            organization_unit_name="Eng",
        ),
    )
    write("stranger", other.issue_cert("alice@example.com", common_name="alice"))
    now = datetime.datetime.now(datetime.UTC)
    write(
        "expired",
        ca.issue_cert(
            "alice@example.com",
            common_name="alice",
            not_before=now - datetime.timedelta(days=30),
            not_after=now - datetime.timedelta(days=1),
        ),
    )
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    other.cert_pem.write_to_path(str(directory / "other-ca.pem"))
    return Certs(
        dir=directory, ca=directory / "ca.pem", other_ca=directory / "other-ca.pem", **paths
    )
