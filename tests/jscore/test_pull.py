"""Pull requests on a virtual clock: expiry (408), no_wait (404), idle heartbeats (100).

The waiting-request timer fires at a request's deadline; a request expires strictly after
it (``now > expires``, as nats-server compares), so the 408 goes out on the re-armed
timer's 1 ms floor: exactly 1 ms after the deadline on a virtual clock.
"""

from __future__ import annotations

from .harness import JsHarness

S = 1_000_000_000


def _pull_consumer(js: JsHarness) -> None:
    js.add_stream("S")
    js.add_consumer("S", durable_name="D", ack_policy="explicit")


def test_request_expires_with_408_and_pending_counts(js: JsHarness) -> None:
    _pull_consumer(js)
    inbox = js.subscribe(js.inbox())
    js.fetch("S", "D", inbox, batch=5, expires=3 * S)
    js.advance(1)
    js.js_publish("s.a", b"one")
    js.advance(2.0009)
    assert [(m.at, m.data) for m in inbox.msgs] == [(1.0, b"one")]
    js.advance(0.0001)
    (m,) = inbox.take()[1:]
    assert (m.at, m.status) == (3.001, "408 Request Timeout")
    # What the request still wanted: 4 messages, no byte limit.
    assert m.headers == {"Nats-Pending-Messages": "4", "Nats-Pending-Bytes": "0"}
    assert js.api("CONSUMER.INFO.S.D")["num_waiting"] == 0


def test_no_wait_on_an_empty_consumer_is_404_at_once(js: JsHarness) -> None:
    _pull_consumer(js)
    inbox = js.subscribe(js.inbox())
    js.fetch("S", "D", inbox, batch=5, no_wait=True)
    assert inbox.statuses() == [(0.0, "404 No Messages")]


def test_no_wait_delivers_what_there_is_then_404(js: JsHarness) -> None:
    _pull_consumer(js)
    js.js_publish("s.a", b"one")
    js.js_publish("s.b", b"two")
    js.advance(1)
    inbox = js.subscribe(js.inbox())
    js.fetch("S", "D", inbox, batch=5, no_wait=True)
    assert [(m.at, m.subject, m.data, m.status) for m in inbox.msgs] == [
        (1.0, "s.a", b"one", ""),
        (1.0, "s.b", b"two", ""),
        (1.0, inbox.subject, b"", "404 No Messages"),
    ]


def test_no_wait_with_expires_waits_for_a_first_message_until_expiry(js: JsHarness) -> None:
    _pull_consumer(js)
    inbox = js.subscribe(js.inbox())
    js.fetch("S", "D", inbox, batch=5, no_wait=True, expires=5 * S)
    js.advance(10)
    assert inbox.statuses() == [(5.001, "408 Request Timeout")]


def test_pull_idle_heartbeats_restart_after_a_delivery(js: JsHarness) -> None:
    _pull_consumer(js)
    inbox = js.subscribe(js.inbox())
    js.fetch("S", "D", inbox, batch=5, expires=10 * S, idle_heartbeat=2 * S)
    js.advance(3)
    js.js_publish("s.a", b"one")
    js.advance(20)
    assert [(m.at, m.status or m.data.decode()) for m in inbox.msgs] == [
        (2.0, "100 Idle Heartbeat"),
        (3.0, "one"),
        (5.0, "100 Idle Heartbeat"),
        (7.0, "100 Idle Heartbeat"),
        (9.0, "100 Idle Heartbeat"),
        (10.001, "408 Request Timeout"),
    ]
    # Heartbeats carry the last delivered consumer and stream sequences.
    assert inbox.msgs[0].headers == {"Nats-Last-Consumer": "0", "Nats-Last-Stream": "0"}
    assert inbox.msgs[2].headers == {"Nats-Last-Consumer": "1", "Nats-Last-Stream": "1"}


def test_requests_share_messages_round_robin_and_expire_independently(js: JsHarness) -> None:
    _pull_consumer(js)
    a = js.subscribe(js.inbox())
    b = js.subscribe(js.inbox())
    js.fetch("S", "D", a, batch=2, expires=4 * S)
    js.advance(1)
    js.fetch("S", "D", b, batch=2, expires=2 * S)
    for i in range(3):
        js.js_publish("s.x", b"%d" % i)
    js.advance(10)
    assert [(m.at, m.data, m.status) for m in a.msgs] == [
        (1.0, b"0", ""),
        (1.0, b"2", ""),
    ]
    assert [(m.at, m.data, m.status) for m in b.msgs] == [
        (1.0, b"1", ""),
        (3.001, b"", "408 Request Timeout"),
    ]


def test_a_request_whose_reply_is_unsubscribed_gets_no_more_messages(js: JsHarness) -> None:
    """A request remembers that its reply had a subscriber (so its next messages skip the
    match); an unsubscribe in between must still be seen: the next message goes to the
    next request, not to a reply nobody reads."""
    _pull_consumer(js)
    gone = js.subscribe(js.inbox())
    js.fetch("S", "D", gone, batch=5, expires=30 * S)
    js.js_publish("s.a", b"one")
    js.settle()
    assert [m.data for m in gone.msgs] == [b"one"]
    # An unrelated subscription comes and goes first: the memo must not outlive it.
    other = js.subscribe(js.inbox())
    other.unsubscribe()
    js.js_publish("s.a", b"two")
    js.settle()
    assert [m.data for m in gone.msgs] == [b"one", b"two"]
    gone.unsubscribe()
    js.js_publish("s.a", b"three")
    js.settle()
    assert [m.data for m in gone.msgs] == [b"one", b"two"]
    live = js.subscribe(js.inbox())
    js.fetch("S", "D", live, batch=1, expires=30 * S)
    js.settle()
    (m,) = live.msgs
    assert (m.data, m.ack_tokens[0]) == (b"three", 1)  # a first delivery, not a redelivery
    assert js.api("CONSUMER.INFO.S.D")["num_ack_pending"] == 3
