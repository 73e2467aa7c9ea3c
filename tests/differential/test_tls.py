"""TLS on the client port and nkey users, compared between nats-server and natsd: the same
certificates and configuration, the same clients (raw sockets and nats-py), the same
outcomes and INFO fields."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nkeys
import pytest
from components import require_nats_server
from tlscerts import Certs, make_certs

from .harness import ServerPair, ServerProcess, server_pair

pytestmark = pytest.mark.differential

PING = b"PING\r\n"
# A user nkey made for these tests (nats-py signs the nonce with the seed).
SEED = b"SUAMSCZIPZX5KKDYFAHJGYO42YRLSE3ZKBUJDHLJH3S5XB3WZKGEX3IIGI"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _pair(config: str) -> Iterator[ServerPair]:
    require_nats_server()
    with server_pair(config=config) as p:
        yield p


@pytest.fixture(scope="module")
def tls_pair(certs: Certs) -> Iterator[ServerPair]:
    yield from _pair(certs.tls_block(timeout=0.5))


@pytest.fixture(scope="module")
def verify_pair(certs: Certs) -> Iterator[ServerPair]:
    yield from _pair(certs.tls_block(verify=True))


@pytest.fixture(scope="module")
def mixed_pair(certs: Certs) -> Iterator[ServerPair]:
    yield from _pair(certs.tls_block() + "allow_non_tls: true\n")


@pytest.fixture(scope="module")
def first_pair(certs: Certs) -> Iterator[ServerPair]:
    # A fallback delay, so a plain client (and the harness's readiness probe) still gets INFO.
    yield from _pair(certs.tls_block(handshake_first="300ms"))


@pytest.fixture(scope="module")
def map_pair(certs: Certs) -> Iterator[ServerPair]:
    users = """
authorization {
  users = [
    { user: "alice@example.com", permissions: { publish: "alice.>", subscribe: ">" } }
    { user: "O=Acme, OU=Eng, CN=bob" }
  ]
}
"""
    yield from _pair(certs.tls_block(verify_and_map=True) + users)


@pytest.fixture(scope="module")
def pinned_pair(certs: Certs) -> Iterator[ServerPair]:
    yield from _pair(certs.tls_block(verify=True, pinned_certs=[certs.spki_sha256("alice")]))


@pytest.fixture(scope="module")
def nkey_pair() -> Iterator[ServerPair]:
    public = nkeys.from_seed(bytearray(SEED)).public_key.decode()
    yield from _pair(
        f"authorization {{ users = [ {{ nkey: {public}, permissions: {{ publish: ok }} }} ] }}\n"
    )


# ---------------------------------------------------------------------- raw probes
def _read_line(sock: socket.socket | ssl.SSLSocket, timeout: float = 3.0) -> bytes:
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def _info(line: bytes) -> dict[str, Any]:
    assert line.startswith(b"INFO "), line
    info: dict[str, Any] = json.loads(line[5:].split(b"\r\n")[0])
    return info


def _tls_fields(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k.startswith("tls_") or k == "auth_required"}


def _read_all(sock: socket.socket | ssl.SSLSocket, seconds: float) -> tuple[bytes, bool]:
    """What arrives within ``seconds``, and whether the server closed."""
    deadline = time.monotonic() + seconds
    out = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            return out, False
        except (ssl.SSLError, ConnectionResetError):
            return out, True
        if not chunk:
            return out, True
        out += chunk
        if out.endswith(b"PONG\r\n"):
            return out, False
    return out, False


def upgrade(
    server: ServerProcess,
    ctx: ssl.SSLContext,
    send: bytes = b'CONNECT {"verbose":false}\r\n' + PING,
    first: bool = False,
) -> tuple[dict[str, Any], str, bytes]:
    """Connect, read INFO in plaintext (or handshake first), upgrade, send ``send``; returns
    the INFO's TLS fields, "ok" or "handshake failed", and what came back."""
    sock = socket.create_connection(server.address, timeout=3)
    try:
        info: dict[str, Any] = {}
        if not first:
            info = _info(_read_line(sock))
        try:
            tls = ctx.wrap_socket(sock, server_hostname="localhost")
        except (ssl.SSLError, OSError):
            return _tls_fields(info), "handshake failed", b""
        if first:
            info = _info(_read_line(tls))
        try:
            tls.sendall(send)
            out, _ = _read_all(tls, 2.0)
        except (ssl.SSLError, OSError):
            # TLS 1.3: a refused client certificate shows only when the client reads.
            return _tls_fields(info), "handshake failed", b""
        if not out:
            return _tls_fields(info), "handshake failed", b""
        return _tls_fields(info), "ok", out
    finally:
        sock.close()


def both(pair: ServerPair, fn: Any, *args: Any, **kw: Any) -> Any:
    ref = fn(pair.ref, *args, **kw)
    impl = fn(pair.impl, *args, **kw)
    assert impl == ref, f"nats-server: {ref!r}\nnatsd:       {impl!r}"
    return impl


def plain(server: ServerProcess, send: bytes, wait: float = 1.0) -> tuple[dict[str, Any], Any]:
    """A plaintext client: INFO's TLS fields, then what ``send`` gets back and whether the
    server closed."""
    with socket.create_connection(server.address, timeout=3) as sock:
        info = _info(_read_line(sock))
        sock.sendall(send)
        out, closed = _read_all(sock, wait)
        return _tls_fields(info), (out, closed)


# ---------------------------------------------------------------------- tls {}
def test_tls_client_upgrades_after_info(tls_pair: ServerPair, certs: Certs) -> None:
    fields, outcome, out = both(tls_pair, upgrade, certs.client_context())
    assert fields == {"tls_required": True} and outcome == "ok" and out == b"PONG\r\n"


def test_plain_client_on_a_tls_port_is_closed_without_a_word(tls_pair: ServerPair) -> None:
    fields, (out, closed) = both(tls_pair, plain, b'CONNECT {"verbose":false}\r\n' + PING)
    assert fields == {"tls_required": True} and out == b"" and closed


def test_client_that_never_starts_tls_is_closed_after_the_timeout(tls_pair: ServerPair) -> None:
    fields, (out, closed) = both(tls_pair, plain, b"", wait=2.0)
    assert fields == {"tls_required": True} and out == b"" and closed


def test_client_that_does_not_trust_the_server_fails_its_handshake(
    tls_pair: ServerPair, certs: Certs
) -> None:
    _, outcome, _ = both(tls_pair, upgrade, certs.client_context(ca=certs.other_ca))
    assert outcome == "handshake failed"


async def _nats_py_roundtrip(server: ServerProcess, **kw: Any) -> bytes:
    nc = await nats.connect(
        f"tls://localhost:{server.port}",
        allow_reconnect=False,
        max_reconnect_attempts=0,
        connect_timeout=3,
        **kw,
    )
    try:
        sub = await nc.subscribe("tls.check")
        await nc.publish("tls.check", b"x" * 100_000)
        msg = await sub.next_msg(timeout=3)
        return msg.data
    finally:
        await nc.close()


def test_nats_py_over_tls(tls_pair: ServerPair, certs: Certs) -> None:
    for server in tls_pair:
        data = asyncio.run(_nats_py_roundtrip(server, tls=certs.client_context()))
        assert data == b"x" * 100_000, server.name


# ---------------------------------------------------------------------- verify
def test_verify_needs_a_client_certificate(verify_pair: ServerPair, certs: Certs) -> None:
    fields, outcome, _ = both(verify_pair, upgrade, certs.client_context())
    assert fields == {"tls_required": True, "tls_verify": True}
    assert outcome == "handshake failed"


def test_verify_accepts_a_certificate_of_its_ca(verify_pair: ServerPair, certs: Certs) -> None:
    _, outcome, out = both(verify_pair, upgrade, certs.client_context("alice"))
    assert outcome == "ok" and out == b"PONG\r\n"


def test_verify_refuses_an_expired_certificate(verify_pair: ServerPair, certs: Certs) -> None:
    _, outcome, _ = both(verify_pair, upgrade, certs.client_context("expired"))
    assert outcome == "handshake failed"


def test_verify_refuses_a_certificate_of_another_ca(verify_pair: ServerPair, certs: Certs) -> None:
    _, outcome, _ = both(verify_pair, upgrade, certs.client_context("stranger"))
    assert outcome == "handshake failed"


# ---------------------------------------------------------------------- allow_non_tls
def test_allow_non_tls_serves_plain_clients(mixed_pair: ServerPair) -> None:
    fields, (out, closed) = both(mixed_pair, plain, b'CONNECT {"verbose":false}\r\n' + PING)
    assert fields == {"tls_available": True}
    assert out == b"PONG\r\n" and not closed


def test_allow_non_tls_serves_tls_clients(mixed_pair: ServerPair, certs: Certs) -> None:
    fields, outcome, out = both(mixed_pair, upgrade, certs.client_context())
    assert fields == {"tls_available": True} and outcome == "ok" and out == b"PONG\r\n"


# ---------------------------------------------------------------------- handshake_first
def test_handshake_first_client_gets_info_over_tls(first_pair: ServerPair, certs: Certs) -> None:
    fields, outcome, out = both(first_pair, upgrade, certs.client_context(), first=True)
    assert fields == {"tls_required": True} and outcome == "ok" and out == b"PONG\r\n"


def test_handshake_first_falls_back_to_info_first(first_pair: ServerPair, certs: Certs) -> None:
    fields, outcome, out = both(first_pair, upgrade, certs.client_context())
    assert fields == {"tls_required": True} and outcome == "ok" and out == b"PONG\r\n"


def test_nats_py_handshake_first(first_pair: ServerPair, certs: Certs) -> None:
    for server in first_pair:
        data = asyncio.run(
            _nats_py_roundtrip(server, tls=certs.client_context(), tls_handshake_first=True)
        )
        assert data == b"x" * 100_000, server.name


# ---------------------------------------------------------------------- verify_and_map
def _connect_and_publish(server: ServerProcess, ctx: ssl.SSLContext, subject: str) -> Any:
    send = b'CONNECT {"verbose":false}\r\nPUB ' + subject.encode() + b" 1\r\nx\r\n" + PING
    fields, outcome, out = upgrade(server, ctx, send)
    return fields, outcome, out.replace(subject.encode(), b"<s>")


def test_verify_and_map_names_the_user_by_email(map_pair: ServerPair, certs: Certs) -> None:
    ctx = certs.client_context("alice")
    _, outcome, out = both(map_pair, _connect_and_publish, ctx, "alice.ok")
    assert outcome == "ok" and out == b"PONG\r\n"
    # alice's permissions apply: the mapping chose her user.
    _, outcome, out = both(map_pair, _connect_and_publish, ctx, "elsewhere")
    assert b"Permissions Violation" in out


def test_verify_and_map_names_the_user_by_subject(map_pair: ServerPair, certs: Certs) -> None:
    _, outcome, out = both(map_pair, _connect_and_publish, certs.client_context("bob"), "any")
    assert outcome == "ok" and out == b"PONG\r\n"


# ---------------------------------------------------------------------- pinned_certs
def test_pinned_certs_admit_only_the_pinned_key(pinned_pair: ServerPair, certs: Certs) -> None:
    _, outcome, out = both(pinned_pair, upgrade, certs.client_context("alice"))
    assert outcome == "ok" and out == b"PONG\r\n"
    _, outcome, _ = both(pinned_pair, upgrade, certs.client_context("bob"))
    assert outcome == "handshake failed"


# ---------------------------------------------------------------------- nkeys
def test_nkey_info_carries_a_fresh_nonce(nkey_pair: ServerPair) -> None:
    nonces = []
    for server in nkey_pair:
        for _ in range(2):
            with socket.create_connection(server.address, timeout=3) as sock:
                info = _info(_read_line(sock))
                assert info["auth_required"] is True
                nonces.append(info["nonce"])
    assert all(len(n) == 15 for n in nonces), nonces
    assert len(set(nonces)) == len(nonces)


def _nkey_connect(server: ServerProcess, sig: str | None, key: str | None) -> tuple[bytes, bool]:
    with socket.create_connection(server.address, timeout=3) as sock:
        info = _info(_read_line(sock))
        kp = nkeys.from_seed(bytearray(SEED))
        opts: dict[str, Any] = {"verbose": False, "nkey": key or kp.public_key.decode()}
        if sig == "good":
            signed = base64.urlsafe_b64encode(kp.sign(info["nonce"].encode())).decode()
            opts["sig"] = signed.rstrip("=")
        elif sig == "std":
            opts["sig"] = base64.standard_b64encode(kp.sign(info["nonce"].encode())).decode()
        elif sig is not None:
            opts["sig"] = sig
        sock.sendall(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPUB ok 1\r\nx\r\n" + PING)
        return _read_all(sock, 1.0)


@pytest.mark.parametrize(
    ("sig", "key"),
    [
        ("good", None),
        ("std", None),
        (None, None),
        ("bm90IGEgc2lnbmF0dXJl", None),
        ("good", "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"),
    ],
    ids=[
        "signed",
        "signed-std-base64",
        "no-signature",
        "bad-signature",
        "unknown-key",
    ],
)
def test_nkey_signature(nkey_pair: ServerPair, sig: str | None, key: str | None) -> None:
    out, closed = both(nkey_pair, _nkey_connect, sig, key)
    if sig in ("good", "std") and key is None:
        assert out == b"PONG\r\n" and not closed
    else:
        assert out == b"-ERR 'Authorization Violation'\r\n" and closed


def test_nkey_signature_of_another_nonce_is_refused(nkey_pair: ServerPair) -> None:
    """A replayed CONNECT: signed for one connection's nonce, sent on another."""

    def replay(server: ServerProcess) -> tuple[bytes, bool]:
        kp = nkeys.from_seed(bytearray(SEED))
        with socket.create_connection(server.address, timeout=3) as first:
            nonce = _info(_read_line(first))["nonce"]
        sig = base64.urlsafe_b64encode(kp.sign(nonce.encode())).decode().rstrip("=")
        with socket.create_connection(server.address, timeout=3) as sock:
            _read_line(sock)
            opts = {"verbose": False, "nkey": kp.public_key.decode(), "sig": sig}
            sock.sendall(b"CONNECT " + json.dumps(opts).encode() + b"\r\n" + PING)
            return _read_all(sock, 1.0)

    out, closed = both(nkey_pair, replay)
    assert out == b"-ERR 'Authorization Violation'\r\n" and closed


def test_nats_py_nkey_user(nkey_pair: ServerPair, tmp_path: Path) -> None:
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(SEED)

    async def run(server: ServerProcess) -> bytes:
        nc = await nats.connect(server.url, nkeys_seed=str(seed_file), allow_reconnect=False)
        try:
            sub = await nc.subscribe("ok")
            await nc.publish("ok", b"signed")
            return (await sub.next_msg(timeout=3)).data
        finally:
            await nc.close()

    for server in nkey_pair:
        assert asyncio.run(run(server)) == b"signed", server.name


@pytest.fixture(scope="module")
def map_mixed_pair(certs: Certs) -> Iterator[ServerPair]:
    users = 'authorization { users = [ { user: "alice@example.com", password: "pw" } ] }\n'
    yield from _pair(certs.tls_block(verify_and_map=True) + "allow_non_tls: true\n" + users)


def test_verify_and_map_names_plain_clients_too(map_mixed_pair: ServerPair) -> None:
    """With verify_and_map every client of the port is named by its certificate: a plain
    client (allow_non_tls) has none, and its password does not stand in for it."""
    send = b'CONNECT {"verbose":false,"user":"alice@example.com","pass":"pw"}\r\n' + PING
    _, (out, closed) = both(map_mixed_pair, plain, send)
    assert out == b"-ERR 'Authorization Violation'\r\n" and closed
