"""Unit tests for natsd.security.permissions and natsd.security.auth."""

from __future__ import annotations

import bcrypt
import pytest

from natsd.security import auth as auth_mod
from natsd.security import permissions
from natsd.security.auth import Authenticator, AuthResult, User, verify_password
from natsd.security.permissions import (
    Permissions,
    PermissionSet,
    ReplyTracker,
    ResponsePermission,
    parse_permissions,
)

# ---------------------------------------------------------------- publish (literal subjects)


def test_no_lists_allows_everything() -> None:
    ps = PermissionSet(None, None)
    assert ps.allowed(b"anything.at.all")
    assert ps.sub_allowed(b">", None)
    assert ps.sub_allowed(b"foo", b"q")
    assert not ps.denied(b"foo")


def test_publish_allow_list() -> None:
    ps = PermissionSet(["foo", "bar.*", "baz.>"], None)
    assert ps.allowed(b"foo")
    assert ps.allowed(b"bar.x")
    assert ps.allowed(b"baz.a.b.c")
    assert not ps.allowed(b"foo.x")
    assert not ps.allowed(b"bar")
    assert not ps.allowed(b"bar.x.y")
    assert not ps.allowed(b"baz")
    assert not ps.allowed(b"other")


def test_empty_allow_list_denies_everything() -> None:
    ps = PermissionSet([], None)
    assert not ps.allowed(b"foo")
    assert not ps.sub_allowed(b"foo", None)


def test_publish_deny_list() -> None:
    ps = PermissionSet(None, ["secret.>", "admin"])
    assert ps.allowed(b"public")
    assert ps.allowed(b"secret")
    assert not ps.allowed(b"secret.x")
    assert not ps.allowed(b"admin")
    assert ps.allowed(b"admin.x")


def test_deny_overrides_allow() -> None:
    ps = PermissionSet([">"], ["foo.bar"])
    assert ps.allowed(b"foo.baz")
    assert not ps.allowed(b"foo.bar")
    ps = PermissionSet(["foo.*"], ["foo.*"])
    assert not ps.allowed(b"foo.x")


def test_allowed_result_cache_is_consistent() -> None:
    ps = PermissionSet(["a.*"], ["a.b"])
    for _ in range(3):
        assert ps.allowed(b"a.c")
        assert not ps.allowed(b"a.b")
    # Many unique subjects do not break later answers.
    for i in range(3000):
        assert ps.allowed(b"a.%d" % i)
    assert not ps.allowed(b"a.b")
    assert not ps.allowed(b"zzz")


def test_literal_tokens_with_wildcard_chars() -> None:
    ps = PermissionSet(["foo*"], None)
    assert ps.allowed(b"foo*")
    assert not ps.allowed(b"foox")


# ---------------------------------------------------------------- subscribe


def test_sub_allow_wildcards() -> None:
    ps = PermissionSet(["foo.*", "bar.>"], None)
    assert ps.sub_allowed(b"foo.x", None)
    assert ps.sub_allowed(b"foo.*", None)
    assert ps.sub_allowed(b"bar.>", None)
    assert ps.sub_allowed(b"bar.a.*", None)
    assert ps.sub_allowed(b"bar.*.c", None)
    assert not ps.sub_allowed(b"foo.>", None)  # broader than the allow entry
    assert not ps.sub_allowed(b"foo", None)
    assert not ps.sub_allowed(b">", None)
    assert not ps.sub_allowed(b"*.x", None)
    assert not ps.sub_allowed(b"bar", None)


def test_sub_deny_rejects_covered_subscription() -> None:
    ps = PermissionSet(None, ["foo.bar", "secret.>"])
    assert not ps.sub_allowed(b"foo.bar", None)
    assert not ps.sub_allowed(b"secret.x", None)
    assert not ps.sub_allowed(b"secret.>", None)
    assert not ps.sub_allowed(b"foo.bar", b"q")
    # A wildcard that merely overlaps a deny entry is allowed and filtered at delivery.
    assert ps.sub_allowed(b"foo.*", None)
    assert ps.sub_allowed(b">", None)
    assert ps.denied(b"foo.bar")
    assert ps.denied(b"secret.a.b")
    assert not ps.denied(b"foo.baz")


def test_sub_deny_overrides_allow() -> None:
    ps = PermissionSet(["foo.>"], ["foo.bar"])
    assert ps.sub_allowed(b"foo.baz", None)
    assert not ps.sub_allowed(b"foo.bar", None)
    assert ps.sub_allowed(b"foo.*", None)
    assert ps.denied(b"foo.bar")


def test_queue_restricted_allow() -> None:
    ps = PermissionSet(["foo workers", "bar"], None)
    assert ps.sub_allowed(b"foo", b"workers")
    assert not ps.sub_allowed(b"foo", None)  # plain subscriptions need a plain entry
    assert not ps.sub_allowed(b"foo", b"other")
    # An entry without a queue permits plain and queue subscriptions.
    assert ps.sub_allowed(b"bar", None)
    assert ps.sub_allowed(b"bar", b"any")


def test_queue_restricted_allow_with_wildcard_queue() -> None:
    ps = PermissionSet(["foo v1.*"], None)
    assert ps.sub_allowed(b"foo", b"v1.a")
    assert not ps.sub_allowed(b"foo", b"v2.a")
    assert not ps.sub_allowed(b"foo", None)


def test_queue_restricted_deny() -> None:
    ps = PermissionSet(None, ["foo workers"])
    assert not ps.sub_allowed(b"foo", b"workers")
    assert ps.sub_allowed(b"foo", b"other")
    assert ps.sub_allowed(b"foo", None)


def test_queue_restricted_deny_does_not_filter_plain_deliveries() -> None:
    ps = PermissionSet(None, ["foo workers"])
    assert ps.sub_allowed(b"foo", None)
    assert not ps.denied(b"foo")


# ---------------------------------------------------------------- parse_permissions


def test_parse_permissions_forms() -> None:
    assert parse_permissions(None) is None
    assert parse_permissions({}) is None
    p = parse_permissions(
        {"publish": "foo", "subscribe": {"allow": ["bar.>"], "deny": "bar.secret"}}
    )
    assert isinstance(p, Permissions)
    assert p.publish is not None and p.subscribe is not None
    assert p.publish.allow == ["foo"] and p.publish.deny is None
    assert p.subscribe.allow == ["bar.>"] and p.subscribe.deny == ["bar.secret"]
    assert p.publish.allowed(b"foo") and not p.publish.allowed(b"bar")
    assert p.subscribe.sub_allowed(b"bar.x", None)
    assert not p.subscribe.sub_allowed(b"bar.secret", None)


def test_parse_permissions_list_is_allow_and_aliases() -> None:
    p = parse_permissions({"PUB": ["a", "b.*"], "Sub": {"deny": ["x"]}})
    assert p is not None and p.publish is not None and p.subscribe is not None
    assert p.publish.allow == ["a", "b.*"]
    assert p.subscribe.allow is None and p.subscribe.deny == ["x"]


def test_parse_permissions_only_one_direction() -> None:
    p = parse_permissions({"publish": {"deny": ">"}})
    assert p is not None and p.subscribe is None
    assert p.publish is not None and not p.publish.allowed(b"anything")


def test_parse_permissions_allow_responses() -> None:
    # nats-server's defaults: one response within two minutes; the blanket publish allow
    # is turned off (only reply subjects, or what an allow list names, may be published).
    p = parse_permissions({"allow_responses": True})
    assert p is not None and p.allow_responses == ResponsePermission(1, 120.0)
    assert p.publish is not None and p.publish.allow == [] and not p.publish.allowed(b"x")
    p = parse_permissions({"allow_responses": {"max": 5, "expires": "1m"}})
    assert p is not None and p.allow_responses == ResponsePermission(5, 60.0)
    p = parse_permissions({"publish": {"deny": "a"}, "allow_responses": {"max_msgs": -1}})
    assert p is not None and p.allow_responses == ResponsePermission(-1, 120.0)
    assert p.publish is not None and p.publish.allow == [] and p.publish.deny == ["a"]
    p = parse_permissions({"publish": "ok.>", "allow_responses": {"max": 0, "ttl": "0s"}})
    assert p is not None and p.allow_responses == ResponsePermission(1, 120.0)
    assert p.publish is not None and p.publish.allowed(b"ok.1")
    p = parse_permissions({"publish": "x", "allow_responses": False})
    assert p is not None and p.allow_responses is None


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("yes", "expected a boolean or a map"),
        ({"expires": 5}, "not a duration string"),
        ({"expires": "soon"}, "error parsing expires"),
        ({"maxx": 1}, 'Unknown field "maxx" parsing permissions'),
    ],
)
def test_parse_permissions_bad_allow_responses(spec: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_permissions({"allow_responses": spec})


def _tracker(max_msgs: int, expires: float, publish: list[str] | None = None) -> ReplyTracker:
    p = parse_permissions(
        {"publish": publish or [], "allow_responses": {"max": max_msgs, "expires": f"{expires}s"}}
    )
    assert p is not None
    t = p.reply_tracker()
    assert t is not None
    return t


def test_reply_tracker_counts_responses_per_reply() -> None:
    t = _tracker(2, 60)
    assert not t.allowed(b"_INBOX.1")  # never delivered
    t.delivered(b"_INBOX.1")
    assert t.allowed(b"_INBOX.1") and t.allowed(b"_INBOX.1")
    assert not t.allowed(b"_INBOX.1")  # the third response
    assert b"_INBOX.1" not in t.replies  # used up entries leave at once


def test_reply_tracker_skips_replies_publish_allows() -> None:
    t = _tracker(1, 60, publish=["_INBOX.>"])
    t.delivered(b"_INBOX.1")
    assert t.replies == {}


def test_reply_tracker_redelivery_counts_as_use() -> None:
    # nats-server checks the reply with the full check on delivery: a tracked reply that
    # is delivered again uses one response instead of starting afresh.
    t = _tracker(1, 60)
    t.delivered(b"r")
    t.delivered(b"r")
    assert t.replies[b"r"][1] == 1
    assert not t.allowed(b"r")


def test_reply_tracker_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(permissions.time, "monotonic", lambda: now[0])
    t = _tracker(-1, 5)
    t.delivered(b"r")
    now[0] += 4.0
    assert t.allowed(b"r") and t.allowed(b"r")  # negative max: any number of responses
    now[0] += 2.0
    assert not t.allowed(b"r")
    assert b"r" not in t.replies


def test_reply_tracker_prunes_and_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(permissions.time, "monotonic", lambda: now[0])
    t = _tracker(1, 5)
    for i in range(100):
        t.delivered(b"a.%d" % i)
    now[0] += 6.0  # all expired; the next delivery past the prune interval drops them
    t.delivered(b"b")
    assert list(t.replies) == [b"b"]
    # Unlimited max and expiry: the oldest entries go once REPLY_TRACK_MAX is passed.
    monkeypatch.setattr(permissions, "REPLY_TRACK_MAX", 50)
    u = _tracker(-1, -1)
    for i in range(120):
        u.delivered(b"c.%d" % i)
    assert len(u.replies) == 50 and b"c.119" in u.replies and b"c.0" not in u.replies


def test_parse_permissions_rejects_bad_spec() -> None:
    with pytest.raises(ValueError):
        parse_permissions({"publish": 42})


# ---------------------------------------------------------------- passwords


def test_plain_password() -> None:
    assert verify_password("s3cret", "s3cret")
    assert not verify_password("s3cret", "S3cret")
    assert not verify_password("s3cret", "")
    assert not verify_password("", "x")


def _hash(pw: str, prefix: str | None = None) -> str:
    h = bcrypt.hashpw(pw.encode(), bcrypt.gensalt(4)).decode()
    if prefix:
        h = prefix + h[4:]
    return h


@pytest.mark.parametrize("prefix", [None, "$2a$", "$2y$"])
def test_bcrypt_password(prefix: str | None) -> None:
    h = _hash("pässword", prefix)
    assert verify_password(h, "pässword")
    assert not verify_password(h, "password")
    # Cached answers stay correct.
    assert verify_password(h, "pässword")
    assert not verify_password(h, "password")


def test_bcrypt_cache_hit_skips_checkpw(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _hash("pw")
    assert verify_password(h, "pw")
    monkeypatch.setattr(auth_mod.bcrypt, "checkpw", lambda *a: pytest.fail("not cached"))
    assert verify_password(h, "pw")


def test_malformed_bcrypt_hash_is_rejected_not_raised() -> None:
    assert not verify_password("$2a$04$tooshort", "anything")


def test_plain_password_looking_nothing_like_bcrypt_compared_literally() -> None:
    assert verify_password("$notbcrypt$", "$notbcrypt$")


# ---------------------------------------------------------------- Authenticator


def test_no_auth_configured() -> None:
    a = Authenticator()
    assert not a.required
    assert a.check({}) is None


def test_users_plain_and_bcrypt() -> None:
    perms = parse_permissions({"publish": "foo"})
    a = Authenticator(
        [User("alice", "pw1", "$G"), User("bob", _hash("pw2"), "ACC", perms)]
    )
    assert a.required
    assert a.check({"user": "alice", "pass": "pw1"}) == AuthResult("alice", "$G", None)
    res = a.check({"user": "bob", "pass": "pw2"})
    assert res is not None and res.username == "bob" and res.account == "ACC"
    assert res.permissions is perms
    assert a.check({"user": "alice", "pass": "nope"}) is None
    assert a.check({"user": "bob", "pass": "pw1"}) is None
    assert a.check({"user": "carol", "pass": "pw1"}) is None
    assert a.check({"user": "alice"}) is None
    assert a.check({"user": "alice", "pass": 123}) is None
    assert a.check({}) is None


def test_token() -> None:
    a = Authenticator(token="t0k")
    assert a.required
    assert a.check({"auth_token": "t0k"}) == AuthResult("", "$G", None)
    assert a.check({"auth_token": "bad"}) is None
    assert a.check({}) is None
    assert a.check({"user": "x", "pass": "t0k"}) is None


def test_bcrypt_token_and_token_account() -> None:
    a = Authenticator(token=_hash("t0k"), token_account="TOK")
    assert a.check({"auth_token": "t0k"}) == AuthResult("", "TOK", None)
    assert a.check({"auth_token": "t0x"}) is None


def test_no_auth_user() -> None:
    perms = parse_permissions({"subscribe": "public.>"})
    a = Authenticator(
        [User("anon", "x", "PUBLIC", perms), User("admin", "pw", "$G")], no_auth_user="anon"
    )
    assert a.required
    res = a.check({})
    assert res is not None and res.username == "anon" and res.account == "PUBLIC"
    assert res.permissions is perms
    # Explicit credentials still win and are still checked.
    assert a.check({"user": "admin", "pass": "pw"}) == AuthResult("admin", "$G", None)
    assert a.check({"user": "admin", "pass": "bad"}) is None
    assert a.check({"user": "ghost", "pass": "x"}) is None


def test_no_auth_user_must_exist() -> None:
    with pytest.raises(ValueError, match="no_auth_user"):
        Authenticator([User("a", "b", "$G")], no_auth_user="missing")
