"""The batched direct get (``{"seq": S, "batch": N, "max_bytes": M}``) built on
``StreamStore.load_range`` and ``ReplyStream.many`` sends, byte for byte, what the
per-message loop sent: ``_msg_headers`` + ``_pending`` per message (timestamps included,
which the differential tests mask), then the EOB. Both stores, both ReplyStream paths
(the requester's own inbox, and anything else through ``publish``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from natsd.core.clock import rfc3339
from natsd.jetstream.api import direct
from natsd.router.publish import ReplyStream
from natsd.router.sublist import Sublist
from natsd.router.subscription import Sink, Subscription
from natsd.storage.filestore import FileStore
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
NAME = b"S"
INBOX = b"_INBOX.dg.1"
HDR = b"NATS/1.0\r\nA: B\r\n\r\n"
NOT_FOUND = b"NATS/1.0 404 Message Not Found\r\n\r\n"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

# (subject, headers, payload, ts): trailing zeros in the nanoseconds, none, a whole second,
# a new second, stored headers of several shapes, a non-ASCII subject.
MSGS: list[tuple[str, bytes | None, bytes, int]] = [
    ("a.1", None, b"one", T0 + 123_456_789),
    ("a.2", HDR, b"two", T0 + 123_456_780),
    ("a.1", None, b"", T0 + 120_000_000),
    ("a.3", b"NATS/1.0\r\n\r\n", b"four", T0 + NS),
    ("ü.é", HDR, b"five", T0 + NS + 1),
    ("a.1", b"NATS/1.0\r\nX: 1\r\nY: 2\r\n\r\n", b"six" * 10, T0 + 2 * NS + 500),
    ("a.2", None, b"seven", T0 + 3 * NS),
    ("a.1", None, b"eight", T0 + 3 * NS + 999_999_999),
    ("a.3", None, b"nine", T0 + 4 * NS + 100),
    ("a.4", HDR, b"ten", T0 + 4 * NS + 7),
]
DELETED = (3, 7)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StreamStore]:
    cfg = StoreConfig(name="S")
    st: StreamStore = MemoryStore(cfg) if request.param == "memory" else FileStore(tmp_path, cfg)
    for i, (subj, hdr, data, ts) in enumerate(MSGS, 1):
        st.store_raw(subj, hdr, data, i, ts)
    for s in DELETED:
        st.remove_msg(s)
    yield st
    st.stop()


def reference(
    store: StreamStore, seq: int, batch: int, max_bytes: int
) -> list[tuple[bytes, bytes]]:
    """The replies of the per-message loop ``_get`` ran for an unfiltered batch."""
    mb = max_bytes if max_bytes != 0 else DEFAULT_MAX_BYTES
    np = store.num_pending(seq, "", False)
    out: list[tuple[bytes, bytes]] = []
    lseq = sent = 0
    for i in range(batch):
        m = store.load_next_msg("", seq)
        if m is None:
            if i == 0:
                return [(NOT_FOUND, b"")]
            break
        seq = m.seq + 1
        np = max(np - 1, 0)
        subject = m.subject.encode()
        out.append((direct._msg_headers(NAME, m, subject, direct._pending(np, lseq)), m.data))
        lseq = m.seq
        sent += len(subject) + (len(m.hdr) if m.hdr else 0) + len(m.data)
        if sent >= mb:
            break
    out.append((b"NATS/1.0 204 EOB\r\n" + direct._pending(np, lseq) + b"\r\n", b""))
    return out


def inbox_stream() -> tuple[ReplyStream, Sink, Subscription]:
    """A ReplyStream on its fast path: one plain subscription of a client taking headers."""
    sink = Sink(1)
    sink.headers = True
    sink.flush_pending = True  # no kick(): the base class has none
    sub = Subscription(INBOX, None, b"7", client=sink)
    sl: Sublist[Subscription] = Sublist()
    sl.insert(sub)
    send = ReplyStream(sl, INBOX)
    return send, sink, sub


def parse_frames(out: list[bytes]) -> list[tuple[bytes, bytes]]:
    got: list[tuple[bytes, bytes]] = []
    data = b"".join(out)
    while data:
        line, _, rest = data.partition(b"\r\n")
        op, subj, sid, hlen, size = line.split(b" ")
        assert (op, subj, sid) == (b"HMSG", INBOX, b"7")
        h, n = int(hlen), int(size)
        assert rest[n : n + 2] == b"\r\n"
        got.append((rest[:h], rest[h:n]))
        data = rest[n + 2 :]
    return got


def run_get(store: StreamStore, send: ReplyStream, body: dict[str, int]) -> None:
    req = direct.DirectRequest(**body)
    np = store.num_pending(req.seq, "", False)
    direct._get_batch(NAME, store, req.seq, req, np, send)


CASES = [
    {"seq": 1, "batch": 100},
    {"seq": 1, "batch": 3},
    {"seq": 3, "batch": 2},  # from a deleted sequence
    {"seq": 6, "batch": 100},
    {"seq": 10, "batch": 5},
    {"seq": 11, "batch": 5},  # past the end
    {"seq": 1, "batch": -1},
    {"seq": 2, "batch": 10, "max_bytes": 5},
    {"seq": 2, "batch": 10, "max_bytes": 60},
    {"seq": 2, "batch": 10, "max_bytes": 61},
    {"seq": 2, "batch": 10, "max_bytes": -1},
]


@pytest.mark.parametrize("body", CASES, ids=str)
def test_batch_replies_match_the_per_message_loop(store: StreamStore, body: dict[str, int]) -> None:
    send, sink, sub = inbox_stream()
    run_get(store, send, body)
    got = parse_frames(sink.out)
    want = reference(store, body["seq"], body["batch"], body.get("max_bytes", 0))
    assert got == want
    assert sink.msgs_out == sub.delivered == len(want)
    assert sink.bytes_out == sum(len(h) + len(p) for h, p in want)
    assert sink.out_size == sum(len(f) for f in sink.out)


@pytest.mark.parametrize("body", CASES, ids=str)
def test_batch_through_publish(store: StreamStore, body: dict[str, int]) -> None:
    """A subscription ReplyStream cannot write to directly (internal, queue, max...)."""
    got: list[tuple[bytes, bytes]] = []

    def cb(
        sub: Subscription, subj: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        assert subj == INBOX
        got.append((hdr or b"", data))

    sl: Sublist[Subscription] = Sublist()
    sl.insert(Subscription(INBOX, None, b"1", callback=cb))
    run_get(store, ReplyStream(sl, INBOX), body)
    assert got == reference(store, body["seq"], body["batch"], body.get("max_bytes", 0))


def test_time_stamps_are_rfc3339_of_the_stored_time(store: StreamStore) -> None:
    send, sink, _sub = inbox_stream()
    run_get(store, send, {"seq": 1, "batch": 100})
    stamps = [
        line.split(b": ", 1)[1].decode()
        for h, _p in parse_frames(sink.out)[:-1]
        for line in h.split(b"\r\n")
        if line.startswith(b"Nats-Time-Stamp: ")
    ]
    live = [ts for i, (_s, _h, _d, ts) in enumerate(MSGS, 1) if i not in DELETED]
    assert stamps == [rfc3339(ts) for ts in live]
    assert stamps[1] == "2023-11-14T22:13:20.12345678Z"  # trailing zero trimmed
    assert stamps[2] == "2023-11-14T22:13:21Z"  # a whole second


@pytest.fixture(params=["memory", "file"])
def big_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StreamStore]:
    """More messages than one chunk of a batch (1024), and a run of 100 KB ones (more bytes
    than one chunk, 1 MiB), with deleted sequences here and there."""
    cfg = StoreConfig(name="S")
    st: StreamStore = MemoryStore(cfg) if request.param == "memory" else FileStore(tmp_path, cfg)
    for i in range(1, 3001):
        st.store_msg(f"c.{i % 5}", HDR if i % 7 == 0 else None, b"%d" % i)
    for i in range(40):
        st.store_msg("big", None, bytes([i]) * 100_000)
    for s in (1, 1024, 1025, 2047, 2999, 3010):
        st.remove_msg(s)
    yield st
    st.stop()


def sizes_from(store: StreamStore, seq: int) -> list[int]:
    return [
        len(m.subject) + (len(m.hdr) if m.hdr else 0) + len(m.data)
        for m in store.load_range(seq, 10**6)
    ]


def test_batches_across_chunks(big_store: StreamStore) -> None:
    st = big_store
    sz = sizes_from(st, 1)
    first1024 = sum(sz[:1024])
    cases = [
        {"seq": 1, "batch": 2500},
        {"seq": 1, "batch": 10_000},
        {"seq": 2, "batch": 1024},
        {"seq": 2, "batch": 1025},
        {"seq": 1, "batch": 5000, "max_bytes": first1024},  # ends a chunk exactly
        {"seq": 1, "batch": 5000, "max_bytes": first1024 + 1},
        {"seq": 1, "batch": 5000, "max_bytes": sum(sz[:1700])},
        {"seq": 2990, "batch": 100},  # into the big ones: chunks end on 1 MiB
        {"seq": 2990, "batch": 100, "max_bytes": 2_500_000},
        {"seq": 3005, "batch": 3},
    ]
    for body in cases:
        send, sink, _sub = inbox_stream()
        run_get(st, send, body)
        want = reference(st, body["seq"], body["batch"], body.get("max_bytes", 0))
        assert parse_frames(sink.out) == want, body
