"""The API requests that reach a replicated stream's leader (``JsCluster.route`` sends them
here once ``StreamGroups.leads`` says this replica answers): reads are answered from the
leader's store, purges and message deletes go through the group, ephemeral consumers live on
the leader, durable ones share the group (``cluster_consumers``); what the group does not
replicate (stream snapshots) is refused with nats-server's "not currently supported in
clustered mode"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from natsd.jetstream.api.cluster_consumers import durable_target, ephemeral_request
from natsd.jetstream.api.cluster_streams import StreamGroups
from natsd.jetstream.api.dispatch import ERROR_EXTRAS, handle, lookup_verb
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.router.subscription import Subscription

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

# API requests that change a replicated stream's store: replicated as they are.
_REPLICATED_WRITES: Final = frozenset({("STREAM", "PURGE"), ("STREAM", "MSG", "DELETE")})


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
        live on the leader, durable ones share the group (``cluster_consumers``); what the
        group does not replicate yet (durable consumers of interest and workqueue streams,
        snapshots) is refused with nats-server's "not currently supported in clustered
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
        if create and verb[1] == "CREATE" and ephemeral_request(data):
            if s.cfg.retention == RetentionPolicy.LIMITS:
                local(sub, subject, reply, hdr, data)
                return
        elif create and m and m.consumers:
            m.consumers.change(subject, reply, hdr, data)
            return
        if tuple(verb[:3]) in _REPLICATED_WRITES or tuple(verb[:2]) in _REPLICATED_WRITES:
            # through the group: every replica runs it in log order, this one answers
            if not self.groups.propose_api(s, subject, reply, hdr, data) and reply:
                self._refuse(ja, verb, reply, E.JSClusterNotAvailErr())
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
            m.consumers.change(subject, reply, hdr, data, verb[3])
        elif op == "DELETE":
            if not self.groups.propose_api(s, subject, reply, hdr, data) and reply:
                self._refuse(ja, verb, reply, E.JSClusterNotAvailErr())
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
