"""A client connection's TLS, in memory on virtual time: the connection's side runs on a
MockTransport and a VirtualScheduler, the client's side is a TlsSession of its own; the
records go back and forth by hand. Every order nats-server has: INFO then upgrade, TLS first
(with and without a fallback), plain and TLS clients on an ``allow_non_tls`` port, the
handshake timeout, pinned certificates."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_client_connection import CONNECT, INFO, FakeHost, MockTransport
from tlscerts import Certs, make_certs

from natsd.connection.client import ClientConnection, CloseReason
from natsd.connection.tls import ClientTls, TlsSession
from natsd.security.tls import TlsOptions, server_context

HELLO = CONNECT + b"PING\r\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_host(certs: Certs, **kw: object) -> FakeHost:
    host = FakeHost()
    opts = TlsOptions(
        cert_file=str(certs.server_cert),
        key_file=str(certs.server_key),
        ca_file=str(certs.ca),
        verify=bool(kw.get("verify", False)),
        pinned_certs=frozenset(kw.get("pinned", ())),  # type: ignore[call-overload]
    )
    host.tls = ClientTls(
        context=server_context(opts),
        timeout=0.5,
        handshake_first=bool(kw.get("first", False)),
        fallback_delay=float(kw.get("fallback", 0.0)),  # type: ignore[arg-type]
        allow_non_tls=bool(kw.get("allow_non_tls", False)),
        verify=opts.verify,
        pinned_certs=opts.pinned_certs,
    )
    return host


def pump(client: ClientConnection, t: MockTransport, peer: TlsSession, host: FakeHost) -> bytes:
    """Move records both ways until neither side has more; the plaintext the peer got."""
    got = b""
    for _ in range(20):
        out = peer.outgoing()
        if out:
            client.data_received(out)
        host.scheduler.run_ready()
        back = t.take()
        if back:
            got += peer.feed(back)
        if not out and not back:
            break
    return got


def start(
    certs: Certs, host: FakeHost, who: str | None = None
) -> tuple[ClientConnection, MockTransport, TlsSession]:
    client = ClientConnection(host, 1)
    t = MockTransport()
    client.connection_made(t)
    peer = TlsSession(certs.client_context(who), server_side=False, hostname="localhost")
    peer.begin()
    return client, t, peer


def test_info_in_plaintext_then_the_upgrade(certs: Certs) -> None:
    host = tls_host(certs)
    client, t, peer = start(certs, host)
    assert t.take() == INFO
    pump(client, t, peer, host)
    assert peer.established and client.tls is not None and client.tls.established
    assert client.tls.version in ("1.2", "1.3")
    peer_out = peer.encrypt(HELLO)
    client.data_received(peer_out)
    host.scheduler.run_ready()
    assert peer.feed(t.take()) == b"PONG\r\n" + INFO
    # A message too big for one TLS record arrives whole, whatever the reads' split.
    payload = bytes(range(256)) * 400
    records = peer.encrypt(b"SUB big 1\r\nPUB big %d\r\n" % len(payload) + payload + b"\r\n")
    for i in range(0, len(records), 777):
        client.data_received(records[i : i + 777])
    host.scheduler.run_ready()
    got = peer.feed(t.take())
    assert got == b"MSG big 1 %d\r\n" % len(payload) + payload + b"\r\n"


def test_plain_client_on_a_tls_port_is_closed(certs: Certs) -> None:
    host = tls_host(certs)
    client, t, _ = start(certs, host)
    t.take()
    client.data_received(HELLO)
    assert client.closed and client.close_reason == CloseReason.TLS_HANDSHAKE
    assert t.take() == b""  # nothing more: nats-server writes nothing to it either
    assert any("first record does not look like a TLS handshake" in d for d in host.debug)
    assert host.tls_errors == []  # a probe is a debug line, not an error


def test_handshake_timeout_closes(certs: Certs) -> None:
    host = tls_host(certs)
    client, t, _ = start(certs, host)
    t.take()
    host.scheduler.advance(0.49)
    assert not client.closed
    host.scheduler.advance(0.02)
    assert client.closed and client.close_reason == CloseReason.TLS_HANDSHAKE


def test_handshake_first_sends_info_over_tls(certs: Certs) -> None:
    host = tls_host(certs, first=True)
    client, t, peer = start(certs, host)
    assert t.take() == b""  # nothing before the handshake
    got = pump(client, t, peer, host)
    assert got == INFO


def test_handshake_first_fallback_sends_info_when_the_client_waits(certs: Certs) -> None:
    host = tls_host(certs, first=True, fallback=0.05)
    client, t, peer = start(certs, host)
    assert t.take() == b""
    host.scheduler.advance(0.06)
    assert t.take() == INFO
    assert client.info_tls_required is True
    pump(client, t, peer, host)
    assert peer.established


def test_handshake_first_fallback_takes_a_client_that_starts_tls(certs: Certs) -> None:
    host = tls_host(certs, first=True, fallback=0.05)
    client, t, peer = start(certs, host)
    got = pump(client, t, peer, host)
    assert got == INFO
    host.scheduler.advance(1.0)  # the fallback timer was cancelled: no INFO in plaintext
    assert t.take() == b"" and not client.closed


def test_allow_non_tls_takes_plain_and_tls_clients(certs: Certs) -> None:
    host = tls_host(certs, allow_non_tls=True)
    client, t, _ = start(certs, host)
    assert t.take() == INFO
    client.data_received(HELLO)
    host.scheduler.run_ready()
    assert t.take() == b"PONG\r\n" + INFO and client.tls is None

    client, t, peer = start(certs, host)
    t.take()
    pump(client, t, peer, host)
    client.data_received(peer.encrypt(HELLO))
    host.scheduler.run_ready()
    assert peer.feed(t.take()) == b"PONG\r\n" + INFO


def test_pinned_certs(certs: Certs) -> None:
    host = tls_host(certs, verify=True, pinned=[certs.spki_sha256("alice")])
    client, t, peer = start(certs, host, "alice")
    t.take()
    pump(client, t, peer, host)
    assert not client.closed and client.tls_peer is not None
    assert client.tls_peer.email_addresses == ("alice@example.com",)

    client, t, peer = start(certs, host, "bob")
    t.take()
    pump(client, t, peer, host)
    assert client.closed and client.close_reason == CloseReason.TLS_HANDSHAKE
    assert host.tls_errors == ["TLS handshake error: certificate not pinned"]


def test_a_tls_connection_does_not_move_between_workers(certs: Certs) -> None:
    host = tls_host(certs)
    client, t, peer = start(certs, host)
    t.take()
    pump(client, t, peer, host)
    client.data_received(peer.encrypt(HELLO))
    host.scheduler.run_ready()
    assert client.connected and client.unmovable() == "tls"


def test_certificate_files_are_checked(tmp_path: Path, certs: Certs) -> None:
    from natsd.security.tls import TlsError

    with pytest.raises(TlsError, match=r"open .*nope\.pem: no such file or directory"):
        server_context(TlsOptions(cert_file=str(tmp_path / "nope.pem"), key_file="k"))
    with pytest.raises(TlsError, match="missing 'key_file'"):
        server_context(TlsOptions(cert_file=str(certs.server_cert)))


def test_nkey_signature_encodings_are_gos() -> None:
    """Raw URL-safe base64, else padded standard base64, each strictly (nats-server tries
    Go's RawURLEncoding, then StdEncoding)."""
    import base64

    import nacl.signing
    import nkeys as nk

    from natsd.security.nkeys import verify

    sk = nacl.signing.SigningKey(bytes(range(32)))
    seed = nk.encode_seed(bytes(sk), nk.PREFIX_BYTE_USER)
    kp = nk.from_seed(bytearray(seed))
    public = kp.public_key.decode()
    nonce = b"abcdefghijklmno"
    sig = kp.sign(nonce)
    url = base64.urlsafe_b64encode(sig).decode()
    std = base64.standard_b64encode(sig).decode()
    assert verify(public, nonce, url.rstrip("="))
    assert verify(public, nonce, std)
    assert not verify(public, b"another nonce", url.rstrip("="))
    if any(ch in url for ch in "-_"):
        assert not verify(public, nonce, url)  # padded URL-safe: neither encoding
    if any(ch in std for ch in "+/"):
        assert not verify(public, nonce, std.rstrip("="))  # standard without its padding
    assert not verify("UNOTAKEY", nonce, std)


def test_input_before_close_notify_is_taken(certs: Certs) -> None:
    """A client that publishes and closes at once (nats-py's publish then close) sends its
    last records and its close_notify together: the publish counts, then the close."""
    host = tls_host(certs)
    client, t, peer = start(certs, host)
    t.take()
    pump(client, t, peer, host)
    client.data_received(peer.encrypt(HELLO + b"PUB last.words 2\r\nhi\r\n") + peer.close_notify())
    assert client.msgs_in == 1
    assert client.closed and client.close_reason == CloseReason.CLIENT_CLOSED
