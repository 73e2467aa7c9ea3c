"""The StreamStore contract: every implementation (``kit`` fixture) must pass all of it.

Semantics follow nats-server (``server/memstore.go``, ``server/filestore.go``); the ones
checked against a real nats-server 2.15 through the JetStream API are marked "(verified)".
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from natsd.storage.store import (
    DiscardPolicy,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    ErrStoreClosed,
    SimpleState,
    StoreConfig,
    StoreError,
    StreamStore,
)

from .conftest import StoreKit

NS = 1_000_000_000
HDR = b"NATS/1.0\r\nA: B\r\n\r\n"
T0 = 1_700_000_000 * NS  # a fixed timestamp for store_raw


def cfg(**kw: object) -> StoreConfig:
    return StoreConfig(name="S", **kw)  # type: ignore[arg-type]


def fill(store: StreamStore, subjects: str | list[str], data: bytes = b"x") -> list[int]:
    """Store one message per subject (a space-separated string or a list)."""
    subs = subjects.split() if isinstance(subjects, str) else subjects
    return [store.store_msg(s, None, data)[0] for s in subs]


def live(store: StreamStore, upto: int) -> list[int]:
    return [s for s in range(upto + 1) if store.load_msg(s) is not None]


def summary(store: StreamStore) -> tuple[int, int, int, int]:
    st = store.state()
    return st.msgs, st.first_seq, st.last_seq, st.num_deleted


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, str]] = []

    def __call__(self, msgs: int, nbytes: int, seq: int, subject: str) -> None:
        self.calls.append((msgs, nbytes, seq, subject))

    def totals(self) -> tuple[int, int]:
        return sum(c[0] for c in self.calls), sum(c[1] for c in self.calls)


# ---------------------------------------------------------------------------- basics


def test_fresh_store_is_empty(kit: StoreKit) -> None:
    s = kit.make()
    st = s.state(with_deleted=True)
    # (verified) a brand-new stream reports first_seq 0, last_seq 0.
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq) == (0, 0, 0, 0)
    assert st.num_deleted == 0 and st.deleted == [] and st.num_subjects == 0
    assert st.first_ts == 0
    assert s.load_msg(0) is None and s.load_msg(1) is None
    assert s.load_next_msg("", 0) is None and s.load_last_msg("") is None
    assert s.load_prev_msg(10) is None
    assert s.filtered_state(0, "") == SimpleState()
    assert s.subjects_state("") == {} and s.subjects_totals(">") == {}
    assert s.num_pending(0, "", False) == 0 and s.num_pending(0, "", True) == 0
    assert s.multi_last_seqs([">"], 0, 0) == []
    assert s.flush() == 0


def test_store_and_load(kit: StoreKit) -> None:
    s = kit.make()
    seq1, ts1 = s.store_msg("a.b", None, b"one")
    seq2, ts2 = s.store_msg("a.c", HDR, b"two")
    assert (seq1, seq2) == (1, 2) and 0 < ts1 <= ts2
    m = s.load_msg(2)
    assert m is not None
    assert (m.subject, m.seq, m.ts, m.hdr, m.data) == ("a.c", 2, ts2, HDR, b"two")
    m1 = s.load_msg(1)
    assert m1 is not None and not m1.hdr and m1.data == b"one"
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_subjects) == (2, 1, 2, 2)
    assert (st.first_ts, st.last_ts) == (ts1, ts2)
    assert s.flush() == 2
    s.sync()
    assert s.load_msg(3) is None


def test_bytes_follow_the_store_formula(kit: StoreKit) -> None:
    s = kit.make()
    msgs = [("sz.a", None, b"hello"), ("sz.bb", HDR, b"x" * 100), ("sz.c", None, b"")]
    for subj, hdr, data in msgs:
        s.store_msg(subj, hdr, data)
    assert s.state().bytes == sum(kit.size(*m) for m in msgs)
    s.remove_msg(2)
    assert s.state().bytes == kit.size(*msgs[0]) + kit.size(*msgs[2])


def test_empty_payload_and_unicode_subject(kit: StoreKit) -> None:
    s = kit.make()
    s.store_msg("é.ü", None, b"")
    m = s.load_msg(1)
    assert m is not None and m.subject == "é.ü" and m.data == b""
    assert s.state().bytes == kit.size("é.ü", None, b"")
    assert s.load_last_msg("é.ü") is not None


def test_first_seq_config(kit: StoreKit) -> None:
    s = kit.make(cfg(first_seq=10))
    # (verified) an empty stream with first_seq 10 reports 10 / 9.
    assert summary(s) == (0, 10, 9, 0)
    assert s.store_msg("a", None, b"x")[0] == 10
    assert summary(s) == (1, 10, 10, 0)


def test_config_property(kit: StoreKit) -> None:
    c = cfg(max_msgs=5)
    s = kit.make(c)
    assert s.config.max_msgs == 5 and s.config.name == "S"
    s.update_config(replace(c, max_msgs=7))
    assert s.config.max_msgs == 7


# ---------------------------------------------------------------------------- removal


def test_purge(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a a b")
    assert s.purge() == 3
    st = s.state(with_deleted=True)
    # (verified) after a purge first_seq = last_seq + 1.
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq, st.num_deleted) == (0, 0, 4, 3, 0)
    assert st.deleted == [] and st.num_subjects == 0 and st.first_ts == 0
    assert s.load_msg(1) is None and s.load_last_msg("a") is None
    assert s.purge() == 0
    assert s.store_msg("a", None, b"x")[0] == 4
    assert summary(s) == (1, 4, 4, 0)


def test_remove_interior_first_and_last(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b a b a b")
    assert s.remove_msg(2) and s.remove_msg(4)
    st = s.state(with_deleted=True)
    # (verified) interior deletes are listed.
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.deleted) == (4, 1, 6, 2, [2, 4])
    assert s.state().deleted is None
    assert s.remove_msg(1)
    st = s.state(with_deleted=True)
    assert (st.first_seq, st.num_deleted, st.deleted) == (3, 1, [4])
    assert s.remove_msg(6)  # (verified) removing the last message keeps last_seq; 6 is deleted
    st = s.state(with_deleted=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (2, 3, 6, [4, 6])
    assert not s.remove_msg(6) and not s.remove_msg(4)
    assert not s.remove_msg(0) and not s.remove_msg(99)
    assert live(s, 7) == [3, 5]


def test_remove_everything_moves_first_past_last(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c")
    for seq in (2, 3, 1):
        assert s.remove_msg(seq)
    assert summary(s) == (0, 4, 3, 0)
    assert s.state(with_deleted=True).deleted == []
    assert s.store_msg("a", None, b"x")[0] == 4


def test_erase_msg(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c", b"secret")
    assert s.erase_msg(2)
    assert s.load_msg(2) is None
    assert not s.erase_msg(2) and not s.erase_msg(10)
    assert summary(s) == (2, 1, 3, 1)
    assert s.state().bytes == 2 * kit.size("a", None, b"secret")


def test_load_out_of_range_and_deleted(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c")
    s.remove_msg(2)
    assert [s.load_msg(q) is None for q in (0, 1, 2, 3, 4, 1000)] == [
        True, False, True, False, True, True
    ]  # fmt: skip


# ---------------------------------------------------------------------------- reads


def test_load_next_msg(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "foo.a foo.b bar.a foo.a bar.b foo.c.d")
    s.remove_msg(4)

    def nxt(f: str, start: int) -> int:
        m = s.load_next_msg(f, start)
        return m.seq if m is not None else 0

    assert [nxt("", q) for q in (0, 1, 4, 6, 7)] == [1, 1, 5, 6, 0]
    assert [nxt(">", q) for q in (0, 2, 7)] == [1, 2, 0]
    assert [nxt("foo.a", q) for q in (0, 2, 5)] == [1, 0, 0]
    assert [nxt("foo.*", q) for q in (0, 2, 3, 4)] == [1, 2, 0, 0]
    assert [nxt("*.a", q) for q in (0, 2, 4)] == [1, 3, 0]
    assert [nxt("foo.>", q) for q in (3, 6)] == [6, 6]
    assert [nxt("*.b", q) for q in (0, 3)] == [2, 5]
    assert nxt("nope", 0) == 0 and nxt("nope.*", 0) == 0
    m = s.load_next_msg("bar.*", 4)
    assert m is not None and m.subject == "bar.b"


def test_load_next_msg_many_subjects_sparse_match(kit: StoreKit) -> None:
    s = kit.make()
    # Enough messages between the matches that a store cannot just walk from ``start``.
    subjects = [f"n.{i}" for i in range(300)] + ["n.0"] * 700 + ["w.y", "w.x", "w.y"]
    fill(s, subjects + ["n.1"] * 10)
    m = s.load_next_msg("w.*", 1)
    assert m is not None and m.seq == 1001
    m = s.load_next_msg("*.x", 2)
    assert m is not None and m.seq == 1002
    assert s.load_next_msg("w.*", 1004) is None
    m = s.load_next_msg("n.*", 1001)
    assert m is not None and m.seq == 1004


def test_load_last_msg(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a.x a.y a.x b.z a.y")

    def last(f: str) -> int:
        m = s.load_last_msg(f)
        return m.seq if m is not None else 0

    assert [last(f) for f in ("", ">", "a.x", "a.y", "a.*", "*.z", "c", "c.*")] == [
        5, 5, 3, 5, 5, 4, 0, 0
    ]  # fmt: skip
    s.remove_msg(5)
    s.remove_msg(3)
    assert [last(f) for f in ("", "a.x", "a.y", "a.*")] == [4, 1, 2, 2]


def test_load_prev_msg(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c d e")
    s.remove_msg(3)
    s.remove_msg(1)

    def prev(q: int) -> int:
        m = s.load_prev_msg(q)
        return m.seq if m is not None else 0

    assert [prev(q) for q in (0, 1, 2, 3, 4, 5, 100)] == [0, 0, 2, 2, 4, 5, 5]


def test_filtered_state(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a.1 b.1 a.2 a.1 b.2 a.1")
    s.remove_msg(4)
    fs = s.filtered_state
    assert fs(0, "") == SimpleState(5, 1, 6)
    assert fs(3, ">") == SimpleState(3, 3, 6)
    assert fs(0, "a.1") == SimpleState(2, 1, 6)
    assert fs(2, "a.1") == SimpleState(1, 6, 6)
    assert fs(0, "a.*") == SimpleState(3, 1, 6)
    assert fs(4, "a.*") == SimpleState(1, 6, 6)
    assert fs(0, "*.2") == SimpleState(2, 3, 5)
    assert fs(7, "") == SimpleState() and fs(0, "zz") == SimpleState()


def test_subjects_state_and_totals(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a.1 b.1 a.2 a.1 b.2 a.1")
    assert s.subjects_state("a.*") == {"a.1": SimpleState(3, 1, 6), "a.2": SimpleState(1, 3, 3)}
    assert set(s.subjects_state("")) == {"a.1", "a.2", "b.1", "b.2"}
    assert s.subjects_totals(">") == {"a.1": 3, "a.2": 1, "b.1": 1, "b.2": 1}
    assert s.subjects_totals("b.1") == {"b.1": 1}
    assert s.subjects_totals("*.2") == {"a.2": 1, "b.2": 1}
    s.remove_msg(1)
    s.remove_msg(6)
    s.remove_msg(3)
    assert s.subjects_state("a.>") == {"a.1": SimpleState(1, 4, 4)}
    assert s.state().num_subjects == 3


def test_num_pending(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a.1 b.1 a.2 a.1 b.2 a.1")
    assert s.num_pending(0, "", False) == 6
    assert s.num_pending(4, ">", False) == 3
    assert s.num_pending(2, "a.*", False) == 3
    assert s.num_pending(0, "", True) == 4
    assert s.num_pending(4, "", True) == 2  # a.1 (last 6) and b.2 (last 5)
    assert s.num_pending(0, "a.*", True) == 2
    assert s.num_pending(4, "a.*", True) == 1
    assert s.num_pending(99, "", False) == 0 and s.num_pending(99, "", True) == 0


def test_multi_last_seqs(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a.1 b.1 a.2 a.1 b.2 a.1")
    assert s.multi_last_seqs([">"], 0, 0) == [2, 3, 5, 6]
    assert s.multi_last_seqs(["a.*", "a.1", "*.1"], 0, 0) == [2, 3, 6]
    assert s.multi_last_seqs(["a.*"], 5, 0) == [3, 4]
    assert s.multi_last_seqs(["b.*"], 1, 0) == []
    assert s.multi_last_seqs(["zz"], 0, 0) == []
    assert s.multi_last_seqs([">"], 0, 4) == [2, 3, 5, 6]
    with pytest.raises(StoreError):
        s.multi_last_seqs([">"], 0, 3)


# ---------------------------------------------------------------------------- purge_ex


def test_purge_ex_literal_and_wildcard(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a.1 b.1 a.2 a.1 b.2 a.1")
    assert s.purge_ex("a.1", 0, 0) == 3
    assert live(s, 6) == [2, 3, 5]
    assert s.purge_ex("*.2", 0, 0) == 2
    assert live(s, 6) == [2]
    assert s.purge_ex("nothing.*", 0, 0) == 0
    assert summary(s) == (1, 2, 6, 4)


def test_purge_ex_seq_bound_is_exclusive(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b a b a b a b a b")
    # (verified) a filtered purge with seq=1 removes nothing; seq=6 removes b's below 6.
    assert s.purge_ex("a", 1, 0) == 0
    assert s.purge_ex("b", 6, 0) == 2
    assert live(s, 10) == [1, 3, 5, 6, 7, 8, 9, 10]
    assert s.purge_ex("*", 8, 0) == 5
    assert live(s, 10) == [8, 9, 10]
    st = s.state(with_deleted=True)
    assert (st.first_seq, st.deleted) == (8, [])


def test_purge_ex_keep_applies_to_the_whole_filter(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "e.b e.a e.b e.a e.b e.a e.b e.a e.b e.a")
    # (verified) keep=3 with a wildcard keeps the newest 3 overall, not 3 per subject.
    assert s.purge_ex("e.*", 0, 3) == 7
    assert live(s, 10) == [8, 9, 10]
    assert s.purge_ex("e.a", 0, 1) == 1
    assert live(s, 10) == [9, 10]
    assert s.purge_ex("e.*", 0, 2) == 0 and s.purge_ex("e.*", 0, 5) == 0


def test_purge_ex_all_with_keep_counts_messages(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "d.b d.a d.b d.a d.b d.a d.b d.a d.b d.a")
    s.remove_msg(9)
    # (verified) keep=3 on the whole stream keeps 3 messages even across a hole.
    assert s.purge_ex("", 0, 3) == 6
    st = s.state(with_deleted=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (3, 7, 10, [9])
    assert s.purge_ex(">", 0, 3) == 0


def test_purge_ex_all_with_seq_compacts(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "g g g g g")
    assert s.purge_ex("", 1, 0) == 0  # (verified)
    assert s.purge_ex("", 3, 0) == 2  # (verified) first_seq 3
    assert summary(s) == (3, 3, 5, 0)
    assert s.purge_ex(">", 100, 0) == 3  # (verified) first_seq 100, last_seq 99
    assert summary(s) == (0, 100, 99, 0)
    assert s.store_msg("g", None, b"x")[0] == 100


def test_purge_ex_all_no_bounds_is_purge(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c")
    assert s.purge_ex("", 0, 0) == 3
    assert summary(s) == (0, 4, 3, 0)


# ---------------------------------------------------------------------------- compact / truncate


def test_compact(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c d e f")
    assert s.compact(1) == 0
    s.remove_msg(4)
    assert s.compact(3) == 2
    assert summary(s) == (3, 3, 6, 1)
    assert s.compact(4) == 1  # (verified) 4 is deleted: first becomes the next live one
    st = s.state(with_deleted=True)
    assert (st.msgs, st.first_seq, st.deleted) == (2, 5, [])
    assert s.compact(2) == 0


def test_compact_beyond_last(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c")
    assert s.compact(4) == 3
    assert summary(s) == (0, 4, 3, 0)
    assert s.compact(50) == 0
    assert summary(s) == (0, 50, 49, 0)
    assert s.store_msg("a", None, b"x")[0] == 50


def test_truncate(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b a b a b")
    s.remove_msg(2)
    s.truncate(4)
    st = s.state(with_deleted=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (3, 1, 4, [2])
    assert st.bytes == 3 * kit.size("a", None, b"x")
    assert s.subjects_totals("") == {"a": 2, "b": 1}
    last = s.load_last_msg("")
    assert last is not None and last.seq == 4 and s.state().last_ts == last.ts
    assert s.store_msg("c", None, b"x")[0] == 5
    s.truncate(10)  # past the end: nothing to do
    assert summary(s) == (4, 1, 5, 1)
    s.truncate(2)  # to a deleted sequence: last_seq is still 2
    assert summary(s) == (1, 1, 2, 1)


def test_truncate_below_first(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c d e")
    s.compact(4)
    s.truncate(2)
    assert summary(s) == (0, 3, 2, 0)
    assert s.store_msg("a", None, b"x")[0] == 3


def test_truncate_zero_resets(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c")
    s.truncate(0)
    assert summary(s) == (0, 0, 0, 0)
    assert s.store_msg("a", None, b"x")[0] == 1


# ---------------------------------------------------------------------------- skip / raw


def test_skip_msgs(kit: StoreKit) -> None:
    s = kit.make()
    s.skip_msgs(1, 3)
    assert summary(s) == (0, 4, 3, 0)
    assert s.store_msg("a", None, b"x")[0] == 4
    s.skip_msgs(5, 2)
    assert s.state(with_deleted=True).deleted == [5, 6]
    assert summary(s) == (1, 4, 6, 2)
    assert s.store_msg("a", None, b"x")[0] == 7
    with pytest.raises(StoreError):
        s.skip_msgs(3, 1)
    with pytest.raises(StoreError):
        s.skip_msgs(9, 1)


def test_store_raw(kit: StoreKit) -> None:
    s = kit.make()
    s.store_raw("a", None, b"x", 5, T0)
    assert summary(s) == (1, 5, 5, 0)
    s.store_raw("b", HDR, b"y", 8, T0 + 1)
    st = s.state(with_deleted=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (2, 5, 8, [6, 7])
    assert (st.first_ts, st.last_ts) == (T0, T0 + 1)
    m = s.load_msg(8)
    assert m is not None and (m.subject, m.ts, m.hdr, m.data) == ("b", T0 + 1, HDR, b"y")
    with pytest.raises(StoreError):
        s.store_raw("c", None, b"z", 8, T0)
    with pytest.raises(StoreError):
        s.store_raw("c", None, b"z", 3, T0)
    assert s.store_msg("c", None, b"z")[0] == 9


# ---------------------------------------------------------------------------- limits


def test_max_msgs_discard_old(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msgs=3))
    fill(s, "a b c d e")
    assert summary(s) == (3, 3, 5, 0)


def test_max_bytes_discard_old(kit: StoreKit) -> None:
    one = kit.size("m.x", None, b"0123456789")
    s = kit.make(cfg(max_bytes=3 * one))
    fill(s, ["m.x"] * 4, b"0123456789")
    assert summary(s) == (3, 2, 4, 0) and s.state().bytes == 3 * one
    s.update_config(cfg(max_bytes=3 * one - 1))
    assert summary(s) == (2, 3, 4, 0)


def test_message_bigger_than_max_bytes_discard_old(kit: StoreKit) -> None:
    s = kit.make(cfg(max_bytes=20))
    # (verified) it is stored, then removed at once by the limit.
    assert s.store_msg("big", None, b"0123456789" * 3)[0] == 1
    assert summary(s) == (0, 2, 1, 0)


def test_max_msgs_per_subject_discard_old(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msgs_per_subject=2))
    fill(s, "a a a b b a")
    # (verified) 1, 2 dropped as a's 3rd and 4th arrive.
    assert live(s, 6) == [3, 4, 5, 6]
    assert s.subjects_totals("") == {"a": 2, "b": 2}
    s.update_config(cfg(max_msgs_per_subject=1))
    assert live(s, 6) == [5, 6]


def test_kv_style_replacement_keeps_subject_state(kit: StoreKit) -> None:
    # One value per key (a KV bucket): every put removes the key's previous message, and the
    # per-subject first/last must follow without going stale.
    s = kit.make(cfg(max_msgs_per_subject=1))
    keys = ["k0", "k1", "k2"]
    for round_ in range(4):
        for i, k in enumerate(keys):
            s.store_msg(k, None, b"%d" % round_)
            seq = round_ * len(keys) + i + 1
            st = s.subjects_state(k)[k]
            assert (st.msgs, st.first, st.last) == (1, seq, seq)
    assert live(s, 12) == [10, 11, 12]
    last = s.load_last_msg("k1")
    assert last is not None and last.seq == 11 and last.data == b"3"
    nxt = s.load_next_msg("k0", 1)
    assert nxt is not None and nxt.seq == 10


def test_discard_new_max_msgs(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msgs=2, discard=DiscardPolicy.NEW))
    fill(s, "a b")
    before = s.state()
    with pytest.raises(ErrMaxMsgs):
        s.store_msg("c", None, b"x")
    assert s.state() == before
    s.remove_msg(1)
    assert s.store_msg("c", None, b"x")[0] == 3  # the rejected one used no sequence


def test_discard_new_max_bytes_boundary(kit: StoreKit) -> None:
    one = kit.size("m.x", None, b"0123456789")
    s = kit.make(cfg(max_bytes=3 * one, discard=DiscardPolicy.NEW))
    # (verified) reaching max_bytes exactly is allowed; going over is not.
    fill(s, ["m.x"] * 3, b"0123456789")
    with pytest.raises(ErrMaxBytes):
        s.store_msg("m.x", None, b"0123456789")
    assert summary(s) == (3, 1, 3, 0)
    s2 = kit.make(cfg(max_bytes=10, discard=DiscardPolicy.NEW))
    with pytest.raises(ErrMaxBytes):
        s2.store_msg("big", None, b"0123456789")
    assert summary(s2) == (0, 0, 0, 0)


def test_discard_new_replacing_at_subject_limit_is_allowed(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msgs=3, max_msgs_per_subject=1, discard=DiscardPolicy.NEW))
    # (verified) a full stream takes a message that replaces its subject's only one.
    fill(s, "a b c a b")
    assert live(s, 5) == [3, 4, 5]
    with pytest.raises(ErrMaxMsgs):
        s.store_msg("d", None, b"x")


def test_discard_new_bytes_replacement_needs_room(kit: StoreKit) -> None:
    one = kit.size("a", None, b"xx")
    s = kit.make(cfg(max_bytes=2 * one, max_msgs_per_subject=1, discard=DiscardPolicy.NEW))
    fill(s, "a b", b"xx")
    assert s.store_msg("a", None, b"yy")[0] == 3  # same size: replacing frees enough
    with pytest.raises(ErrMaxBytes):
        s.store_msg("a", None, b"zzz")
    assert live(s, 4) == [2, 3]


def test_discard_new_per_subject(kit: StoreKit) -> None:
    c = cfg(max_msgs_per_subject=2, discard=DiscardPolicy.NEW, discard_new_per_subject=True)
    s = kit.make(c)
    fill(s, "a a")
    with pytest.raises(ErrMaxMsgsPerSubject):
        s.store_msg("a", None, b"x")
    assert s.store_msg("b", None, b"x")[0] == 3  # (verified)
    assert s.subjects_totals("") == {"a": 2, "b": 1}


def test_discard_new_without_per_subject_flag_drops_old(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msgs_per_subject=2, discard=DiscardPolicy.NEW))
    fill(s, "a a a")  # (verified) the per-subject limit still removes the oldest
    assert live(s, 3) == [2, 3]


def test_max_msg_size_counts_headers(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msg_size=len(HDR) + 4))
    assert s.store_msg("a", None, b"x" * (len(HDR) + 4))[0] == 1
    with pytest.raises(ErrMsgTooLarge):
        s.store_msg("a", None, b"x" * (len(HDR) + 5))
    assert s.store_msg("a", HDR, b"1234")[0] == 2
    with pytest.raises(ErrMsgTooLarge):
        s.store_msg("a", HDR, b"12345")  # (verified) headers count
    with pytest.raises(ErrMsgTooLarge):
        s.store_raw("a", None, b"x" * 100, 10, T0)
    assert summary(s) == (2, 1, 2, 0)


def test_update_config_lowers_limits(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b c d e f")
    s.update_config(cfg(max_msgs=4))
    assert live(s, 6) == [3, 4, 5, 6]
    s.update_config(cfg(max_msgs=2, discard=DiscardPolicy.NEW))
    assert live(s, 6) == [3, 4, 5, 6]  # discard new never removes stored messages
    with pytest.raises(ErrMaxMsgs):
        s.store_msg("g", None, b"x")


# ---------------------------------------------------------------------------- age and TTL


def test_max_age(kit: StoreKit) -> None:
    age = 5 * NS
    s = kit.make(cfg(max_age_ns=age))
    for i in range(4):
        s.store_raw("a", None, b"x", i + 1, T0 + i * NS)
    assert s.expire(T0 + age - 1) == 0
    assert s.expire(T0 + age) == 1  # expiry is inclusive at ts + max_age
    assert s.expire(T0 + age + 2 * NS) == 2
    assert summary(s) == (1, 4, 4, 0)
    assert s.expire(T0 + 100 * NS) == 1
    assert summary(s) == (0, 5, 4, 0)


def test_max_age_with_wall_clock(kit: StoreKit) -> None:
    s = kit.make(cfg(max_age_ns=NS))
    _, ts = s.store_msg("a", None, b"x")
    assert s.expire(ts) == 0
    assert s.expire(ts + NS) == 1


def test_message_ttl(kit: StoreKit) -> None:
    s = kit.make(cfg(allow_msg_ttl=True))
    s.store_raw("a", None, b"x", 1, T0, ttl=2)
    s.store_raw("b", None, b"x", 2, T0, ttl=1)
    s.store_raw("c", None, b"x", 3, T0)
    m = s.load_msg(1)
    assert m is not None and m.ttl == 2
    assert s.expire(T0 + NS - 1) == 0
    assert s.expire(T0 + NS) == 1
    assert live(s, 3) == [1, 3]
    assert s.expire(T0 + 2 * NS) == 1
    assert s.expire(T0 + 1000 * NS) == 0
    assert live(s, 3) == [3]


def test_message_ttl_with_store_msg(kit: StoreKit) -> None:
    s = kit.make(cfg(allow_msg_ttl=True))
    _, ts = s.store_msg("a", None, b"x", ttl=1)
    assert s.expire(ts + NS - 1) == 0 and s.expire(ts + NS) == 1


def test_ttl_ignored_unless_allowed(kit: StoreKit) -> None:
    s = kit.make()
    s.store_raw("a", None, b"x", 1, T0, ttl=1)
    assert s.expire(T0 + 100 * NS) == 0
    assert live(s, 1) == [1]


def test_max_age_and_ttl(kit: StoreKit) -> None:
    s = kit.make(cfg(allow_msg_ttl=True, max_age_ns=2 * NS))
    s.store_raw("a", None, b"x", 1, T0, ttl=1)
    s.store_raw("b", None, b"x", 2, T0, ttl=-1)  # "never"
    s.store_raw("c", None, b"x", 3, T0, ttl=5)
    s.store_raw("d", None, b"x", 4, T0)
    assert s.expire(T0 + NS) == 1
    # (verified) max_age removes messages with a longer TTL, but not TTL "never".
    assert s.expire(T0 + 2 * NS) == 2
    assert live(s, 4) == [2]
    st = s.state(with_deleted=True)
    assert (st.first_seq, st.last_seq, st.deleted) == (2, 4, [3, 4])
    assert s.expire(T0 + 10_000 * NS) == 0


# ---------------------------------------------------------------------------- callbacks


def test_update_callback_store_and_remove(kit: StoreKit) -> None:
    s = kit.make()
    rec = Recorder()
    s.register_updates(rec)
    s.store_msg("a", HDR, b"hi")
    s.store_raw("b", None, b"yo", 5, T0)
    s.remove_msg(1)
    s.erase_msg(5)
    sa, sb = kit.size("a", HDR, b"hi"), kit.size("b", None, b"yo")
    assert rec.calls == [(1, sa, 1, "a"), (1, sb, 5, "b"), (-1, -sa, 1, "a"), (-1, -sb, 5, "b")]
    s.register_updates(None)
    s.store_msg("c", None, b"")
    assert len(rec.calls) == 4


def test_update_callback_limit_and_age_removals(kit: StoreKit) -> None:
    s = kit.make(cfg(max_msgs=2, max_msgs_per_subject=1, max_age_ns=NS))
    rec = Recorder()
    s.register_updates(rec)
    s.store_raw("a", None, b"x", 1, T0)
    s.store_raw("a", None, b"x", 2, T0)  # replaces 1 (per subject)
    s.store_raw("b", None, b"x", 3, T0 + NS)
    s.store_raw("c", None, b"x", 4, T0 + NS)  # pushes out 2 (max_msgs)
    s.expire(T0 + 2 * NS)  # 3 and 4 are exactly max_age old
    one = kit.size("a", None, b"x")
    removals = [c for c in rec.calls if c[0] < 0]
    adds = sorted(c for c in rec.calls if c[0] > 0)
    order = [(1, "a"), (2, "a"), (3, "b"), (4, "c")]
    assert removals == [(-1, -one, q, subj) for q, subj in order]
    assert adds == [(1, one, q, subj) for q, subj in order]
    assert rec.totals() == (0, 0)


@pytest.mark.parametrize(
    "op",
    ["purge", "compact", "compact_beyond", "truncate", "purge_ex", "purge_ex_keep", "delete"],
)
def test_update_callback_bulk_totals(kit: StoreKit, op: str) -> None:
    """Bulk removals may report one aggregate call or one per message; the sums must
    match the state either way."""
    s = kit.make()
    rec = Recorder()
    s.register_updates(rec)
    fill(s, "a.1 a.2 b.1 a.1 b.2 a.1", b"data")
    s.remove_msg(3)
    if op == "purge":
        s.purge()
    elif op == "compact":
        s.compact(5)
    elif op == "compact_beyond":
        s.compact(100)
    elif op == "truncate":
        s.truncate(2)
    elif op == "purge_ex":
        s.purge_ex("a.*", 0, 0)
    elif op == "purge_ex_keep":
        s.purge_ex("", 0, 2)
    else:
        st = s.state()
        s.delete()
        assert rec.totals() == (0, 0) and st.msgs == 5
        return
    st = s.state()
    assert rec.totals() == (st.msgs, st.bytes)
    assert all(c[0] < 0 for c in rec.calls[7:])


# ---------------------------------------------------------------------------- lifecycle


def test_stop_and_delete_refuse_writes(kit: StoreKit) -> None:
    s = kit.make()
    fill(s, "a b")
    s.stop()
    with pytest.raises(ErrStoreClosed):
        s.store_msg("a", None, b"x")
    d = kit.make()
    fill(d, "a")
    d.delete()
    with pytest.raises(ErrStoreClosed):
        d.store_msg("a", None, b"x")


def test_reopen_keeps_everything(kit: StoreKit) -> None:
    if not kit.persistent:
        pytest.skip("memory stores do not survive a restart")
    c = cfg(max_msgs_per_subject=3, allow_msg_ttl=True)
    s = kit.make(c)
    fill(s, "a.1 a.2 b.1 a.1 b.2 a.1", b"data")
    s.store_raw("t", HDR, b"ttl", 9, T0, ttl=3)
    s.remove_msg(2)
    s.purge_ex("b.1", 0, 0)
    before = s.state(with_deleted=True)
    msgs = [s.load_msg(q) for q in range(11)]
    s = kit.reopen(s)
    assert s.state(with_deleted=True) == before
    assert [s.load_msg(q) for q in range(11)] == msgs
    assert s.subjects_totals("") == {"a.1": 3, "b.2": 1, "t": 1}
    assert s.expire(T0 + 3 * NS) == 1
    assert s.store_msg("z", None, b"")[0] == 10


def test_subject_last_after_removing_the_last_then_storing(kit: StoreKit) -> None:
    """Found by the power-loss suite: removing a subject's newest message and then storing
    a new one on it left the subject's last marked stale, so the next lookup walked back
    from the new message and reported an older one; a subject purge then missed the new
    message."""
    s = kit.make()
    for subj in ["a", "b", "a", "b", "a"]:
        s.store_msg(subj, None, b"x")
    s.remove_msg(5)  # the last "a": last goes stale
    s.store_msg("b", None, b"x")  # 6
    s.store_msg("a", None, b"x")  # 7: the new last "a"
    st = s.filtered_state(1, "a")
    assert (st.msgs, st.first, st.last) == (3, 1, 7)
    assert s.purge_ex("a", 0, 0) == 3
    assert [m is None for m in (s.load_msg(1), s.load_msg(3), s.load_msg(7))] == [True] * 3


def test_load_with_headers_passes_over_the_rest(kit: StoreKit) -> None:
    """What rebuilding the message-id window reads: the messages with headers among the
    next ``max_msgs`` live ones, and where to go on from."""
    s = kit.make()
    hdr = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n"
    for i in range(1, 41):
        s.store_msg("a", hdr % i if i % 7 == 0 else None, b"p%d" % i)
    s.remove_msg(14)  # a deleted message with headers is not returned
    s.remove_msg(15)
    got: list[int] = []
    seq = 1
    calls = 0
    while seq:
        batch, seq = s.load_with_headers(seq, 6)
        got += [m.seq for m in batch]
        assert all(m.hdr == hdr % m.seq and m.data == b"p%d" % m.seq for m in batch)
        calls += 1
    assert got == [7, 21, 28, 35]
    assert calls == 7  # 38 live messages, 6 at a time, then the empty answer
    assert s.load_with_headers(41, 6) == ([], 0)
