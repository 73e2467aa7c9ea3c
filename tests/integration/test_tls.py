"""natsd with TLS, embedded on the test's loop, driven by nats-py: /connz's TLS fields, a
reload that renews the certificate (new connections get it, open ones keep theirs), TLS
first without a fallback, and an nkey user's permissions."""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
import trustme
from tlscerts import Certs, make_certs

import natsd
from natsd.config import load_config

from .conftest import get_json


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


PLACE = 'host: "127.0.0.1"\nport: -1\nhttp: "127.0.0.1:-1"\n'


async def _server(conf: Path) -> natsd.Server:
    """natsd from ``conf`` (which reload_config reads again), on random ports."""
    opts, _ = load_config(str(conf))
    srv = natsd.Server(opts)
    await srv.start()
    return srv


@pytest.fixture
async def verify_server(certs: Certs, tmp_path: Path) -> AsyncIterator[natsd.Server]:
    conf = tmp_path / "tls.conf"
    conf.write_text(PLACE + certs.tls_block(verify=True))
    srv = await _server(conf)
    try:
        yield srv
    finally:
        await srv.shutdown()


async def _connect(srv: natsd.Server, ctx: ssl.SSLContext, **kw: Any) -> nats.NATS:
    return await nats.connect(
        f"tls://localhost:{srv.port}", tls=ctx, allow_reconnect=False, connect_timeout=3, **kw
    )


async def _roundtrip(nc: nats.NATS, subject: str) -> bytes:
    sub = await nc.subscribe(subject)
    await nc.publish(subject, b"data")
    msg = await sub.next_msg(timeout=3)
    await sub.unsubscribe()
    return msg.data


async def test_connz_reports_tls(verify_server: natsd.Server, certs: Certs) -> None:
    nc = await _connect(verify_server, certs.client_context("alice"), name="alice-app")
    try:
        connz = await get_json(verify_server.monitor_url + "/connz")
        (c,) = connz["connections"]
        assert c["tls_version"] == "1.3"
        assert c["tls_cipher_suite"].startswith("TLS_")
        assert "tls_peer_certs" not in c and "tls_first" not in c
        connz = await get_json(verify_server.monitor_url + "/connz?auth=1")
        (peer,) = connz["connections"][0]["tls_peer_certs"]
        assert peer["spki_sha256"] == certs.spki_sha256("alice")
        assert peer["subject"].startswith("CN=alice")
        assert len(peer["cert_sha256"]) == 64
    finally:
        await nc.close()


async def test_reload_renews_the_certificate_for_new_connections(
    certs: Certs, tmp_path: Path
) -> None:
    conf = tmp_path / "tls.conf"
    conf.write_text(PLACE + certs.tls_block())
    srv = await _server(conf)
    try:
        old = await _connect(srv, certs.client_context())
        # The certificate is renewed in place by a new CA (same file names).
        renewed = trustme.CA()
        leaf = renewed.issue_cert("localhost", "127.0.0.1")
        leaf.cert_chain_pems[0].write_to_path(str(certs.server_cert.with_name("r.pem")))
        leaf.private_key_pem.write_to_path(str(certs.server_key.with_name("r-key.pem")))
        renewed.cert_pem.write_to_path(str(tmp_path / "renewed-ca.pem"))
        conf.write_text(
            PLACE
            + certs.tls_block()
            .replace(str(certs.server_cert), str(certs.server_cert.with_name("r.pem")))
            .replace(str(certs.server_key), str(certs.server_key.with_name("r-key.pem")))
        )
        srv.reload_config()
        # The open connection keeps its session.
        assert await _roundtrip(old, "still.there") == b"data"
        # A new client must trust the new certificate's CA.
        with pytest.raises(Exception):  # noqa: B017 - nats-py wraps the SSL error variously
            await _connect(srv, certs.client_context())
        new = await _connect(srv, certs.client_context(ca=tmp_path / "renewed-ca.pem"))
        assert await _roundtrip(new, "renewed") == b"data"
        await new.close()
        await old.close()
    finally:
        await srv.shutdown()
        for f in ("r.pem", "r-key.pem"):
            certs.server_cert.with_name(f).unlink(missing_ok=True)


async def test_tls_first_without_fallback(certs: Certs, tmp_path: Path) -> None:
    conf = tmp_path / "tls.conf"
    conf.write_text(PLACE + certs.tls_block(handshake_first=True))
    srv = await _server(conf)
    try:
        nc = await _connect(srv, certs.client_context(), tls_handshake_first=True)
        assert await _roundtrip(nc, "first") == b"data"
        connz = await get_json(srv.monitor_url + "/connz")
        assert connz["connections"][0]["tls_first"] is True
        await nc.close()
    finally:
        await srv.shutdown()


async def test_allow_non_tls_serves_both_on_one_port(certs: Certs, tmp_path: Path) -> None:
    """A client that asks for TLS on an allow_non_tls port gets it; one that does not is
    served in plaintext, side by side on one port."""
    conf = tmp_path / "tls.conf"
    conf.write_text(PLACE + certs.tls_block() + "allow_non_tls: true\n")
    srv = await _server(conf)
    try:
        plain = await nats.connect(f"nats://127.0.0.1:{srv.port}", allow_reconnect=False)
        sub = await plain.subscribe("mixed")
        await plain.flush()
        # nats-py upgrades only when INFO says tls_required: a client of its own does it.
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        info = await reader.readline()
        assert b'"tls_available":true' in info and b"tls_required" not in info
        await writer.start_tls(certs.client_context(), server_hostname="localhost")
        writer.write(b'CONNECT {"verbose":false}\r\nPUB mixed 6\r\nacross\r\nPING\r\n')
        assert await asyncio.wait_for(reader.readline(), 3) == b"PONG\r\n"
        assert (await sub.next_msg(timeout=3)).data == b"across"
        connz = await get_json(srv.monitor_url + "/connz")
        versions = sorted(c.get("tls_version", "") for c in connz["connections"])
        assert versions == ["", "1.3"]
        writer.close()
        await plain.close()
    finally:
        await srv.shutdown()


async def test_https_monitoring_uses_the_tls_certificates(certs: Certs, tmp_path: Path) -> None:
    import json
    import urllib.request

    conf = tmp_path / "tls.conf"
    conf.write_text('host: "127.0.0.1"\nport: -1\nhttps: "127.0.0.1:-1"\n' + certs.tls_block())
    srv = await _server(conf)
    try:
        assert srv.monitor_url.startswith("https://127.0.0.1:")
        ctx = certs.client_context(check_hostname=False)

        def get(path: str) -> dict[str, Any]:
            with urllib.request.urlopen(srv.monitor_url + path, context=ctx, timeout=5) as r:
                out: dict[str, Any] = json.loads(r.read())
                return out

        varz = await asyncio.to_thread(get, "/varz")
        assert varz["https_port"] == srv.monitor_port and varz["http_port"] == 0
        assert varz["tls_required"] is True and varz["tls_timeout"] == 2
        # plain HTTP is not served on the HTTPS port
        with pytest.raises(OSError):
            await asyncio.to_thread(
                urllib.request.urlopen, f"http://127.0.0.1:{srv.monitor_port}/varz", timeout=5
            )
    finally:
        await srv.shutdown()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("http_port: -1\nhttps_port: -1\n", "can't specify both HTTP (-1) and HTTPs (-1) ports"),
        ("https_port: -1\n", "TLS cert and key required for HTTPS"),
    ],
)
def test_https_monitoring_checks(text: str, error: str, tmp_path: Path) -> None:
    conf = tmp_path / "m.conf"
    conf.write_text(text)
    opts, _ = load_config(str(conf))
    with pytest.raises(ValueError, match=re.escape(error)):
        natsd.Server(opts)
