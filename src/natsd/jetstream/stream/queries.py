"""Look-ups over a ``StreamStore`` that need more than one store call.

``seq_from_time`` (nats-server ``GetSeqFromTime``) is the one answer to "where does time T
start in this stream": direct gets and MSG.GET with ``start_time``, consumers with
``deliver_policy: by_start_time`` and their resets, and the duplicate-window rebuild after a
restart all use it. Pure functions of the store; compiled with the hot path because direct
gets call it.
"""

from __future__ import annotations

from natsd.storage.store import StreamStore

__all__ = ["seq_from_time"]


def seq_from_time(store: StreamStore, ts: int) -> int:
    """nats-server ``GetSeqFromTime``: the first message stored at or after ``ts``, or the
    last sequence + 1 when there is none. Binary search; timestamps ascend with sequence."""
    st = store.state()
    first = store.load_next_msg("", st.first_seq) if st.msgs else None
    if first is None:
        return st.last_seq + 1
    if ts <= first.ts:
        return first.seq
    last = store.load_prev_msg(st.last_seq)
    if last is None or ts > last.ts:
        return st.last_seq + 1
    lo, hi = first.seq, last.seq  # the answer is the first live message at or after lo
    while lo < hi:
        mid = (lo + hi) // 2
        m = store.load_next_msg("", mid)
        if m is not None and m.ts >= ts:
            hi = mid
        else:
            lo = mid + 1
    m = store.load_next_msg("", lo)
    return m.seq if m is not None else st.last_seq + 1
