"""Ack wait, backoff and max_deliver on a virtual clock (nats-server ``checkPending``).

A message not acknowledged within ack_wait (plus nats-server's 1 ms ``ackWaitDelay``) is
redelivered; with ``backoff`` the n-th redelivery waits ``backoff[n-1]`` (the last entry
repeats); after ``max_deliver`` deliveries it stops and a MAX_DELIVERIES advisory says so.
"""

from __future__ import annotations

import time

from .harness import JsHarness

S = 1_000_000_000


def test_ack_wait_redelivers_at_exact_times_in_milliseconds_of_real_time(js: JsHarness) -> None:
    t0 = time.perf_counter()
    js.add_stream("S")
    js.add_consumer("S", durable_name="D", ack_policy="explicit", ack_wait=30 * S)
    inbox = js.subscribe(js.inbox())
    assert js.js_publish("s.a", b"one") == {"stream": "S", "seq": 1}
    js.fetch("S", "D", inbox, batch=10, expires=100 * S)
    js.advance(95)
    got = inbox.take()
    assert [(m.at, m.data, m.ack_tokens) for m in got] == [
        (0.0, b"one", (1, 1, 1)),
        (30.001, b"one", (2, 1, 2)),
        (60.002, b"one", (3, 1, 3)),
        (90.003, b"one", (4, 1, 4)),
    ]
    # An ack stops the redeliveries; the request still times out at its expiry.
    js.ack(got[-1])
    js.advance(60)
    assert inbox.statuses() == [(100.001, "408 Request Timeout")]
    info = js.api("CONSUMER.INFO.S.D")
    assert (info["num_ack_pending"], info["num_redelivered"]) == (0, 0)
    assert info["ack_floor"]["stream_seq"] == 1
    # 155 virtual seconds in well under a second of real time.
    assert time.perf_counter() - t0 < 1.0


def test_ack_before_ack_wait_means_no_redelivery(js: JsHarness) -> None:
    js.add_stream("S")
    js.add_consumer("S", durable_name="D", ack_policy="explicit", ack_wait=2 * S)
    inbox = js.subscribe(js.inbox())
    js.js_publish("s.a", b"one")
    js.fetch("S", "D", inbox, batch=5, expires=10 * S)
    js.advance(1.999)
    (m,) = inbox.take()
    js.ack(m)
    js.advance(9)
    assert inbox.statuses() == [(10.001, "408 Request Timeout")]


def test_backoff_schedule_then_last_interval_repeats(js: JsHarness) -> None:
    js.add_stream("S")
    js.add_consumer(
        "S",
        durable_name="D",
        ack_policy="explicit",
        backoff=[1 * S, 5 * S, 10 * S],
        max_deliver=6,
    )
    inbox = js.subscribe(js.inbox())
    js.js_publish("s.a", b"one")
    js.fetch("S", "D", inbox, batch=10, expires=100 * S)
    js.advance(60)
    # Redelivery n waits backoff[n-1] after the previous delivery (1 ms late the first
    # time, as nats-server arms its first timer with ackWaitDelay); 10s repeats.
    assert [(m.at, m.ack_tokens[0]) for m in inbox.take()] == [
        (0.0, 1),
        (1.001, 2),
        (6.001, 3),
        (16.001, 4),
        (26.001, 5),
        (36.001, 6),
    ]


def test_max_deliver_stops_and_advises(js: JsHarness) -> None:
    js.add_stream("S")
    js.add_consumer("S", durable_name="D", ack_policy="explicit", ack_wait=10 * S, max_deliver=3)
    adv = js.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>")
    inbox = js.subscribe(js.inbox())
    js.js_publish("s.a", b"one")
    js.fetch("S", "D", inbox, batch=10, expires=100 * S)
    js.advance(99)
    assert [(m.at, m.ack_tokens[0]) for m in inbox.take()] == [(0.0, 1), (10.001, 2), (20.002, 3)]
    # The third delivery's ack wait ends: no fourth delivery, one advisory.
    (a,) = adv.msgs
    assert a.at == 30.003
    assert a.subject == "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.D"
    body = a.json()
    assert body["type"] == "io.nats.jetstream.advisory.v1.max_deliver"
    assert (body["stream"], body["consumer"], body["stream_seq"], body["deliveries"]) == (
        "S",
        "D",
        1,
        3,
    )
    assert body["timestamp"] == "2026-01-01T00:00:30.003Z"
    # Nothing is left waiting for an ack, and nothing more is delivered.
    assert js.api("CONSUMER.INFO.S.D")["num_ack_pending"] == 0
    js.advance(100)
    assert inbox.statuses() == [(100.001, "408 Request Timeout")]
    assert len(adv.msgs) == 1


def test_nak_with_delay_redelivers_after_the_delay(js: JsHarness) -> None:
    js.add_stream("S")
    js.add_consumer("S", durable_name="D", ack_policy="explicit", ack_wait=30 * S)
    inbox = js.subscribe(js.inbox())
    js.js_publish("s.a", b"one")
    js.fetch("S", "D", inbox, batch=10, expires=100 * S)
    js.advance(2)
    (m,) = inbox.take()
    js.ack(m, b'-NAK {"delay": 5000000000}')
    js.advance(20)
    assert [(m.at, m.ack_tokens[0]) for m in inbox.take()] == [(7.0, 2)]
