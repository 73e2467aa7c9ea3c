"""Authentication and authorization scenarios, raw protocol, compared between
nats-server and natsd."""

from __future__ import annotations

from typing import Any

import pytest

from .harness import ServerPair, check_raw, scenario

pytestmark = pytest.mark.differential

PING = b"PING\r\n"
PONG = b"PONG\r\n"

check = check_raw
P = scenario


def connect(**fields: Any) -> bytes:
    import json

    opts = {"verbose": False, "pedantic": False, **fields}
    return b"CONNECT " + json.dumps(opts, separators=(",", ":")).encode() + b"\r\n"


# ---------------------------------------------------------------------------
# --user a --pass b
# ---------------------------------------------------------------------------

USER_PASS_SCENARIOS = [
    P("info-auth-required"),
    P("right-credentials", connect(user="a", **{"pass": "b"}) + PING, until=PONG),
    P(
        "right-credentials-verbose",
        connect(user="a", verbose=True, **{"pass": "b"}) + PING,
        until=PONG,
    ),
    P(
        "right-credentials-pubsub",
        connect(user="a", **{"pass": "b"}) + b"SUB foo 1\r\nPUB foo 2\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P("wrong-password", connect(user="a", **{"pass": "x"}) + PING),
    P("wrong-user", connect(user="x", **{"pass": "b"}) + PING),
    P("missing-credentials", connect() + PING),
    P("user-without-password", connect(user="a") + PING),
    P("token-instead-of-user", connect(auth_token="b") + PING),
    P("empty-connect", b"CONNECT {}\r\n" + PING),
    P("ping-before-connect", PING),
    P("sub-before-connect", b"SUB foo 1\r\n" + PING),
    P("pub-before-connect", b"PUB foo 2\r\nhi\r\n" + PING),
    P("unknown-before-connect", b"FOO\r\n"),
    P(
        "lowercase-connect-right",
        b'connect {"verbose":false,"user":"a","pass":"b"}\r\n' + PING,
        until=PONG,
    ),
    P("invalid-json-connect", b"CONNECT {nope}\r\n" + PING),
    P(
        "second-connect-wrong",
        connect(user="a", **{"pass": "b"}) + connect(user="a", **{"pass": "x"}) + PING,
    ),
]


@pytest.mark.parametrize(("chunks", "until"), USER_PASS_SCENARIOS)
def test_user_pass(user_pass_pair: ServerPair, chunks: list[Any], until: bytes | None) -> None:
    check(user_pass_pair, chunks, until=until)


# ---------------------------------------------------------------------------
# --auth s3cr3t
# ---------------------------------------------------------------------------

TOKEN_SCENARIOS = [
    P("info"),
    P("right-token", connect(auth_token="s3cr3t") + PING, until=PONG),
    P("wrong-token", connect(auth_token="nope") + PING),
    P("missing-token", connect() + PING),
    P("user-pass-instead", connect(user="s3cr3t", **{"pass": "s3cr3t"}) + PING),
    P("ping-before-connect", PING),
]


@pytest.mark.parametrize(("chunks", "until"), TOKEN_SCENARIOS)
def test_token(token_pair: ServerPair, chunks: list[Any], until: bytes | None) -> None:
    check(token_pair, chunks, until=until)


def test_auth_timeout(auth_timeout_pair: ServerPair) -> None:
    """authorization { timeout: 0.5 } and a client that never sends CONNECT."""
    check(auth_timeout_pair, [], quiet=1.5)


def test_auth_timeout_not_hit_after_connect(auth_timeout_pair: ServerPair) -> None:
    check(
        auth_timeout_pair,
        [connect(user="a", **{"pass": "b"}), 0.8, PING],
        until=PONG,
    )


# ---------------------------------------------------------------------------
# Permissions from a config file (see conftest.PERMISSIONS_CONFIG)
# ---------------------------------------------------------------------------

LIMITED = connect(user="limited", **{"pass": "pw"})
LIMITED_V = connect(user="limited", verbose=True, **{"pass": "pw"})
ALLOWONLY = connect(user="allowonly", **{"pass": "pw"})

PERMISSION_SCENARIOS = [
    P("allowed-pub-sub", LIMITED + b"SUB foo 1\r\nPUB foo 2\r\nhi\r\n" + PING, until=PONG),
    P(
        "publish-deny-wildcard",
        LIMITED + b"SUB > 1\r\nPUB secret.x 2\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P("publish-deny-literal", LIMITED + b"PUB forbidden 2\r\nhi\r\n" + PING, until=PONG),
    P(
        "publish-deny-then-allowed",
        LIMITED + b"SUB ok 1\r\nPUB secret.a 0\r\n\r\nPUB ok 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P("publish-deny-verbose", LIMITED_V + b"PUB secret.x 2\r\nhi\r\n" + PING, until=PONG),
    P(
        "publish-deny-hpub",
        connect(user="limited", headers=True, **{"pass": "pw"})
        + b"HPUB secret.x 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        + PING,
        until=PONG,
    ),
    P("subscribe-deny", LIMITED + b"SUB private.x 1\r\n" + PING, until=PONG),
    P("subscribe-deny-wildcard", LIMITED + b"SUB private.> 1\r\n" + PING, until=PONG),
    P("subscribe-deny-literal", LIMITED + b"SUB ro 1\r\n" + PING, until=PONG),
    P("subscribe-deny-verbose", LIMITED_V + b"SUB private.x 1\r\n" + PING, until=PONG),
    P(
        "subscribe-deny-then-pub-not-delivered",
        LIMITED + b"SUB private.x 1\r\nPUB private.x 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P(
        "wide-sub-filters-denied-subjects",
        LIMITED + b"SUB > 1\r\nPUB private.x 1\r\nx\r\nPUB public 1\r\ny\r\n" + PING,
        until=PONG,
    ),
    P("subscribe-deny-queue", LIMITED + b"SUB jobs.x bad 1\r\n" + PING, until=PONG),
    P(
        "subscribe-deny-queue-other-queue-ok",
        LIMITED + b"SUB jobs.x good 1\r\nPUB jobs.x 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P(
        "subscribe-deny-queue-plain-ok",
        LIMITED + b"SUB jobs.x 1\r\nPUB jobs.x 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P("allow-only-pub-denied", ALLOWONLY + b"PUB other 2\r\nhi\r\n" + PING, until=PONG),
    P(
        "allow-only-pub-allowed",
        ALLOWONLY + b"SUB ok.x 1\r\nPUB ok.x 2\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P("allow-only-sub-denied", ALLOWONLY + b"SUB other 1\r\n" + PING, until=PONG),
    P("allow-only-sub-wider-than-allowed", ALLOWONLY + b"SUB ok.* 1\r\n" + PING, until=PONG),
    P("allow-only-sub-all", ALLOWONLY + b"SUB > 1\r\n" + PING, until=PONG),
    P(
        "allow-queue-only-queue-ok",
        ALLOWONLY + b"SUB work.a workers 1\r\nPUB ok.x 0\r\n\r\n" + PING,
        until=PONG,
    ),
    P("allow-queue-only-plain-denied", ALLOWONLY + b"SUB work.a 1\r\n" + PING, until=PONG),
    P(
        "allow-queue-only-other-queue-denied",
        ALLOWONLY + b"SUB work.a other 1\r\n" + PING,
        until=PONG,
    ),
    P(
        "pub-reply-to-denied-subject",
        ALLOWONLY + b"SUB ok.x 1\r\nPUB ok.x other.reply 2\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P("many-violations-stay-open", LIMITED + b"PUB secret.x 0\r\n\r\n" * 5 + PING, until=PONG),
]


@pytest.mark.parametrize(("chunks", "until"), PERMISSION_SCENARIOS)
def test_permissions(permissions_pair: ServerPair, chunks: list[Any], until: bytes | None) -> None:
    check(permissions_pair, chunks, until=until)
