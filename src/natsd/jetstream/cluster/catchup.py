"""A stream replica catching up from the leader's store (design-clustering §4.6).

A replica that was away longer than the leader kept its log (the leader compacts past a
replica that is far behind, so the log stays bounded) gets a Raft snapshot instead of the
entries it missed. A stream's snapshot holds no messages: it says where the stream stood
(first and last sequence) and the durable consumers' committed meta and state
(``encode_snapshot``). Before the snapshot may replace the replica's log, its store must
hold what the snapshot stands for, so the group holds the MsgSnap back
(``RaftGroup.hold_snapshot``) while this module copies the messages from the store of the
server that sent it, in bounded batches, while that server keeps taking writes:

1. **Reconcile** what the replica already has: for its range [its first, its last], the
   source answers with the runs of sequences it still holds (at most ``RUN_SCAN`` live
   sequences per answer) and its first sequence; the replica removes what it holds outside
   them (deleted, purged, acknowledged from a work queue while it was away).
2. **Copy** (its last, the snapshot's last]: the source answers with its messages, at most
   ``BATCH_BYTES`` per answer; the replica stores them with ``store_raw`` (a gap is recorded
   as deleted).
3. **Finish**: the store is synced, the consumers take the snapshot's committed state, the
   dedup window is rebuilt from the store, and only then is the MsgSnap stepped: Raft
   replaces the log and the entries after the snapshot come by append as usual.

The same transfer repairs a replica whose own store is short of its own snapshot (a memory
stream after a restart; a file store whose damage recovery cut it back below its log):
``repair`` asks the other members in turn, and the group's committed entries wait until it
is done (``StreamGroups``: the replica does not lead meanwhile).

Why this is exact: nothing beyond the snapshot's last sequence is copied, and a message at
or below it can afterwards only be deleted, so the source's store (which may already be
further on) holds a subset of what the snapshot stood for, and every deletion it shows is
one the entries after the snapshot would also make; applying those entries again is
idempotent (a message the store holds is skipped, a purge carries the sequence it was
proposed at). One request is in flight per transfer (the replica asks for the next batch
when it has applied one), so the source's work and the replica's memory are bounded by one
batch; a request unanswered for ``RETRY_AFTER`` is sent again, to whichever server sent the
newest snapshot, and a transfer resumes from the batch it had reached.

Transport: like the Raft frames, a message in the system account on
``$NATSD.CATCHUP.<raft id in hex>``, one subscription per server. A peer is untrusted: what
does not decode is counted and dropped, and a store is served only to its group's members.
Formats (little endian), version 1: a request is ``u8 version, u8 kind (1), u64 from, u64
start, u64 end, u64 have_last, u16 len + group, u64 snapshot index``; an answer is ``u8
version, u8 kind, u64 from, u64 start, u64 through, u64 first, u16 len + group`` and then,
for kind 2 (runs), ``u32 n, n x (u64 lo, u64 hi)``; for kind 3 (messages), ``u32 n, n x
(u64 seq, i64 ts, i64 ttl, u16 len + subject, u32 len + hdr (0xFFFFFFFF: none), u32 len +
data)``; kind 4 says the source does not serve that group.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import orjson

from natsd.core.scheduler import Clock
from natsd.jetstream.stream.entries import (
    OP_BATCH,
    OP_MSG,
    EntryError,
    decode_batch,
    decode_msg,
    entry_op,
)
from natsd.jetstream.stream.stream import Stream
from natsd.raft.types import Message
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.store import StoredMsg, StoreError, StreamStore, direct_size
from natsd.storage.wal import GroupLog

__all__ = [
    "BATCH_BYTES",
    "CatchUp",
    "CatchupError",
    "StreamSnapshot",
    "Transfer",
    "catchup_subject",
    "cut_lost",
    "decode_snapshot",
    "encode_snapshot",
    "report_lost",
]

log: Final = logging.getLogger("natsd")

_PREFIX: Final = b"$NATSD.CATCHUP."
VERSION: Final = 1
K_REQ: Final = 1
K_RUNS: Final = 2
K_MSGS: Final = 3
K_NONE: Final = 4
_HEAD: Final = struct.Struct("<BBQQQQH")
_RUN: Final = struct.Struct("<QQ")
_MSG: Final = struct.Struct("<QqqH")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_NO_HDR: Final = 0xFFFFFFFF
# One answer: at most this many bytes of messages (the design's bound), this many
# messages, or this many live sequences compared.
BATCH_BYTES: Final = 256 << 10
BATCH_MSGS: Final = 8192
RUN_SCAN: Final = 65536
# A request unanswered this long (seconds) is sent again.
RETRY_AFTER: Final = 2.0
# A repair (``CatchUp.repair``) with no batch applied for this long gives up.
REPAIR_GIVES_UP: Final = 15.0


def catchup_subject(node_id: int) -> bytes:
    return _PREFIX + b"%016x" % node_id


class CatchupError(ValueError):
    """A snapshot or catch-up message that does not decode."""


# ---------------------------------------------------------------------------- repair


def _first_logged_seq(log: GroupLog) -> int:
    """The sequence of the first message entry this replica's log still holds (0: none)."""
    for _index, _term, kind, data in log.entries:
        op = entry_op(data) if kind == 0 and data else 0
        if op in (OP_MSG, OP_BATCH):
            try:
                return decode_msg(data).seq if op == OP_MSG else decode_batch(data)[1][0].seq
            except (EntryError, IndexError):
                continue
    return 0


def cut_lost(stream: Stream) -> None:
    """Cut a store that lost messages to damage back to just before the first one lost
    (at start-up, before anything else: ``report_lost`` says how it is refilled)."""
    lost = stream.store.state().lost
    if lost is not None and lost.msgs:
        stream.store.truncate(min(lost.msgs) - 1)


def report_lost(stream: Stream, wal_log: GroupLog, what: str) -> None:
    """Say how a store that lost messages to damage (cut back before the first one by
    ``cut_lost`` at start-up) is refilled: applying the log again refills what the log
    still holds; what is older than the log is fetched from the other replicas' stores
    first (``CatchUp.repair``: the store then ends before its snapshot's last sequence)."""
    lost = stream.store.state().lost
    if lost is None or not lost.msgs:
        return
    first_lost = min(lost.msgs)
    logged = _first_logged_seq(wal_log)
    how = (
        "refilled from the replica's log"
        if logged and logged <= first_lost
        else f"older than this replica's log (from {logged}): fetched from the other replicas"
    )
    log.warning("stream %s: %d damaged messages from %d; %s", what, len(lost.msgs), first_lost, how)


# ---------------------------------------------------------------------------- snapshot


@dataclass(slots=True)
class StreamSnapshot:
    first_seq: int
    last_seq: int
    # durable consumer name -> (meta document, state document), as committed
    consumers: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    # a sourcing stream's source positions (iname -> (origin seq, identity)), as its store
    # held them at ``last_seq``: they outlive the messages that named them (a purge)
    sources: dict[str, tuple[int, str]] = field(default_factory=dict)


def encode_snapshot(
    first: int,
    last: int,
    consumers: dict[str, tuple[bytes, bytes]],
    sources: dict[str, tuple[int, str]] | None = None,
) -> bytes:
    """A replicated stream's snapshot data: where its store stood, its consumers'
    committed meta and state, and its sources' positions (JSON, once per compaction,
    never per message)."""
    docs = {n: [meta.decode(), state.decode()] for n, (meta, state) in consumers.items()}
    doc: dict[str, object] = {"v": VERSION, "first_seq": first, "last_seq": last,
                              "consumers": docs}  # fmt: skip
    if sources:
        doc["sources"] = {i: [seq, ident] for i, (seq, ident) in sources.items()}
    return orjson.dumps(doc)


def decode_snapshot(data: bytes) -> StreamSnapshot:
    try:
        doc = orjson.loads(data)
        if not isinstance(doc, dict) or doc.get("v") != VERSION:
            raise CatchupError("not a stream snapshot of this version")
        first, last = doc["first_seq"], doc["last_seq"]
        if not (isinstance(first, int) and isinstance(last, int)) or first < 0 or last < 0:
            raise CatchupError("bad sequences in stream snapshot")
        consumers: dict[str, tuple[bytes, bytes]] = {}
        for name, pair in dict(doc.get("consumers") or {}).items():
            meta, state = pair
            consumers[str(name)] = (str(meta).encode(), str(state).encode())
        sources: dict[str, tuple[int, str]] = {}
        for iname, pos in dict(doc.get("sources") or {}).items():
            seq, ident = pos
            if not isinstance(seq, int) or seq < 1 or not isinstance(ident, str):
                raise CatchupError("bad source position in stream snapshot")
            sources[str(iname)] = (seq, ident)
        return StreamSnapshot(first, last, consumers, sources)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        if isinstance(e, CatchupError):
            raise
        raise CatchupError(f"bad stream snapshot: {type(e).__name__}: {e}") from None


# ---------------------------------------------------------------------------- wire


def _head(kind: int, sender: int, a: int, b: int, c: int, group: bytes) -> bytes:
    return _HEAD.pack(VERSION, kind, sender, a, b, c, len(group)) + group


def encode_request(
    sender: int, group: bytes, start: int, end: int, have_last: int, index: int
) -> bytes:
    return _head(K_REQ, sender, start, end, have_last, group) + _U64.pack(index)


def encode_runs(
    sender: int, group: bytes, start: int, through: int, first: int, seqs: list[int]
) -> bytes:
    runs: list[bytes] = []
    i = 0
    while i < len(seqs):
        j = i
        while j + 1 < len(seqs) and seqs[j + 1] == seqs[j] + 1:
            j += 1
        runs.append(_RUN.pack(seqs[i], seqs[j]))
        i = j + 1
    head = _head(K_RUNS, sender, start, through, first, group)
    return head + _U32.pack(len(runs)) + b"".join(runs)


def encode_msgs(
    sender: int, group: bytes, start: int, through: int, first: int, msgs: list[StoredMsg]
) -> bytes:
    out = [_head(K_MSGS, sender, start, through, first, group), _U32.pack(len(msgs))]
    for m in msgs:
        subj = m.subject.encode()
        out.append(_MSG.pack(m.seq, m.ts, m.ttl, len(subj)))
        out.append(subj)
        out.append(_U32.pack(_NO_HDR if m.hdr is None else len(m.hdr)))
        if m.hdr is not None:
            out.append(m.hdr)
        out.append(_U32.pack(len(m.data)))
        out.append(m.data)
    return b"".join(out)


@dataclass(slots=True)
class Packet:
    kind: int
    sender: int
    group: bytes
    a: int  # request: start; answer: start
    b: int  # request: end; answer: through
    c: int  # request: have_last; answer: the source's first sequence
    index: int = 0  # request: the snapshot's log index
    runs: list[tuple[int, int]] = field(default_factory=list)
    msgs: list[StoredMsg] = field(default_factory=list)


def decode_packet(b: bytes) -> Packet:
    """A catch-up message; CatchupError when it does not decode (it came from a peer)."""
    try:
        version, kind, sender, x, y, z, glen = _HEAD.unpack_from(b, 0)
        if version != VERSION or kind not in (K_REQ, K_RUNS, K_MSGS, K_NONE):
            raise CatchupError(f"unknown catch-up message (version {version}, kind {kind})")
        pos = _HEAD.size + glen
        if pos > len(b):
            raise CatchupError("truncated catch-up message")
        p = Packet(kind, sender, b[_HEAD.size : pos], x, y, z)
        if kind == K_REQ:
            (p.index,) = _U64.unpack_from(b, pos)
            pos += 8
            if pos != len(b):
                raise CatchupError("trailing bytes in catch-up request")
        elif kind == K_RUNS:
            (n,) = _U32.unpack_from(b, pos)
            pos += 4
            if pos + n * _RUN.size != len(b):
                raise CatchupError("bad runs in catch-up answer")
            p.runs = [_RUN.unpack_from(b, pos + i * _RUN.size) for i in range(n)]
        elif kind == K_MSGS:
            (n,) = _U32.unpack_from(b, pos)
            pos += 4
            for _ in range(n):
                seq, ts, ttl, slen = _MSG.unpack_from(b, pos)
                pos += _MSG.size
                subject = b[pos : pos + slen].decode()
                pos += slen
                (hlen,) = _U32.unpack_from(b, pos)
                pos += 4
                hdr = None
                if hlen != _NO_HDR:
                    hdr = b[pos : pos + hlen]
                    pos += hlen
                (dlen,) = _U32.unpack_from(b, pos)
                pos += 4
                if pos + dlen > len(b):
                    raise CatchupError("truncated message in catch-up answer")
                p.msgs.append(StoredMsg(subject, seq, ts, hdr, b[pos : pos + dlen], ttl))
                pos += dlen
            if pos != len(b):
                raise CatchupError("trailing bytes in catch-up answer")
        elif pos != len(b):
            raise CatchupError("trailing bytes in catch-up message")
        return p
    except (struct.error, UnicodeDecodeError) as e:
        raise CatchupError(f"bad catch-up message: {e}") from None


# ---------------------------------------------------------------------------- transfers


@dataclass(slots=True)
class Transfer:
    """One replica's catch-up under way (module docstring)."""

    group: bytes
    store: StreamStore
    # the newest MsgSnap, stepped when the store holds its state; None for a repair (the
    # replica's own snapshot, see ``repair``)
    held: Message | None
    held_index: int  # the snapshot's index
    snap: StreamSnapshot
    peer: int  # the server asked (the one that sent the newest snapshot)
    start: int  # the next sequence to ask about
    have_last: int  # the store's last sequence when the transfer began: reconcile up to it
    sent_at: float = 0.0
    copied: int = 0
    removed: int = 0
    # a repair's sources, asked in turn while one does not answer
    sources: list[int] = field(default_factory=list)
    # loop time of the last batch applied (a repair that makes no progress gives up)
    progress_at: float = 0.0


# A source's store for a group, a requester and a snapshot index (None: not served to it,
# or not yet: the source has not applied its log that far)
Source = Callable[[bytes, int, int], StreamStore | None]
# The transfer is complete: install the snapshot's state and step the held MsgSnap
Finish = Callable[[Transfer], None]


class CatchUp:
    """Owns the catch-up transfers under way on this server, and answers the requests of
    peers catching up from stores here."""

    def __init__(
        self, node_id: int, system: Account, source: Source, finish: Finish, clock: Clock
    ) -> None:
        self.node_id = node_id
        self.clock = clock
        self.system = system
        self._source = source
        self._finish = finish
        self.transfers: dict[bytes, Transfer] = {}
        self._sub = Subscription(catchup_subject(node_id), None, b"catchup", callback=self._on_msg)
        # observability (and tests): transfers completed, messages copied, peers' bad input
        self.completed = 0
        self.copied = 0
        self.bad = 0
        self.served = 0

    def start(self) -> None:
        self.system.sublist.insert(self._sub)

    def stop(self) -> None:
        self.system.sublist.remove(self._sub)
        self.transfers.clear()

    # ------------------------------------------------------------------ the replica
    def offer(self, group: bytes, store: StreamStore, m: Message) -> bool:
        """A MsgSnap for ``group`` ahead of this replica's log: hold it and fetch what it
        stands for (False: it does not describe a stream; the engine takes it as it is)."""
        assert m.snapshot is not None
        if not m.snapshot.data:
            return False  # the group's first snapshot (its membership): nothing to fetch
        try:
            snap = decode_snapshot(m.snapshot.data)
        except CatchupError as e:
            log.error("stream group %s: snapshot from %x not usable: %s", group, m.from_, e)
            return False
        t = self.transfers.get(group)
        if t is not None:
            # a newer snapshot (the leader compacted again, or a new leader): aim for it;
            # one of a newer term even when it is older, since Raft drops the held one of
            # an older term when it is stepped (a new leader that compacted less)
            newer_term = t.held is not None and m.term > t.held.term
            if m.snapshot.metadata.index >= t.held_index or newer_term:
                t.held, t.held_index, t.snap = m, m.snapshot.metadata.index, snap
            if m.from_ != t.peer:
                t.peer = m.from_
                self._request(t)  # the old source may be gone
            return True
        st = store.state()
        first = st.first_seq if st.msgs else st.last_seq + 1
        t = Transfer(
            group, store, m, m.snapshot.metadata.index, snap, m.from_, first, store.last_seq()
        )
        self.transfers[group] = t
        log.info(
            "stream group %s: catching up from %x's store (have %d..%d, snapshot up to %d)",
            group, m.from_, first, t.have_last, snap.last_seq,
        )  # fmt: skip
        self._request(t)
        return True

    def repair(
        self, group: bytes, store: StreamStore, snap: StreamSnapshot, index: int, sources: list[int]
    ) -> None:
        """A replica whose store lost what its own snapshot (at log ``index``) stands for: a
        memory stream after a restart, or a file store damaged below the log. It fetches it
        the same way, from the other members in turn (one that has applied its log to
        ``index``), before it applies its log again."""
        st = store.state()
        first = st.first_seq if st.msgs else st.last_seq + 1
        peer = sources[0] if sources else 0
        t = Transfer(group, store, None, index, snap, peer, first, store.last_seq())
        t.sources = list(sources)
        t.progress_at = self.clock.monotonic()
        self.transfers[group] = t
        log.warning(
            "stream group %s: store holds %d..%d of what its snapshot stands for (up to %d);"
            " fetching the rest from the other replicas",
            group, first, t.have_last, snap.last_seq,
        )  # fmt: skip
        self._request(t)

    def cancel(self, group: bytes) -> None:
        self.transfers.pop(group, None)

    def tick(self, now: float) -> None:
        """Send again what went unanswered (lost, or its source went away); a repair asks
        the next member."""
        for t in list(self.transfers.values()):  # (a request may complete one)
            if t.held is None and now - t.progress_at >= REPAIR_GIVES_UP:
                # no member can serve it (every replica of a memory stream restarted):
                # what is missing is lost, as nats-server loses a memory stream's messages
                log.error(
                    "stream group %s: no replica could refill messages %d..%d; they are"
                    " lost here", t.group, t.start, t.snap.last_seq,
                )  # fmt: skip
                self._complete(t)
                continue
            if now - t.sent_at >= RETRY_AFTER:
                if t.held is None and len(t.sources) > 1:
                    t.peer = t.sources[(t.sources.index(t.peer) + 1) % len(t.sources)]
                self._request(t)

    def _request(self, t: Transfer) -> None:
        if t.start > t.snap.last_seq:
            self._complete(t)
            return
        t.sent_at = self.clock.monotonic()
        data = encode_request(
            self.node_id, t.group, t.start, t.snap.last_seq, t.have_last, t.held_index
        )
        publish(self.system.sublist, catchup_subject(t.peer), None, None, data)

    def _answer(self, p: Packet) -> None:
        t = self.transfers.get(p.group)
        if t is None or p.sender != t.peer or p.a != t.start:
            return  # stale: a resent request's first answer already moved it on
        if p.kind == K_NONE:
            if t.held is None:
                t.sent_at = 0.0  # a repair asks the next member at the next tick
            return  # not served there (yet): tick asks again, maybe elsewhere
        if p.b < p.a or p.b > t.snap.last_seq:
            self.bad += 1
            return
        store = t.store
        try:
            if p.c > 1 and store.state().first_seq < p.c:
                # the source's first is past ours: what is below it is gone there
                t.removed += store.compact(min(p.c, t.snap.last_seq + 1))
            if p.kind == K_RUNS:
                self._reconcile(t, p)
            else:
                for m in p.msgs:
                    if p.a <= m.seq <= p.b and m.seq > store.last_seq():
                        store.store_raw(m.subject, m.hdr, m.data, m.seq, m.ts, m.ttl)
                        t.copied += 1
                        self.copied += 1
        except StoreError as e:
            # this replica's own disk: it stays behind and asks again later
            log.error("stream group %s: catch-up batch not stored: %s", t.group, e)
            t.sent_at = self.clock.monotonic()
            return
        t.start = max(t.start, p.b + 1)
        t.progress_at = self.clock.monotonic()
        self._request(t)

    def _reconcile(self, t: Transfer, p: Packet) -> None:
        """Remove what this replica holds in [start, through] that the source does not."""
        runs = p.runs
        i = 0
        start = p.a
        store = t.store
        while start <= p.b:
            mine = store.live_seqs(start, p.b, RUN_SCAN)
            if not mine:
                break
            for seq in mine:
                while i < len(runs) and runs[i][1] < seq:
                    i += 1
                if i == len(runs) or seq < runs[i][0]:
                    store.remove_msg(seq)
                    t.removed += 1
            start = mine[-1] + 1

    def _complete(self, t: Transfer) -> None:
        self.transfers.pop(t.group, None)
        store = t.store
        last = store.last_seq()
        if last < t.snap.last_seq:
            store.skip_msgs(last + 1, t.snap.last_seq - last)
        store.flush()
        store.sync()
        self.completed += 1
        log.info(
            "stream group %s: caught up to %d (%d messages copied, %d removed)",
            t.group, t.snap.last_seq, t.copied, t.removed,
        )  # fmt: skip
        self._finish(t)

    # ------------------------------------------------------------------ the source
    def _serve(self, p: Packet) -> None:
        start, end, have_last = p.a, p.b, p.c
        if end < start or start <= 0:
            self.bad += 1
            return
        # Served only from a store that has applied the log up to the snapshot (it then
        # shows every deletion the snapshot stands for), and never past what it holds: a
        # replica records the sequences an answer covers and does not list as deleted.
        store = self._source(p.group, p.sender, p.index)
        if store is not None:
            end = min(end, store.last_seq())
        if store is None or start > end:
            self._send(p.sender, _head(K_NONE, self.node_id, p.a, p.a, 0, p.group))
            return
        st = store.state()
        first = st.first_seq if st.msgs else st.last_seq + 1
        if start <= have_last:
            hi = min(end, have_last)
            seqs = store.live_seqs(start, hi, RUN_SCAN)
            through = seqs[-1] if len(seqs) >= RUN_SCAN else hi
            out = encode_runs(self.node_id, p.group, start, through, first, seqs)
        else:
            msgs = store.load_range(start, BATCH_MSGS, BATCH_BYTES)
            msgs = [m for m in msgs if m.seq <= end]
            full = len(msgs) >= BATCH_MSGS or sum(direct_size(m) for m in msgs) >= BATCH_BYTES
            through = msgs[-1].seq if msgs and full else end
            out = encode_msgs(self.node_id, p.group, start, through, first, msgs)
        self.served += 1
        self._send(p.sender, out)

    def _send(self, to: int, data: bytes) -> None:
        publish(self.system.sublist, catchup_subject(to), None, None, data)

    def _on_msg(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        payload: bytes,
    ) -> None:
        try:
            p = decode_packet(payload)
        except CatchupError:
            self.bad += 1  # a peer is as untrusted as a client: drop, count
            return
        try:
            if p.kind == K_REQ:
                self._serve(p)
            else:
                self._answer(p)
        except StoreError as e:
            log.error("stream group %s: catch-up: %s", p.group, e)
        except Exception:
            # a bug here must not tear down the route that carried the message (the
            # transfer is asked for again)
            self.bad += 1
            log.exception("stream group %s: catch-up message from %x failed", p.group, p.sender)
