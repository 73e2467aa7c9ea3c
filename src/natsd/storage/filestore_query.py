"""The read side of FileStore: loads, state and per-subject queries over the block index.

Kept apart from the write path (``filestore``) so each module stays readable; ``FileStore``
supplies the index attributes and the primitives declared at the top of ``QueryMixin``.
Strategy, as in nats-server's memstore: answer from per-subject state when it suffices and
fall back to a scan of the live sequences (which walks records, never sequence gaps; a
subject is read from its record).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Final

from natsd.storage.filestore_index import (
    Block,
    SubjState,
    is_all,
    is_literal,
    subject_matches,
)
from natsd.storage.store import (
    LostData,
    SimpleState,
    StoredMsg,
    StoreError,
    StreamState,
    StreamStore,
)

__all__ = ["QueryMixin"]

# Above this many subjects a wildcard lookup scans messages instead of subjects
# (nats-server memstore linearScanMaxFSS).
_LINEAR_SCAN_MAX_SUBJECTS: Final = 256


class QueryMixin(StreamStore):
    _nlive: int
    _subjects: dict[str, SubjState]
    _blocks: list[Block]
    _firsts: list[int]
    _bytes: int
    _first_seq: int
    _first_ts: int
    _last_seq: int
    _last_ts: int
    _lost: LostData | None

    # Primitives FileStore provides.
    def _check_open(self) -> None:
        raise NotImplementedError

    def _load(self, seq: int) -> StoredMsg | None:
        raise NotImplementedError

    def _iter_live(self, lo: int, hi: int) -> Iterator[int]:
        raise NotImplementedError

    def _next_live(self, lo: int) -> tuple[Block, int, int] | None:
        raise NotImplementedError

    def _load_at(self, blk: Block, k: int, seq: int) -> StoredMsg | None:
        raise NotImplementedError

    def _iter_live_rev(self, hi: int, lo: int) -> Iterator[int]:
        raise NotImplementedError

    def _iter_subjects(self, lo: int, hi: int, rev: bool = False) -> Iterator[tuple[int, str]]:
        raise NotImplementedError

    def _fresh(self, subject: str, ss: SubjState) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _is_literal_cached(subject: str) -> bool:
        return is_literal(subject)

    @staticmethod
    def _matches(subject: str, filter: str) -> bool:
        return subject_matches(subject, filter)

    def _matching(self, filter: str) -> list[tuple[str, SubjState]]:
        """Subjects matching ``filter`` with their state brought up to date."""
        if is_all(filter):
            items = list(self._subjects.items())
        elif is_literal(filter):
            ss = self._subjects.get(filter)
            items = [(filter, ss)] if ss is not None else []
        else:
            items = [(s, ss) for s, ss in self._subjects.items() if subject_matches(s, filter)]
        for subj, ss in items:
            if ss.first_stale or ss.last_stale:
                self._fresh(subj, ss)
        return items

    def _first_loadable(self, seqs: Iterator[int]) -> StoredMsg | None:
        for s in seqs:
            m = self._load(s)
            if m is not None:
                return m
        return None

    # ------------------------------------------------------------------ loads
    def load_msg(self, seq: int) -> StoredMsg | None:
        self._check_open()
        return self._load(seq)

    def load_next_msg(self, filter: str, start: int) -> StoredMsg | None:
        self._check_open()
        start = max(start, self._first_seq)
        last = self._last_seq
        if start > last or not self._nlive:
            return None
        if is_all(filter):
            # (what a consumer without a filter reads for every message)
            while True:
                w = self._next_live(start)
                if w is None:
                    return None
                m = self._load_at(w[0], w[1], w[2])
                if m is not None:
                    return m
                start = w[2] + 1
        if is_literal(filter):
            ss = self._subjects.get(filter)
            if ss is None:
                return None
            self._fresh(filter, ss)
            if ss.last < start:
                return None
            # Explicit loops, not generator expressions: mypyc builds those eagerly, which
            # made every call walk the whole range (a filtered consumer went quadratic).
            for s, subj in self._iter_subjects(max(start, ss.first), ss.last):
                if subj == filter:
                    m = self._load(s)
                    if m is not None:
                        return m
            return None
        nsub = len(self._subjects)
        if nsub > _LINEAR_SCAN_MAX_SUBJECTS or 2 * (last - start) < nsub:
            cache: dict[str, bool] = {}

            def match(subj: str) -> bool:
                m = cache.get(subj)
                if m is None:
                    m = cache[subj] = subject_matches(subj, filter)
                return m

            for s, subj in self._iter_subjects(start, last):
                if match(subj):
                    m = self._load(s)
                    if m is not None:
                        return m
            return None
        matched = {s: ss for s, ss in self._matching(filter) if ss.last >= start}
        if not matched:
            return None
        lo = max(start, min(ss.first for ss in matched.values()))
        hi = max(ss.last for ss in matched.values())
        for s, subj in self._iter_subjects(lo, hi):
            if subj in matched:
                m = self._load(s)
                if m is not None:
                    return m
        return None

    def load_last_msg(self, subject: str) -> StoredMsg | None:
        self._check_open()
        if not self._nlive:
            return None
        if is_all(subject):
            return self._first_loadable(self._iter_live_rev(self._last_seq, self._first_seq))
        items = self._matching(subject)
        if not items:
            return None
        best = max(ss.last for _s, ss in items)
        return self._load(best)

    def load_prev_msg(self, start: int) -> StoredMsg | None:
        self._check_open()
        if not self._nlive or start < self._first_seq:
            return None
        return self._first_loadable(self._iter_live_rev(min(start, self._last_seq), 1))

    # ------------------------------------------------------------------ state
    def last_seq(self) -> int:
        return self._last_seq

    def state(self, with_deleted: bool = False) -> StreamState:
        self._check_open()
        n = self._nlive
        first, last = self._first_seq, self._last_seq
        st = StreamState(
            msgs=n,
            bytes=self._bytes,
            first_seq=first,
            first_ts=self._first_ts if n else 0,
            last_seq=last,
            last_ts=self._last_ts,
            num_deleted=max(0, last - first + 1 - n) if n else 0,
            num_subjects=len(self._subjects),
        )
        if self._lost is not None:
            st.lost = LostData(msgs=list(self._lost.msgs), bytes=self._lost.bytes)
        if with_deleted:
            deleted: list[int] = []
            if n:
                prev = first - 1
                for s in self._iter_live(first, last):
                    if s > prev + 1:
                        deleted.extend(range(prev + 1, s))
                    prev = s
                deleted.extend(range(prev + 1, last + 1))
            st.deleted = deleted
        return st

    def _count_live_from(self, seq: int) -> tuple[int, int]:
        """(live messages with sequence >= seq, the first of them) using per-block counts."""
        blocks = self._blocks
        i = max(bisect_right(self._firsts, seq) - 1, 0)
        count = 0
        first = 0
        for bi in range(i, len(blocks)):
            blk = blocks[bi]
            if not blk.live:
                continue
            alive = blk.alive
            k = blk.pos_from(seq)
            if k == 0:
                count += blk.live
            else:
                count += alive.count(1, k)
            if not first:
                k = alive.find(1, k)
                if k >= 0:
                    first = blk.seq_at(k)
        return count, first

    def filtered_state(self, seq: int, subject: str) -> SimpleState:
        self._check_open()
        seq = max(seq, self._first_seq)
        if seq > self._last_seq or not self._nlive:
            return SimpleState()
        last_live = next(self._iter_live_rev(self._last_seq, seq), 0)
        if is_all(subject):
            if seq <= self._first_seq:
                return SimpleState(self._nlive, self._first_seq, last_live)
            count, first = self._count_live_from(seq)
            return SimpleState(count, first, last_live if count else 0)
        total = 0
        first = 0
        last = 0
        partial: dict[str, SubjState] = {}
        for subj, ss in self._matching(subject):
            if seq <= ss.first:
                total += ss.msgs
                if first == 0 or ss.first < first:
                    first = ss.first
                last = max(last, ss.last)
            elif seq <= ss.last:
                partial[subj] = ss
                last = max(last, ss.last)
        if partial:
            hi = max(ss.last for ss in partial.values())
            for s, subj in self._iter_subjects(seq, hi):
                if subj in partial:
                    total += 1
                    if first == 0 or s < first:
                        first = s
        return SimpleState(total, first, last)

    def subjects_state(self, filter: str) -> dict[str, SimpleState]:
        self._check_open()
        return {s: SimpleState(ss.msgs, ss.first, ss.last) for s, ss in self._matching(filter)}

    def subjects_totals(self, filter: str) -> dict[str, int]:
        self._check_open()
        if is_all(filter):
            return {s: ss.msgs for s, ss in self._subjects.items()}
        if is_literal(filter):
            ss = self._subjects.get(filter)
            return {filter: ss.msgs} if ss is not None else {}
        return {s: ss.msgs for s, ss in self._subjects.items() if subject_matches(s, filter)}

    def num_pending(self, sseq: int, filter: str, last_per_subject: bool) -> int:
        self._check_open()
        if not last_per_subject:
            return self.filtered_state(sseq, filter).msgs
        sseq = max(sseq, self._first_seq)
        return sum(1 for _s, ss in self._matching(filter) if ss.last >= sseq)

    def multi_last_seqs(self, filters: list[str], max_seq: int, max_allowed: int) -> list[int]:
        self._check_open()
        if not self._nlive:
            return []
        if max_seq <= 0:
            max_seq = self._last_seq
        seen: set[int] = set()
        for filter in filters:
            for subj, ss in self._matching(filter):
                if ss.last <= max_seq:
                    seen.add(ss.last)
                elif ss.first <= max_seq:
                    for s, name in self._iter_subjects(ss.first, max_seq, rev=True):
                        if name == subj:
                            seen.add(s)
                            break
            if max_allowed > 0 and len(seen) > max_allowed:
                raise StoreError("too many results")
        return sorted(seen)
