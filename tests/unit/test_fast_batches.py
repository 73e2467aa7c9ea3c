"""The fast batches' state (``jetstream/stream/fastbatch.py``) on virtual time: a replicated
stream's leader answering as entries apply (in-flight count, what a duplicate skips, the
PubAck once the last message is applied), a follower recording where each batch is, a new
leader picking the batches up (a flow ack to the last reply), and the inactivity timeout."""

from __future__ import annotations

from natsd.core.scheduler import VirtualScheduler
from natsd.jetstream.stream.fastbatch import FastBatches, FastLimits, FastReq, parse_fast_reply


def _rig() -> tuple[VirtualScheduler, FastBatches, list[tuple[bytes, bytes]], FastLimits]:
    sched = VirtualScheduler()
    sent: list[tuple[bytes, bytes]] = []
    limits = FastLimits()
    fb = FastBatches(
        sched,
        sched.clock,
        limits,
        lambda reply, payload: sent.append((reply, payload)),
        lambda seq, bid, count: b'{"seq":%d,"batch":"%s","count":%d}' % (seq, bid.encode(), count),
    )
    return sched, fb, sent, limits


def _reply(seq: int, op: int, flow: int = 2, bid: str = "b") -> bytes:
    return b"in.%s.%d.fail.%d.%d.$FI" % (bid.encode(), flow, seq, op)


def _req(seq: int, op: int, flow: int = 2, bid: str = "b") -> FastReq:
    req = parse_fast_reply(_reply(seq, op, flow, bid))
    assert req is not None
    return req


def test_the_leader_answers_as_entries_apply() -> None:
    _s, fb, sent, _l = _rig()
    b = fb.open_batch(_req(1, 0))
    assert b is not None and b.am == 2
    # three messages proposed (lseq 3), none applied
    b.lseq, b.pending = 3, 3
    fb.applied(_req(1, 0), _reply(1, 0), 101, leading=True)
    assert (b.pseq, b.pending, sent) == (1, 2, [])
    fb.applied(_req(2, 1), _reply(2, 1), 102, leading=True)
    assert b.pseq == 2 and sent == [(_reply(2, 1), b'{"type":"ack","seq":2,"msgs":2}')]
    # the commit arrives while message 3 and 4 are in flight: answered when they apply
    b.lseq, b.pending = 4, 2
    fb.commit(b, _reply(4, 2))
    assert b.committing and len(sent) == 1
    fb.applied(_req(3, 1), _reply(3, 1), 103, leading=True)
    fb.applied(_req(4, 2), _reply(4, 2), 104, leading=True)
    assert sent[-1] == (_reply(4, 2), b'{"seq":104,"batch":"b","count":4}')
    assert "b" not in fb.open


def test_nothing_in_flight_counts_what_a_duplicate_skipped() -> None:
    _s, fb, _sent, _l = _rig()
    b = fb.open_batch(_req(1, 0, flow=100))
    assert b is not None
    b.lseq, b.pending = 5, 1  # messages 2..5 were duplicates, skipped
    fb.applied(_req(1, 0, flow=100), _reply(1, 0, flow=100), 7, leading=True)
    assert (b.pseq, b.sseq) == (5, 7)


def test_a_follower_records_the_batch_and_a_new_leader_picks_it_up() -> None:
    _s, fb, sent, limits = _rig()
    for seq in (1, 2, 3):
        fb.applied(_req(seq, 0 if seq == 1 else 1), _reply(seq, 1), 10 + seq, leading=False)
    b = fb.open["b"]
    assert (b.lseq, b.pseq, b.sseq, b.reply) == (3, 3, 13, _reply(3, 1)) and limits.open == 1
    assert sent == []  # a follower answers nothing
    b.pending, b.committing = 7, True  # (whatever it held as leader before)
    fb.lead()
    assert (b.pending, b.committing, b.fseq, b.lseq) == (0, False, 3, 3)
    assert sent == [(_reply(3, 1), b'{"type":"ack","seq":3,"msgs":2}')]
    # the batch's commit, applied on a follower, ends it there
    fb.applied(_req(4, 2), _reply(4, 2), 14, leading=False)
    assert "b" not in fb.open and limits.open == 0


def test_a_batch_left_alone_times_out() -> None:
    sched, fb, _sent, limits = _rig()
    fb.applied(_req(1, 0), _reply(1, 0), 1, leading=False)
    assert limits.open == 1
    sched.advance(limits.timeout + 0.1)
    assert not fb.open and limits.open == 0
    fb.lead()  # nothing left to pick up
    assert not fb.open


def test_each_message_starts_the_timeout_again() -> None:
    """The timeout runs from a batch's last message (its timer looks at when that was)."""
    sched, fb, _sent, limits = _rig()
    fb.applied(_req(1, 0), _reply(1, 0), 1, leading=False)
    sched.advance(limits.timeout * 0.6)
    fb.applied(_req(2, 1), _reply(2, 1), 2, leading=False)
    sched.advance(limits.timeout * 0.6)  # past the first message's deadline
    assert "b" in fb.open and limits.open == 1
    sched.advance(limits.timeout * 0.3)  # 0.9 of a timeout after the second
    assert "b" in fb.open
    sched.advance(limits.timeout * 0.2)
    assert not fb.open and limits.open == 0
