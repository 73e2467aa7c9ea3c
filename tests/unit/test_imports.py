"""router/imports.py on virtual time: shadow subscriptions follow the importer's, response
mappings expire after the export's threshold and stay bounded, imports that loop are
dropped, and everything goes when the links stop."""

from __future__ import annotations

import random

import pytest

from natsd.core.scheduler import VirtualClock, VirtualScheduler
from natsd.router import imports as I
from natsd.router import subscription as subscription_mod
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import InternalCallback, Sink, Subscription

# Under ``make test-compiled`` the router is mypyc-compiled and ``Sink`` cannot be subclassed
# by an interpreted class: a plain ``Sink`` with a flush pending (never kicked) stands in.
COMPILED = not str(getattr(subscription_mod, "__file__", "")).endswith(".py")

if not COMPILED:

    class Conn(Sink):
        def __init__(self, cid: int = 1) -> None:
            super().__init__(cid)
            self.exhausted: list[Subscription] = []

        def kick(self) -> None:
            self.flush_pending = True

        def sub_exhausted(self, sub: Subscription) -> None:
            self.exhausted.append(sub)


def _conn() -> Sink:
    c: Sink = Conn() if not COMPILED else Sink(1)
    c.headers = True
    c.flush_pending = True
    return c


Got = list[tuple[bytes, bytes | None, bytes | None, bytes]]


def _collector(got: Got) -> InternalCallback:
    def cb(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        got.append((subject, reply, hdr, data))

    return cb


def _setup() -> tuple[I.AccountLinks, VirtualScheduler, Account, Account]:
    clock = VirtualClock()
    sched = VirtualScheduler(clock)
    links = I.AccountLinks(sched, clock, random.Random(7))
    return links, sched, Account("A"), Account("B")


def test_shadows_follow_the_importers_subscriptions() -> None:
    links, _, a, b = _setup()
    links.add_stream_import(b, a, "news.>", "a.news.>")
    got: Got = []
    early = Subscription(b"a.news.>", None, b"1", callback=_collector(got))
    b.sublist.insert(early)
    links.start()
    late = Subscription(b"a.*.sport", None, b"2", callback=_collector(got))
    b.sublist.insert(late)
    other = Subscription(b"other", None, b"3", callback=_collector(got))
    b.sublist.insert(other)
    assert sorted(s.subject for s in a.sublist) == [b"news.>", b"news.sport"]
    publish(a.sublist, b"news.sport", b"r", None, b"x")
    assert sorted(got) == [(b"a.news.sport", b"r", None, b"x")] * 2
    b.sublist.remove(late)
    assert [s.subject for s in a.sublist] == [b"news.>"]
    assert links.shadow_count() == 1
    links.stop()
    assert len(a.sublist) == 0 and b.sublist.on_sub is None


def test_a_shadow_delivers_to_its_subscription_alone() -> None:
    links, _, a, b = _setup()
    links.add_stream_import(b, a, "m.*.cpu", "cpu.*")
    links.start()
    c = _conn()
    s1 = Subscription(b"cpu.*", None, b"1", client=c)
    s2 = Subscription(b"cpu.h2", None, b"2", client=c)
    if not COMPILED:
        s1.max = 1  # (a compiled Sink cannot say it was exhausted)
    b.sublist.insert(s1)
    b.sublist.insert(s2)
    assert sorted(s.subject for s in a.sublist) == [b"m.*.cpu", b"m.h2.cpu"]
    publish(a.sublist, b"m.h2.cpu", None, None, b"v")
    assert sorted(c.out) == [b"MSG cpu.h2 1 1\r\nv\r\n", b"MSG cpu.h2 2 1\r\nv\r\n"]
    if not COMPILED:
        assert c.exhausted == [s1]  # type: ignore[attr-defined]  # (UNSUB max counts it)


def _service(
    response_type: str = "Singleton", threshold: float = 0.0
) -> tuple[I.AccountLinks, VirtualScheduler, Account, Account, Got, list[bytes]]:
    links, sched, a, b = _setup()
    links.add_service_import(b, a, "req", "svc", response_type, threshold)
    links.start()
    got: Got = []
    b.sublist.insert(Subscription(b"inbox.>", None, b"i", callback=_collector(got)))
    replies: list[bytes] = []

    def responder(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        assert reply is not None
        replies.append(reply)

    a.sublist.insert(Subscription(b"svc", None, b"r", callback=responder))
    return links, sched, a, b, got, replies


def test_a_singleton_response_is_delivered_once() -> None:
    links, _, a, b, got, replies = _service()
    publish(b.sublist, b"req", b"inbox.1", None, b"q")
    assert len(replies) == 1 and replies[0].startswith(b"_R_.")
    assert links.pending_responses(a) == 1
    publish(a.sublist, replies[0], None, None, b"one")
    publish(a.sublist, replies[0], None, None, b"two")
    assert [(s, d) for s, _, _, d in got] == [(b"inbox.1", b"one")]
    assert links.pending_responses(a) == 0


def test_a_stream_lives_while_responses_come_and_ends_with_an_empty_one() -> None:
    links, sched, a, b, got, replies = _service("Stream", threshold=2.0)
    publish(b.sublist, b"req", b"inbox.1", None, b"q")
    for i in range(3):
        sched.advance(1.5)  # each within the threshold of the one before
        publish(a.sublist, replies[0], None, None, b"%d" % i)
    publish(a.sublist, replies[0], None, None, b"")
    publish(a.sublist, replies[0], None, None, b"late")
    assert [d for _, _, _, d in got] == [b"0", b"1", b"2", b""]
    assert links.pending_responses(a) == 0


def test_a_mapping_without_responses_expires_after_the_threshold() -> None:
    links, sched, a, b, got, replies = _service("Singleton", threshold=1.0)
    publish(b.sublist, b"req", b"inbox.1", None, b"q")
    sched.advance(0.9)
    assert links.pending_responses(a) == 1
    sched.advance(1.2)
    assert links.pending_responses(a) == 0
    publish(a.sublist, replies[0], None, None, b"too late")
    assert got == []


def test_mappings_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(I, "MAX_PENDING_RESPONSES", 5)
    links, _, a, b, got, replies = _service()
    for i in range(8):
        publish(b.sublist, b"req", b"inbox.%d" % i, None, b"q")
    assert links.pending_responses(a) == 5
    publish(a.sublist, replies[0], None, None, b"oldest")  # evicted
    publish(a.sublist, replies[-1], None, None, b"newest")
    assert [(s, d) for s, _, _, d in got] == [(b"inbox.7", b"newest")]


def test_a_request_carries_the_requesting_account() -> None:
    links, _, a, b = _setup()
    links.add_service_import(b, a, "req", "svc")
    links.start()
    seen: Got = []
    a.sublist.insert(Subscription(b"svc", None, b"r", callback=_collector(seen)))
    forged = b'NATS/1.0\r\nNats-Request-Info: {"acc":"A"}\r\nX: 1\r\n\r\n'
    publish(b.sublist, b"req", None, forged, b"q")
    assert seen[0][2] == b'NATS/1.0\r\nNats-Request-Info: {"acc":"B"}\r\nX: 1\r\n\r\n'


def test_imports_that_loop_are_dropped() -> None:
    """Two accounts whose service imports lead back to each other (the config reader
    refuses this; the runtime must not loop on it either)."""
    links, _, a, b = _setup()
    links.add_service_import(b, a, "q", "q")
    links.add_service_import(a, b, "q", "q")
    links.start()
    publish(b.sublist, b"q", None, None, b"x")  # returns: no recursion error
    assert links.chain == []


def test_a_request_nobody_takes_gets_no_responders() -> None:
    links, _, a, b = _setup()
    links.add_service_import(b, a, "req", "svc")
    links.start()
    c = _conn()
    b.sublist.insert(Subscription(b"inbox.1", None, b"9", client=c))
    publish(b.sublist, b"req", b"inbox.1", None, b"q")
    assert c.out == [b"HMSG inbox.1 9 35 35\r\nNATS/1.0 503\r\nNats-Subject: req\r\n\r\n\r\n"]
    assert links.pending_responses(a) == 0


def test_a_service_request_is_not_exported_again_as_a_stream() -> None:
    links, _, a, b = _setup()
    links.add_service_import(b, a, "svc.x", "svc.x")
    links.add_stream_import(b, a, "svc.>", "")
    links.start()
    got: Got = []
    a.sublist.insert(Subscription(b"svc.x", None, b"r", callback=_collector(got)))
    mine: Got = []
    b.sublist.insert(Subscription(b"svc.>", None, b"s", callback=_collector(mine)))
    publish(b.sublist, b"svc.x", None, None, b"req")
    assert [d for _, _, _, d in got] == [b"req"]
    assert [d for _, _, _, d in mine] == [b"req"]  # its own publish, not the import's copy


@pytest.mark.parametrize(
    ("frm", "to", "sub", "shadow", "published", "seen"),
    [
        ("news.>", "a.news.>", b"a.news.x", b"news.x", b"news.x", b"a.news.x"),
        ("news.>", "a.news.>", b">", b"news.>", b"news.y.z", b"a.news.y.z"),
        ("m.*.cpu", "cpu.*", b"cpu.h1", b"m.h1.cpu", b"m.h1.cpu", b"cpu.h1"),
        ("m.*.*", "x.$2.$1", b"x.b.a", b"m.a.b", b"m.a.b", b"x.b.a"),
        ("lit", "other", b"other", b"lit", b"lit", b"other"),
        ("w.*", "w.*", b"w.q", b"w.q", b"w.q", b"w.q"),
    ],
)
def test_subjects_both_ways(
    frm: str, to: str, sub: bytes, shadow: bytes, published: bytes, seen: bytes
) -> None:
    link = I.StreamLink(Account("B"), Account("A"), frm, to)
    assert link.shadow_subject(sub) == shadow
    assert link.local_subject(published) == seen
