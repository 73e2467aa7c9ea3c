"""The Nats-Msg-Id duplicate window on a virtual clock: an id is a duplicate exactly while
its first copy is within ``duplicate_window``, whichever ids came between, and a window
shrunk by an update applies to the ids already remembered."""

from __future__ import annotations

from .harness import JsHarness

S = 1_000_000_000


def _id(mid: str) -> bytes:
    return b"NATS/1.0\r\nNats-Msg-Id: %s\r\n\r\n" % mid.encode()


def _dup(js: JsHarness, mid: str) -> bool:
    ack = js.js_publish("s.a", mid.encode(), _id(mid))
    assert "error" not in ack, ack
    return bool(ack.get("duplicate"))


def test_an_id_is_a_duplicate_while_its_first_copy_is_in_the_window(js: JsHarness) -> None:
    js.add_stream("S", duplicate_window=10 * S)
    assert not _dup(js, "a")  # t=0
    js.advance(4)
    assert not _dup(js, "b")  # t=4
    js.advance(5.999)
    assert _dup(js, "a") and _dup(js, "b")  # t=9.999: both in the window
    js.advance(0.002)
    assert not _dup(js, "a")  # t=10.001: a's first copy has left; stored again at 10.001
    assert _dup(js, "b")
    js.advance(4)
    assert not _dup(js, "b")  # t=14.001: b (stored at 4) has left
    assert _dup(js, "a")  # the new a (10.001) is in the window
    js.advance(1)
    for i in range(50):  # many ids between the checks
        assert not _dup(js, f"m{i}")
    assert _dup(js, "m0") and _dup(js, "a")


def test_a_shrunk_window_applies_to_the_ids_remembered(js: JsHarness) -> None:
    cfg = js.add_stream("S", duplicate_window=60 * S)["config"]
    assert not _dup(js, "a")
    js.advance(5)
    assert _dup(js, "a")  # (the oldest id is looked at: in the 60 s window)
    out = js.api("STREAM.UPDATE.S", {**cfg, "duplicate_window": 2 * S})
    assert "error" not in out, out
    assert not _dup(js, "a")  # 5 s old: outside the 2 s window at once
    js.advance(1)
    assert _dup(js, "a")
