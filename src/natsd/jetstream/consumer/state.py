"""Consumer info and persisted state.

``info`` is CONSUMER.INFO (nats-server ``ConsumerInfo``). File consumers save their config
(``save_meta``) when it is set, and their state (the stored view: delivered and ack-floor
pairs, pending with delivery times, redelivery counts) through the catalog a little after it
changes (``STATE_FLUSH_DELAY``) and when the server stops; ``apply_state`` restores it at
start-up (``applyState``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from natsd.core.clock import rfc3339
from natsd.jetstream.consumer import priority as prio
from natsd.jetstream.consumer import pull, push
from natsd.version import API_LEVEL, SERVER_VERSION

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer

__all__ = ["apply_state", "flush_state", "info", "save_meta", "state_doc"]

log = logging.getLogger("natsd")


def info(c: Consumer, *, versioned: bool = True) -> dict[str, Any]:
    """CONSUMER.INFO; ``versioned`` adds nats-server's ``_nats.ver``/``_nats.level``
    response metadata (create and info responses have it, list entries do not)."""
    np = c.num_pending()
    if c.st_dc or c.st_ds:
        dlv_c, dlv_s = c.st_dc, c.st_ds
    else:
        dlv_c, dlv_s = max(c.dseq, 1) - 1, max(c.sseq, 1) - 1
    delivered: dict[str, Any] = {"consumer_seq": dlv_c, "stream_seq": dlv_s}
    if c.ldt:
        delivered["last_active"] = rfc3339(c.ldt)
    ack_floor: dict[str, Any] = {"consumer_seq": c.st_fc, "stream_seq": c.st_fs}
    if c.lat:
        ack_floor["last_active"] = rfc3339(c.lat)
    if versioned:
        cfg = c.cfg.to_json(server_version=SERVER_VERSION, api_level=API_LEVEL)
    else:
        cfg = c.cfg.to_json()
    out: dict[str, Any] = {
        "stream_name": c.stream.name,
        "name": c.name,
        "created": rfc3339(c.created_ns),
        "config": cfg,
        "delivered": delivered,
        "ack_floor": ack_floor,
        "num_ack_pending": len(c.pending),
        "num_redelivered": 0 if c.cfg.max_deliver == 1 else len(c.rdc),
        "num_waiting": 0,
        "num_pending": np,
    }
    if c.waiting is not None:
        pull.process_waiting(c, False)
        out["num_waiting"] = len(c.waiting)
    if c.cfg.deliver_subject and c.active and not push.has_interest(c):
        # Losing the subscriber shows at once (nats-server hears of it synchronously).
        push.update_interest(c, False)
    if c.cfg.deliver_subject and c.active:
        out["push_bound"] = True
    groups = prio.group_state(c)
    until = c.paused_until()
    now = c.now_ns()
    if until > now:
        out["paused"] = True
        out["pause_remaining"] = until - now
    out["ts"] = rfc3339(c.now_ns())
    if groups:
        out["priority_groups"] = groups
    return out


def state_doc(c: Consumer) -> bytes:
    return orjson.dumps(
        {
            "delivered": {"consumer_seq": c.st_dc, "stream_seq": c.st_ds},
            "ack_floor": {"consumer_seq": c.st_fc, "stream_seq": c.st_fs},
            "cursor": {"consumer_seq": c.dseq, "stream_seq": c.sseq},
            "pending": {str(s): p for s, p in c.pending.items()},
            "redelivered": {str(s): n for s, n in c.rdc.items()},
        }
    )


def flush_state(c: Consumer, durable: bool = False) -> bool:
    """Save the state if it changed (``durable``: also when it did not, and fsync the
    directory too). False when the save failed."""
    c._flush_tmr = None
    if not c._dirty and not durable:
        return True
    c._dirty = False
    if not c.persist:
        return True
    ctx = c.stream.ctx
    try:
        ctx.catalog.save_consumer_state(
            ctx.account_name, c.stream.name, c.name, "file", state_doc(c), durable
        )
    except OSError as e:
        log.error("consumer %s > %s: cannot save state: %s", c.stream.name, c.name, e)
        c._dirty = True
        return False
    return True


def save_meta(c: Consumer) -> None:
    """Persist the consumer's name, creation time and config (file consumers only): at
    creation, on config updates and pauses. Raises OSError when the catalog cannot."""
    if not c.persist:
        return
    meta = orjson.dumps({"name": c.name, "created": c.created_ns, "config": c.cfg.to_json()})
    ctx = c.stream.ctx
    ctx.catalog.save_consumer(ctx.account_name, c.stream.name, c.name, "file", meta)


def apply_state(c: Consumer, st: dict[str, Any]) -> None:
    """Restore the persisted state (``applyState``)."""
    d = st.get("delivered", {})
    f = st.get("ack_floor", {})
    c.st_dc, c.st_ds = int(d.get("consumer_seq", 0)), int(d.get("stream_seq", 0))
    c.st_fc, c.st_fs = int(f.get("consumer_seq", 0)), int(f.get("stream_seq", 0))
    c.dseq, c.sseq = c.st_dc + 1, c.st_ds + 1
    c.adflr, c.asflr = c.st_fc, c.st_fs
    c.pending = {int(s): [int(p[0]), int(p[1])] for s, p in st.get("pending", {}).items()}
    c.st_pending = {s: p[0] for s, p in c.pending.items()}
    c.rdc = {int(s): int(n) for s, n in st.get("redelivered", {}).items()}
    first = c.stream.store.state().first_seq
    for s in [s for s in c.rdc if s < first]:
        del c.rdc[s]
