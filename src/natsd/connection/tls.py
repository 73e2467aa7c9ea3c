"""TLS on a connection, run by the connection itself over its plain transport.

``ssl.SSLObject`` with memory BIOs does the protocol (OpenSSL underneath); this module only
pumps bytes: what the socket read goes in, plaintext comes out for the parser, and what the
connection writes is encrypted in one piece per flush (the connection's one write per loop
turn stays one write). Running TLS inside the connection rather than through
``loop.start_tls`` is what lets natsd do what nats-server does on one port: send INFO in
plaintext and then upgrade, look at the first byte to tell a TLS client from a plain one
(``allow_non_tls``), or wait for a client that starts with the handshake
(``handshake_first``), on asyncio and uvloop alike.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Final

from natsd.security.tls import CIPHERS, PeerCert, peer_cert, tls_version_name

__all__ = [
    "READ_CHUNK",
    "TLS_RECORD_HANDSHAKE",
    "ClientTls",
    "RouteTls",
    "TlsSession",
    "handshake_error",
]

# OpenSSL's TLS 1.2 names back to Go's, which /connz reports (TLS 1.3 names are the same).
_GO_CIPHER: Final = {v: k for k, v in CIPHERS.items()}

# The first byte of a TLS record carrying a handshake (a ClientHello).
TLS_RECORD_HANDSHAKE: Final = 0x16
READ_CHUNK: Final = 256 * 1024


def handshake_error(e: ssl.SSLError) -> str:
    """What a failed handshake's log line says: the verification's own words when the
    peer's certificate was refused, else OpenSSL's reason (``TLSV1_ALERT_UNKNOWN_CA``)."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {e.verify_message}"
    return str(e.reason or e)


@dataclass(frozen=True)
class ClientTls:
    """The client port's TLS as configured when a connection was accepted (a reload makes a
    new one; connections keep theirs, as in nats-server)."""

    context: ssl.SSLContext
    timeout: float
    handshake_first: bool = False
    fallback_delay: float = 0.0
    allow_non_tls: bool = False
    verify: bool = False
    map_users: bool = False
    pinned_certs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RouteTls:
    """``cluster { tls {} }``: every route, either way, is TLS from its first byte (nats-server
    shakes hands before CONNECT and INFO on routes)."""

    server_context: ssl.SSLContext  # the accepting end
    client_context: ssl.SSLContext  # the dialing end
    timeout: float
    verify: bool = False
    pinned_certs: frozenset[str] = frozenset()


class TlsSession:
    """One connection's TLS state: feed it what was read, send what it has to send."""

    def __init__(self, context: ssl.SSLContext, server_side: bool, hostname: str = "") -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(
            self._in, self._out, server_side=server_side, server_hostname=hostname or None
        )
        self.established = False
        # The peer sent close_notify: nothing more will come.
        self.closed_by_peer = False
        self.fed = 0  # bytes taken from the socket

    def begin(self) -> None:
        """The dialing side's first flight (ClientHello), ready in :meth:`outgoing`."""
        try:
            self._obj.do_handshake()
            self.established = True
        except ssl.SSLWantReadError:
            pass

    def feed(self, data: bytes) -> bytes:
        """Take bytes from the socket; return the plaintext they complete (maybe none).
        Raises ``ssl.SSLError`` on a failed handshake or a corrupt record; what the session
        must send (handshake records, alerts) waits in :meth:`outgoing`."""
        self._in.write(data)
        self.fed += len(data)
        if not self.established:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.established = True
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._obj.read(READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.closed_by_peer = True
                break
            if not chunk:
                # An empty read without SSLWantReadError: the peer's close_notify.
                self.closed_by_peer = True
                break
            chunks.append(chunk)
        if not chunks:
            return b""
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def outgoing(self) -> bytes:
        """Records the session has made (handshake, tickets, alerts) and not yet sent."""
        return self._out.read()

    def send_pending(self, t: asyncio.Transport | None) -> None:
        """Write what the session has made (handshake records, an alert) to ``t``."""
        out = self._out.read()
        if out and t is not None and not t.is_closing():
            t.write(out)

    def last_words(self, data: bytes) -> bytes:
        """What a closing connection writes: ``data`` encrypted, then close_notify (a TLS
        peer waits for it); nothing before the handshake is done."""
        if not self.established:
            return b""
        return (self.encrypt(data) if data else b"") + self.close_notify()

    def encrypt(self, data: bytes) -> bytes:
        """``data`` as TLS records, with anything else pending before it."""
        self._obj.write(data)
        return self._out.read()

    def close_notify(self) -> bytes:
        """The close_notify alert to send before closing (empty if it cannot be made)."""
        try:
            self._obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        return self._out.read()

    @property
    def version(self) -> str:
        """``1.3``, as nats-server reports it."""
        return tls_version_name(self._obj.version())

    @property
    def cipher(self) -> str:
        c = self._obj.cipher()
        return _GO_CIPHER.get(c[0], c[0]) if c else ""

    def peer(self) -> PeerCert | None:
        """The peer's certificate, if it showed one."""
        try:
            der = self._obj.getpeercert(binary_form=True)
        except ValueError:
            return None
        return peer_cert(der)
