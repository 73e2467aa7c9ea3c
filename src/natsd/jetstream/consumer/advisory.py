"""Consumer advisories and metrics (``$JS.EVENT.ADVISORY.CONSUMER.*``, ``$JS.EVENT.METRIC``).

Bodies and subjects follow nats-server's ``JSConsumer*Advisory`` types; the stream's
context (the engine) adds ``type``, ``id``, ``timestamp`` and ``domain`` and only builds an
event when someone listens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer

__all__ = [
    "ack_metric",
    "consumer_action",
    "max_deliveries",
    "nak",
    "pause",
    "pinned",
    "terminated",
    "unpinned",
]

_PRE = "$JS.EVENT.ADVISORY.CONSUMER."
_V1 = "io.nats.jetstream.advisory.v1."


def _send(c: Consumer, kind: str, typ: str, body: dict[str, object]) -> None:
    subject = f"{kind}.{c.stream.name}.{c.name}"
    c.stream.ctx.advise(subject, typ, body)


def consumer_action(c: Consumer, action: str) -> None:
    """``CREATED`` / ``DELETED``."""
    _send(
        c,
        _PRE + action.upper() + "D",
        _V1 + "consumer_action",
        {"stream": c.stream.name, "consumer": c.name, "action": action},
    )


def pause(c: Consumer, paused: bool, pause_until: str) -> None:
    _send(
        c,
        _PRE + "PAUSE",
        _V1 + "consumer_pause",
        {
            "stream": c.stream.name,
            "consumer": c.name,
            "paused": paused,
            "pause_until": pause_until,
        },
    )


def nak(c: Consumer, dseq: int, sseq: int, dc: int) -> None:
    _send(
        c,
        _PRE + "MSG_NAKED",
        _V1 + "nak",
        {
            "stream": c.stream.name,
            "consumer": c.name,
            "consumer_seq": dseq,
            "stream_seq": sseq,
            "deliveries": dc,
        },
    )


def terminated(c: Consumer, dseq: int, sseq: int, dc: int, reason: str) -> None:
    body: dict[str, object] = {
        "stream": c.stream.name,
        "consumer": c.name,
        "consumer_seq": dseq,
        "stream_seq": sseq,
        "deliveries": dc,
    }
    if reason:
        body["reason"] = reason
    _send(c, _PRE + "MSG_TERMINATED", _V1 + "terminated", body)


def max_deliveries(c: Consumer, sseq: int, dc: int) -> None:
    _send(
        c,
        _PRE + "MAX_DELIVERIES",
        _V1 + "max_deliver",
        {"stream": c.stream.name, "consumer": c.name, "stream_seq": sseq, "deliveries": dc},
    )


def pinned(c: Consumer, group: str, pin_id: str) -> None:
    _send(
        c,
        _PRE + "PINNED",
        _V1 + "consumer_group_pinned",
        {
            "account": c.stream.ctx.account_name,
            "stream": c.stream.name,
            "consumer": c.name,
            "group": group,
            "pinned_id": pin_id,
        },
    )


def unpinned(c: Consumer, group: str, reason: str) -> None:
    _send(
        c,
        _PRE + "UNPINNED",
        _V1 + "consumer_group_unpinned",
        {
            "account": c.stream.ctx.account_name,
            "stream": c.stream.name,
            "consumer": c.name,
            "group": group,
            "reason": reason,
        },
    )


def ack_metric(c: Consumer, dseq: int, sseq: int, delay_ns: int, dc: int) -> None:
    _send(
        c,
        "$JS.EVENT.METRIC.CONSUMER.ACK",
        "io.nats.jetstream.metric.v1.consumer_ack",
        {
            "stream": c.stream.name,
            "consumer": c.name,
            "consumer_seq": dseq,
            "stream_seq": sseq,
            "ack_time": delay_ns,
            "deliveries": dc,
        },
    )
