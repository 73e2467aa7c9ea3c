"""The publish path across routes: a local publish out to the peers, a peer's message in.

Ownership: the ``Mesh`` builds one ``Forwarder`` per account and hangs it on the account's
Sublist (``Sublist.forward``) while at least one route is up; with no route (or no cluster)
the field is None and the publish paths (the client's loop, ``router.publish`` for the
server's own messages) pay one ``is None`` test per message.

Out: one RMSG/HMSG per route, never one per remote subscription: the ``ForwardPlan`` from
``RemoteInterest.match`` lists each route with plain interest once, and ``assign`` picks one
member per queue group across the cluster; a group that went to a route is skipped locally.
In: the route connection delivers a peer's message itself (``router.routed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from natsd.connection.route import RouteConnection
from natsd.core.headers import set_header
from natsd.router.deliver import deliver
from natsd.router.interest import ForwardPlan, RemoteInterest, assign
from natsd.router.msgtrace import (
    ERR_NO_SUPPORT,
    ERR_ONLY_NO_SUPPORT,
    TRACE_HOP_KEY,
    TRACE_PROTO,
    MsgTrace,
)
from natsd.router.routed import js_deliver_index
from natsd.router.subscription import Sink, Subscription

__all__ = ["MOVE_AFTER", "Forwarder", "Mover"]

# A connection whose last MOVE_AFTER publishes all went to one route peer and nowhere else
# is offered to the mover (cluster/handoff.py, --workers): on the peer they stay local.
MOVE_AFTER: Final = 256

Mover = Callable[[Sink, int], None]


class Forwarder:
    """``Sublist.forward`` for one account: deliver locally and send to the routes.

    Returns the local deliveries made, or -1 when nobody anywhere has interest (the caller
    then answers a request with no-responders)."""

    __slots__ = ("mover", "name", "remote", "routes")

    def __init__(
        self,
        name: bytes,
        remote: RemoteInterest,
        routes: dict[int, RouteConnection],
        mover: Mover | None = None,
    ) -> None:
        self.name = name
        self.remote = remote
        # The mesh's table of installed routes by id (shared, not copied).
        self.routes = routes
        self.mover = mover

    def __call__(
        self,
        subject: bytes,
        reply: bytes | None,
        tail: bytes,
        size: int,
        hlen: int,
        psubs: list[Subscription],
        qsubs: list[list[Subscription]],
        publisher: Sink | None,
    ) -> int:
        plan = self.remote.match(self.name, subject)
        if plan is None:
            if publisher is not None and self.mover is not None:
                publisher.route_hits = 0
            if psubs or qsubs:
                return deliver(psubs, qsubs, subject, reply, tail, size, hlen, publisher)
            return -1
        if publisher is not None and self.mover is not None:
            if psubs or qsubs or plan.groups or len(plan.routes) != 1:
                publisher.route_hits = 0
            else:
                publisher.route_hits += 1
                if publisher.route_hits == MOVE_AFTER:
                    self.mover(publisher, plan.routes[0])
        qsubs = self._send(plan, subject, reply, tail, hlen, qsubs)
        if psubs or qsubs:
            return deliver(psubs, qsubs, subject, reply, tail, size, hlen, publisher)
        return 0

    def deliver_as(
        self,
        to: bytes,
        subject: bytes,
        reply: bytes | None,
        tail: bytes,
        size: int,
        hlen: int,
        psubs: list[Subscription],
        qsubs: list[list[Subscription]],
    ) -> int:
        """A message matched on ``to`` that keeps ``subject`` (a JetStream consumer's
        delivery to its inbox). A route carries one subject, so as nats-server the RMSG goes
        to ``to`` and the subject rides at the end of the ack reply, ``<reply>@<subject>``;
        the receiving server delivers it under ``subject`` again (``router.routed``)."""
        plan = self.remote.match(self.name, to)
        if plan is None:
            if psubs or qsubs:
                return deliver(psubs, qsubs, subject, reply, tail, size, hlen, None)
            return -1
        routed = reply + b"@" + subject if reply and js_deliver_index(reply) < 0 else reply
        qsubs = self._send(plan, to, routed, tail, hlen, qsubs)
        if psubs or qsubs:
            return deliver(psubs, qsubs, subject, reply, tail, size, hlen, None)
        return 0

    def send_to(
        self, server: str, subject: bytes, reply: bytes | None, hdr: bytes | None, payload: bytes
    ) -> bool:
        """One message to the peer named ``server`` alone, if it has plain interest in
        ``subject`` (the publishes an old stream leader passes on to the new one, which
        other subscribers already had); False when it has none (yet)."""
        plan = self.remote.match(self.name, subject)
        if plan is None:
            return False
        for rid in plan.routes:
            r = self.routes.get(rid)
            if r is None or r.remote_name != server:
                continue
            if hdr:
                tail = b" %d %d\r\n%s%s\r\n" % (len(hdr), len(hdr) + len(payload), hdr, payload)
            else:
                tail = b" %d\r\n%s\r\n" % (len(payload), payload)
            head = (b"HMSG " if hdr else b"RMSG ") + self.name + b" " + subject
            r.send_msg(head + b" " + reply + tail if reply else head + tail)
            return True
        return False

    def send_traced(
        self,
        trace: MsgTrace,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes,
        payload: bytes,
        qsubs: list[list[Subscription]],
    ) -> tuple[int, list[list[Subscription]]]:
        """A traced message to the routes with interest: each gets the header with its
        ``Nats-Trace-Hop`` and an egress event; a peer that takes no part in traces gets no
        trace-only message. Returns the routes it went to and the local queue groups still
        to serve."""
        plan = self.remote.match(self.name, subject)
        if plan is None:
            return 0, qsubs
        targets: dict[int, list[bytes]]
        if plan.groups:
            targets, went = assign(plan, lambda q: _members(qsubs, q))
            if went:
                qsubs = [g for g in qsubs if g[0].queue not in went]
        else:
            targets = {rid: [] for rid in plan.routes}
        sent = 0
        for rid, queues in targets.items():
            r = self.routes.get(rid)
            if r is None:
                continue
            hop = trace.next_hop()
            proto = r.peer_info.get("proto") if r.peer_info else None
            takes_part = isinstance(proto, int) and proto >= TRACE_PROTO
            if takes_part:
                trace.egress_route(r.rid, r.remote_name, hop)
            elif trace.only:
                trace.egress_route(r.rid, r.remote_name, hop, ERR_ONLY_NO_SUPPORT)
                continue
            else:
                trace.egress_route(r.rid, r.remote_name, hop, ERR_NO_SUPPORT)
            h = set_header(hdr, TRACE_HOP_KEY, hop.encode())
            tail = b" %d %d\r\n%s%s\r\n" % (len(h), len(h) + len(payload), h, payload)
            head = b"HMSG " + self.name + b" " + subject
            r.send_msg(_routed(head, reply, queues, tail))
            sent += 1
        return sent, qsubs

    def has_interest(self, subject: bytes) -> bool:
        return self.remote.match(self.name, subject) is not None

    def has_exact(self, subject: bytes, queue: bytes | None) -> bool:
        return self.remote.has_exact(self.name, subject, queue)

    def _send(
        self,
        plan: ForwardPlan,
        subject: bytes,
        reply: bytes | None,
        tail: bytes,
        hlen: int,
        qsubs: list[list[Subscription]],
    ) -> list[list[Subscription]]:
        """One RMSG/HMSG per route of ``plan``; returns the local queue groups still to
        serve (those whose member was picked on a route are not)."""
        routes = self.routes
        verb = b"HMSG " if hlen else b"RMSG "
        # ``tail`` (" <sizes>\r\n<payload>\r\n") is the RMSG's end as it is: the payload
        # is copied once, into the frame.
        head = verb + self.name + b" " + subject
        if not plan.groups:
            # Plain interest only: the same frame for every route.
            frame = head + b" " + reply + tail if reply else head + tail
            for rid in plan.routes:
                r = routes.get(rid)
                if r is not None:
                    r.send_msg(frame)
            return qsubs
        targets, went = assign(plan, lambda q: _members(qsubs, q))
        for rid, queues in targets.items():
            r = routes.get(rid)
            if r is None:
                continue
            r.send_msg(_routed(head, reply, queues, tail))
        if went:
            return [g for g in qsubs if g[0].queue not in went]
        return qsubs


def _routed(head: bytes, reply: bytes | None, queues: list[bytes], tail: bytes) -> bytes:
    """An RMSG/HMSG frame: ``head`` (verb, account, subject), the reply and queue names as
    the route protocol writes them (``+ reply q1 q2``, ``| q1 q2``), then ``tail``."""
    if queues:
        qs = b" ".join(queues)
        return head + (b" + " + reply + b" " + qs if reply else b" | " + qs) + tail
    if reply:
        return head + b" " + reply + tail
    return head + tail


def _members(qsubs: list[list[Subscription]], queue: bytes) -> int:
    for g in qsubs:
        if g[0].queue == queue:
            return len(g)
    return 0
