"""nkey users and account nkeys in the configuration, checked as nats-server checks them
(and, under the differential marker, against ``nats-server -t``)."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import nacl.signing
import nkeys
import pytest
from components import require_nats_server

from natsd.config import ConfigError, apply_config
from natsd.config.options import ServerOptions
from natsd.config.parse import parse


def public_key(prefix: int, seed: int = 7) -> str:
    vk = nacl.signing.SigningKey(bytes([seed]) * 32).verify_key
    raw = bytes([prefix]) + bytes(vk)
    return base64.b32encode(raw + bytes(nkeys.crc16_checksum(raw))).decode().rstrip("=")


USER = public_key(nkeys.PREFIX_BYTE_USER)
ACCOUNT = public_key(nkeys.PREFIX_BYTE_ACCOUNT)

CASES = {
    "user-nkey": (f"authorization {{ users = [ {{ nkey: {USER} }} ] }}", None),
    "user-nkey-not-a-user-key": (
        f"authorization {{ users = [ {{ nkey: {ACCOUNT} }} ] }}",
        "Not a valid public nkey for a user",
    ),
    "user-nkey-and-password": (
        f"authorization {{ users = [ {{ nkey: {USER}, password: x }} ] }}",
        "Nkey users do not take usernames or passwords",
    ),
    "account-nkey": (f"accounts {{ A: {{ nkey: {ACCOUNT} }} }}", None),
    "account-nkey-not-an-account-key": (
        f"accounts {{ A: {{ nkey: {USER} }} }}",
        "Not a valid public nkey for an account",
    ),
    "connection-types-standard": (
        'authorization { users = [ { user: u, password: p, allowed_connection_types: ["STANDARD"] } ] }',  # noqa: E501
        None,
    ),
    "connection-types-unknown": (
        'authorization { users = [ { user: u, password: p, allowed_connection_types: ["FAX"] } ] }',
        'invalid connection types ["FAX"]',
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_nkey_configuration(case: str) -> None:
    text, error = CASES[case]
    opts = ServerOptions()
    if error is None:
        apply_config(opts, parse(text))
        if "accounts" in text:
            assert opts.accounts["A"].nkey == ACCOUNT
        elif "nkey" in text:
            assert opts.users[0].nkey == USER and opts.users[0].username == USER
    else:
        with pytest.raises(ConfigError, match=re.escape(error)):
            apply_config(opts, parse(text))


def test_websocket_connections_are_refused_by_name() -> None:
    text = 'authorization { users = [ { user: u, password: p, allowed_connection_types: ["STANDARD", "websocket"] } ] }'  # noqa: E501
    with pytest.raises(ConfigError, match="value WEBSOCKET is not supported by natsd"):
        apply_config(ServerOptions(), parse(text))


@pytest.mark.differential
@pytest.mark.parametrize("case", sorted(CASES))
def test_nats_server_agrees(case: str, tmp_path: Path) -> None:
    text, error = CASES[case]
    conf = tmp_path / "n.conf"
    conf.write_text(text + "\n")
    r = subprocess.run([require_nats_server(), "-c", str(conf), "-t"], capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    if error is None:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode != 0 and error in r.stdout + r.stderr
