"""Unit tests for natsd.router.deliver (fan-out of one message into Sink.out lists).

``make test-compiled`` runs this file against the mypyc-compiled router, where ``Sink`` is a
native class that interpreted classes cannot subclass. There the sinks are plain ``Sink``
instances with ``flush_pending`` set (so ``kick`` is never due), and a due ``sub_exhausted``
shows up as the base class's ``NotImplementedError``.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator

import pytest

from natsd.protocol.parser import OP_HPUB, OP_PUB, Parser
from natsd.router import subscription as subscription_mod
from natsd.router.deliver import deliver, no_responders_frame
from natsd.router.subscription import Sink, Subscription

COMPILED = not str(getattr(subscription_mod, "__file__", "")).endswith(".py")
needs_interpreted_sink = pytest.mark.skipif(
    COMPILED, reason="counting kick() calls needs a Sink subclass; Sink is mypyc-compiled"
)

if not COMPILED:

    class FakeSink(Sink):
        """A subscriber connection as the router sees it; records kicks and exhausted subs."""

        def __init__(self, cid: int) -> None:
            self.cid = cid
            self.out: list[bytes] = []
            self.out_size = 0
            self.flush_pending = False
            self.headers = True
            self.echo = True
            self.sub_deny: Callable[[bytes], bool] | None = None
            self.track_reply: Callable[[bytes], None] | None = None
            self.msgs_out = 0
            self.bytes_out = 0
            self.kicks = 0
            self.exhausted: list[Subscription] = []

        def kick(self) -> None:
            self.kicks += 1
            self.flush_pending = True

        def sub_exhausted(self, sub: Subscription) -> None:
            self.exhausted.append(sub)


def make_sink(
    cid: int = 1,
    *,
    headers: bool = True,
    echo: bool = True,
    sub_deny: Callable[[bytes], bool] | None = None,
    flush_pending: bool = False,
) -> Sink:
    s: Sink = FakeSink(cid) if not COMPILED else Sink(cid)
    s.headers = headers
    s.echo = echo
    s.sub_deny = sub_deny
    s.flush_pending = flush_pending or COMPILED
    return s


@contextlib.contextmanager
def exhausts(sink: Sink, sub: Subscription) -> Iterator[None]:
    """Assert that the block makes the router call ``sink.sub_exhausted(sub)``."""
    if COMPILED:
        with pytest.raises(NotImplementedError):
            yield
    else:
        before = len(sink.exhausted)  # type: ignore[attr-defined]
        yield
        assert sink.exhausted[before:] == [sub]  # type: ignore[attr-defined]


def exhausted(sink: Sink) -> list[Subscription]:
    return [] if COMPILED else sink.exhausted  # type: ignore[attr-defined]


def publish(
    psubs: list[Subscription],
    qsubs: list[list[Subscription]],
    frame: bytes,
    publisher: Sink | None = None,
) -> int:
    """Parse one PUB/HPUB frame and fan it out exactly as the client connection does."""
    (ev,) = Parser().feed(frame)
    if ev[0] == OP_PUB:
        _, subject, reply, size, tail = ev
        hlen = 0
    else:
        assert ev[0] == OP_HPUB
        _, subject, reply, hlen, size, tail = ev
    return deliver(psubs, qsubs, subject, reply, tail, size, hlen, publisher)


HDR = b"NATS/1.0\r\nA: b\r\n\r\n"  # 18 bytes
HPUB = b"HPUB foo 18 23\r\n" + HDR + b"hello\r\n"
HPUB_REPLY = b"HPUB foo _INBOX.1 18 23\r\n" + HDR + b"hello\r\n"


def test_msg_without_reply() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    assert publish([sub], [], b"PUB foo 5\r\nhello\r\n") == 1
    assert s.out == [b"MSG foo 1 5\r\nhello\r\n"]
    assert s.out_size == len(s.out[0])
    assert s.msgs_out == 1
    assert s.bytes_out == 5
    if not COMPILED:
        assert s.kicks == 1  # type: ignore[attr-defined]


def test_msg_with_reply() -> None:
    s = make_sink()
    sub = Subscription(b"foo.*", None, b"22", client=s)
    publish([sub], [], b"PUB foo.bar _INBOX.abc 2\r\nhi\r\n")
    assert s.out == [b"MSG foo.bar 22 _INBOX.abc 2\r\nhi\r\n"]


def test_msg_frames_from_nonstandard_pub_lines() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    publish([sub], [], b"PUB\tfoo\t2\nhi\r\n")
    publish([sub], [], b"pub foo  r  2\r\nhi\r\n")
    publish([sub], [], b"PUB foo 0\r\n\r\n")
    assert s.out == [
        b"MSG foo 1 2\r\nhi\r\n",
        b"MSG foo 1 r 2\r\nhi\r\n",
        b"MSG foo 1 0\r\n\r\n",
    ]


def test_payload_with_crlf_inside() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    publish([sub], [], b"PUB foo 8\r\n\r\nPING\r\n\r\n")
    assert s.out == [b"MSG foo 1 8\r\n\r\nPING\r\n\r\n"]


def test_hmsg_without_reply() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    publish([sub], [], HPUB)
    assert s.out == [b"HMSG foo 1 18 23\r\n" + HDR + b"hello\r\n"]
    assert s.bytes_out == 23


def test_hmsg_with_reply() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"7", client=s)
    publish([sub], [], HPUB_REPLY)
    assert s.out == [b"HMSG foo 7 _INBOX.1 18 23\r\n" + HDR + b"hello\r\n"]


def test_headers_stripped_for_sink_without_headers() -> None:
    plain = make_sink(1, headers=False)
    hdrs = make_sink(2, headers=True)
    a = Subscription(b"foo", None, b"1", client=plain)
    b = Subscription(b"foo", None, b"2", client=hdrs)
    assert publish([a, b], [], HPUB) == 2
    assert publish([a, b], [], HPUB_REPLY) == 2
    assert plain.out == [b"MSG foo 1 5\r\nhello\r\n", b"MSG foo 1 _INBOX.1 5\r\nhello\r\n"]
    assert hdrs.out == [
        b"HMSG foo 2 18 23\r\n" + HDR + b"hello\r\n",
        b"HMSG foo 2 _INBOX.1 18 23\r\n" + HDR + b"hello\r\n",
    ]
    assert plain.out_size == sum(map(len, plain.out))


def test_headers_only_message_stripped() -> None:
    plain = make_sink(headers=False)
    sub = Subscription(b"foo", None, b"1", client=plain)
    publish([sub], [], b"HPUB foo 18 18\r\n" + HDR + b"\r\n")
    assert plain.out == [b"MSG foo 1 0\r\n\r\n"]


def test_plain_pub_to_sink_without_headers_is_unchanged() -> None:
    s = make_sink(headers=False)
    sub = Subscription(b"foo", None, b"1", client=s)
    publish([sub], [], b"PUB foo 2\r\nhi\r\n")
    assert s.out == [b"MSG foo 1 2\r\nhi\r\n"]


def test_hpub_with_zero_header_length() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    publish([sub], [], b"HPUB foo 0 5\r\nhello\r\n")
    assert s.out == [b"MSG foo 1 5\r\nhello\r\n"]


@needs_interpreted_sink
def test_kick_only_when_no_flush_pending() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    for _ in range(3):
        publish([sub], [], b"PUB foo 1\r\nx\r\n")
    assert s.kicks == 1  # type: ignore[attr-defined]
    assert len(s.out) == 3
    pending = make_sink(flush_pending=True)
    publish([Subscription(b"foo", None, b"1", client=pending)], [], b"PUB foo 1\r\nx\r\n")
    assert pending.kicks == 0  # type: ignore[attr-defined]
    assert pending.out == [b"MSG foo 1 1\r\nx\r\n"]


def test_multiple_subs_same_sink() -> None:
    s = make_sink()
    a = Subscription(b"foo", None, b"1", client=s)
    b = Subscription(b">", None, b"2", client=s)
    assert publish([a, b], [], b"PUB foo 1\r\nx\r\n") == 2
    assert s.out == [b"MSG foo 1 1\r\nx\r\n", b"MSG foo 2 1\r\nx\r\n"]
    assert s.msgs_out == 2
    if not COMPILED:
        assert s.kicks == 1  # type: ignore[attr-defined]


def test_echo_false_skips_publisher() -> None:
    pub = make_sink(1, echo=False)
    other = make_sink(2)
    a = Subscription(b"foo", None, b"1", client=pub)
    b = Subscription(b"foo", None, b"2", client=other)
    assert publish([a, b], [], b"PUB foo 1\r\nx\r\n", publisher=pub) == 1
    assert pub.out == []
    assert other.out == [b"MSG foo 2 1\r\nx\r\n"]
    # Messages from someone else still reach the no-echo client.
    assert publish([a, b], [], b"PUB foo 1\r\nx\r\n", publisher=other) == 2
    assert pub.out == [b"MSG foo 1 1\r\nx\r\n"]


def test_echo_true_delivers_to_publisher() -> None:
    pub = make_sink(1, echo=True)
    a = Subscription(b"foo", None, b"1", client=pub)
    assert publish([a], [], b"PUB foo 1\r\nx\r\n", publisher=pub) == 1
    assert pub.out == [b"MSG foo 1 1\r\nx\r\n"]


def test_sub_deny_filters_plain_subscription() -> None:
    s = make_sink(sub_deny=lambda subj: subj == b"foo.secret")
    sub = Subscription(b"foo.*", None, b"1", client=s)
    assert publish([sub], [], b"PUB foo.secret 1\r\nx\r\n") == 0
    assert publish([sub], [], b"PUB foo.public 1\r\nx\r\n") == 1
    assert s.out == [b"MSG foo.public 1 1\r\nx\r\n"]


def test_sub_deny_filters_queue_subscription() -> None:
    denied = make_sink(1, sub_deny=lambda subj: subj == b"foo.secret")
    sub = Subscription(b"foo.*", b"q", b"1", client=denied)
    assert publish([], [[sub]], b"PUB foo.secret 1\r\nx\r\n") == 0
    assert denied.out == []


def test_queue_group_gets_exactly_one() -> None:
    random.seed(7)
    sinks = [make_sink(i) for i in range(3)]
    group = [Subscription(b"foo", b"q", b"%d" % i, client=s) for i, s in enumerate(sinks)]
    for _ in range(300):
        assert publish([], [group], b"PUB foo 1\r\nx\r\n") == 1
    counts = [len(s.out) for s in sinks]
    assert sum(counts) == 300
    assert all(c > 0 for c in counts), counts
    for i, s in enumerate(sinks):
        assert set(s.out) <= {b"MSG foo %d 1\r\nx\r\n" % i}


def test_plain_and_multiple_queue_groups() -> None:
    plain_sink, q1_sink, q2_sink = make_sink(1), make_sink(2), make_sink(3)
    plain = Subscription(b"foo", None, b"p", client=plain_sink)
    g1 = [
        Subscription(b"foo", b"q1", b"a", client=q1_sink),
        Subscription(b"foo", b"q1", b"b", client=q1_sink),
    ]
    g2 = [Subscription(b"foo", b"q2", b"c", client=q2_sink)]
    assert publish([plain], [g1, g2], b"PUB foo 1\r\nx\r\n") == 3
    assert plain_sink.out == [b"MSG foo p 1\r\nx\r\n"]
    assert len(q1_sink.out) == 1
    assert q2_sink.out == [b"MSG foo c 1\r\nx\r\n"]


def test_queue_skips_no_echo_publisher() -> None:
    pub = make_sink(1, echo=False)
    other = make_sink(2)
    group = [
        Subscription(b"foo", b"q", b"1", client=pub),
        Subscription(b"foo", b"q", b"2", client=other),
    ]
    for _ in range(50):
        assert publish([], [group], b"PUB foo 1\r\nx\r\n", publisher=pub) == 1
    assert pub.out == []
    assert len(other.out) == 50
    # A group made only of the no-echo publisher gets nothing.
    assert publish([], [[group[0]]], b"PUB foo 1\r\nx\r\n", publisher=pub) == 0


def test_queue_member_headers_stripped() -> None:
    s = make_sink(headers=False)
    group = [Subscription(b"foo", b"q", b"9", client=s)]
    publish([], [group], HPUB_REPLY)
    assert s.out == [b"MSG foo 9 _INBOX.1 5\r\nhello\r\n"]


def test_max_auto_unsub_calls_sub_exhausted() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    sub.max = 2
    publish([sub], [], b"PUB foo 1\r\nx\r\n")
    assert exhausted(s) == []
    assert sub.delivered == 1
    with exhausts(s, sub):
        publish([sub], [], b"PUB foo 1\r\nx\r\n")
    assert sub.delivered == 2
    assert len(s.out) == 2  # the message that reached the limit is still delivered


def test_max_auto_unsub_on_queue_member() -> None:
    s = make_sink()
    sub = Subscription(b"foo", b"q", b"1", client=s)
    sub.max = 1
    with exhausts(s, sub):
        publish([], [[sub]], b"PUB foo 1\r\nx\r\n")
    assert s.out == [b"MSG foo 1 1\r\nx\r\n"]


def test_no_max_never_exhausts() -> None:
    s = make_sink()
    sub = Subscription(b"foo", None, b"1", client=s)
    for _ in range(10):
        publish([sub], [], b"PUB foo 1\r\nx\r\n")
    assert exhausted(s) == []


def test_internal_callback_pub() -> None:
    calls: list[tuple] = []

    def cb(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, payload: bytes
    ) -> None:
        calls.append((sub, subject, reply, hdr, payload))

    sub = Subscription(b"$SYS.REQ.>", None, b"i1", callback=cb)
    assert publish([sub], [], b"PUB $SYS.REQ.X _INBOX.9 4\r\nping\r\n") == 1
    assert publish([sub], [], b"PUB $SYS.REQ.Y 0\r\n\r\n") == 1
    assert calls == [
        (sub, b"$SYS.REQ.X", b"_INBOX.9", None, b"ping"),
        (sub, b"$SYS.REQ.Y", None, None, b""),
    ]


def test_internal_callback_hpub_splits_headers() -> None:
    calls: list[tuple] = []
    sub = Subscription(b"foo", None, b"i1", callback=lambda *a: calls.append(a[1:]))
    publish([sub], [], HPUB_REPLY)
    assert calls == [(b"foo", b"_INBOX.1", HDR, b"hello")]


def test_internal_callback_in_queue_group() -> None:
    calls: list[tuple] = []
    sub = Subscription(b"foo", b"q", b"i1", callback=lambda *a: calls.append(a[1:]))
    assert publish([], [[sub]], b"PUB foo 2\r\nhi\r\n") == 1
    assert calls == [(b"foo", None, None, b"hi")]


def test_internal_and_client_subs_together() -> None:
    calls: list[tuple] = []
    s = make_sink()
    internal = Subscription(b"foo", None, b"i", callback=lambda *a: calls.append(a[1:]))
    client = Subscription(b"foo", None, b"1", client=s)
    assert publish([internal, client], [], b"PUB foo 2\r\nhi\r\n") == 2
    assert calls == [(b"foo", None, None, b"hi")]
    assert s.out == [b"MSG foo 1 2\r\nhi\r\n"]


def test_no_subscribers() -> None:
    assert publish([], [], b"PUB foo 1\r\nx\r\n") == 0


def test_no_responders_frame_exact_bytes() -> None:
    assert no_responders_frame(b"inbox", b"1", b"nobody") == (
        b"HMSG inbox 1 38 38\r\nNATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n\r\n"
    )


def test_no_responders_frame_sizes_track_subject() -> None:
    frame = no_responders_frame(b"_INBOX.abc.1", b"42", b"svc.a.b")
    line, _, rest = frame.partition(b"\r\n")
    _, reply, sid, hl, tl = line.split(b" ")
    assert (reply, sid) == (b"_INBOX.abc.1", b"42")
    hdr = b"NATS/1.0 503\r\nNats-Subject: svc.a.b\r\n\r\n"
    assert int(hl) == int(tl) == len(hdr)
    assert rest == hdr + b"\r\n"
