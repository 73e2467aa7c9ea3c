"""Unit tests for natsd.cluster.forward: the frames a local publish sends to each route and
what a routed message delivers locally.

The routes are never-connected RouteConnections whose queue is read back; the frames are
checked byte for byte (the layouts nats-server writes, ``route_encode``) and parsed back with
``RouteParser``.
"""

from __future__ import annotations

from typing import Any

from natsd.cluster.forward import Forwarder
from natsd.connection.route import RouteConnection, RouteSettings
from natsd.protocol.route_parser import R_HMSG, R_RMSG, RouteParser
from natsd.router.interest import RemoteInterest
from natsd.router.routed import deliver_routed, js_deliver_index
from natsd.router.sublist import Sublist
from natsd.router.subscription import Sink, Subscription

ACC = b"$G"


class _Host:
    """Just enough of a RouteHost to build a RouteConnection that is never connected."""

    settings = RouteSettings(server_id="SELF", cluster="c")
    wire_accounts: dict[bytes, Any] = {}


class StubRoute:
    """A real RouteConnection (the compiled Forwarder takes no other type) whose queued
    frames are read back; flush_pending keeps it from scheduling a flush."""

    def __init__(self, rid: int) -> None:
        self.conn = RouteConnection(_Host(), rid, solicited=True)  # type: ignore[arg-type]
        self.conn.flush_pending = True

    @property
    def frames(self) -> list[bytes]:
        return self.conn.out


def _sink(cid: int) -> Sink:
    s = Sink(cid)
    s.headers = True
    s.flush_pending = True  # never kicked: works with the compiled Sink too
    return s


def _forwarder(remote: RemoteInterest, n: int = 2) -> tuple[Forwarder, dict[int, Any]]:
    stubs = {i: StubRoute(i) for i in range(1, n + 1)}
    return Forwarder(ACC, remote, {i: r.conn for i, r in stubs.items()}), stubs


def _tail(payload: bytes, hdr: bytes = b"") -> tuple[bytes, int, int]:
    if hdr:
        size = len(hdr) + len(payload)
        return b" %d %d\r\n%s%s\r\n" % (len(hdr), size, hdr, payload), size, len(hdr)
    return b" %d\r\n%s\r\n" % (len(payload), payload), len(payload), 0


def _local(*subs: Subscription) -> tuple[list[Subscription], list[list[Subscription]]]:
    sl: Sublist[Subscription] = Sublist()
    for s in subs:
        sl.insert(s)
    return sl.match(subs[0].subject) if subs else ([], [])


def test_nobody_anywhere_is_minus_one() -> None:
    f, routes = _forwarder(RemoteInterest())
    tail, size, hlen = _tail(b"x")
    assert f(b"a", b"_INBOX.1", tail, size, hlen, [], [], None) == -1
    assert all(not r.frames for r in routes.values())


def test_one_frame_per_route_however_many_of_its_subs_match() -> None:
    remote = RemoteInterest()
    remote.add(1, ACC, b"a.*", None)
    remote.add(1, ACC, b"a.>", None)
    remote.add(2, ACC, b"a.b", None)
    f, routes = _forwarder(remote)
    tail, size, hlen = _tail(b"hello")
    assert f(b"a.b", b"re.1", tail, size, hlen, [], [], None) == 0
    assert routes[1].frames == [b"RMSG $G a.b re.1 5\r\nhello\r\n"]
    assert routes[2].frames == [b"RMSG $G a.b re.1 5\r\nhello\r\n"]
    assert RouteParser().feed(routes[1].frames[0]) == [
        (R_RMSG, ACC, b"a.b", b"re.1", None, 5, b" 5\r\nhello\r\n")
    ]


def test_local_and_remote_plain_subscribers_both_get_it() -> None:
    remote = RemoteInterest()
    remote.add(2, ACC, b"s", None)
    f, routes = _forwarder(remote)
    c = _sink(7)
    psubs, qsubs = _local(Subscription(b"s", None, b"9", c))
    tail, size, hlen = _tail(b"p")
    assert f(b"s", None, tail, size, hlen, psubs, qsubs, None) == 1
    assert c.out == [b"MSG s 9 1\r\np\r\n"]
    assert routes[2].frames == [b"RMSG $G s 1\r\np\r\n"]
    assert routes[1].frames == []


def test_queue_group_only_remote_names_the_queue() -> None:
    remote = RemoteInterest()
    remote.add(1, ACC, b"work", b"g", 3)
    f, routes = _forwarder(remote)
    for reply, want in (
        (None, b"RMSG $G work | g 2\r\nhi\r\n"),
        (b"r.1", b"RMSG $G work + r.1 g 2\r\nhi\r\n"),
    ):
        routes[1].frames.clear()
        tail, size, hlen = _tail(b"hi")
        assert f(b"work", reply, tail, size, hlen, [], [], None) == 0
        assert routes[1].frames == [want]
        ev = RouteParser().feed(want)[0]
        assert ev[0] == R_RMSG and ev[3] == reply and ev[4] == [b"g"]


def test_queue_group_goes_to_exactly_one_member_cluster_wide() -> None:
    remote = RemoteInterest()
    remote.add(1, ACC, b"work", b"g", 1)
    f, routes = _forwarder(remote)
    c = _sink(1)
    psubs, qsubs = _local(Subscription(b"work", b"g", b"5", c))
    local = sent = 0
    for _ in range(400):
        c.out.clear()
        routes[1].frames.clear()
        tail, size, hlen = _tail(b"m")
        k = f(b"work", None, tail, size, hlen, psubs, qsubs, None)
        assert k == len(c.out)
        assert len(c.out) + len(routes[1].frames) == 1
        local += len(c.out)
        sent += len(routes[1].frames)
    # One local member and one remote of weight 1: about half each.
    assert 100 < local < 300 and 100 < sent < 300


def test_headers_go_as_hmsg() -> None:
    remote = RemoteInterest()
    remote.add(1, ACC, b"h", None)
    f, routes = _forwarder(remote, 1)
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    tail, size, hlen = _tail(b"body", hdr)
    f(b"h", None, tail, size, hlen, [], [], None)
    frame = routes[1].frames[0]
    assert frame == b"HMSG $G h %d %d\r\n%sbody\r\n" % (len(hdr), size, hdr)
    ev = RouteParser().feed(frame)[0]
    assert ev[0] == R_HMSG and ev[5] == len(hdr) and ev[6] == size


def test_routed_message_reaches_plain_subs_and_named_groups_only() -> None:
    plain, g1, g2 = _sink(1), _sink(2), _sink(3)
    sl: Sublist[Subscription] = Sublist()
    sl.insert(Subscription(b"t", None, b"1", plain))
    sl.insert(Subscription(b"t", b"g1", b"2", g1))
    sl.insert(Subscription(b"t", b"g2", b"3", g2))
    psubs, qsubs = sl.match(b"t")
    tail, size, hlen = _tail(b"x")
    assert deliver_routed(psubs, qsubs, b"t", None, None, tail, size, hlen) == 1
    assert (len(plain.out), len(g1.out), len(g2.out)) == (1, 0, 0)
    assert deliver_routed(psubs, qsubs, b"t", None, [b"g2"], tail, size, hlen) == 2
    assert (len(plain.out), len(g1.out), len(g2.out)) == (2, 0, 1)


ACK = b"$JS.ACK.ORDERS.pull.1.5.5.1700000000000000000.0"


def test_js_deliver_index_follows_nats_server() -> None:
    assert js_deliver_index(ACK + b"@orders.new") == len(ACK)
    assert js_deliver_index(ACK) == -1
    # fewer than eight dots before the '@', or not an ack subject: no delivery subject
    assert js_deliver_index(b"$JS.ACK.a.b@c") == -1
    assert js_deliver_index(b"_INBOX.a.b.c.d.e.f.g.h@x") == -1
    # the domain form has more tokens and still counts
    assert js_deliver_index(b"$JS.ACK.dom.hash.S.C.1.2.3.4.5.tok@s") == 34


def test_consumer_delivery_crosses_with_its_subject_in_the_reply() -> None:
    """A push consumer's message to an inbox whose subscriber is on another server: the
    RMSG goes to the inbox, the stream subject after '@' in the ack reply (nats-server's
    wire form), and the far side delivers it under the stream subject again."""
    remote = RemoteInterest()
    remote.add(1, ACC, b"_INBOX.push", None)
    f, routes = _forwarder(remote, 1)
    tail, size, hlen = _tail(b"order")
    assert f.deliver_as(b"_INBOX.push", b"orders.new", ACK, tail, size, hlen, [], []) == 0
    frame = routes[1].frames[0]
    assert frame == b"RMSG $G _INBOX.push " + ACK + b"@orders.new 5\r\norder\r\n"
    ev = RouteParser().feed(frame)[0]
    sink = _sink(4)
    sl: Sublist[Subscription] = Sublist()
    sl.insert(Subscription(b"_INBOX.push", None, b"7", sink))
    psubs, qsubs = sl.match(ev[2])
    assert deliver_routed(psubs, qsubs, ev[2], ev[3], ev[4], ev[6], ev[5], 0) == 1
    assert sink.out == [b"MSG orders.new 7 " + ACK + b" 5\r\norder\r\n"]


def test_consumer_delivery_local_subscriber_keeps_subject_and_reply() -> None:
    remote = RemoteInterest()
    remote.add(1, ACC, b"other", None)
    f, routes = _forwarder(remote, 1)
    c = _sink(2)
    psubs, qsubs = _local(Subscription(b"_INBOX.p", None, b"3", c))
    tail, size, hlen = _tail(b"x")
    assert f.deliver_as(b"_INBOX.p", b"s.1", ACK, tail, size, hlen, psubs, qsubs) == 1
    assert c.out == [b"MSG s.1 3 " + ACK + b" 1\r\nx\r\n"] and not routes[1].frames
    # nobody anywhere: -1, as for a plain publish
    assert f.deliver_as(b"_INBOX.none", b"s.1", ACK, tail, size, hlen, [], []) == -1
