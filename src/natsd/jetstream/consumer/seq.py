"""Where a consumer starts and restarts: the deliver policies (``selectStartingSeqNo``) and
the checks of ``CONSUMER.RESET`` (``resetStartingSeq``).

Pure functions of the stream and the config: they return sequences and the consumer moves
its cursor (the cursor's one writer). Purges are split between the ack tracker
(``AckTracker.purge_below`` / ``purged``) and the consumer. All on the event loop.
"""

from __future__ import annotations

from natsd.jetstream.config.consumer_config import ConsumerConfig, DeliverPolicy, rfc3339_to_ns
from natsd.jetstream.stream.queries import seq_from_time
from natsd.jetstream.stream.stream import Stream

__all__ = ["reset_seq", "starting_seq"]


def starting_seq(
    stream: Stream, cfg: ConsumerConfig, filters: list[str]
) -> tuple[int, list[int] | None, int]:
    """The first stream sequence a new consumer looks at, and for ``last_per_subject`` the
    list of last sequences to deliver first and where to resume after them."""
    store = stream.store
    st = store.state()
    dp = cfg.deliver_policy
    sseq = 0
    lss: list[int] | None = None
    lss_resume = 0
    if cfg.opt_start_seq == 0:
        if dp == DeliverPolicy.ALL:
            sseq = st.first_seq
        elif dp == DeliverPolicy.LAST:
            if not filters:
                sseq = st.last_seq
            else:
                for f in filters:
                    last = store.filtered_state(1, f).last
                    if last > sseq:
                        sseq = last
        elif dp == DeliverPolicy.LAST_PER_SUBJECT:
            if stream.cfg.max_msgs_per_subject == 1:
                sseq = st.first_seq
            else:
                seqs = store.multi_last_seqs(filters, 0, 0)
                lss_resume = st.last_seq
                sseq = seqs[0] if seqs else st.last_seq
                lss = seqs if seqs else None
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
    return max(sseq, 1), lss, lss_resume


def reset_seq(stream: Stream, cfg: ConsumerConfig, asflr: int, seq: int) -> int:
    """``resetStartingSeq``'s checks: where delivery restarts for a reset to ``seq`` (0: just
    above the ack floor ``asflr``). Raises ValueError with nats-server's reason."""
    if seq == 0:
        seq = asflr + 1
    elif cfg.deliver_policy == DeliverPolicy.BY_START_SEQUENCE:
        if seq < cfg.opt_start_seq:
            raise ValueError("below start seq")
    elif cfg.deliver_policy == DeliverPolicy.BY_START_TIME:
        if seq < seq_from_time(stream.store, rfc3339_to_ns(cfg.opt_start_time)):
            raise ValueError("below start time")
    elif cfg.deliver_policy != DeliverPolicy.ALL:
        raise ValueError("not allowed")
    return max(seq, 1)
