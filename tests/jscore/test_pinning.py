"""Pinned-client priority groups (ADR-42) on a virtual clock.

The first request of the group is pinned (``Nats-Pin-Id`` on its messages, a PINNED
advisory); requests without the id are passed over, requests with another id get 423. The
pin is dropped ``priority_timeout`` after the pinned client's last request (UNPINNED,
reason "timeout") or by ``$JS.API.CONSUMER.UNPIN`` (reason "admin"), and the next request
is pinned instead.
"""

from __future__ import annotations

from .harness import JsHarness

S = 1_000_000_000


def _pinned(js: JsHarness) -> None:
    js.add_stream("S")
    js.add_consumer(
        "S",
        durable_name="D",
        ack_policy="explicit",
        priority_policy="pinned_client",
        priority_groups=["A"],
        priority_timeout=10 * S,
    )


def test_pin_ttl_expiry_moves_the_pin_to_the_next_client(js: JsHarness) -> None:
    _pinned(js)
    events = js.subscribe("$JS.EVENT.ADVISORY.CONSUMER.>")
    a = js.subscribe(js.inbox())
    b = js.subscribe(js.inbox())
    js.js_publish("s.x", b"one")
    js.fetch("S", "D", a, batch=1, expires=60 * S, group="A")
    pin = a.msgs[0].headers["Nats-Pin-Id"]
    assert (a.msgs[0].at, a.msgs[0].data) == (0.0, b"one")
    # b has no pin id: passed over while a holds the pin.
    js.fetch("S", "D", b, batch=1, expires=60 * S, group="A")
    js.js_publish("s.x", b"two")
    assert b.msgs == []
    # A wrong id is refused at once.
    wrong = js.subscribe(js.inbox())
    js.fetch("S", "D", wrong, batch=1, expires=60 * S, group="A", id="not-the-pin")
    assert wrong.statuses() == [(0.0, "423 Nats-Pin-Id mismatch")]
    # The pinned client's request at t=4 gets "two" and restarts the pin timer.
    js.advance(4)
    js.fetch("S", "D", a, batch=1, expires=60 * S, group="A", id=pin)
    assert [(m.at, m.data, m.headers["Nats-Pin-Id"]) for m in a.msgs[1:]] == [(4.0, b"two", pin)]
    adv = [m for m in events.msgs if "PINNED" in m.subject]
    assert [m.subject for m in adv] == ["$JS.EVENT.ADVISORY.CONSUMER.PINNED.S.D"]
    assert (adv[0].at, adv[0].json()["pinned_id"]) == (0.0, pin)
    js.advance(9.999)
    assert len([m for m in events.msgs if "PINNED" in m.subject]) == 1
    js.advance(0.001)
    adv = [m for m in events.msgs if "PINNED" in m.subject]
    # 10 s after the pinned client's last request.
    unpinned = adv[1]
    assert (unpinned.at, unpinned.subject) == (14.0, "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.S.D")
    assert (unpinned.json()["group"], unpinned.json()["reason"]) == ("A", "timeout")
    # b, still waiting, is pinned with the next message.
    js.advance(1)
    js.js_publish("s.x", b"three")
    (m,) = b.msgs
    assert (m.at, m.data) == (15.0, b"three")
    new_pin = m.headers["Nats-Pin-Id"]
    assert new_pin != pin
    pinned = [m for m in events.msgs if "PINNED" in m.subject][2]
    assert (pinned.at, pinned.json()["pinned_id"]) == (15.0, new_pin)
    groups = js.api("CONSUMER.INFO.S.D")["priority_groups"]
    assert groups == [
        {"group": "A", "pinned_client_id": new_pin, "pinned_ts": "2026-01-01T00:00:15Z"}
    ]


def test_unpin_through_the_api(js: JsHarness) -> None:
    _pinned(js)
    adv = js.subscribe("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.>")
    a = js.subscribe(js.inbox())
    js.js_publish("s.x", b"one")
    js.fetch("S", "D", a, batch=1, expires=60 * S, group="A")
    assert "Nats-Pin-Id" in a.msgs[0].headers
    js.advance(2)
    assert js.api("CONSUMER.UNPIN.S.D", {"group": "A"}) == {
        "type": "io.nats.jetstream.api.v1.consumer_unpin_response"
    }
    (u,) = adv.msgs
    assert (u.at, u.json()["reason"]) == (2.0, "admin")
    assert js.api("CONSUMER.INFO.S.D")["priority_groups"] == [
        {"group": "A", "pinned_ts": "0001-01-01T00:00:00Z"}
    ]
    # The old pin timer was cancelled with the pin: no second UNPINNED at t=10.
    js.advance(20)
    assert len(adv.msgs) == 1
