"""Where a consumer starts and restarts: the deliver policies (``selectStartingSeqNo``),
``CONSUMER.RESET`` (``resetStartingSeq``) and stream purges (``consumer.purge``).

Functions of a :class:`~natsd.jetstream.consumer.consumer.Consumer`; all on the event loop.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from natsd.jetstream.config.consumer_config import DeliverPolicy, rfc3339_to_ns
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.consumer import ack
from natsd.jetstream.stream.queries import seq_from_time

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer

__all__ = ["purge", "reset_to", "select_starting_seq"]


def select_starting_seq(c: Consumer) -> None:
    store = c.stream.store
    st = store.state()
    cfg = c.cfg
    dp = cfg.deliver_policy
    sseq = 0
    if cfg.opt_start_seq == 0:
        if dp == DeliverPolicy.ALL:
            sseq = st.first_seq
        elif dp == DeliverPolicy.LAST:
            if c.filter_all:
                sseq = st.last_seq
            else:
                for f in c.filters:
                    last = store.filtered_state(1, f).last
                    if last > sseq:
                        sseq = last
        elif dp == DeliverPolicy.LAST_PER_SUBJECT:
            if c.stream.cfg.max_msgs_per_subject == 1:
                sseq = st.first_seq
            else:
                seqs = store.multi_last_seqs(c.filters, 0, 0)
                c.lss_resume = st.last_seq
                sseq = seqs[0] if seqs else st.last_seq
                c.lss = seqs if seqs else None
        elif dp == DeliverPolicy.BY_START_TIME and cfg.opt_start_time is not None:
            sseq = seq_from_time(store, rfc3339_to_ns(cfg.opt_start_time))
        else:  # new
            sseq = st.last_seq + 1
    else:
        sseq = cfg.opt_start_seq
    if st.first_seq == 0 and (cfg.direct or cfg.opt_start_seq == 0):
        sseq = 1
    elif sseq > st.last_seq and (cfg.direct or cfg.opt_start_seq == 0):
        sseq = st.last_seq + 1
    elif sseq < st.first_seq:
        sseq = st.first_seq
    c.sseq = max(sseq, 1)
    c.dseq = 1
    c.adflr = 0
    c.asflr = c.sseq - 1
    # SetStarting: the stored view starts just below the first sequence.
    c.st_ds = c.st_fs = c.sseq - 1


def reset_to(c: Consumer, seq: int) -> int:
    """``resetStartingSeq``: restart delivery at ``seq`` (0: just above the ack floor),
    forgetting what is pending. Raises ValueError with nats-server's reason."""
    cfg = c.cfg
    if seq == 0:
        seq = c.asflr + 1
    elif cfg.deliver_policy == DeliverPolicy.BY_START_SEQUENCE:
        if seq < cfg.opt_start_seq:
            raise ValueError("below start seq")
    elif cfg.deliver_policy == DeliverPolicy.BY_START_TIME:
        if seq < seq_from_time(c.stream.store, rfc3339_to_ns(cfg.opt_start_time)):
            raise ValueError("below start time")
    elif cfg.deliver_policy != DeliverPolicy.ALL:
        raise ValueError("not allowed")
    seq = max(seq, 1)
    c.pending.clear()
    c.rdc.clear()
    c.rdq.clear()
    c.rdqi.clear()
    c.lss = None
    c.sseq, c.dseq = seq, 1
    c.adflr, c.asflr = 0, seq - 1
    c.ldt = c.lat = 0
    c.st_dc, c.st_ds, c.st_fc, c.st_fs = 0, seq - 1, 0, seq - 1
    c.st_pending = {}
    ack.stop_ptmr(c)
    if c.retention == RetentionPolicy.INTEREST:
        c.stream.cleanup_no_interest(c.asflr, None)
    c._stream_num_pending()
    c.mark_dirty()
    c._signal()
    return seq


def purge(c: Consumer, sseq: int, slseq: int, wider: bool) -> None:
    """The stream was purged: ``sseq`` is its new first sequence for this consumer."""
    if sseq == 0 and not wider:
        sseq = slseq + 1
    if c.sseq < sseq:
        c.sseq = sseq
    store = c.stream.store
    if c.asflr < sseq:
        c.asflr = sseq - 1
        for seq, p in list(c.pending.items()):
            gone = seq <= c.asflr or (wider and store.load_msg(seq) is None)
            if gone:
                if p[0] > c.adflr:
                    c.adflr = p[0]
                    if c.adflr > c.dseq:
                        c.dseq = c.adflr
                del c.pending[seq]
                c.rdc.pop(seq, None)
                ack.update_acks(c, p[0], seq, b"")
    if not c.pending:
        c.rdc.clear()
        c.adflr, c.asflr = c.dseq - 1, c.sseq - 1
    keep = [s for s in c.rdq if s >= c.sseq]
    c.rdq = deque(keep)
    c.rdqi = set(keep)
    c._stream_num_pending()
    ack.write_store_state(c)
