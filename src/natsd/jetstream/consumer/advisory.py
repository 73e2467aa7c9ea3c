"""Consumer advisories and metrics (``$JS.EVENT.ADVISORY.CONSUMER.*``, ``$JS.EVENT.METRIC``).

Bodies and subjects follow nats-server's ``JSConsumer*Advisory`` types; the stream's
context (the engine) adds ``type``, ``id``, ``timestamp`` and ``domain`` and only builds an
event when someone listens. :class:`Advisories` holds no state but the names: each part of a
consumer that reports something (acks, priority groups, pause) is handed the consumer's one
instance, and the engine and the API reach it as ``consumer.adv``.
"""

from __future__ import annotations

from natsd.jetstream.stream.stream import Stream

__all__ = ["Advisories"]

_PRE = "$JS.EVENT.ADVISORY.CONSUMER."
_V1 = "io.nats.jetstream.advisory.v1."


class Advisories:
    """The advisories of consumer ``name`` of ``stream``."""

    def __init__(self, stream: Stream, name: str) -> None:
        self.stream = stream
        self.name = name

    def _send(self, kind: str, typ: str, body: dict[str, object]) -> None:
        subject = f"{kind}.{self.stream.name}.{self.name}"
        self.stream.ctx.advise(subject, typ, body)

    def consumer_action(self, action: str) -> None:
        """``CREATED`` / ``DELETED``."""
        self._send(
            _PRE + action.upper() + "D",
            _V1 + "consumer_action",
            {"stream": self.stream.name, "consumer": self.name, "action": action},
        )

    def pause(self, paused: bool, pause_until: str) -> None:
        self._send(
            _PRE + "PAUSE",
            _V1 + "consumer_pause",
            {
                "stream": self.stream.name,
                "consumer": self.name,
                "paused": paused,
                "pause_until": pause_until,
            },
        )

    def nak(self, dseq: int, sseq: int, dc: int) -> None:
        self._send(
            _PRE + "MSG_NAKED",
            _V1 + "nak",
            {
                "stream": self.stream.name,
                "consumer": self.name,
                "consumer_seq": dseq,
                "stream_seq": sseq,
                "deliveries": dc,
            },
        )

    def terminated(self, dseq: int, sseq: int, dc: int, reason: str) -> None:
        body: dict[str, object] = {
            "stream": self.stream.name,
            "consumer": self.name,
            "consumer_seq": dseq,
            "stream_seq": sseq,
            "deliveries": dc,
        }
        if reason:
            body["reason"] = reason
        self._send(_PRE + "MSG_TERMINATED", _V1 + "terminated", body)

    def max_deliveries(self, sseq: int, dc: int) -> None:
        self._send(
            _PRE + "MAX_DELIVERIES",
            _V1 + "max_deliver",
            {
                "stream": self.stream.name,
                "consumer": self.name,
                "stream_seq": sseq,
                "deliveries": dc,
            },
        )

    def pinned(self, group: str, pin_id: str) -> None:
        self._send(
            _PRE + "PINNED",
            _V1 + "consumer_group_pinned",
            {
                "account": self.stream.ctx.account_name,
                "stream": self.stream.name,
                "consumer": self.name,
                "group": group,
                "pinned_id": pin_id,
            },
        )

    def unpinned(self, group: str, reason: str) -> None:
        self._send(
            _PRE + "UNPINNED",
            _V1 + "consumer_group_unpinned",
            {
                "account": self.stream.ctx.account_name,
                "stream": self.stream.name,
                "consumer": self.name,
                "group": group,
                "reason": reason,
            },
        )

    def ack_metric(self, dseq: int, sseq: int, delay_ns: int, dc: int) -> None:
        self._send(
            "$JS.EVENT.METRIC.CONSUMER.ACK",
            "io.nats.jetstream.metric.v1.consumer_ack",
            {
                "stream": self.stream.name,
                "consumer": self.name,
                "consumer_seq": dseq,
                "stream_seq": sseq,
                "ack_time": delay_ns,
                "deliveries": dc,
            },
        )
