"""natsd's configuration key tables against nats-server's own parser (``nats-server -t``).

* every key natsd refuses or calls cosmetic is one nats-server knows (so the tables hold no
  invented keys: anything else is an unknown field in both);
* a key nats-server does not know is an error in both, at every level;
* the few natsd-only spellings are exactly the ones nats-server rejects.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server

from natsd.config import policy as P

from .conftest import pair_fixture
from .harness import ServerPair, check_raw, scenario

pytestmark = pytest.mark.differential

PLACES: dict[str, str] = {
    P.TOP.name: "{kv}",
    P.AUTHORIZATION.name: "authorization {{ {kv} }}",
    P.USER.name: "authorization {{ users: [ {{ user: u, {kv} }} ] }}",
    P.PERMISSIONS.name: "authorization {{ users: [ {{ user: u, permissions: {{ {kv} }} }} ] }}",
    P.SUBJECT_PERMISSION.name: (
        "authorization {{ users: [ {{ user: u, permissions: {{ publish: {{ {kv} }} }} }} ] }}"
    ),
    P.ALLOW_RESPONSES.name: (
        "authorization {{ users: [ {{ user: u,"
        " permissions: {{ allow_responses: {{ {kv} }} }} }} ] }}"
    ),
    P.TLS.name: "tls {{ {kv} }}",
    P.ACCOUNT.name: "accounts {{ A: {{ {kv} }} }}",
    P.EXPORT.name: "accounts {{ A: {{ exports: [ {{ {kv} }} ] }} }}",
    P.IMPORT.name: "accounts {{ A: {{ imports: [ {{ {kv} }} ] }} }}",
    P.IMPORT_ACCOUNT.name: "accounts {{ A: {{ imports: [ {{ stream: {{ {kv} }} }} ] }} }}",
    P.ACCOUNT_JETSTREAM.name: "accounts {{ A: {{ jetstream: {{ {kv} }} }} }}",
    P.JETSTREAM.name: "jetstream {{ {kv} }}",
    P.CLUSTER.name: "cluster {{ {kv} }}",
    P.CLUSTER_AUTHORIZATION.name: "cluster {{ authorization {{ {kv} }} }}",
}


def reference() -> str:
    return require_nats_server()


def check(cmd: list[str], tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "f.conf"
    conf.write_text(text)
    return subprocess.run([*cmd, "-c", str(conf), "-t"], capture_output=True, text=True, timeout=60)


def says_unknown(out: str, key: str) -> bool:
    # nats-server: `unknown field "k"`, or in permission maps `Unknown field "k" parsing
    # permissions` / `Unknown field name "k" parsing subject permissions`.
    return re.search(rf'unknown field (name )?"{re.escape(key)}"', out, re.IGNORECASE) is not None


def keys_of(*tables: str) -> list[tuple[P.Level, str]]:
    return [(lv, k) for lv in P.LEVELS for t in tables for k in sorted(getattr(lv, t))]


def ids(item: tuple[P.Level, str]) -> str:
    return f"{item[0].name}:{item[1]}"


KNOWN = keys_of("refused", "cosmetic", "checked", "supported")


@pytest.mark.parametrize(("level", "key"), KNOWN, ids=map(ids, KNOWN))
def test_nats_server_knows_every_key_natsd_classifies(
    level: P.Level, key: str, tmp_path: Path
) -> None:
    res = check([reference()], tmp_path, PLACES[level.name].format(kv=f"{key}: 1") + "\n")
    assert not says_unknown(res.stderr + res.stdout, key), res.stderr


NATSD_ONLY = keys_of("natsd_only")


@pytest.mark.parametrize(("level", "key"), NATSD_ONLY, ids=map(ids, NATSD_ONLY))
def test_natsd_only_spellings_are_unknown_to_nats_server(
    level: P.Level, key: str, tmp_path: Path
) -> None:
    res = check([reference()], tmp_path, PLACES[level.name].format(kv=f"{key}: 1") + "\n")
    assert res.returncode == 1
    assert says_unknown(res.stderr, key), res.stderr


@pytest.mark.parametrize("level", P.LEVELS, ids=lambda lv: lv.name)
def test_unknown_key_is_an_error_in_both(level: P.Level, tmp_path: Path) -> None:
    text = PLACES[level.name].format(kv="no_such_key: 1") + "\n"
    ref = check([reference()], tmp_path, text)
    impl = check([sys.executable, "-m", "natsd"], tmp_path, text)
    assert (ref.returncode, impl.returncode) == (1, 1)
    assert says_unknown(ref.stderr, "no_such_key"), ref.stderr
    assert says_unknown(impl.stderr, "no_such_key"), impl.stderr
    assert impl.stdout == ""


def test_tiers_are_not_a_config_key(tmp_path: Path) -> None:
    """Tiered account limits (R1, R3) exist only in JWT accounts; a config file cannot set
    them in nats-server, so natsd has none and refuses them the same way."""
    text = "accounts { A: { jetstream: { tiers: { R1: { max_streams: 1 } } } } }\n"
    ref = check([reference()], tmp_path, text)
    impl = check([sys.executable, "-m", "natsd"], tmp_path, text)
    assert (ref.returncode, impl.returncode) == (1, 1)
    assert says_unknown(ref.stderr, "tiers") and says_unknown(impl.stderr, "tiers")


# ---------------------------------------------------------------------------
# Default permissions: an `authorization` or account block's permissions apply to its users
# that have none of their own (natsd used to drop them: those users could publish anything).
# ---------------------------------------------------------------------------

DEFAULT_PERMISSIONS_CONFIG = """
authorization {
  default_permissions: { publish: { deny: "secret.>" } }
  users: [
    { user: dflt, password: pw }
    { user: own, password: pw, permissions: { subscribe: { allow: "mine.>" } } }
  ]
}
accounts {
  A: { default_permissions: { subscribe: { deny: "private.>" } }, users: [{user: a, password: pw}] }
}
"""

default_permissions_pair = pair_fixture(config=DEFAULT_PERMISSIONS_CONFIG)


def _connect(user: str) -> bytes:
    opts = {"verbose": False, "pedantic": False, "user": user, "pass": "pw"}
    return b"CONNECT " + json.dumps(opts, separators=(",", ":")).encode() + b"\r\n"


PING, PONG = b"PING\r\n", b"PONG\r\n"


@pytest.mark.parametrize(
    ("chunks", "until"),
    [
        scenario(
            "default-denies-publish",
            _connect("dflt") + b"PUB secret.x 0\r\n\r\n" + PING,
            until=PONG,
        ),
        scenario(
            "default-allows-the-rest",
            _connect("dflt") + b"SUB p 1\r\nPUB p 0\r\n\r\n" + PING,
            until=PONG,
        ),
        scenario(
            "own-permissions-win",
            _connect("own") + b"PUB secret.x 0\r\n\r\nSUB x 1\r\n" + PING,
            until=PONG,
        ),
        scenario(
            "account-default", _connect("a") + b"SUB private.x 1\r\nSUB ok 2\r\n" + PING, until=PONG
        ),
    ],
)
def test_default_permissions(
    default_permissions_pair: ServerPair, chunks: list[Any], until: bytes | None
) -> None:
    check_raw(default_permissions_pair, chunks, until=until)
