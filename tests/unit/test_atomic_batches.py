"""The staging of atomic batches (``jetstream/stream/batch.py``) on virtual time: the
inactivity timeout and its advisory, the limits (open batches per stream and per server,
messages per batch), a batch opened under another leadership, and that every way a batch
ends gives its slot back."""

from __future__ import annotations

from natsd.core.headers import parse_headers
from natsd.core.scheduler import VirtualScheduler
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.stream.batch import AtomicBatches, BatchLimits, Staged
from natsd.jetstream.wire.errors import ApiError

CFG = StreamConfig(name="A", allow_atomic=True)


def _hdr(bid: str, seq: int, commit: str | None = None) -> bytes:
    h = f"NATS/1.0\r\nNats-Batch-Id: {bid}\r\nNats-Batch-Sequence: {seq}\r\n"
    if commit is not None:
        h += f"Nats-Batch-Commit: {commit}\r\n"
    return (h + "\r\n").encode()


EPOCH = [0]  # the stream's leadership, as Replica.epoch counts it


def _stage(b: AtomicBatches, bid: str, seq: int, commit: str | None = None) -> object:
    hdr = _hdr(bid, seq, commit)
    return b.stage(CFG, b"a.x", "a.x", hdr, parse_headers(hdr)[2], b"x")


def _code(got: object) -> int:
    assert isinstance(got, ApiError), got
    return got.err_code


def test_a_batch_left_alone_is_abandoned_with_an_advisory() -> None:
    sched = VirtualScheduler()
    gone: list[tuple[str, str]] = []
    limits = BatchLimits(timeout=2.0)
    b = AtomicBatches(sched, limits, lambda bid, why: gone.append((bid, why)), 1, lambda: EPOCH[0])
    assert _stage(b, "t", 1) is None and _stage(b, "t", 2) is None
    sched.advance(1.9)
    assert _stage(b, "t", 3) is None  # each message restarts the timer
    sched.advance(1.9)
    assert gone == [] and limits.open == 1
    sched.advance(0.2)
    assert gone == [("t", "timeout")] and limits.open == 0 and not b.open
    assert _code(_stage(b, "t", 4, "1")) == 10176
    committed = _stage(b, "t", 1, "1")  # the same id starts again
    assert isinstance(committed, Staged) and len(committed.msgs) == 1


def test_limits_and_leadership() -> None:
    sched = VirtualScheduler()
    gone: list[tuple[str, str]] = []
    limits = BatchLimits(per_stream=2, total=3, max_msgs=3)
    s1 = AtomicBatches(sched, limits, lambda bid, why: gone.append((bid, why)), 1, lambda: EPOCH[0])
    s2 = AtomicBatches(sched, limits, lambda bid, why: None, 1, lambda: EPOCH[0])
    assert _stage(s1, "a", 1) is None and _stage(s1, "b", 1) is None
    assert _code(_stage(s1, "c", 1)) == 10210  # per stream
    assert _stage(s2, "d", 1) is None
    assert _code(_stage(s2, "e", 1)) == 10210  # per server
    assert _stage(s1, "a", 2) is None and _stage(s1, "a", 3) is None
    assert _code(_stage(s1, "a", 4, "1")) == 10199 and gone == [("a", "large")]
    assert _code(_stage(s1, "zz", 5)) == 10199  # unknown, past the limit
    assert _stage(s1, "b", 2) is None
    EPOCH[0] = 1
    try:
        assert _code(_stage(s1, "b", 3, "1")) == 10176  # opened under another leader
        sched.advance(20)  # (d's timer: dropped without an advisory)
        assert ("d", "timeout") not in gone and limits.open == 0
    finally:
        EPOCH[0] = 0
    s2.clear()
    assert limits.open == 0 and not s1.open and not s2.open
    assert _code(_stage(s1, "f", 1, "maybe")) == 10200 and limits.open == 0
