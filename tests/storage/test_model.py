"""Model-based contract test: random operation sequences against ``model.Model``.

Runs for every store kind (``kit``). Timestamps come from a model clock (store_raw) so
max_age and TTL boundaries are hit exactly; store_msg (wall clock) is used only when the
configuration makes timestamps irrelevant.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from natsd.storage.store import DiscardPolicy, StoreConfig, StoreError, StreamStore

from .conftest import StoreKit
from .model import NS, Model

SUBJECTS = ["a", "a.b", "a.c", "b.c", "b.c.d"]
FILTERS = ["", ">", "a", "a.*", "*.c", "b.>", "a.b", "*", "x.*"]
HDR = b"NATS/1.0\r\nK: v\r\n\r\n"

payloads = st.binary(max_size=12)
headers = st.sampled_from([None, None, HDR])
ttls = st.sampled_from([0, 0, 0, 1, 2, -1])


class StoreMachine(RuleBasedStateMachine):
    kit: StoreKit

    def __init__(self) -> None:
        super().__init__()
        self.store: StreamStore | None = None
        self.model: Model | None = None
        self.clock = time.time_ns()
        self.totals = [0, 0]

    def _cb(self, msgs: int, nbytes: int, seq: int, subject: str) -> None:
        self.totals[0] += msgs
        self.totals[1] += nbytes

    @property
    def s(self) -> StreamStore:
        assert self.store is not None
        return self.store

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    @initialize(
        max_msgs=st.sampled_from([-1, -1, 3, 6]),
        max_bytes=st.sampled_from([-1, -1, 150, 300]),
        maxp=st.sampled_from([-1, -1, 1, 2]),
        discard=st.sampled_from(DiscardPolicy),
        per_subject=st.booleans(),
        max_msg_size=st.sampled_from([-1, -1, 10]),
        max_age=st.sampled_from([0, 0, 3 * NS]),
        allow_ttl=st.booleans(),
        first_seq=st.sampled_from([0, 0, 5]),
    )
    def setup(
        self,
        max_msgs: int,
        max_bytes: int,
        maxp: int,
        discard: DiscardPolicy,
        per_subject: bool,
        max_msg_size: int,
        max_age: int,
        allow_ttl: bool,
        first_seq: int,
    ) -> None:
        cfg = StoreConfig(
            name="M",
            max_msgs=max_msgs,
            max_bytes=max_bytes,
            max_msgs_per_subject=maxp,
            discard=discard,
            discard_new_per_subject=per_subject and discard is DiscardPolicy.NEW,
            max_msg_size=max_msg_size,
            max_age_ns=max_age,
            allow_msg_ttl=allow_ttl,
            first_seq=first_seq,
        )
        self.store = self.kit.make(cfg)
        self.model = Model(cfg, self.kit.size)
        self.store.register_updates(self._cb)

    def teardown(self) -> None:
        if self.store is not None:
            self.store.stop()

    # ------------------------------------------------------------------ writes
    def _expect_store(self, subject: str, hdr: bytes | None, data: bytes, ttl: int) -> type | None:
        """The error class the model raises for this message (checked before any change)."""
        probe = Model(self.m.cfg, self.m.size)
        probe.msgs, probe.first, probe.last = dict(self.m.msgs), self.m.first, self.m.last
        try:
            probe.store(subject, hdr, data, probe.last + 1, 0, ttl)
        except StoreError as e:
            return type(e)
        return None

    @precondition(lambda self: self.m.cfg.max_age_ns == 0 and not self.m.cfg.allow_msg_ttl)
    @rule(subject=st.sampled_from(SUBJECTS), hdr=headers, data=payloads)
    def store_msg(self, subject: str, hdr: bytes | None, data: bytes) -> None:
        expected = self._expect_store(subject, hdr, data, 0)
        try:
            seq, ts = self.s.store_msg(subject, hdr, data)
        except StoreError as e:
            assert type(e) is expected
            return
        assert expected is None and seq == self.m.last + 1
        self.m.store(subject, hdr, data, seq, ts, 0)

    @rule(
        subject=st.sampled_from(SUBJECTS),
        hdr=headers,
        data=payloads,
        gap=st.sampled_from([0, 0, 0, 1, 3]),
        ttl=ttls,
    )
    def store_raw(self, subject: str, hdr: bytes | None, data: bytes, gap: int, ttl: int) -> None:
        seq = self.m.last + 1 + gap
        expected = self._expect_store(subject, hdr, data, ttl)
        try:
            self.s.store_raw(subject, hdr, data, seq, self.clock, ttl)
        except StoreError as e:
            assert type(e) is expected
            return
        assert expected is None
        self.m.store(subject, hdr, data, seq, self.clock, ttl)

    @rule(num=st.integers(1, 3))
    def skip_msgs(self, num: int) -> None:
        self.s.skip_msgs(self.m.last + 1, num)
        self.m.skip(num)

    @rule(data=st.data(), erase=st.booleans())
    def remove(self, data: st.DataObject, erase: bool) -> None:
        seq = data.draw(st.integers(0, self.m.last + 2))
        got = self.s.erase_msg(seq) if erase else self.s.remove_msg(seq)
        assert got == self.m.remove(seq)

    @rule(data=st.data(), filt=st.sampled_from(FILTERS), use_keep=st.booleans())
    def purge_ex(self, data: st.DataObject, filt: str, use_keep: bool) -> None:
        seq = keep = 0
        if use_keep:
            keep = data.draw(st.integers(0, 4))
        else:
            seq = data.draw(st.integers(0, self.m.last + 3))
        assert self.s.purge_ex(filt, seq, keep) == self.m.purge_ex(filt, seq, keep)

    @rule()
    def purge(self) -> None:
        assert self.s.purge() == self.m.purge()

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        seq = data.draw(st.integers(0, self.m.last + 3))
        assert self.s.compact(seq) == self.m.compact(seq)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        seq = data.draw(st.integers(max(0, self.m.first - 2), self.m.last + 1))
        self.s.truncate(seq)
        self.m.truncate(seq)

    @rule(step=st.sampled_from([0, NS // 2, NS, 2 * NS]))
    def tick(self, step: int) -> None:
        self.clock += step

    @rule(delta=st.sampled_from([-1, 0, 1, NS]))
    def expire(self, delta: int) -> None:
        now = self.clock + delta
        assert self.s.expire(now) == self.m.expire(now)

    @precondition(lambda self: self.kit.persistent)
    @rule()
    def reopen(self) -> None:
        self.store = self.kit.reopen(self.s)
        self.store.register_updates(self._cb)

    # ------------------------------------------------------------------ checks
    @invariant()
    def state_matches(self) -> None:
        if self.store is None:
            return
        s, m = self.s, self.m
        st_ = s.state(with_deleted=True)
        first_ts = m.msgs[m.first].ts if m.msgs else 0
        assert (st_.msgs, st_.bytes, st_.first_seq, st_.last_seq, st_.first_ts) == (
            len(m.msgs),
            m.nbytes,
            m.first,
            m.last,
            first_ts,
        )
        assert st_.num_deleted == m.num_deleted
        assert st_.deleted == m.deleted()
        assert st_.num_subjects == len(m.subjects(""))
        assert tuple(self.totals) == (st_.msgs, st_.bytes)
        assert s.flush() == m.last

    @invariant()
    def loads_match(self) -> None:
        if self.store is None:
            return
        s, m = self.s, self.m
        for seq in range(max(0, m.first - 1), m.last + 2):
            got = s.load_msg(seq)
            want = m.msgs.get(seq)
            if want is None:
                assert got is None, seq
            else:
                assert got is not None, seq
                assert (got.subject, got.seq, got.ts, got.hdr or None, got.data) == (
                    want.subject,
                    want.seq,
                    want.ts,
                    want.hdr,
                    want.data,
                )
        starts = sorted({0, m.first, (m.first + m.last) // 2, m.last, m.last + 1})
        for q in starts:
            p = s.load_prev_msg(q)
            assert (p.seq if p else 0) == m.load_prev(q)

    @invariant()
    def queries_match(self) -> None:
        if self.store is None:
            return
        s, m = self.s, self.m
        mid = (m.first + m.last) // 2 + 1
        for f in FILTERS:
            last = s.load_last_msg(f)
            assert (last.seq if last else 0) == m.load_last(f), f
            for q in (0, mid, m.last + 1):
                nxt = s.load_next_msg(f, q)
                assert (nxt.seq if nxt else 0) == m.load_next(f, q), (f, q)
                assert s.filtered_state(q, f) == m.filtered(q, f), (f, q)
                assert s.num_pending(q, f, False) == m.num_pending(q, f, False)
                assert s.num_pending(q, f, True) == m.num_pending(q, f, True)
            assert s.subjects_state(f) == m.subjects(f), f
            assert s.subjects_totals(f) == {k: v.msgs for k, v in m.subjects(f).items()}
        for fs in (["a.*", "b.>"], [">"], ["a", "a.b", "x.*"]):
            assert s.multi_last_seqs(fs, 0, 0) == m.multi_last(fs, 0, 0)
            assert s.multi_last_seqs(fs, mid, 0) == m.multi_last(fs, mid, 0)


def test_store_matches_model(kit: StoreKit) -> None:
    machine = type("Machine", (StoreMachine,), {"kit": kit})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=80 if kit.kind == "memory" else 30,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
