"""Authentication (user/password, bcrypt, token), permissions and account isolation."""

from __future__ import annotations

import asyncio

import bcrypt
import nats.errors
import pytest

from .conftest import wait_for


def assert_auth_violation(exc: BaseException) -> None:
    assert "Authorization Violation" in str(exc), repr(exc)


async def test_user_password(make_server, connect) -> None:
    srv = await make_server(users=[{"user": "alice", "password": "s3cret"}])
    nc = await connect(srv.client_url, user="alice", password="s3cret")
    sub = await nc.subscribe("a")
    await nc.publish("a", b"hi")
    assert (await sub.next_msg(timeout=2)).data == b"hi"
    # Credentials embedded in the URL work too.
    nc2 = await connect(f"nats://alice:s3cret@127.0.0.1:{srv.port}")
    assert nc2.is_connected


@pytest.mark.parametrize(
    "creds",
    [
        {"user": "alice", "password": "wrong"},
        {"user": "mallory", "password": "s3cret"},
        {},
        {"token": "s3cret"},
    ],
    ids=["wrong-password", "unknown-user", "no-credentials", "token-instead"],
)
async def test_bad_credentials_rejected(make_server, connect, creds) -> None:
    srv = await make_server(users=[{"user": "alice", "password": "s3cret"}])
    with pytest.raises(nats.errors.Error) as ei:
        await connect(srv.client_url, **creds)
    assert_auth_violation(ei.value)


async def test_bcrypt_password(make_server, connect) -> None:
    hashed = bcrypt.hashpw(b"hunter2", bcrypt.gensalt(4)).decode()
    srv = await make_server(users=[{"user": "bob", "password": hashed}])
    nc = await connect(srv.client_url, user="bob", password="hunter2")
    await nc.flush()
    assert nc.is_connected
    with pytest.raises(nats.errors.Error) as ei:
        await connect(srv.client_url, user="bob", password="hunter3")
    assert_auth_violation(ei.value)
    # The hash itself is not a password.
    with pytest.raises(nats.errors.Error) as ei:
        await connect(srv.client_url, user="bob", password=hashed)
    assert_auth_violation(ei.value)


async def test_token(make_server, connect) -> None:
    srv = await make_server(token="tok-123")
    nc = await connect(srv.client_url, token="tok-123")
    await nc.flush()
    assert nc.is_connected
    with pytest.raises(nats.errors.Error) as ei:
        await connect(srv.client_url, token="tok-124")
    assert_auth_violation(ei.value)
    with pytest.raises(nats.errors.Error) as ei:
        await connect(srv.client_url)
    assert_auth_violation(ei.value)


async def test_info_advertises_auth_required(make_server, raw) -> None:
    srv = await make_server(token="t")
    c = await raw(srv.port)
    assert c.info.get("auth_required") is True


async def test_raw_wrong_password_gets_err_and_close(make_server, raw) -> None:
    srv = await make_server(users=[{"user": "alice", "password": "s3cret"}])
    c = await raw(srv.port)
    await c.send('CONNECT {"verbose":false,"user":"alice","pass":"nope"}\r\nPING\r\n')
    data = await c.read_until_closed(timeout=5)
    assert data == b"-ERR 'Authorization Violation'\r\n"


async def test_commands_before_connect_need_auth(make_server, raw) -> None:
    srv = await make_server(users=[{"user": "alice", "password": "s3cret"}])
    c = await raw(srv.port)
    await c.send("SUB foo 1\r\n")
    data = await c.read_until_closed(timeout=5)
    assert data == b"-ERR 'Authorization Violation'\r\n"


PERM_USERS = [
    {"user": "admin", "password": "admin"},
    {
        "user": "limited",
        "password": "limited",
        "permissions": {
            "publish": {"allow": ["allowed.>", "_INBOX.>"], "deny": ["allowed.secret"]},
            "subscribe": {"allow": ["sub.ok.>", "_INBOX.>"], "deny": ["sub.ok.denied"]},
        },
    },
]


async def errors_matching(nc, text: str, timeout: float = 3.0) -> list[str]:
    """Wait for an async error whose text contains ``text`` (nats-py lower-cases -ERR text)."""
    low = text.lower()
    await wait_for(
        lambda: any(low in str(e).lower() for e in nc.test_errors),
        timeout=timeout,
        what=lambda: f"error {text!r}; have {nc.test_errors}",
    )
    return [str(e) for e in nc.test_errors]


async def test_publish_permission_violation(make_server, connect) -> None:
    srv = await make_server(users=PERM_USERS)
    admin = await connect(srv.client_url, user="admin", password="admin")
    lim = await connect(srv.client_url, user="limited", password="limited")
    spy = await admin.subscribe(">")
    await admin.flush()

    await lim.publish("forbidden", b"no")
    await lim.publish("allowed.secret", b"no")
    await lim.publish("allowed.public", b"yes")
    await lim.flush()

    errs = await errors_matching(lim, 'Permissions Violation for Publish to "forbidden"')
    await errors_matching(lim, 'Permissions Violation for Publish to "allowed.secret"')
    assert len(errs) == 2, errs
    # Only the allowed message reached anyone.
    msg = await spy.next_msg(timeout=2)
    assert (msg.subject, msg.data) == ("allowed.public", b"yes")
    await admin.flush()
    await asyncio.sleep(0.05)
    assert spy.pending_msgs == 0
    # The violation did not cost the connection.
    assert lim.is_connected
    await lim.publish("allowed.again", b"ok")
    await lim.flush()
    assert (await spy.next_msg(timeout=2)).subject == "allowed.again"


async def test_subscribe_permission_violation(make_server, connect) -> None:
    srv = await make_server(users=PERM_USERS)
    admin = await connect(srv.client_url, user="admin", password="admin")
    lim = await connect(srv.client_url, user="limited", password="limited")
    bad = await lim.subscribe("not.allowed")
    await lim.flush()
    await errors_matching(lim, 'Permissions Violation for Subscription to "not.allowed"')
    bad2 = await lim.subscribe("sub.ok.denied")
    await lim.flush()
    await errors_matching(lim, 'Permissions Violation for Subscription to "sub.ok.denied"')
    good = await lim.subscribe("sub.ok.fine")
    await lim.flush()
    assert lim.is_connected

    await admin.publish("not.allowed", b"1")
    await admin.publish("sub.ok.denied", b"2")
    await admin.publish("sub.ok.fine", b"3")
    await admin.flush()
    assert (await good.next_msg(timeout=2)).data == b"3"
    await asyncio.sleep(0.05)
    assert bad.pending_msgs == 0
    assert bad2.pending_msgs == 0


async def test_permission_violations_raw_exact_text(make_server, raw) -> None:
    """The exact -ERR lines, and the connection survives both."""
    srv = await make_server(users=PERM_USERS)
    c = await raw(srv.port)
    await c.connect(user="limited", **{"pass": "limited"})
    await c.send("PUB forbidden 2\r\nno\r\nPING\r\n")
    assert await c.expect(b"PONG\r\n") == (
        b"-ERR 'Permissions Violation for Publish to \"forbidden\"'\r\nPONG\r\n"
    )
    await c.send("SUB not.allowed 1\r\nPING\r\n")
    assert await c.expect(b"PONG\r\n") == (
        b"-ERR 'Permissions Violation for Subscription to \"not.allowed\"'\r\nPONG\r\n"
    )
    await c.send("SUB sub.ok.x 2\r\nPUB allowed.y 1\r\nz\r\nPING\r\n")
    assert await c.expect(b"PONG\r\n") == b"PONG\r\n"


async def test_wildcard_subscription_filters_denied_subjects(make_server, connect) -> None:
    """A permitted wildcard subscription never receives messages on a denied subject."""
    srv = await make_server(users=PERM_USERS)
    admin = await connect(srv.client_url, user="admin", password="admin")
    lim = await connect(srv.client_url, user="limited", password="limited")
    sub = await lim.subscribe("sub.ok.>")
    await lim.flush()
    for s in ("sub.ok.a", "sub.ok.denied", "sub.ok.b"):
        await admin.publish(s, s.encode())
    await admin.flush()
    got = [await sub.next_msg(timeout=2) for _ in range(2)]
    assert [m.subject for m in got] == ["sub.ok.a", "sub.ok.b"]
    await asyncio.sleep(0.05)
    assert sub.pending_msgs == 0
    assert not lim.test_errors


async def test_request_reply_within_permissions(make_server, connect) -> None:
    srv = await make_server(users=PERM_USERS)
    admin = await connect(srv.client_url, user="admin", password="admin")
    lim = await connect(srv.client_url, user="limited", password="limited")

    async def handler(msg) -> None:
        await msg.respond(b"pong")

    await admin.subscribe("allowed.svc", cb=handler)
    await admin.flush()
    resp = await lim.request("allowed.svc", b"ping", timeout=2)
    assert resp.data == b"pong"


ACCOUNT_USERS = [
    {"user": "a1", "password": "p", "account": "A"},
    {"user": "a2", "password": "p", "account": "A"},
    {"user": "b1", "password": "p", "account": "B"},
]


async def test_accounts_are_isolated(make_server, connect) -> None:
    srv = await make_server(users=ACCOUNT_USERS, accounts=["A", "B"])
    a1 = await connect(srv.client_url, user="a1", password="p")
    a2 = await connect(srv.client_url, user="a2", password="p")
    b1 = await connect(srv.client_url, user="b1", password="p")
    sub_a2 = await a2.subscribe("shared.>")
    sub_b1 = await b1.subscribe("shared.>")
    await a2.flush()
    await b1.flush()

    await a1.publish("shared.x", b"from-A")
    await a1.flush()
    await b1.publish("shared.y", b"from-B")
    await b1.flush()

    m = await sub_a2.next_msg(timeout=2)
    assert (m.subject, m.data) == ("shared.x", b"from-A")
    m = await sub_b1.next_msg(timeout=2)
    assert (m.subject, m.data) == ("shared.y", b"from-B")
    await asyncio.sleep(0.1)
    assert sub_a2.pending_msgs == 0
    assert sub_b1.pending_msgs == 0
    # Requests do not cross accounts either.
    with pytest.raises(nats.errors.NoRespondersError):
        await b1.request("only.in.a", b"?", timeout=2)


async def test_no_auth_user_lands_in_its_account(make_server, connect) -> None:
    srv = await make_server(users=ACCOUNT_USERS, accounts=["A", "B"], no_auth_user="a1")
    anon = await connect(srv.client_url)
    a2 = await connect(srv.client_url, user="a2", password="p")
    b1 = await connect(srv.client_url, user="b1", password="p")
    sub_a = await a2.subscribe("greet")
    sub_b = await b1.subscribe("greet")
    sub_anon = await anon.subscribe("reply.here")
    await a2.flush()
    await b1.flush()
    await anon.flush()

    await anon.publish("greet", b"anonymous")
    await anon.flush()
    assert (await sub_a.next_msg(timeout=2)).data == b"anonymous"
    await a2.publish("reply.here", b"back")
    await a2.flush()
    assert (await sub_anon.next_msg(timeout=2)).data == b"back"
    await asyncio.sleep(0.05)
    assert sub_b.pending_msgs == 0
    # Wrong explicit credentials are still refused; no_auth_user is not a fallback for them.
    with pytest.raises(nats.errors.Error) as ei:
        await connect(srv.client_url, user="a2", password="bad")
    assert_auth_violation(ei.value)


async def test_connz_shows_account_and_user(make_server, connect) -> None:
    from .conftest import get_json

    srv = await make_server(users=ACCOUNT_USERS, accounts=["A", "B"])
    await connect(srv.client_url, user="b1", password="p", name="the-b1")
    cz = await get_json(srv.monitor_url + "/connz?auth=1")
    conns = [c for c in cz["connections"] if c.get("name") == "the-b1"]
    assert len(conns) == 1
    assert conns[0]["account"] == "B"
    assert conns[0]["authorized_user"] == "b1"
