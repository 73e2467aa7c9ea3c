"""max_age and per-message TTL on a virtual clock.

The engine applies them every ``EXPIRE_INTERVAL`` (0.25 s, from when it started), so a
message leaves on the first expiry pass at or after its deadline. Stores stamp messages
from the same virtual wall clock.
"""

from __future__ import annotations

import base64

from natsd.jetstream.engine import EXPIRE_INTERVAL

from .harness import JsHarness

S = 1_000_000_000
TTL_HDR = b"NATS/1.0\r\nNats-TTL: 3s\r\n\r\n"


def _messages(js: JsHarness) -> int:
    n = js.api("STREAM.INFO.S")["state"]["messages"]
    assert isinstance(n, int)
    return n


def test_max_age_and_message_ttl(js: JsHarness) -> None:
    assert EXPIRE_INTERVAL == 0.25  # the pass times below are multiples of it
    js.add_stream("S", max_age=10 * S, allow_msg_ttl=True)
    js.advance(0.1)
    js.js_publish("s.a", b"aged")
    js.js_publish("s.b", b"ttl", TTL_HDR)
    # The TTL deadline is 3.1: the pass at 3.25 removes the message, not the one at 3.0.
    js.advance_to(3.249999999)
    assert _messages(js) == 2
    js.advance_to(3.25)
    assert _messages(js) == 1
    # max_age: stored at 0.1, gone at the pass of 10.25.
    js.advance_to(10.249999999)
    assert _messages(js) == 1
    js.advance_to(10.25)
    info = js.api("STREAM.INFO.S")["state"]
    assert (info["messages"], info["first_seq"], info["last_seq"]) == (0, 3, 2)


def test_stored_timestamps_come_from_the_virtual_clock(js: JsHarness) -> None:
    js.add_stream("S")
    js.advance(1.5)
    js.js_publish("s.a", b"x")
    m = js.api("STREAM.MSG.GET.S", {"seq": 1})["message"]
    assert m["time"] == "2026-01-01T00:00:01.5Z"


def test_ttl_expiry_leaves_a_delete_marker_that_expires_by_its_own_ttl(js: JsHarness) -> None:
    js.add_stream("S", allow_msg_ttl=True, subject_delete_marker_ttl=2 * S)
    watch = js.subscribe("s.>")
    js.js_publish("s.a", b"ttl", TTL_HDR)
    # Stored at 0 with a 3 s TTL: the pass at 3.0 removes it and places the marker.
    js.advance_to(2.999999999)
    state = js.api("STREAM.INFO.S")["state"]
    assert (state["messages"], state["last_seq"]) == (1, 1)
    js.advance_to(3.0)
    state = js.api("STREAM.INFO.S")["state"]
    assert (state["messages"], state["first_seq"], state["last_seq"]) == (1, 2, 2)
    marker = js.api("STREAM.MSG.GET.S", {"last_by_subj": "s.a"})["message"]
    assert (marker["seq"], marker["time"]) == (2, "2026-01-01T00:00:03Z")
    hdrs = base64.b64decode(marker["hdrs"])
    assert b"Nats-Marker-Reason: MaxAge\r\n" in hdrs and b"Nats-TTL: 2s\r\n" in hdrs
    # The marker's own TTL (2 s) runs out at the pass of 5.0; no marker replaces it.
    js.advance_to(4.999999999)
    assert _messages(js) == 1
    js.advance_to(5.0)
    state = js.api("STREAM.INFO.S")["state"]
    assert (state["messages"], state["last_seq"]) == (0, 2)
    # Markers are not delivered to core subscribers: only the original publish was seen.
    assert [m.data for m in watch.msgs] == [b"ttl"]
