"""The fast batches' state (``jetstream/stream/fastbatch.py``) on virtual time: a replicated
stream's leader answering as entries apply (in-flight count, what a duplicate skips, the
PubAck once the last message is applied), a follower recording where each batch is, a new
leader picking the batches up (a flow ack to the last reply), and the inactivity timeout."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from natsd.core.scheduler import VirtualScheduler
from natsd.jetstream.stream.fastbatch import (
    FastBatches,
    FastLimits,
    FastReplies,
    FastReq,
    parse_fast_reply,
)


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


def _split_reference(reply: bytes) -> tuple[str, int, bool, int, int] | None:
    """getFastBatch written the plain way (tokens split from the end), to check the parser
    that reads the subject in place against."""
    tokens = reply[:-4].rsplit(b".", 5)
    if len(tokens) < 6:
        return None
    _prefix, bid, flow_b, gap, seq_b, op_b = tokens
    op = int(op_b) if op_b.isdigit() and len(op_b) <= 18 else -1
    if op < 0 or op > 4 or not seq_b.isdigit() or len(seq_b) > 20:
        return None
    seq = int(seq_b)
    if seq == 0 or seq >= (1 << 64) - 1:
        return None
    if (seq == 1 and op == 3) or (op == 0 and seq != 1) or (op == 1 and seq <= 1):
        return None
    if gap not in (b"ok", b"fail"):
        return None
    flow = int(flow_b) if flow_b.isdigit() and len(flow_b) <= 18 else -1
    flow = 10 if flow <= 0 else min(flow, 65535)
    return bid.decode(errors="replace"), flow, gap == b"ok", seq, op


_TOKENS = st.sampled_from(
    [b"", b"0", b"1", b"2", b"3", b"4", b"5", b"10", b"500", b"99999", b"18446744073709551615",
     b"18446744073709551614", b"ok", b"fail", b"x", b"b1", b"-1", b"1" * 19, b"\xff"]
)  # fmt: skip


@given(st.lists(_TOKENS, min_size=0, max_size=8))
@example([b"_INBOX", b"abc", b"b", b"500", b"fail", b"1", b"0"])
@example([b"", b"b", b"500", b"ok", b"2", b"1"])
def test_the_reply_parser_reads_what_the_split_reads(tokens: list[bytes]) -> None:
    reply = b".".join(tokens) + b".$FI"
    got = parse_fast_reply(reply)
    want = _split_reference(reply)
    assert (None if got is None else (got.id, got.flow, got.gap_ok, got.seq, got.op)) == want


@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"_INBOX.x.b1.500.fail.", b"_INBOX.x.b2.10.ok.", b"p.b1.500.fail.",
                             b"b1.500.fail.", b"_INBOX.x.b1.500.", b""]),
            st.lists(_TOKENS, min_size=0, max_size=3),
        ),
        max_size=12,
    )
)
@example([(b"_INBOX.x.b1.500.fail.", [b"1", b"0"]), (b"_INBOX.x.b1.500.fail.", [b"2", b"1"]),
          (b"_INBOX.x.b1.500.fail.", [b"", b"1"]), (b"_INBOX.x.b1.500.fail.", [b"2"]),
          (b"_INBOX.x.b1.500.fail.", [b"3", b"3"]), (b"_INBOX.x.b1.500.fail.", [b"ok", b"5", b"1"]),
          (b"_INBOX.x.b1.500.fail.", [b"7", b"1", b"1"])])  # fmt: skip
def test_the_cached_reply_parser_reads_what_the_full_parser_reads(
    replies: list[tuple[bytes, list[bytes]]],
) -> None:
    """FastReplies remembers the last valid reply's head: every reply of a sequence (the
    same head with new numbers, another head, a malformed tail) reads as parse_fast_reply
    reads it alone."""
    cached = FastReplies()
    for head, tail in replies:
        reply = head + b".".join(tail) + b".$FI"
        assert cached.parse(reply) == parse_fast_reply(reply), reply
