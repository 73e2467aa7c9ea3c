"""The in-memory StreamStore, following nats-server's ``server/memstore.go`` semantics.

Messages live in a dict keyed by sequence, beside ascending sequence indexes (``_Seqs``)
over the whole stream and per subject: their first and last entries are always live and a
removed interior entry stays as a dead slot until the list is compacted, so removals are
O(1) and literal-subject queries need no scan. Wildcard filters scan the subject table.

Checked against nats-server 2.15 through its JetStream API: a new stream reports first/last
0/0, a purged one last+1/last (N/N-1 with ``first_seq`` N); discard new refuses when
bytes + size > max_bytes, but takes a message that replaces its subject's oldest even at
max_msgs; max_msg_size counts headers; purge ``keep`` with a filter keeps the newest
``keep`` across the filter; purge ``seq`` removes sequences below it; max_age also removes
messages with a positive TTL, but not TTL "never" (negative).
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Final

from natsd.core.filters import is_all, is_literal, match_tokens
from natsd.storage.sources_index import SourcesIndex
from natsd.storage.store import (
    DiscardPolicy,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    ErrStoreClosed,
    SimpleState,
    StorageUpdate,
    StoreConfig,
    StoredMsg,
    StoreError,
    StreamState,
    StreamStore,
    mem_msg_size,
)

__all__ = ["MemoryStore"]

_NS_PER_SEC: Final = 1_000_000_000
# A list is compacted once this many of its slots are dead and they outnumber the live ones.
_COMPACT_MIN: Final = 64


class _Seqs:
    """Ascending sequences of live messages, the whole stream's or one subject's.

    ``seqs[head]`` and ``seqs[-1]`` are always live when ``n`` > 0. Callers remove the
    message from ``live`` (the store's dict) before calling :meth:`discard`.
    """

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.head: int = 0
        self.n: int = 0  # live entries
        self.dead: int = 0  # removed entries still inside seqs[head:]

    def append(self, seq: int) -> None:
        self.seqs.append(seq)
        self.n += 1

    def first(self) -> int:
        return self.seqs[self.head] if self.n else 0

    def last(self) -> int:
        return self.seqs[-1] if self.n else 0

    def discard(self, seq: int, live: dict[int, StoredMsg]) -> None:
        self.n -= 1
        if self.n == 0:
            self.seqs = []
            self.head = 0
            self.dead = 0
            return
        seqs = self.seqs
        if seq == seqs[self.head]:
            h = self.head + 1
            while seqs[h] not in live:
                h += 1
                self.dead -= 1
            self.head = h
            if h > _COMPACT_MIN and 2 * h > len(seqs):
                del seqs[:h]
                self.head = 0
        elif seq == seqs[-1]:
            seqs.pop()
            while seqs[-1] not in live:
                seqs.pop()
                self.dead -= 1
        else:
            self.dead += 1
            if self.dead > _COMPACT_MIN and self.dead > self.n:
                self.seqs = [s for s in seqs[self.head :] if s in live]
                self.head = 0
                self.dead = 0

    def next_at(self, start: int, live: dict[int, StoredMsg]) -> int:
        """First live sequence >= start, or 0."""
        if self.n == 0:
            return 0
        seqs = self.seqs
        if start <= seqs[self.head]:
            return seqs[self.head]
        if start > seqs[-1]:
            return 0
        i = bisect_left(seqs, start, self.head)
        while seqs[i] not in live:
            i += 1
        return seqs[i]

    def prev_at(self, start: int, live: dict[int, StoredMsg]) -> int:
        """Last live sequence <= start, or 0."""
        if self.n == 0:
            return 0
        seqs = self.seqs
        if start >= seqs[-1]:
            return seqs[-1]
        if start < seqs[self.head]:
            return 0
        i = bisect_right(seqs, start, self.head) - 1
        while seqs[i] not in live:
            i -= 1
        return seqs[i]

    def count_from(self, start: int, live: dict[int, StoredMsg]) -> int:
        """Live sequences >= start (scans whichever side of ``start`` is shorter)."""
        if self.n == 0:
            return 0
        seqs = self.seqs
        if start <= seqs[self.head]:
            return self.n
        if start > seqs[-1]:
            return 0
        i = bisect_left(seqs, start, self.head)
        if not self.dead:
            return len(seqs) - i  # no dead slots: every entry from i on is live
        if len(seqs) - i <= i - self.head:
            return _count_live(seqs, i, len(seqs), live)
        return self.n - _count_live(seqs, self.head, i, live)

    def below(self, bound: int, live: dict[int, StoredMsg]) -> list[int]:
        """Live sequences < bound, ascending."""
        out: list[int] = []
        for j in range(self.head, len(self.seqs)):
            s = self.seqs[j]
            if s >= bound:
                break
            if s in live:
                out.append(s)
        return out

    def nth(self, i: int, live: dict[int, StoredMsg]) -> int:
        """The i-th (0-based, ascending) live sequence, walking from the nearer end."""
        seqs = self.seqs
        if i < self.n - i:
            k = -1
            for j in range(self.head, len(seqs)):
                if seqs[j] in live:
                    k += 1
                    if k == i:
                        return seqs[j]
        else:
            k = self.n
            for j in range(len(seqs) - 1, self.head - 1, -1):
                if seqs[j] in live:
                    k -= 1
                    if k == i:
                        return seqs[j]
        return 0


def _count_live(seqs: list[int], lo: int, hi: int, live: dict[int, StoredMsg]) -> int:
    return sum(1 for j in range(lo, hi) if seqs[j] in live)


def _msg_size(msg: StoredMsg) -> int:
    return mem_msg_size(msg.subject, msg.hdr, msg.data)


class MemoryStore(StreamStore):
    """A stream's messages in memory. Not thread-safe: one owner (the event loop)."""

    def __init__(self, cfg: StoreConfig, now_ns: Callable[[], int] = time.time_ns) -> None:
        self._cfg = cfg
        # The clock that stamps stored messages (a test passes a virtual one).
        self._now_ns = now_ns
        self._cb: StorageUpdate | None = None
        self._closed = False
        self._sources: SourcesIndex | None = None  # (a sourcing stream's: track_sources)
        self._msgs: dict[int, StoredMsg] = {}
        self._all = _Seqs()
        self._fss: dict[str, _Seqs] = {}
        self._ttls: list[tuple[int, int]] = []  # heap of (expires_ns, seq)
        self._bytes = 0
        self._first = 0
        self._last = 0
        self._last_ts = 0
        if cfg.first_seq > 0:
            self._first = cfg.first_seq
            self._last = cfg.first_seq - 1

    # ------------------------------------------------------------------ internals
    def _reset(self, first: int, last: int) -> tuple[int, int]:
        """Drop every message; returns (messages, bytes) dropped."""
        n, b = len(self._msgs), self._bytes
        self._msgs = {}
        self._all = _Seqs()
        self._fss = {}
        self._ttls = []
        self._bytes = 0
        self._first = first
        self._last = last
        return n, b

    def _notify_bulk(self, n: int, b: int) -> None:
        if n and self._cb is not None:
            self._cb(-n, -b, 0, "")

    def _remove(self, seq: int, notify: bool) -> int:
        """Remove one message; returns its size, or -1 when it was not there."""
        msg = self._msgs.pop(seq, None)
        if msg is None:
            return -1
        size = _msg_size(msg)
        self._bytes -= size
        live = self._msgs
        self._all.discard(seq, live)
        ss = self._fss[msg.subject]
        ss.discard(seq, live)
        if ss.n == 0:
            del self._fss[msg.subject]
        if seq == self._first:
            self._first = self._all.first() if live else self._last + 1
        if notify and self._cb is not None:
            self._cb(-1, -size, seq, msg.subject)
        return size

    def _store(
        self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int, ttl: int
    ) -> None:
        if self._closed:
            raise ErrStoreClosed("store is closed")
        cfg = self._cfg
        hdr = hdr or None
        if cfg.max_msg_size > 0 and len(data) + (len(hdr) if hdr else 0) > cfg.max_msg_size:
            raise ErrMsgTooLarge("message size exceeds maximum allowed")
        size = mem_msg_size(subject, hdr, data)
        ss = self._fss.get(subject)
        maxp = cfg.max_msgs_per_subject
        at_subject_limit = ss is not None and 0 < maxp <= ss.n
        if cfg.discard is DiscardPolicy.NEW:
            if at_subject_limit and cfg.discard_new_per_subject:
                raise ErrMaxMsgsPerSubject("maximum messages per subject exceeded")
            if 0 < cfg.max_msgs <= len(self._msgs) and not at_subject_limit:
                raise ErrMaxMsgs("maximum messages exceeded")
            if cfg.max_bytes > 0 and self._bytes + size > cfg.max_bytes:
                # Storing replaces the subject's oldest message: fine if that frees enough.
                if ss is None or not at_subject_limit:
                    raise ErrMaxBytes("maximum bytes exceeded")
                if _msg_size(self._msgs[ss.first()]) < size:
                    raise ErrMaxBytes("maximum bytes exceeded")

        msg = StoredMsg(subject, seq, ts, hdr, data, ttl)
        if not self._msgs:
            self._first = seq
        self._msgs[seq] = msg
        self._all.append(seq)
        if ss is None:
            ss = _Seqs()
            self._fss[subject] = ss
        ss.append(seq)
        self._bytes += size
        self._last = seq
        self._last_ts = ts
        if ttl > 0 and cfg.allow_msg_ttl:
            heapq.heappush(self._ttls, (ts + ttl * _NS_PER_SEC, seq))
            if len(self._ttls) > 2 * len(self._msgs) + _COMPACT_MIN:
                self._rebuild_ttls()  # drop entries of messages removed by other means
        if self._cb is not None:
            self._cb(1, size, seq, subject)
        if self._sources is not None and hdr is not None:
            self._sources.note(hdr)

        if maxp > 0:
            while ss.n > maxp:
                self._remove(ss.first(), True)
        if cfg.discard is DiscardPolicy.OLD:
            self._enforce_totals()

    def _enforce_totals(self) -> None:
        cfg = self._cfg
        if cfg.max_msgs > 0:
            while len(self._msgs) > cfg.max_msgs:
                self._remove(self._first, True)
        if cfg.max_bytes > 0:
            while self._bytes > cfg.max_bytes:
                self._remove(self._first, True)

    def _subjects(self, filt: str) -> list[tuple[str, _Seqs]]:
        """The per-subject indexes matching a filter."""
        if is_all(filt):
            return list(self._fss.items())
        if is_literal(filt):
            ss = self._fss.get(filt)
            return [(filt, ss)] if ss is not None else []
        ftoks = filt.split(".")
        return [(s, ss) for s, ss in self._fss.items() if match_tokens(s, ftoks)]

    def _next_wild(self, filt: str, start: int) -> int:
        ftoks = filt.split(".")
        msgs = self._msgs
        seqs = self._all.seqs
        i = bisect_left(seqs, start, self._all.head)
        # A short walk in sequence order wins when matches are dense; past that budget
        # ask each matching subject's index instead.
        end = min(len(seqs), i + 32 + len(self._fss))
        for j in range(i, end):
            m = msgs.get(seqs[j])
            if m is not None and match_tokens(m.subject, ftoks):
                return m.seq
        if end >= len(seqs):
            return 0
        start = seqs[end]
        best = 0
        for subj, ss in self._fss.items():
            if ss.last() >= start and match_tokens(subj, ftoks):
                s = ss.next_at(start, msgs)
                if best == 0 or s < best:
                    best = s
        return best

    def _rebuild_ttls(self) -> None:
        msgs = self._msgs.values() if self._cfg.allow_msg_ttl else ()
        self._ttls = [(m.ts + m.ttl * _NS_PER_SEC, m.seq) for m in msgs if m.ttl > 0]
        heapq.heapify(self._ttls)

    # ------------------------------------------------------------------ writes
    def store_msg(
        self, subject: str, hdr: bytes | None, data: bytes, ttl: int = 0
    ) -> tuple[int, int]:
        seq, ts = self._last + 1, self._now_ns()
        self._store(subject, hdr, data, seq, ts, ttl)
        return seq, ts

    def store_raw(
        self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int, ttl: int = 0
    ) -> None:
        if seq <= self._last:
            raise StoreError(f"sequence mismatch: {seq} <= last sequence {self._last}")
        self._store(subject, hdr, data, seq, ts, ttl)

    def skip_msgs(self, seq: int, num: int) -> None:
        if self._closed:
            raise ErrStoreClosed("store is closed")
        if seq != self._last + 1:
            raise StoreError(f"sequence mismatch: {seq} != {self._last + 1}")
        if num <= 0:
            return
        self._last = seq + num - 1
        self._last_ts = self._now_ns()
        if not self._msgs:
            self._first = self._last + 1

    def remove_msg(self, seq: int) -> bool:
        return self._remove(seq, True) >= 0

    def erase_msg(self, seq: int) -> bool:
        # Python cannot overwrite the bytes in place; dropping the last reference is all
        # there is (loaded messages are shared with callers, so they are not scrambled).
        return self._remove(seq, True) >= 0

    def purge(self) -> int:
        n, b = self._reset(self._last + 1, self._last)
        self._notify_bulk(n, b)
        return n

    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        msgs = self._msgs
        if is_all(subject):
            if seq > 0:
                return self.compact(seq)
            if keep <= 0:
                return self.purge()
            if keep >= len(msgs):
                return 0
            return self.compact(self._all.nth(len(msgs) - keep, msgs))
        subs = self._subjects(subject)
        bound = seq if seq > 0 else self._last + 1
        doomed: list[int] = []
        for _, ss in subs:
            doomed.extend(ss.below(bound, msgs))
        if keep > 0:
            total = sum(ss.n for _, ss in subs)
            if keep >= total:
                return 0
            if len(doomed) > total - keep:
                doomed.sort()
                del doomed[total - keep :]
        for s in doomed:
            self._remove(s, True)
        return len(doomed)

    def compact(self, seq: int) -> int:
        if seq <= 0:
            return self.purge()
        if seq > self._last:
            # Past the end: like purge, and the next message gets ``seq``.
            n, b = self._reset(seq, seq - 1)
            self._notify_bulk(n, b)
            return n
        removed = freed = 0
        while self._msgs and self._first < seq:
            freed += self._remove(self._first, False)
            removed += 1
        self._notify_bulk(removed, freed)
        return removed

    def truncate(self, seq: int) -> None:
        if self._sources is not None:
            self._sources.reset()  # (a position may name a message that goes now)
        if seq <= 0:
            # nats-server resets the store to a brand-new state.
            n, b = self._reset(0, 0)
            self._last_ts = 0
            self._notify_bulk(n, b)
            return
        if seq >= self._last:
            return
        removed = freed = 0
        while self._msgs and self._all.last() > seq:
            freed += self._remove(self._all.last(), False)
            removed += 1
        self._last = seq
        if self._msgs:
            self._last_ts = self._msgs[self._all.last()].ts
        else:
            self._first = seq + 1
            self._last_ts = 0
        self._notify_bulk(removed, freed)

    def expire(self, now_ns: int, emptied: list[StoredMsg] | None = None) -> int:
        cfg = self._cfg
        msgs = self._msgs
        removed = 0
        if cfg.max_age_ns > 0 and msgs:
            min_age = now_ns - cfg.max_age_ns
            keep_never = cfg.allow_msg_ttl
            seq = self._first
            while seq:
                msg = msgs[seq]
                if msg.ts > min_age:
                    break
                nxt = self._all.next_at(seq + 1, msgs)
                if not (keep_never and msg.ttl < 0):
                    self._remove(seq, True)
                    removed += 1
                    if emptied is not None and msg.subject not in self._fss:
                        emptied.append(msg)
                seq = nxt
        if cfg.allow_msg_ttl:
            heap = self._ttls
            while heap and heap[0][0] <= now_ns:
                expires, seq = heapq.heappop(heap)
                m = msgs.get(seq)
                if m is not None and m.ttl > 0 and m.ts + m.ttl * _NS_PER_SEC == expires:
                    self._remove(seq, True)
                    removed += 1
                    if emptied is not None and m.subject not in self._fss:
                        emptied.append(m)
        return removed

    def update_config(self, cfg: StoreConfig) -> None:
        old = self._cfg
        self._cfg = cfg
        if cfg.allow_msg_ttl != old.allow_msg_ttl:
            self._rebuild_ttls()
        maxp = cfg.max_msgs_per_subject
        if maxp > 0 and (old.max_msgs_per_subject <= 0 or maxp < old.max_msgs_per_subject):
            for ss in list(self._fss.values()):
                while ss.n > maxp:
                    self._remove(ss.first(), True)
        if cfg.discard is DiscardPolicy.OLD:
            self._enforce_totals()

    # ------------------------------------------------------------------ reads
    def load_msg(self, seq: int) -> StoredMsg | None:
        return self._msgs.get(seq)

    def load_next_msg(self, filter: str, start: int) -> StoredMsg | None:
        msgs = self._msgs
        if not msgs:
            return None
        if is_all(filter):
            hit = msgs.get(start)
            if hit is not None:
                return hit  # dense streams: consumers ask for the very next sequence
            seq = self._all.next_at(start, msgs)
        elif is_literal(filter):
            ss = self._fss.get(filter)
            seq = ss.next_at(start, msgs) if ss is not None else 0
        else:
            seq = self._next_wild(filter, max(start, self._first))
        return msgs[seq] if seq else None

    def live_seqs(self, start: int, end: int, limit: int) -> list[int]:
        out: list[int] = []
        all_ = self._all
        if not all_.n or limit <= 0:
            return out
        msgs = self._msgs
        seqs = all_.seqs
        for i in range(bisect_left(seqs, start, all_.head), len(seqs)):
            s = seqs[i]
            if s > end:
                break
            if s in msgs:
                out.append(s)
                if len(out) >= limit:
                    break
        return out

    def load_range(self, start: int, max_msgs: int, max_bytes: int = 0) -> list[StoredMsg]:
        out: list[StoredMsg] = []
        msgs = self._msgs
        al = self._all
        if max_msgs <= 0 or al.n == 0:
            return out
        seqs = al.seqs
        if start > seqs[-1]:
            return out
        i = al.head if start <= seqs[al.head] else bisect_left(seqs, start, al.head)
        total = 0
        for k in range(i, len(seqs)):
            m = msgs.get(seqs[k])
            if m is None:
                continue  # a dead slot
            out.append(m)
            if len(out) >= max_msgs:
                break
            if max_bytes > 0:
                # direct_size(m), inlined
                subj = m.subject
                hdr = m.hdr
                total += len(subj) if subj.isascii() else len(subj.encode())
                total += len(m.data) + (len(hdr) if hdr else 0)
                if total >= max_bytes:
                    break
        return out

    def load_last_msg(self, subject: str) -> StoredMsg | None:
        if is_all(subject):
            seq = self._all.last()
        else:
            seq = max((ss.last() for _, ss in self._subjects(subject)), default=0)
        return self._msgs.get(seq) if seq else None

    def load_prev_msg(self, start: int) -> StoredMsg | None:
        seq = self._all.prev_at(start, self._msgs)
        return self._msgs[seq] if seq else None

    def last_seq(self) -> int:
        return self._last

    def state(self, with_deleted: bool = False) -> StreamState:
        msgs = self._msgs
        n = len(msgs)
        st = StreamState(
            msgs=n,
            bytes=self._bytes,
            first_seq=self._first,
            first_ts=msgs[self._first].ts if n else 0,
            last_seq=self._last,
            last_ts=self._last_ts,
            num_subjects=len(self._fss),
        )
        if n:
            st.num_deleted = (self._last - self._first + 1) - n
        if with_deleted:
            st.deleted = self._deleted() if st.num_deleted else []
        return st

    def _deleted(self) -> list[int]:
        out: list[int] = []
        msgs = self._msgs
        prev = self._first - 1
        all_ = self._all
        for j in range(all_.head, len(all_.seqs)):
            s = all_.seqs[j]
            if s in msgs:
                if s > prev + 1:
                    out.extend(range(prev + 1, s))
                prev = s
        out.extend(range(prev + 1, self._last + 1))
        return out

    def filtered_state(self, seq: int, subject: str) -> SimpleState:
        msgs = self._msgs
        out = SimpleState()
        if not msgs:
            return out
        start = max(seq, self._first)
        if start > self._last:
            return out
        all_ = is_all(subject)
        indexes = [self._all] if all_ else [ss for _, ss in self._subjects(subject)]
        for ss in indexes:
            c = ss.count_from(start, msgs)
            if c:
                out.msgs += c
                first = ss.next_at(start, msgs)
                if out.first == 0 or first < out.first:
                    out.first = first
                out.last = max(out.last, ss.last())
        return out

    def subjects_state(self, filter: str) -> dict[str, SimpleState]:
        return {s: SimpleState(ss.n, ss.first(), ss.last()) for s, ss in self._subjects(filter)}

    def subjects_totals(self, filter: str) -> dict[str, int]:
        return {s: ss.n for s, ss in self._subjects(filter)}

    def num_pending(self, sseq: int, filter: str, last_per_subject: bool) -> int:
        if not last_per_subject:
            return self.filtered_state(sseq, filter).msgs
        start = max(sseq, self._first)
        return sum(1 for _, ss in self._subjects(filter) if ss.last() >= start)

    def multi_last_seqs(self, filters: list[str], max_seq: int, max_allowed: int) -> list[int]:
        msgs = self._msgs
        if not msgs:
            return []
        if max_seq <= 0:
            max_seq = self._last
        found: set[int] = set()
        for filt in filters:
            for _, ss in self._subjects(filt):
                last = ss.last()
                s = last if last <= max_seq else ss.prev_at(max_seq, msgs)
                if s:
                    found.add(s)
            if max_allowed > 0 and len(found) > max_allowed:
                raise StoreError("too many results")
        return sorted(found)

    # ------------------------------------------------------------------ lifecycle
    def register_updates(self, cb: StorageUpdate | None) -> None:
        self._cb = cb

    def flush(self) -> int:
        return self._last

    def sync(self) -> None:
        return None

    def track_sources(self, inames: list[str]) -> None:
        if not inames:
            self._sources = None
        elif self._sources is None:
            self._sources = SourcesIndex(inames)
        else:
            self._sources.configure(inames)

    def seed_sources(self, positions: dict[str, tuple[int, str]]) -> None:
        if self._sources is not None and positions:
            self._sources.seed(positions)

    def sources_state(self) -> dict[str, tuple[int, str]]:
        return self._sources.known() if self._sources is not None else {}

    def stop(self) -> None:
        """Memory cannot outlive the store: stopping releases every message (and reports
        it through the update callback, as nats-server's memstore does)."""
        if self._closed:
            return
        self.purge()
        self._closed = True
        self._cb = None

    def delete(self) -> None:
        self.stop()

    @property
    def config(self) -> StoreConfig:
        return self._cfg
