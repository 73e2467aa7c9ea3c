"""The numbers of a ``$JS.ACK`` reply subject: ``<prefix><dc>.<sseq>.<dseq>.<ts>.<pending>``,
read in place. A consumer reads the acks sent to its own prefix
(``$JS.ACK.<stream>.<consumer>.``); a mirror reads the replies of the messages its origin's
consumer delivers, timestamp and pending count included (``stream/mirror.py``)."""

from __future__ import annotations

__all__ = ["ack_tail"]


def ack_tail(subject: bytes, start: int, numbers: int) -> tuple[int, int, int, int, int]:
    """(delivery count, stream sequence, consumer sequence, timestamp, pending) of an ack
    subject whose tail, from ``start``, is ``<dc>.<sseq>.<dseq>.<ts>.<pending>``; all zeros
    when the tail is not five tokens or one of its first ``numbers`` (3 or 5) is not a plain
    number (1 to 20 ASCII digits, as many as a uint64 has). The others read as 0. One pass
    over the bytes: compiled, about 0.2 us against 0.56 us for a split and ``int()`` calls
    (``bytes.find`` with a start offset is no help: its arguments are parsed the slow way)."""
    n = len(subject)
    got = [0, 0, 0, 0, 0]
    tok = 0  # tokens ended so far
    v = 0
    nd = 0  # digits of the number being read
    ts_at = 0  # where the timestamp's digits start (it is read whole, not digit by digit:
    # a nanosecond time does not fit a compiled small int, and big-int steps cost more)
    i = start
    while i < n:
        ch = subject[i]
        if ch == 46:  # "."
            if tok < numbers:
                if nd == 0:
                    return 0, 0, 0, 0, 0
                got[tok] = int(subject[ts_at:i]) if tok == 3 else v
            tok += 1
            if tok > 4:
                return 0, 0, 0, 0, 0
            if tok == 3:
                ts_at = i + 1
            v = 0
            nd = 0
        elif tok < numbers:
            if ch < 48 or ch > 57 or nd >= 20:
                return 0, 0, 0, 0, 0
            if tok != 3:
                v = v * 10 + ch - 48
            nd += 1
        i += 1
    if tok != 4:
        return 0, 0, 0, 0, 0
    if numbers > 4:
        if nd == 0:
            return 0, 0, 0, 0, 0
        got[4] = v
    return got[0], got[1], got[2], got[3], got[4]
