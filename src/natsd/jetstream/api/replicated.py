"""The API requests that reach a replicated stream's leader (``ApiRouter.route`` sends them
here once ``StreamGroups.leads`` says this replica answers): reads are answered from the
leader's store; purges, message deletes and durable consumer deletes are checked here and go
through the group as typed operations (``stream/entries.py``), answered once applied;
ephemeral consumers live on the leader; a durable consumer's create, update, pause or reset
is done here and its outcome goes through the group (``cluster/consumers.py``); what the
group does not replicate (stream snapshots) is refused with nats-server's "not currently
supported in clustered mode"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.jetstream.answer import ERROR_EXTRAS, answer
from natsd.jetstream.api.consumers import consumer_delete_request
from natsd.jetstream.api.dispatch import handle, lookup_verb
from natsd.jetstream.api.streams import msg_delete_request, purge_request
from natsd.jetstream.cluster.consumers import ReplicatedConsumers
from natsd.jetstream.cluster.streams import StreamGroups
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.engine import JsAccount, find_consumer
from natsd.jetstream.stream.entries import Request
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.router.subscription import Subscription
from natsd.storage.store import StoreError

__all__ = ["OnApi", "R1Stepdown", "StreamApi"]

# JsCluster._r1_stepdown: the answer to a stepdown of something with one replica
R1Stepdown = Callable[[JsAccount, list[str], str, bytes], None]
# dispatch's API callback for this account (the standalone handlers)
OnApi = Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]

# What the leader of a replicated stream answers as a standalone server would (the rest
# is refused until the group replicates it, see StreamGroups.request).
_REPLICATED_READS: Final = frozenset(
    {
        ("STREAM", "INFO"),
        ("STREAM", "MSG", "GET"),
        ("DIRECT", "GET"),
        # a backup: the leader's store holds what the group committed
        ("STREAM", "SNAPSHOT"),
        ("CONSUMER", "NAMES"),
        ("CONSUMER", "LIST"),
        # the ephemeral consumers the leader holds (see _ephemeral)
        ("CONSUMER", "INFO"),
        ("CONSUMER", "DELETE"),
        ("CONSUMER", "PAUSE"),
        ("CONSUMER", "UNPIN"),
        ("CONSUMER", "RESET"),
    }
)


def ephemeral_request(data: bytes) -> bool:
    """Does this consumer create ask for an ephemeral consumer (no ``durable_name``)? One
    lives and dies with the leader of its replicated stream, as nats-server's ephemerals are
    R1; on a stream that keeps messages by limits its acks remove nothing, so the replicas
    stay the same, and on an interest or workqueue stream it is refused (its acks would
    remove messages on one replica)."""
    try:
        doc = orjson.loads(data) if data.strip() else {}
    except orjson.JSONDecodeError:
        return True  # the handler answers nats-server's "invalid JSON"
    cfg = doc.get("config") if isinstance(doc, dict) else None
    return not (isinstance(cfg, dict) and cfg.get("durable_name"))


def sourcing_request(data: bytes) -> bool:
    """Does this consumer create come from a mirror or a source (``direct`` and
    ``sourcing``, named)? On a workqueue or interest stream it becomes a durable consumer
    (``consumers._sourcing_consumer``), made through the group."""
    try:
        doc = orjson.loads(data) if data.strip() else {}
    except orjson.JSONDecodeError:
        return False
    cfg = doc.get("config") if isinstance(doc, dict) else None
    return (
        isinstance(cfg, dict)
        and cfg.get("direct") is True
        and cfg.get("sourcing") is True
        and bool(cfg.get("name"))
    )


def durable_target(s: Stream, verb: list[str]) -> bool:
    """Does this request name a durable consumer of ``s`` (info, delete, pause, unpin,
    reset, leader stepdown)?"""
    if len(verb) < 4 or verb[0] != "CONSUMER":
        return False
    if verb[1] in ("INFO", "DELETE", "PAUSE", "UNPIN", "RESET"):
        name = verb[3]
    elif verb[1:3] == ["LEADER", "STEPDOWN"] and len(verb) >= 5:
        name = verb[4]
    else:
        return False
    c = find_consumer(s, name)
    return c is not None and bool(c.cfg.durable_name)


class StreamApi:
    """Answers for the replicated streams this server leads."""

    def __init__(self, groups: StreamGroups, r1_stepdown: R1Stepdown) -> None:
        self.groups = groups
        self._r1_stepdown = r1_stepdown

    def request(
        self,
        ja: JsAccount,
        local: OnApi,
        s: Stream,
        verb: list[str],
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        """A request about a replicated stream, on its leader: reads are answered from the
        leader's store, purges and message deletes go through the group, ephemeral consumers
        live on the leader, durable ones share the group (``cluster/consumers.py``); what the
        group does not replicate yet (durable consumers of interest and workqueue streams)
        is refused with nats-server's "not currently supported in clustered
        mode"."""
        durable = durable_target(s, verb)
        if durable:
            self._durable_request(ja, s, verb, subject, reply, hdr, data)
            return
        if tuple(verb[:3]) in _REPLICATED_READS or tuple(verb[:2]) in _REPLICATED_READS:
            local(sub, subject, reply, hdr, data)
            return
        create = verb[:2] == ["CONSUMER", "CREATE"] or verb[:3] == ["CONSUMER", "DURABLE", "CREATE"]
        m = self.groups.member(s)
        if (
            create
            and m
            and m.consumers
            and s.cfg.retention != RetentionPolicy.LIMITS
            and sourcing_request(data)
        ):
            _change(ja, m.consumers, subject, reply, hdr, data)
            return
        if create and verb[1] == "CREATE" and ephemeral_request(data):
            if s.cfg.retention == RetentionPolicy.LIMITS:
                local(sub, subject, reply, hdr, data)
                return
        elif create and m and m.consumers:
            _change(ja, m.consumers, subject, reply, hdr, data)
            return
        if verb[:2] == ["STREAM", "PURGE"] or verb[:3] == ["STREAM", "MSG", "DELETE"]:
            self._write(ja, s, verb, subject, reply, data)
            return
        if not reply:
            return
        rep = reply.decode(errors="replace")
        if verb[:3] == ["CONSUMER", "LEADER", "STEPDOWN"]:
            self._r1_stepdown(ja, verb, s.name, reply)  # its consumers are R1
            return
        if verb[:3] == ["STREAM", "LEADER", "STEPDOWN"]:
            if self.groups.stepdown(s):
                self.groups.respond(ja, rep, "stream_leader_stepdown_response", {"success": True})
            else:
                err = E.JSClusterNoPeersErrF(err="no replacement peer connected").to_json()
                self.groups.respond(ja, rep, "stream_leader_stepdown_response", {"error": err})
            return
        self._refuse(ja, verb, reply, E.JSClusterUnSupportFeatureErr())

    def _durable_request(
        self,
        ja: JsAccount,
        s: Stream,
        verb: list[str],
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        """A request naming a durable consumer of replicated stream ``s``, on its leader:
        info and unpin are answered here, pause and reset go through the group with the
        consumer's new config and state, a delete goes through the group as it is, a
        stepdown moves the stream's leadership (the consumer shares its group)."""
        op = verb[1]
        m = self.groups.member(s)
        if op in ("INFO", "UNPIN"):
            handle(ja, subject, reply, data, hdr)
        elif op in ("PAUSE", "RESET") and m is not None and m.consumers is not None:
            _change(ja, m.consumers, subject, reply, hdr, data, verb[3])
        elif op == "DELETE":
            self._write(ja, s, verb, subject, reply, data)
        elif op == "LEADER" and reply:
            rep = reply.decode(errors="replace")
            rtype = "consumer_leader_stepdown_response"
            if self.groups.stepdown(s):
                self.groups.respond(ja, rep, rtype, {"success": True})
            else:
                err = E.JSClusterNoPeersErrF(err="no replacement peer connected").to_json()
                self.groups.respond(ja, rep, rtype, {"error": err})
        elif reply:
            self._refuse(ja, verb, reply, E.JSClusterUnSupportFeatureErr())

    def _write(
        self,
        ja: JsAccount,
        s: Stream,
        verb: list[str],
        subject: bytes,
        reply: bytes | None,
        data: bytes,
    ) -> None:
        """A purge, message delete or durable consumer delete: checked here as a
        standalone server checks it (a refusal is answered at once), then proposed to the
        group as a typed operation that every replica applies in log order; this replica
        answers once it is applied (``StreamGroups._apply_op``)."""
        route = lookup_verb(verb)
        if route is None:
            return  # not an API subject: nats-server does not answer it
        rtype, _handler, args = route
        request = Request(subject, reply or b"", data)
        groups = self.groups
        try:
            if verb[0] == "CONSUMER":
                c = consumer_delete_request(ja, args, data)
                taken = groups.propose_delete_consumer(s, request, c.name)
            elif verb[1] == "PURGE":
                _s, filt, seq, keep = purge_request(ja, args, data)
                taken = groups.propose_purge(s, request, filt, seq, keep)
            else:
                _s, seq, no_erase = msg_delete_request(ja, args, data)
                taken = groups.propose_delete_msg(s, request, seq, no_erase)
        except ApiError as e:
            answer(ja, subject, reply, data, rtype, e, s.name)
            return
        except StoreError as e:  # (as dispatch.handle answers one)
            err = E.JSStreamGeneralErrorF(err=str(e) or type(e).__name__)
            answer(ja, subject, reply, data, rtype, err, s.name)
            return
        if not taken and reply:
            self._refuse(ja, verb, reply, E.JSClusterNotAvailErr())

    def _refuse(self, ja: JsAccount, verb: list[str], reply: bytes, err: ApiError) -> None:
        """Answer an API request with ``err`` (in its response type, with its extras)."""
        route = lookup_verb(verb)
        if route is None:
            return  # not an API subject: nats-server does not answer it
        rtype = route[0]
        body: dict[str, Any] = {"error": err.to_json()}
        body.update(ERROR_EXTRAS.get(rtype, {}))
        ja.api.total += 1
        ja.api.errors += 1
        self.groups.respond(ja, reply.decode(errors="replace"), rtype, body)


def _change(
    ja: JsAccount,
    consumers: ReplicatedConsumers,
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    data: bytes,
    name: str = "",
) -> None:
    """A durable consumer's create, update, pause or reset, on the leader: the API does it
    here as a standalone server would (the checks read the leader's own consumers,
    ephemeral ones included, which only the leader has), and a success goes through the
    group with the consumer's config and state (``ReplicatedConsumers.commit``) before it is
    answered. ``name``: the consumer the request names (a create's answer names it)."""
    out: list[bytes] = []
    handle(ja, subject, None, data, hdr, respond=out.append)
    body = out[0] if out else b""
    try:
        doc: Any = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        doc = {}
    ok = isinstance(doc, dict) and "error" not in doc
    found = name or (doc.get("name") if ok else None)
    c = find_consumer(consumers.stream, found) if ok and isinstance(found, str) else None
    if c is None or c.passive:
        if reply and body:
            ja.engine.send(ja, reply, body)  # refused: nothing changed
        return
    consumers.commit(c, reply, body)
