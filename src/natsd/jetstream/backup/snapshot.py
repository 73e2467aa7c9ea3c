"""A stream's backup, as the archive's entries (``streamSnapshotV2``).

:func:`archive_pieces` yields the uncompressed archive in pieces of about ``PIECE`` bytes,
reading the store ``READ_BATCH`` messages at a time, so a backup of any size holds one
batch in memory. The state is taken when the backup starts: messages stored after it are
not in it, and messages removed while it runs are left out (their sequences restore as
deleted). Consumers are written before the messages, as nats-server writes them (an
interest or workqueue stream's retention depends on them); each one's state is bounded by
the backup's last sequence.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson

from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.stream.stream import Stream
from natsd.protocol.natsarc import MAGIC, encode_entry, end_entry

__all__ = ["PIECE", "archive_pieces", "backup_state", "consumer_backup"]

PIECE: Final = 64 * 1024
READ_BATCH: Final = 512


def backed_up_consumers(stream: Stream) -> list[Consumer]:
    """The consumers a backup carries: the stream's own (not the in-memory consumers that
    other streams' mirrors and sources read through, which they make again)."""
    return [
        c for c in stream.consumers.values() if isinstance(c, Consumer) and not c.cfg.direct
    ]


def backup_state(stream: Stream, consumers: int) -> dict[str, Any]:
    """``state.json``: the stream's state as STREAM.INFO gives it, with the number of
    consumer entries that follow."""
    st = stream.state_json()
    st.pop("lost", None)
    st["consumer_count"] = consumers
    return st


def consumer_backup(c: Consumer, last_seq: int) -> dict[str, Any]:
    """``consumers/<name>``: nats-server's ``SnapshotConsumerState`` (the config, and the
    stored state with its pending and redelivered maps), bounded by ``last_seq``."""
    st = orjson.loads(c.state_doc())
    d, f = st.get("delivered", {}), st.get("ack_floor", {})
    state: dict[str, Any] = {
        "delivered": {
            "consumer_seq": int(d.get("consumer_seq", 0)),
            "stream_seq": min(int(d.get("stream_seq", 0)), last_seq),
        },
        "ack_floor": {
            "consumer_seq": int(f.get("consumer_seq", 0)),
            "stream_seq": min(int(f.get("stream_seq", 0)), last_seq),
        },
    }
    pending = {
        s: {"Sequence": int(p[0]), "Timestamp": int(p[1])}
        for s, p in st.get("pending", {}).items()
        if int(s) <= last_seq
    }
    if pending:
        state["pending"] = pending
    redelivered = {s: int(n) for s, n in st.get("redelivered", {}).items() if int(s) <= last_seq}
    if redelivered:
        state["redelivered"] = redelivered
    return {"config": c.cfg.to_json(), "state": state}


def archive_pieces(
    stream: Stream, include_consumers: bool, now_ns: int
) -> tuple[dict[str, Any], Iterator[bytes]]:
    """The state the backup is of, and the archive's bytes (uncompressed) in pieces."""
    consumers = backed_up_consumers(stream) if include_consumers else []
    state = backup_state(stream, len(consumers))
    first, last = int(state["first_seq"]), int(state["last_seq"])
    docs = [(c.name, consumer_backup(c, last)) for c in consumers]

    def pieces() -> Iterator[bytes]:
        buf = bytearray(MAGIC)
        buf += encode_entry(b"state.json", now_ns, 0, b"", orjson.dumps(state))
        for name, doc in docs:
            buf += encode_entry(b"consumers/" + name.encode(), now_ns, 0, b"", orjson.dumps(doc))
        seq = max(first, 1)
        while seq <= last:
            batch = stream.store.load_range(seq, READ_BATCH)
            if not batch:
                break
            for m in batch:
                if m.seq > last:
                    seq = last + 1
                    break
                buf += encode_entry(m.subject.encode(), m.ts, m.seq, m.hdr or b"", m.data)
                seq = m.seq + 1
                if len(buf) >= PIECE:
                    yield bytes(buf)
                    buf.clear()
        buf += end_entry()
        yield bytes(buf)

    return state, pieces()
