"""Push consumers' idle heartbeats and the inactivity deletion of ephemeral consumers.

Push heartbeats go out when nothing was sent for ``idle_heartbeat`` (a delivery restarts the
wait). An ephemeral consumer with nobody interested is deleted after
``inactive_threshold``: a push consumer exactly then, a pull consumer up to a second later
(nats-server adds 0.1 to 1 s of jitter to pull consumers' thresholds).
"""

from __future__ import annotations

from .harness import JsHarness

S = 1_000_000_000


def test_push_idle_heartbeats_count_from_the_last_send(js: JsHarness) -> None:
    js.add_stream("S")
    dl = js.subscribe("deliver.x")
    js.add_consumer(
        "S",
        durable_name="P",
        ack_policy="explicit",
        deliver_subject="deliver.x",
        idle_heartbeat=5 * S,
    )
    js.advance(12)
    js.js_publish("s.a", b"one")
    js.advance(12)
    assert [(m.at, m.status or m.data.decode()) for m in dl.msgs] == [
        (5.0, "100 Idle Heartbeat"),
        (10.0, "100 Idle Heartbeat"),
        (12.0, "one"),
        (17.0, "100 Idle Heartbeat"),
        (22.0, "100 Idle Heartbeat"),
    ]
    assert dl.msgs[3].headers == {"Nats-Last-Consumer": "1", "Nats-Last-Stream": "1"}


def test_push_heartbeats_stop_while_nobody_listens(js: JsHarness) -> None:
    js.add_stream("S")
    dl = js.subscribe("deliver.x")
    js.add_consumer("S", durable_name="P", deliver_subject="deliver.x", idle_heartbeat=1 * S)
    js.advance(2.5)
    dl.unsubscribe()
    js.advance(3)
    assert [m.at for m in dl.msgs] == [1.0, 2.0]
    again = js.subscribe("deliver.x")
    js.advance(3.5)
    # The interest watcher notices the new subscriber; heartbeats resume on their beat.
    assert [(m.at, m.status) for m in again.msgs] == [
        (6.0, "100 Idle Heartbeat"),
        (7.0, "100 Idle Heartbeat"),
        (8.0, "100 Idle Heartbeat"),
        (9.0, "100 Idle Heartbeat"),
    ]


def test_ephemeral_push_consumer_without_interest_is_deleted_at_threshold(
    js: JsHarness,
) -> None:
    js.add_stream("S")
    adv = js.subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.>")
    name = js.add_consumer("S", deliver_subject="nobody.here", inactive_threshold=5 * S)["name"]
    js.advance(4.999)
    assert js.consumer_names("S") == [name]
    js.advance(0.001)
    assert js.consumer_names("S") == []
    (a,) = adv.msgs
    assert (a.at, a.subject) == (5.0, f"$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.{name}")
    assert a.json()["action"] == "delete"


def test_ephemeral_push_consumer_with_a_subscriber_stays(js: JsHarness) -> None:
    js.add_stream("S")
    js.subscribe("deliver.y")
    name = js.add_consumer("S", deliver_subject="deliver.y", inactive_threshold=5 * S)["name"]
    js.advance(60)
    assert js.consumer_names("S") == [name]


def test_ephemeral_pull_consumer_is_deleted_after_threshold_plus_jitter(js: JsHarness) -> None:
    js.add_stream("S")
    adv = js.subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.>")
    name = js.add_consumer("S", ack_policy="explicit", inactive_threshold=5 * S)["name"]
    thresh = js.consumer("S", name).dthresh
    assert 5.1 <= thresh <= 6.0
    js.advance(5.09)
    assert js.consumer_names("S") == [name]
    js.advance(1)
    assert js.consumer_names("S") == []
    (a,) = adv.msgs
    # The deletion timer runs at the threshold, to the nanosecond.
    assert abs(a.at_ns - thresh * 1e9) <= 1


def test_pull_requests_keep_an_ephemeral_alive(js: JsHarness) -> None:
    js.add_stream("S")
    name = js.add_consumer("S", ack_policy="explicit", inactive_threshold=2 * S)["name"]
    inbox = js.subscribe(js.inbox())
    for _ in range(5):
        js.fetch("S", name, inbox, batch=1, expires=1 * S)
        js.advance(1.5)
    assert js.consumer_names("S") == [name]
    assert [s for _t, s in inbox.statuses()] == ["408 Request Timeout"] * 5
    js.advance(3.1)
    assert js.consumer_names("S") == []
