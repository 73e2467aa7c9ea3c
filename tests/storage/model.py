"""A deliberately naive reference StreamStore used by the model-based contract test.

Everything is a scan over a dict of messages; it spells out the semantics the contract
expects (nats-server's, see ``natsd.storage.memstore``'s docstring) without any index.
"""

from __future__ import annotations

from dataclasses import dataclass

from natsd.storage.store import (
    DiscardPolicy,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    SimpleState,
    StoreConfig,
    StoreError,
)

from .conftest import SizeFn

NS = 1_000_000_000


def matches(subject: str, filt: str) -> bool:
    if filt in ("", ">"):
        return True
    st, ft = subject.split("."), filt.split(".")
    for i, f in enumerate(ft):
        if f == ">":
            return len(st) > i
        if i >= len(st) or (f != "*" and f != st[i]):
            return False
    return len(st) == len(ft)


@dataclass
class MMsg:
    subject: str
    seq: int
    ts: int
    hdr: bytes | None
    data: bytes
    ttl: int


class Model:
    def __init__(self, cfg: StoreConfig, size: SizeFn) -> None:
        self.cfg = cfg
        self.size = size
        self.msgs: dict[int, MMsg] = {}
        self.first = cfg.first_seq if cfg.first_seq > 0 else 0
        self.last = cfg.first_seq - 1 if cfg.first_seq > 0 else 0

    # ------------------------------------------------------------ helpers
    def msize(self, m: MMsg) -> int:
        return self.size(m.subject, m.hdr, m.data)

    @property
    def nbytes(self) -> int:
        return sum(self.msize(m) for m in self.msgs.values())

    def seqs(self, filt: str = "") -> list[int]:
        return sorted(s for s, m in self.msgs.items() if matches(m.subject, filt))

    def remove(self, seq: int) -> bool:
        if self.msgs.pop(seq, None) is None:
            return False
        self.first = min(self.msgs) if self.msgs else self.last + 1
        return True

    def reset(self, first: int, last: int) -> int:
        n = len(self.msgs)
        self.msgs.clear()
        self.first, self.last = first, last
        return n

    # ------------------------------------------------------------ writes
    def store(
        self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int, ttl: int
    ) -> None:
        cfg = self.cfg
        if cfg.max_msg_size > 0 and len(data) + len(hdr or b"") > cfg.max_msg_size:
            raise ErrMsgTooLarge()
        size = self.size(subject, hdr, data)
        subj = self.seqs(subject)
        at_limit = 0 < cfg.max_msgs_per_subject <= len(subj)
        if cfg.discard is DiscardPolicy.NEW:
            if at_limit and cfg.discard_new_per_subject:
                raise ErrMaxMsgsPerSubject()
            if 0 < cfg.max_msgs <= len(self.msgs) and not at_limit:
                raise ErrMaxMsgs()
            if cfg.max_bytes > 0 and self.nbytes + size > cfg.max_bytes:
                if not at_limit or self.msize(self.msgs[subj[0]]) < size:
                    raise ErrMaxBytes()
        if not self.msgs:
            self.first = seq
        self.msgs[seq] = MMsg(subject, seq, ts, hdr or None, data, ttl)
        self.last = seq
        if cfg.max_msgs_per_subject > 0:
            while len(s := self.seqs(subject)) > cfg.max_msgs_per_subject:
                self.remove(s[0])
        if cfg.discard is DiscardPolicy.OLD:
            while 0 < cfg.max_msgs < len(self.msgs):
                self.remove(self.first)
            while 0 < cfg.max_bytes < self.nbytes:
                self.remove(self.first)

    def skip(self, num: int) -> None:
        self.last += num
        if not self.msgs:
            self.first = self.last + 1

    def purge(self) -> int:
        return self.reset(self.last + 1, self.last)

    def compact(self, seq: int) -> int:
        if seq <= 0:
            return self.purge()
        if seq > self.last:
            return self.reset(seq, seq - 1)
        doomed = [s for s in self.msgs if s < seq]
        for s in doomed:
            self.remove(s)
        return len(doomed)

    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        if subject in ("", ">"):
            if seq > 0:
                return self.compact(seq)
            if keep <= 0:
                return self.purge()
            if keep >= len(self.msgs):
                return 0
            return self.compact(self.seqs()[-keep])
        matching = self.seqs(subject)
        doomed = [s for s in matching if seq <= 0 or s < seq]
        if keep > 0:
            if keep >= len(matching):
                return 0
            doomed = doomed[: len(matching) - keep]
        for s in doomed:
            self.remove(s)
        return len(doomed)

    def truncate(self, seq: int) -> None:
        if seq <= 0:
            self.reset(0, 0)
            return
        if seq >= self.last:
            return
        for s in [s for s in self.msgs if s > seq]:
            del self.msgs[s]
        self.last = seq
        self.first = min(self.msgs) if self.msgs else seq + 1

    def expire(self, now: int) -> int:
        removed = 0
        cfg = self.cfg
        if cfg.max_age_ns > 0:
            for s in self.seqs():
                m = self.msgs[s]
                if m.ts > now - cfg.max_age_ns:
                    break
                if not (cfg.allow_msg_ttl and m.ttl < 0):
                    removed += self.remove(s)
        if cfg.allow_msg_ttl:
            for s in self.seqs():
                m = self.msgs[s]
                if m.ttl > 0 and m.ts + m.ttl * NS <= now:
                    removed += self.remove(s)
        return removed

    # ------------------------------------------------------------ reads
    @property
    def num_deleted(self) -> int:
        return (self.last - self.first + 1) - len(self.msgs) if self.msgs else 0

    def deleted(self) -> list[int]:
        if not self.msgs:
            return []
        return [s for s in range(self.first, self.last + 1) if s not in self.msgs]

    def load_next(self, filt: str, start: int) -> int:
        return next((s for s in self.seqs(filt) if s >= start), 0)

    def load_last(self, filt: str) -> int:
        s = self.seqs(filt)
        return s[-1] if s else 0

    def load_prev(self, start: int) -> int:
        s = [x for x in self.seqs() if x <= start]
        return s[-1] if s else 0

    def filtered(self, seq: int, filt: str) -> SimpleState:
        s = [x for x in self.seqs(filt) if x >= seq]
        return SimpleState(len(s), s[0] if s else 0, s[-1] if s else 0)

    def subjects(self, filt: str) -> dict[str, SimpleState]:
        out: dict[str, SimpleState] = {}
        for s in self.seqs(filt):
            subj = self.msgs[s].subject
            st = out.setdefault(subj, SimpleState(0, s, s))
            st.msgs += 1
            st.last = s
        return out

    def num_pending(self, sseq: int, filt: str, last_per_subject: bool) -> int:
        if not last_per_subject:
            return self.filtered(sseq, filt).msgs
        return sum(1 for st in self.subjects(filt).values() if st.last >= sseq)

    def multi_last(self, filters: list[str], max_seq: int, max_allowed: int) -> list[int]:
        if not self.msgs:
            return []
        bound = max_seq if max_seq > 0 else self.last
        found: set[int] = set()
        for f in filters:
            for s in self.seqs(f):
                if s <= bound:
                    found.add(max(x for x in self.seqs(self.msgs[s].subject) if x <= bound))
        if max_allowed > 0 and len(found) > max_allowed:
            raise StoreError("too many results")
        return sorted(found)
