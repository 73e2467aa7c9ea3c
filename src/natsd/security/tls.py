"""TLS settings and the ``ssl.SSLContext`` made from them (nats-server's ``TLSConfigOpts`` and
``GenTLSConfig``), plus what a finished handshake tells about the peer.

One :class:`TlsOptions` per ``tls {}`` block (client port, ``cluster``, ``https``); the
context is built once per configuration (and again on reload: connections keep the context
they started with). The cryptography is OpenSSL's, through Python's ``ssl``; the certificate
fields natsd reports or maps to users are read with ``cryptography``.
"""

from __future__ import annotations

import hashlib
import os
import ssl
from dataclasses import dataclass, field
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

__all__ = [
    "CIPHERS",
    "DEFAULT_TLS_TIMEOUT",
    "FALLBACK_DELAY",
    "INSECURE_CIPHERS",
    "TLS13_CIPHERS",
    "PeerCert",
    "TlsError",
    "TlsOptions",
    "client_context",
    "peer_cert",
    "server_context",
    "tls_version_name",
]

# nats-server's TLS_TIMEOUT and DEFAULT_TLS_HANDSHAKE_FIRST_FALLBACK_DELAY (seconds).
DEFAULT_TLS_TIMEOUT: Final = 2.0
FALLBACK_DELAY: Final = 0.05

# Go's names (tls.CipherSuites()) -> OpenSSL's, for TLS 1.2. Go does not let TLS 1.3 suites
# be configured and ignores them in the list; so does natsd.
CIPHERS: Final[dict[str, str]] = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
}
TLS13_CIPHERS: Final = frozenset(
    ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
)
# tls.InsecureCipherSuites(): allowed only with ``allow_insecure_cipher_suites``. The RC4
# suites are not in OpenSSL 3 at all (None: refused by name).
INSECURE_CIPHERS: Final[dict[str, str | None]] = {
    "TLS_RSA_WITH_RC4_128_SHA": None,
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": None,
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": None,
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}


class TlsError(ValueError):
    """The TLS settings cannot be used; the message is nats-server's where it has one."""


@dataclass(frozen=True)
class TlsOptions:
    """One ``tls {}`` block as nats-server's ``parseTLS`` reads it."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    verify: bool = False
    # verify_and_map: the client certificate names the user (no password).
    map_users: bool = False
    # verify_cert_and_check_known_urls (routes): the peer's certificate must name one of
    # the configured route URLs' hosts.
    check_known_urls: bool = False
    insecure: bool = False
    timeout: float = DEFAULT_TLS_TIMEOUT
    handshake_first: bool = False
    # handshake_first with a fallback: INFO goes first after this long without a handshake.
    fallback_delay: float = 0.0
    # lower-case hex sha256 of the peer certificate's SubjectPublicKeyInfo; empty: no pinning
    pinned_certs: frozenset[str] = frozenset()
    min_version: str = ""  # "1.2" / "1.3"; "" is TLS 1.2, nats-server's floor
    # OpenSSL cipher names for TLS 1.2 (CIPHERS); empty: Go's default secure list
    ciphers: tuple[str, ...] = field(default=())


def _base(opts: TlsOptions, purpose: ssl.Purpose) -> ssl.SSLContext:
    ctx = ssl.create_default_context(purpose)
    ctx.minimum_version = (
        ssl.TLSVersion.TLSv1_3 if opts.min_version == "1.3" else ssl.TLSVersion.TLSv1_2
    )
    names = list(opts.ciphers) or list(CIPHERS.values())
    tls12 = [n for n in names if n]
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError as e:
            raise TlsError(f"error parsing tls config: cipher_suites: {e}") from None
    else:
        # Only TLS 1.3 suites listed: Go then has no TLS 1.2 suite to offer.
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if opts.cert_file or opts.key_file:
        if not opts.key_file:
            raise TlsError("missing 'key_file' in TLS configuration")
        if not opts.cert_file:
            raise TlsError("missing 'cert_file' in TLS configuration")
        for f in (opts.cert_file, opts.key_file):
            if not os.path.exists(f):
                raise TlsError(
                    f"error parsing X509 certificate/key pair: open {f}: no such file or directory"
                )
        try:
            ctx.load_cert_chain(opts.cert_file, opts.key_file)
        except (OSError, ssl.SSLError) as e:
            raise TlsError(f"error parsing X509 certificate/key pair: {_why(e)}") from None
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if opts.ca_file:
        try:
            ctx.load_verify_locations(cafile=opts.ca_file)
        except FileNotFoundError as e:
            raise TlsError(f"open {opts.ca_file}: {(e.strerror or '').lower()}") from None
        except (OSError, ssl.SSLError):
            raise TlsError("failed to parse root ca certificate") from None
    return ctx


def _why(e: Exception) -> str:
    if isinstance(e, FileNotFoundError):
        return f"open {e.filename}: no such file or directory"
    return str(e)


def server_context(opts: TlsOptions) -> ssl.SSLContext:
    """The context of an accepting end (client port, route listener, HTTPS): its own
    certificate, and the peer's required and verified against ``ca_file`` with ``verify``."""
    if not opts.cert_file:
        raise TlsError("missing 'cert_file' in TLS configuration")
    ctx = _base(opts, ssl.Purpose.CLIENT_AUTH)
    if opts.verify:
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(opts: TlsOptions, verify_server: bool = True) -> ssl.SSLContext:
    """The context of a dialing end (a route to another server): it verifies the server's
    certificate against ``ca_file`` unless ``insecure``, and shows its own if it has one."""
    ctx = _base(opts, ssl.Purpose.SERVER_AUTH)
    if verify_server and not opts.insecure:
        ctx.verify_mode = ssl.CERT_REQUIRED
        # As Go's tls.Client with ServerName set to the URL's host (a name or an IP).
        ctx.check_hostname = True
    return ctx


def tls_version_name(version: str | None) -> str:
    """``TLSv1.3`` -> ``1.3`` (nats-server's ``tlsVersion``)."""
    if not version:
        return ""
    return version.removeprefix("TLSv")


@dataclass(frozen=True)
class PeerCert:
    """What natsd uses of a peer's certificate: for ``/connz`` (``tls_peer_certs``), pinning
    and ``verify_and_map``."""

    der: bytes
    subject: str  # RFC 2253, as Go's pkix.Name.String()
    spki_sha256: str  # hex, the pinned_certs key
    cert_sha256: str  # hex of the whole certificate
    email_addresses: tuple[str, ...]
    dns_names: tuple[str, ...]
    uris: tuple[str, ...]

    def identities(self) -> list[str]:
        """The names ``verify_and_map`` tries, in nats-server's order: e-mail addresses and
        DNS names and URIs of the SAN, then the subject (RFC 2253)."""
        return [*self.email_addresses, *self.dns_names, *self.uris, self.subject]


def peer_cert(der: bytes | None) -> PeerCert | None:
    """Parse the peer's leaf certificate (DER, from ``SSLObject.getpeercert(True)``)."""
    if not der:
        return None
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError:
        return None
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    emails: list[str] = []
    dns: list[str] = []
    uris: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        emails = san.get_values_for_type(x509.RFC822Name)
        dns = san.get_values_for_type(x509.DNSName)
        uris = san.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        pass
    return PeerCert(
        der=der,
        subject=cert.subject.rfc4514_string(),
        spki_sha256=hashlib.sha256(spki).hexdigest(),
        cert_sha256=hashlib.sha256(der).hexdigest(),
        email_addresses=tuple(emails),
        dns_names=tuple(dns),
        uris=tuple(uris),
    )

