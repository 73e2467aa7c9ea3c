"""A mirror's feed on a virtual clock: when it asks its origin for a consumer, how it notices
a lost delivery or a silent origin, and how it backs off while the origin is missing
(nats-server's timings: the first request 100-200 ms after the start, at least 2 s between
two requests, 10 s of silence, 10 s more backoff per failure)."""

from __future__ import annotations

from .harness import JsHarness


def _state(js: JsHarness, stream: str) -> dict[str, int]:
    st = js.api(f"STREAM.INFO.{stream}")["state"]
    return {k: st[k] for k in ("messages", "first_seq", "last_seq")}


def _mirror_block(js: JsHarness, stream: str) -> dict[str, object]:
    out = js.api(f"STREAM.INFO.{stream}")["mirror"]
    assert isinstance(out, dict)
    return out


def _publish(js: JsHarness, subject: str, n: int) -> None:
    for i in range(n):
        assert "error" not in js.js_publish(subject, b"m%d" % i)


def test_the_first_request_and_the_copy(js: JsHarness) -> None:
    js.add_stream("O", subjects=["o.>"])
    _publish(js, "o.a", 3)
    js.add_stream("M", mirror={"name": "O"}, subjects=[])
    assert _mirror_block(js, "M")["active"] == -1
    js.advance(0.099)
    assert _state(js, "M")["messages"] == 0
    js.advance(0.151)  # (asked 100-200 ms after the start; the origin then delivers)
    assert _state(js, "M") == {"messages": 3, "first_seq": 1, "last_seq": 3}
    _publish(js, "o.b", 2)
    assert _state(js, "M")["last_seq"] == 5  # as each is delivered
    block = _mirror_block(js, "M")
    assert block["lag"] == 0 and block["active"] == 0


def test_a_lost_delivery_starts_the_consumer_again(js: JsHarness) -> None:
    js.add_stream("O", subjects=["o.>"])
    js.add_stream("M", mirror={"name": "O"}, subjects=[])
    js.advance(0.3)
    _publish(js, "o.a", 2)
    feed = js.ja.streams["M"].mirror
    assert feed is not None and feed.dseq == 2
    # delivery 4 comes after 2: delivery 3 was lost on the way; the consumer is dropped
    reply = f"$JS.ACK.O.{feed.cname}.1.4.4.{js.clock.time_ns()}.0"
    js.publish(feed._deliver_subject, b"m3", reply=reply)
    assert _state(js, "M")["last_seq"] == 2
    _publish(js, "o.a", 2)
    js.advance(1.5)
    assert _state(js, "M")["last_seq"] == 2  # (2 s since the last request, at least)
    js.advance(0.8)
    assert _state(js, "M") == {"messages": 4, "first_seq": 1, "last_seq": 4}


def test_a_silent_origin_is_asked_again(js: JsHarness) -> None:
    js.add_stream("O", subjects=["o.>"])
    js.add_stream("M", mirror={"name": "O"}, subjects=[])
    js.advance(0.3)
    feed = js.ja.streams["M"].mirror
    assert feed is not None and feed.cname
    # the origin's consumer goes (as when the origin's server restarts)
    assert js.api(f"CONSUMER.DELETE.O.{feed.cname}").get("success") is True
    _publish(js, "o.a", 2)
    # the health check runs every 10 s from the start of the feed: at 10.2 s the origin has
    # been silent 10 s, not more; at 20.2 s it has, and the mirror asks again
    js.advance(19.5)
    assert _state(js, "M")["messages"] == 0
    js.advance(1.0)
    assert _state(js, "M")["messages"] == 2


def test_a_missing_origin_backs_off(js: JsHarness) -> None:
    js.add_stream("M", mirror={"name": "LATER"}, subjects=[])
    js.advance(0.3)
    err = _mirror_block(js, "M")["error"]
    assert isinstance(err, dict) and err["err_code"] == 10059
    js.add_stream("LATER", subjects=["l.>"])
    _publish(js, "l.a", 1)
    js.advance(11.5)  # 2 s apart, plus 10 s for the one failure
    assert _state(js, "M")["messages"] == 0
    js.advance(1.0)
    assert _state(js, "M")["messages"] == 1
    assert "error" not in _mirror_block(js, "M")
    # the success cleared the failure: a later retry waits 2 s, not 2 s plus the backoff
    feed = js.ja.streams["M"].mirror
    assert feed is not None and feed.fails == 0
    reply = f"$JS.ACK.LATER.{feed.cname}.1.9.9.{js.clock.time_ns()}.0"
    js.publish(feed._deliver_subject, b"lost before it", reply=reply)  # a delivery gap
    _publish(js, "l.a", 1)
    js.advance(2.5)
    assert _state(js, "M")["messages"] == 2


def test_mirror_direct_follows_the_config(js: JsHarness) -> None:
    """A caught-up mirror answers its origin's direct gets while its ``mirror_direct``
    (the origin's ``allow_direct``) is on; an update that turns it off stops that."""
    origin = js.add_stream("O", subjects=["o.>"], allow_direct=True)["config"]
    _publish(js, "o.a", 1)
    mirror = js.add_stream("M", mirror={"name": "O"}, subjects=[])["config"]
    assert mirror["mirror_direct"] is True
    js.advance(0.3)
    assert [s.name for s in js.ja.mirror_direct.get("O", [])] == ["M"]
    assert "error" not in js.api("STREAM.UPDATE.O", {**origin, "allow_direct": False})
    out = js.api("STREAM.UPDATE.M", mirror)
    assert out["config"]["mirror_direct"] is False
    assert js.ja.mirror_direct == {}
    assert "error" not in js.api("STREAM.DELETE.M")


def test_an_origin_purged_and_deleted_messages(js: JsHarness) -> None:
    js.add_stream("O", subjects=["o.>"])
    _publish(js, "o.a", 3)
    js.add_stream("M", mirror={"name": "O"}, subjects=[])
    js.advance(0.3)
    assert js.api("STREAM.PURGE.O")["success"] is True
    _publish(js, "o.b", 2)
    assert _state(js, "M") == {"messages": 5, "first_seq": 1, "last_seq": 5}
    # a mirror made after the purge starts where the origin's messages do
    js.add_stream("M2", mirror={"name": "O"}, subjects=[])
    js.advance(0.3)
    assert _state(js, "M2") == {"messages": 2, "first_seq": 4, "last_seq": 5}


def test_the_origins_consumer_hands_messages_over_as_stored(js: JsHarness) -> None:
    """On the origin's server the mirror's feed takes its consumer's messages as stored
    (no reply subject made and read back: ``Subscription.take``), unless someone else
    listens on the deliver subject: then every delivery is a message again, with its
    reply subject, which the listener sees and the feed reads, and the copy is the same."""
    js.add_stream("O", subjects=["o.>"])
    _publish(js, "o.a", 3)
    js.add_stream("M", mirror={"name": "O"}, subjects=[])
    js.advance(0.25)
    assert _state(js, "M") == {"messages": 3, "first_seq": 1, "last_seq": 3}
    feed = js.stream("M").mirror
    assert feed is not None and feed._deliver is not None and feed._deliver.take is not None
    snoop = js.subscribe("$JS.M.>")
    _publish(js, "o.b", 2)
    assert _state(js, "M") == {"messages": 5, "first_seq": 1, "last_seq": 5}
    assert [m.subject for m in snoop.msgs] == ["o.b", "o.b"]
    assert all(m.reply and m.reply.startswith("$JS.ACK.O.") for m in snoop.msgs)
    snoop.unsubscribe()
    _publish(js, "o.c", 2)
    assert _state(js, "M") == {"messages": 7, "first_seq": 1, "last_seq": 7}
    assert len(snoop.msgs) == 2  # (the lane again: nothing is published)
    copied = [js.stream("M").store.load_msg(s) for s in range(1, 8)]
    origin = [js.stream("O").store.load_msg(s) for s in range(1, 8)]
    assert [(m.subject, m.data, m.ts) for m in copied if m] == [
        (m.subject, m.data, m.ts) for m in origin if m
    ]
