"""Acks, ack floors and redelivery of a consumer (nats-server ``processAck``,
``processAckMsg``, ``processNak``, ``processTerm``, ``checkPending``, and the consumer store's
``UpdateDelivered`` / ``UpdateAcks`` that move the reported sequences).

Functions of a :class:`~natsd.jetstream.consumer.consumer.Consumer`; all run on the event loop.
Ack subjects are ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any, Final

import orjson

from natsd.core.clock import parse_duration
from natsd.jetstream.config.consumer_config import AckPolicy
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.consumer import advisory as adv
from natsd.jetstream.consumer import pull
from natsd.router.subscription import Subscription

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer

__all__ = [
    "check_pending",
    "force_expire_pending",
    "has_max_deliveries",
    "move_ack_floor",
    "on_ack",
    "parse_nak_delay",
    "process_ack",
    "process_nak",
    "process_term",
    "progress",
    "reset_ptmr",
    "stop_ptmr",
    "track_pending",
    "update_acks",
    "update_delivered",
    "write_store_state",
]

log: Final = logging.getLogger("natsd")

ACK_WAIT_DELAY: Final = 1_000_000  # ackWaitDelay: 1ms added to timer deadlines (ns)

# Policy members compared per message, bound once: on Python 3.11 `AckPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_ACK_NONE: Final = AckPolicy.NONE
_ACK_ALL: Final = AckPolicy.ALL
_ACK_EXPLICIT: Final = AckPolicy.EXPLICIT
_LIMITS: Final = RetentionPolicy.LIMITS

_ACK: Final = b"+ACK"
_OK: Final = b"+OK"
_NAK: Final = b"-NAK"
_WPI: Final = b"+WPI"
_NXT: Final = b"+NXT"
_TERM: Final = b"+TERM"


def on_ack(
    c: Consumer,
    sub: Subscription,
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    data: bytes,
) -> None:
    if c.closed:
        return
    # "<ack prefix><dc>.<sseq>.<dseq>.<ts>.<pending>": the prefix is this consumer's own
    # ($JS.ACK.<stream>.<consumer>.), so only the five numeric tokens are split off.
    pre = c._ack_pre
    sseq = dseq = dc = 0
    if subject.startswith(pre):
        toks = subject[len(pre) :].split(b".")
        if len(toks) == 5:
            try:
                dc, sseq, dseq = int(toks[0]), int(toks[1]), int(toks[2])
            except ValueError:
                sseq = dseq = dc = 0
    if c.cfg.inactive_threshold > 0:
        c._suppress_deletion()
    msg = data
    skip_reply = sseq == 0
    if not msg or msg == _ACK or msg == _OK:
        if not process_ack(c, sseq, dseq, dc, reply or b"", True):
            skip_reply = True
    elif msg.startswith(_NXT):
        process_ack(c, sseq, dseq, dc, b"", True)
        if reply:
            pull.process_next_request(c, reply, msg[len(_NXT) :])
        skip_reply = True
    elif msg.startswith(_NAK):
        process_nak(c, sseq, dseq, dc, msg)
    elif msg == _WPI:
        progress(c, sseq)
    elif msg.startswith(_TERM):
        reason = msg[len(_TERM) :].strip().decode(errors="replace")
        if not process_term(c, sseq, dseq, dc, reason, reply or b""):
            skip_reply = True
    if reply and not skip_reply:
        c.ack_reply(reply)


def process_ack(c: Consumer, sseq: int, dseq: int, dc: int, reply: bytes, sample: bool) -> bool:
    """``processAckMsg``; True when the caller should send the ack-sync reply."""
    if c.closed or sseq >= c.sseq:
        return False
    in_place = c.retention != _LIMITS
    ap = c.cfg.ack_policy
    acked: list[int] = []
    need_signal = False
    if ap == _ACK_EXPLICIT:
        p = c.pending.get(sseq)
        if p is not None:
            if sample and c.sfreq > 0:
                sample_ack(c, sseq, dseq, dc, p[1])
            if c.maxp > 0 and len(c.pending) >= c.maxp:
                need_signal = True
            del c.pending[sseq]
            dseq = p[0]
            move_ack_floor(c, dseq, sseq)
        c.rdc.pop(sseq, None)
        c._remove_from_rdq(sseq)
    elif ap == _ACK_ALL:
        if dseq <= c.adflr or sseq <= c.asflr:
            return True
        if c.maxp > 0 and len(c.pending) >= c.maxp:
            need_signal = True
        floor = c.asflr
        c.adflr, c.asflr = dseq, sseq
        for s in drop_upto(c.pending, floor, sseq):
            if in_place and s != sseq:
                acked.append(s)
            c.rdc.pop(s, None)
            c._remove_from_rdq(s)
    else:
        return in_place
    update_acks(c, dseq, sseq, b"" if in_place else reply)
    if in_place:
        stream = c.stream
        stream.ack_msg(sseq, c)
        for s in acked:
            stream.ack_msg(s, c)
    if need_signal:
        c._signal()
    return in_place


def process_term(c: Consumer, sseq: int, dseq: int, dc: int, reason: str, reply: bytes) -> bool:
    in_place = process_ack(c, sseq, dseq, dc, reply, False)
    adv.terminated(c, dseq, sseq, dc, reason)
    return in_place


def process_nak(c: Consumer, sseq: int, dseq: int, dc: int, nak: bytes) -> None:
    if dseq <= c.adflr or dseq > c.dseq:
        return
    p = c.pending.get(sseq)
    if p is None:
        return
    adv.nak(c, dseq, sseq, dc)
    arg = nak[len(_NAK) :].strip()
    if arg:
        delay = parse_nak_delay(arg)
        if delay is not None:
            c._remove_from_rdq(sseq)
            p[1] = c.now_ns() - c.cfg.ack_wait + delay
            update_delivered(c, p[0], sseq, dc, p[1])
            if c._ptmr is not None:
                reset_ptmr(c, 0.01)
            return
        log.warning(
            "JetStream consumer '%s > %s > %s' bad NAK delay value: %r",
            c.stream.ctx.account_name,
            c.stream.name,
            c.name,
            arg.decode(errors="replace"),
        )
    if sseq not in c.rdqi:
        c._add_to_rdq(sseq)
    c._signal()


def progress(c: Consumer, seq: int) -> None:
    p = c.pending.get(seq)
    if p is not None:
        p[1] = c.now_ns()
        update_delivered(c, p[0], seq, 1, p[1])


def sample_ack(c: Consumer, sseq: int, dseq: int, dc: int, ts: int) -> None:
    if c.sfreq < 100 and random.randrange(100) > c.sfreq:
        return
    adv.ack_metric(c, dseq, sseq, c.now_ns() - ts, dc)


def track_pending(c: Consumer, seq: int, dseq: int) -> None:
    now = c.now_ns()
    p = c.pending.get(seq)
    if p is not None:
        p[1] = now
    else:
        c.pending[seq] = [dseq, now]
    bo = c.cfg.backoff
    if bo:
        bi = min(max(c.rdc.get(seq, 0), 0), len(bo) - 1)
        delay = bo[bi] + ACK_WAIT_DELAY
    else:
        delay = c.cfg.ack_wait + ACK_WAIT_DELAY
    end = c.mono() + delay / 1e9
    if c._ptmr is None or c._ptmr_end > end:
        reset_ptmr(c, delay / 1e9)


def reset_ptmr(c: Consumer, delay: float) -> None:
    if c._ptmr is not None:
        c._ptmr.cancel()
    c._ptmr = c.sched.call_later(delay, check_pending, c)
    c._ptmr_end = c.mono() + delay


def stop_ptmr(c: Consumer) -> None:
    if c._ptmr is not None:
        c._ptmr.cancel()
        c._ptmr = None


def has_max_deliveries(c: Consumer, seq: int) -> bool:
    if not c.maxdc:
        return False
    dc = c._delivery_count(seq)
    if dc < c.maxdc:
        return False
    if dc == c.maxdc:
        adv.max_deliveries(c, seq, dc)
    if c.maxp > 0 and len(c.pending) >= c.maxp:
        c._signal()
    p = c.pending.pop(seq, None)
    if p is not None:
        update_delivered(c, p[0], seq, dc + 1, p[1])
        move_ack_floor(c, p[0], seq)
    c.rdc[seq] = dc
    return True


def check_pending(c: Consumer) -> None:
    """``checkPending``: queue what waited longer than ack_wait (or its backoff)."""
    c._ptmr = None
    if c.closed or not c.pending:
        return
    ttl = c.cfg.ack_wait
    if ttl == 0:
        return
    fseq = c.stream.store.state().first_seq
    now = c.now_ns()
    bo = c.cfg.backoff
    nxt = bo[-1] if bo else ttl + ACK_WAIT_DELAY
    expired: list[int] = []
    changed = False
    for seq, p in list(c.pending.items()):
        if seq < fseq or seq <= c.asflr:
            del c.pending[seq]
            c.rdc.pop(seq, None)
            c._remove_from_rdq(seq)
            changed = True
            if seq > c.asflr:
                c.asflr = seq
            if p[0] > c.adflr:
                c.adflr = p[0]
            continue
        elapsed, deadline = now - p[1], ttl
        if bo:
            dc = max(c.rdc.get(seq, 0), 0)
            nbi = dc + 1
            if dc + 1 >= len(bo):
                dc = len(bo) - 1
                nbi = dc
            deadline = bo[dc]
            if bo[nbi] < nxt:
                nxt = bo[nbi]
        if elapsed >= deadline:
            if seq not in c.rdqi and not has_max_deliveries(c, seq):
                expired.append(seq)
        elif deadline - elapsed < nxt:
            nxt = deadline - elapsed
    if expired:
        expired.sort()
        for seq in expired:
            c._add_to_rdq(seq)
        off = now - c.pending[expired[0]][1]
        for seq in expired:
            pe = c.pending.get(seq)
            if pe is not None:
                pe[1] += off
        c._signal()
    if c.pending:
        reset_ptmr(c, max(nxt, 0) / 1e9)
    else:
        c.rdq.clear()
        c.rdqi.clear()
        c.adflr, c.asflr = c.dseq - 1, c.sseq - 1
    if changed:
        write_store_state(c)


def force_expire_pending(c: Consumer) -> None:
    """``forceExpirePending``: queue everything pending for redelivery now."""
    expired = [s for s in list(c.pending) if s not in c.rdqi and not has_max_deliveries(c, s)]
    if expired:
        expired.sort()
        for seq in expired:
            c._add_to_rdq(seq)
        now = c.now_ns()
        off = now - c.pending[expired[0]][1]
        for seq in expired:
            c.pending[seq][1] += off
        reset_ptmr(c, (c.cfg.ack_wait + ACK_WAIT_DELAY) / 1e9)
    c._signal()


def move_ack_floor(c: Consumer, dseq: int, sseq: int) -> None:
    if not c.pending:
        c.adflr, c.asflr = c.dseq - 1, c.sseq - 1
    elif dseq == c.adflr + 1:
        c.adflr, c.asflr = dseq, sseq
        ss = next_above(c.pending, sseq, c.sseq)
        if ss:
            pd = c.pending[ss][0]
            if pd > 0:
                c.adflr, c.asflr = pd - 1, ss - 1


def next_above(pending: dict[int, Any], sseq: int, limit: int) -> int:
    """The lowest pending sequence above ``sseq`` (below ``limit``), 0 if none: walks the
    sequences when the gap is small (acks in order), else scans the pending set."""
    if limit - sseq <= 2 * len(pending) + 8:
        for ss in range(sseq + 1, limit):
            if ss in pending:
                return ss
        return 0
    return min((s for s in pending if s > sseq), default=0)


def drop_upto(pending: dict[int, Any], floor: int, sseq: int) -> list[int]:
    """Remove and return (ascending) the pending sequences in (``floor``, ``sseq``]."""
    if sseq - floor <= len(pending):
        out = [s for s in range(floor + 1, sseq + 1) if s in pending]
    else:
        out = sorted(s for s in pending if s <= sseq)
    for s in out:
        del pending[s]
    return out


def update_delivered(c: Consumer, dseq: int, sseq: int, dc: int, ts: int) -> None:
    """The consumer store's ``UpdateDelivered``, plus last-delivery activity."""
    c.ldt = c.now_ns()
    c.mark_dirty()
    if c.cfg.ack_policy == _ACK_NONE:
        if dc != 1:
            return
        if dseq > c.st_dc:
            c.st_dc = c.st_fc = dseq
        if sseq > c.st_ds:
            c.st_ds = c.st_fs = sseq
        return
    if dseq <= c.st_fc:
        return
    if sseq > c.st_ds:
        c.st_pending[sseq] = dseq
    if dseq > c.st_dc:
        c.st_dc = dseq
    if sseq > c.st_ds:
        c.st_ds = sseq


def update_acks(c: Consumer, dseq: int, sseq: int, reply: bytes) -> None:
    """The consumer store's ``UpdateAcks`` (moves the reported ack floor) and the
    ack-sync reply."""
    c.lat = c.now_ns()
    if reply:
        c.ack_reply(reply)
    if c.cfg.ack_policy == _ACK_NONE or dseq <= c.st_fc:
        return
    stp = c.st_pending
    if sseq not in stp:
        return
    c.mark_dirty()
    if c.cfg.ack_policy == _ACK_ALL:
        floor = c.st_fs
        c.st_fc, c.st_fs = dseq, sseq
        drop_upto(stp, min(floor, sseq - 1), sseq)
        return
    pd = stp.pop(sseq)
    if 0 < pd < dseq:
        dseq = pd
    if not stp:
        c.st_fc, c.st_fs = c.st_dc, c.st_ds
    elif dseq == c.st_fc + 1:
        c.st_fc, c.st_fs = dseq, sseq
        if c.st_dc > dseq:
            ss = next_above(stp, sseq, c.st_ds + 1)
            if ss and stp[ss] > 0:
                c.st_fc, c.st_fs = stp[ss] - 1, ss - 1


def parse_nak_delay(arg: bytes) -> int | None:
    """``-NAK {"delay": <ns>}`` or ``-NAK <go duration>``; None when it does not parse."""
    if arg[:1] == b"{":
        try:
            doc = orjson.loads(arg)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(doc, dict):
            return None
        d = doc.get("delay", 0)
        return int(d) if isinstance(d, int) and not isinstance(d, bool) else None
    try:
        text = arg.decode()
        if text.replace(".", "", 1).isdigit():
            return None  # Go durations need a unit
        return int(parse_duration(text) * 1e9)
    except (ValueError, UnicodeDecodeError):
        return None


def write_store_state(c: Consumer) -> None:
    """``writeStoreState``: the stored view becomes the runtime state (the store's
    ``Update`` refuses inconsistent or outdated states)."""
    dc, ds = c.dseq - 1, c.sseq - 1
    if c.adflr > dc or c.asflr > ds:
        return
    if dc < c.st_dc or c.asflr < c.st_fs:
        return
    c.st_dc, c.st_ds = dc, ds
    c.st_fc, c.st_fs = c.adflr, c.asflr
    c.st_pending = {s: p[0] for s, p in c.pending.items()}
    c.mark_dirty()
