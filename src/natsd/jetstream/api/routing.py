"""Which server answers which JetStream API request on a cluster (design-clustering §4.4).

Every server subscribes to ``$JS.API.>`` as a standalone one does, so every request reaches
every server over the routes, and ``ApiRouter.route`` decides which one answers:

============================================  =========================================
request                                       answered by
============================================  =========================================
``INFO``, ``STREAM.CREATE/UPDATE/DELETE``,    the meta leader (creates, updates and
``STREAM.NAMES/LIST``, ``STREAM.RESTORE``     deletes go through the meta group:
                                              ``meta_requests``; a restore takes the
                                              archive there: ``backup``)
stream-scoped (``STREAM.INFO``, ``PURGE``,    the server the stream is placed on (an R1
``MSG.*``, ``CONSUMER.*``, ``DIRECT.GET``)    stream's, or a replicated stream's leader:
                                              ``replicated``); the meta leader for a
                                              stream that does not exist
``DIRECT.GET`` of a stream with               one of its current replicas, leader or
``allow_direct``                              follower, or of its mirrors with
                                              ``mirror_direct`` (their queue group: not
                                              here)
============================================  =========================================

The clustered JetStream it routes for (the meta group's replica, the stream groups) is
``jetstream/cluster``; this module only reads it.
"""

from __future__ import annotations

from typing import Final

from natsd.core.scheduler import Cancellable
from natsd.jetstream.api.backup import ClusteredRestore
from natsd.jetstream.api.dispatch import handle, make_api_callback
from natsd.jetstream.api.domain import domain_subscriptions
from natsd.jetstream.api.meta_requests import MetaRequests
from natsd.jetstream.api.replicated import OnApi, StreamApi
from natsd.jetstream.cluster.driver import JsCluster
from natsd.jetstream.cluster.replica import unreplicated
from natsd.jetstream.engine import JsAccount, find_consumer
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.router.subscription import Subscription

__all__ = ["ApiRouter"]

_META_VERBS: Final = frozenset(
    {
        ("INFO",),
        ("STREAM", "CREATE"),
        ("STREAM", "UPDATE"),
        ("STREAM", "DELETE"),
        ("STREAM", "NAMES"),
        ("STREAM", "LIST"),
        ("STREAM", "PEER"),
    }
)

_RESPONSE_TYPES: Final = {
    ("INFO",): "account_info_response",
    ("STREAM", "CREATE"): "stream_create_response",
    ("STREAM", "UPDATE"): "stream_update_response",
    ("STREAM", "DELETE"): "stream_delete_response",
    ("STREAM", "NAMES"): "stream_names_response",
    ("STREAM", "LIST"): "stream_list_response",
    ("STREAM", "INFO"): "stream_info_response",
    ("STREAM", "PEER"): "stream_remove_peer_response",
    ("STREAM", "RESTORE"): "stream_restore_response",
}

# A request for a replicated stream without a leader yet waits this long at most (s), at
# most this many per stream, looked at this often.
PARK_FOR: Final = 5.0
PARK_MAX: Final = 256
PARK_POLL: Final = 0.05

# Requests that come once per message read (direct gets, pull requests): routed by prefix.
_DIRECT: Final = b"$JS.API.DIRECT.GET."
_PER_MESSAGE: Final = (_DIRECT, b"$JS.API.CONSUMER.MSG.NEXT.")


class ApiRouter:
    """The clustered engine's API subscriptions: each request answered here, by the meta
    leader's ``MetaRequests``, by a replicated stream leader's ``StreamApi``, or by the
    standalone handlers, or left to another server."""

    def __init__(self, cluster: JsCluster) -> None:
        self.cluster = cluster
        self.requests = MetaRequests(cluster)
        self.stream_api = StreamApi(cluster.stream_groups, self._r1_stepdown)
        self.restore = ClusteredRestore(self.requests, cluster.restores)
        # Requests for a replicated stream whose group has no leader yet (just created,
        # or between leaders), held by each of its replicas: the one that comes to lead
        # answers them, the others drop theirs once they know who leads (a consumer made
        # right after its stream, as clients do, is answered once the group is up).
        self._parked: dict[Stream, list[_Parked]] = {}
        self._parked_timer: Cancellable | None = None

    def subscribe_api(self, ja: JsAccount) -> list[Subscription]:
        """The ``ApiSubscriber`` of a clustered engine: the standalone subscriptions, with
        every request first routed by ``route``."""
        local = make_api_callback(ja)

        def on_api(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
        ) -> None:
            self.route(ja, local, sub, subject, reply, hdr, data)

        subs = [Subscription(b"$JS.API.>", None, b"js-api", callback=on_api)]
        if self.cluster.engine.domain:
            subs.extend(
                domain_subscriptions(self.cluster.engine.domain, ja.account.sublist, on_api)
            )
        return subs

    def route(
        self,
        ja: JsAccount,
        local: OnApi,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        for prefix in _PER_MESSAGE:
            if subject.startswith(prefix):
                # a KV get or a pull request: answered by the stream's server alone (or by
                # nobody), decided without splitting the subject
                end = subject.find(b".", len(prefix))
                name = subject[len(prefix) : end if end >= 0 else len(subject)]
                s = ja.streams.get(name.decode(errors="replace"))
                if s is None:
                    return
                if prefix is _DIRECT and s.cfg.allow_direct:
                    # its replicas' (or R1 server's) queue group answers, with its mirrors
                    # that have mirror_direct (Stream.serve_direct, serve_origin_direct)
                    return
                if unreplicated(s) or self.cluster.stream_groups.leads(s):
                    local(sub, subject, reply, hdr, data)
                return
        toks = subject.decode(errors="replace").split(".")
        # $JS.API.<verb...> or $JS.<domain>.API.<verb...>
        api = 2 if len(toks) > 1 and toks[1] == "API" else 3
        verb = toks[api:]
        leader = self.cluster.is_leader()
        if tuple(verb[:1]) in _META_VERBS or tuple(verb[:2]) in _META_VERBS:
            if leader:
                self.requests.handle(ja, verb, reply, hdr, data, subject)
            elif reply and self.cluster.leaderless():
                self._unavailable(ja, verb, reply)
            return
        if verb[:2] == ["STREAM", "RESTORE"]:
            # the meta leader checks it against the cluster's streams and takes the archive
            if leader:
                handle(ja, subject, reply, data, hdr, handler=self.restore)
            elif reply and self.cluster.leaderless():
                self._unavailable(ja, verb, reply)
            return
        stream = _stream_of(verb)
        if stream is None:
            if leader:
                local(sub, subject, reply, hdr, data)  # unknown or account-wide: one answer
            return
        s = ja.streams.get(stream)
        if s is not None and s.replica is not None:
            groups = self.cluster.stream_groups
            if groups.leads(s):
                self.stream_api.request(ja, local, s, verb, sub, subject, reply, hdr, data)
            elif verb[:2] == ["STREAM", "INFO"] and groups.leaderless(s):
                local(sub, subject, reply, hdr, data)  # every replica: its own state
            elif reply and self._no_leader_yet(s):
                self._park(_Parked(ja, local, s, verb, sub, subject, reply, hdr, data,
                                   self.cluster.clock.monotonic() + PARK_FOR))  # fmt: skip
        elif s is not None:
            if not unreplicated(s):
                return  # replicated, not yet in its group (a restart): its leader answers
            if verb[1:3] == ["LEADER", "STEPDOWN"] and reply:
                self._r1_stepdown(ja, verb, stream, reply)
            else:
                local(sub, subject, reply, hdr, data)
        elif leader and self.cluster.meta.stream(ja.account.name, stream) is None:
            if verb[:3] != ["CONSUMER", "MSG", "NEXT"] and verb[:1] != ["DIRECT"]:
                local(sub, subject, reply, hdr, data)  # nats-server's "stream not found"
        elif reply and self.cluster.leaderless() and verb[:2] == ["STREAM", "INFO"]:
            self._unavailable(ja, verb, reply)

    def _no_leader_yet(self, s: Stream) -> bool:
        m = self.cluster.stream_groups.member(s)
        return m is not None and not m.leader

    def _park(self, p: _Parked) -> None:
        held = self._parked.setdefault(p.stream, [])
        if len(held) >= PARK_MAX:
            return  # (its requester times out, as it would have)
        held.append(p)
        if self._parked_timer is None:
            self._parked_timer = self.cluster.scheduler.call_later(PARK_POLL, self._unpark)

    def _unpark(self) -> None:
        """Answer what waited for a stream that now has this replica as leader; drop what
        another replica leads (it answers) or what waited too long."""
        self._parked_timer = None
        groups = self.cluster.stream_groups
        now = self.cluster.clock.monotonic()
        for s, held in list(self._parked.items()):
            m = groups.member(s)
            if m is None:
                del self._parked[s]
            elif groups.leads(s):
                del self._parked[s]
                for p in held:
                    self.stream_api.request(p.ja, p.local, s, p.verb, p.sub, p.subject,
                                            p.reply, p.hdr, p.data)  # fmt: skip
            elif m.leader and not m.is_raft_leader():
                del self._parked[s]
            else:
                held[:] = [p for p in held if p.deadline > now]
                if not held:
                    del self._parked[s]
        if self._parked:
            self._parked_timer = self.cluster.scheduler.call_later(PARK_POLL, self._unpark)

    def _unavailable(self, ja: JsAccount, verb: list[str], reply: bytes) -> None:
        rtype = _RESPONSE_TYPES.get(tuple(verb[:2]), "")
        if verb[:3] == ["STREAM", "PEER", "EVACUATE"]:
            rtype = "stream_evacuate_peer_response"
        if rtype:
            err = E.JSClusterNotAvailErr().to_json()
            self.cluster.respond(ja, reply.decode(errors="replace"), rtype, {"error": err})

    def _r1_stepdown(self, ja: JsAccount, verb: list[str], stream: str, reply: bytes) -> None:
        # (also the consumers of a replicated stream, which are R1)
        """A stream or consumer leader stepdown on an R1 stream: nats-server answers
        success and changes nothing (there is no other replica to lead)."""
        rep = reply.decode(errors="replace")
        if verb[0] == "STREAM":
            self.cluster.respond(ja, rep, "stream_leader_stepdown_response", {"success": True})
            return
        s = ja.streams[stream]
        if len(verb) != 5 or find_consumer(s, verb[4]) is None:
            err = E.JSConsumerNotFoundErr().to_json()
            self.cluster.respond(ja, rep, "consumer_leader_stepdown_response", {"error": err})
            return
        self.cluster.respond(ja, rep, "consumer_leader_stepdown_response", {"success": True})


class _Parked:
    """A request held until its stream's group has a leader."""

    __slots__ = ("data", "deadline", "hdr", "ja", "local", "reply", "stream", "sub", "subject",
                 "verb")  # fmt: skip

    def __init__(
        self,
        ja: JsAccount,
        local: OnApi,
        stream: Stream,
        verb: list[str],
        sub: Subscription,
        subject: bytes,
        reply: bytes,
        hdr: bytes | None,
        data: bytes,
        deadline: float,
    ) -> None:
        self.ja = ja
        self.local = local
        self.stream = stream
        self.verb = verb
        self.sub = sub
        self.subject = subject
        self.reply = reply
        self.hdr = hdr
        self.data = data
        self.deadline = deadline


def _stream_of(verb: list[str]) -> str | None:
    """The stream a stream-scoped request names, None for one that names none."""
    if not verb:
        return None
    head = verb[0]
    if head == "STREAM" and len(verb) >= 3:
        # STREAM.INFO.<s>, STREAM.PURGE.<s>, STREAM.MSG.GET.<s>, STREAM.LEADER.STEPDOWN.<s>...
        return verb[3] if verb[1] in ("MSG", "LEADER", "PEER") and len(verb) >= 4 else verb[2]
    if head == "CONSUMER" and len(verb) >= 3:
        if verb[1] in ("MSG", "LEADER", "DURABLE"):
            return verb[3] if len(verb) >= 4 else None
        return verb[2]
    if head == "DIRECT" and len(verb) >= 3:
        return verb[2]
    return None
