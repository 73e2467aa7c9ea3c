"""The ``$JS.API.>`` subscriptions and the route table, like nats-server's jetstream_api.go.

``subscribe_api`` is what the server hands the engine (``JetStream(api=...)``): for each
JetStream account, the internal subscriptions that take its API requests (``$JS.API.>``,
and with a domain the ``$JS.<domain>.API.>`` mappings of :mod:`.domain`). ``handle`` routes
a request by its subject tokens through ``_TABLE`` to a handler of :mod:`.streams`,
:mod:`.consumers`, :mod:`.account` or :mod:`.standalone`. Each handler takes (account,
subject tokens after the verb, request body) and returns the response document; the
``type`` field and error bookkeeping are added here. Unknown API subjects get no answer, as
in nats-server. Direct gets go to :mod:`.direct` (compiled: every KV get).

``Nats-Required-Api-Level`` (:mod:`~natsd.jetstream.wire.api_level`) is checked here for
every routed request before its handler runs, as nats-server's handlers do first thing,
except for the requests only a cluster serves (their 10010 comes first); direct gets and
pull requests (status 412) and consumer resets check it once their stream / consumer is
known to exist, as nats-server, which only subscribes for those, does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from natsd.core.headers import slice_header
from natsd.jetstream.answer import API_TYPE_PREFIX, ERROR_EXTRAS, answer
from natsd.jetstream.api.account import account_info
from natsd.jetstream.api.backup import stream_restore, stream_snapshot
from natsd.jetstream.api.consumers import (
    consumer_create,
    consumer_delete,
    consumer_durable_create,
    consumer_info,
    consumer_list,
    consumer_names,
    consumer_pause,
    consumer_unpin,
    next_request,
    reset_request,
)
from natsd.jetstream.api.direct import DIRECT_GET_PREFIX, direct_get, on_direct_get
from natsd.jetstream.api.domain import domain_subscriptions
from natsd.jetstream.api.standalone import cluster_required
from natsd.jetstream.api.streams import (
    msg_delete,
    msg_get,
    stream_create,
    stream_delete,
    stream_info,
    stream_list,
    stream_names,
    stream_purge,
    stream_update,
)
from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.engine import JsAccount, find_consumer
from natsd.jetstream.stream.source import STREAM_IDENTITY
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.api_level import REQUIRED_API_LEVEL_STATUS, level_refused
from natsd.jetstream.wire.errors import ApiError
from natsd.router.imports import no_responders
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.store import StoreError

__all__ = [
    "handle",
    "lookup_verb",
    "make_api_callback",
    "not_enabled_subscription",
    "subscribe_api",
]

# (account, subject tokens after the API verb, raw request body) -> response document
Handler = Callable[[JsAccount, list[str], bytes], dict[str, Any]]


def subscribe_api(ja: JsAccount) -> list[Subscription]:
    """The subscriptions that serve ``ja``'s API (the engine inserts them): ``$JS.API.>``,
    and with a JetStream domain the ``$JS.<domain>.API.>`` forms, as nats-server's account
    mappings do."""
    on_api = make_api_callback(ja)
    subs = [Subscription(b"$JS.API.>", None, b"js-api", callback=on_api)]
    domain = ja.engine.domain
    if domain:
        subs.extend(domain_subscriptions(domain, ja.account.sublist, on_api))
    return subs


def not_enabled_subscription(sublist: Sublist[Subscription], clustered: bool) -> Subscription:
    """``$JS.API.>`` of an account without JetStream on a server with it: each API verb is
    answered "JetStream not enabled for account" (10039) with its response type, as
    nats-server's API answers such an account; direct gets and pull requests find no
    responders; unknown verbs no answer. The server inserts it quiet: every server of a
    cluster answers its own clients."""

    def on_api(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if not reply:
            return
        toks = subject.decode(errors="replace").split(".")[2:]
        if toks[:1] == ["DIRECT"] or toks[:3] == ["CONSUMER", "MSG", "NEXT"]:
            no_responders(sublist, subject, reply)
            return
        route = lookup_verb(toks)
        if route is None:
            return
        rtype, handler, _ = route
        err = (
            E.JSClusterRequiredErr()
            if handler is cluster_required and not clustered
            else E.JSNotEnabledForAccountErr()
        )
        doc: dict[str, Any] = {"type": API_TYPE_PREFIX + rtype, "error": err.to_json()}
        doc.update(ERROR_EXTRAS.get(rtype, {}))
        publish(sublist, reply, None, None, orjson.dumps(doc))

    return Subscription(b"$JS.API.>", None, b"js-api-off", callback=on_api)


def make_api_callback(
    ja: JsAccount,
) -> Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]:
    def on_api(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if subject.startswith(DIRECT_GET_PREFIX):
            _on_direct(ja, None, subject, reply, hdr, data)
        else:
            handle(ja, subject, reply, data, hdr)

    return on_api


def make_direct_callback(
    ja: JsAccount, fixed: Stream | None = None
) -> Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]:
    """What a stream's direct-get subscriptions answer with (``Stream.serve_direct``; a
    mirror's for its origin, ``fixed`` naming it, ``Stream.serve_origin_direct``)."""

    def on_direct(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        _on_direct(ja, fixed, subject, reply, hdr, data)

    return on_direct


def _on_direct(
    ja: JsAccount,
    fixed: Stream | None,
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    data: bytes,
) -> None:
    if hdr is not None and reply and level_refused(hdr):
        stream = fixed
        if stream is None:
            toks = subject.decode(errors="replace").split(".")
            stream = ja.streams.get(toks[4]) if len(toks) > 4 else None
        if stream is not None and (stream.cfg.allow_direct or fixed is not None):
            ja.engine.send(ja, reply, b"", REQUIRED_API_LEVEL_STATUS)
            return
    on_direct_get(ja, subject, reply, data, fixed)  # compiled, the KV get path


def _consumer(ja: JsAccount, stream: str, name: str) -> Consumer | None:
    s = ja.streams.get(stream)
    return find_consumer(s, name) if s is not None else None


def handle(
    ja: JsAccount,
    subject: bytes,
    reply: bytes | None,
    data: bytes,
    hdr: bytes | None = None,
    respond: Callable[[bytes], None] | None = None,
    handler: Handler | None = None,
) -> None:
    """Answer one API request. ``respond`` takes the response instead of ``reply`` (a
    replicated stream's leader answers once the group has the outcome). ``handler``: the
    one to run instead of the table's (a cluster's own, for a verb the table has)."""
    toks = subject.decode(errors="replace").split(".")[2:]
    if toks and toks[0] == "DIRECT":
        if reply:
            direct_get(ja, toks, reply, data)
        return
    refused = hdr is not None and level_refused(hdr)
    if toks[:3] == ["CONSUMER", "MSG", "NEXT"]:
        # Pull requests go to the consumer; they are not API calls (no response, stats or
        # audit), as in nats-server where each consumer subscribes to its own subject.
        if refused and reply and len(toks) == 5:
            c = _consumer(ja, toks[3], toks[4])
            if c is not None and c.is_pull and not c.closed:  # a push consumer answers 409 first
                ja.engine.send(ja, reply, b"", REQUIRED_API_LEVEL_STATUS)
                return
        next_request(ja, toks, reply, data)
        return
    if toks[:2] == ["CONSUMER", "RESET"]:
        if refused and reply and len(toks) == 4 and _consumer(ja, toks[2], toks[3]) is not None:
            refusal = {
                "type": API_TYPE_PREFIX + "consumer_reset_response",
                "error": E.JSRequiredApiLevelErr().to_json(),
                "reset_seq": 0,
            }
            ja.engine.send(ja, reply, orjson.dumps(refusal))
            return
        reset_request(ja, toks, reply, data, respond)
        return
    route = lookup_verb(toks)
    if route is None:
        return  # nats-server does not answer unknown API subjects
    rtype, table_handler, args = route
    if handler is None:
        handler = table_handler
    resp: dict[str, Any] | ApiError
    ident_hdr: bytes | None = None
    try:
        if refused and handler is not cluster_required:
            raise E.JSRequiredApiLevelErr()
        if rtype == "consumer_create_response" and args:
            ident_hdr = _stream_identity(ja, args[0], hdr, data)
        resp = handler(ja, args, data)
    except ApiError as e:
        resp = e
    except StoreError as e:
        # A store that failed or was closed under the request (server shutting down): an
        # error answer, not an exception that would tear down the requester's connection.
        resp = E.JSStreamGeneralErrorF(err=str(e) or type(e).__name__)
    # the stream a stream or consumer request names is every such verb's first argument
    stream = args[0] if args else ""
    answer(ja, subject, reply, data, rtype, resp, stream, respond, handler is not msg_get,
           ident_hdr)  # fmt: skip


def _stream_identity(
    ja: JsAccount, stream_name: str, hdr: bytes | None, data: bytes
) -> bytes | None:
    """A mirror's or a source's consumer request (``direct`` or ``sourcing``): the stream
    identity header its answer carries (nats-server 2.15: a hash of the stream's creation
    time, so that a source notices its origin was deleted and made again); a request that
    expects another identity is refused (10225)."""
    stream = ja.streams.get(stream_name)
    if stream is None:
        return None  # (the handler answers "stream not found")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    cfg = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(cfg, dict) or not (cfg.get("direct") is True or cfg.get("sourcing") is True):
        return None
    ident = stream.identity()
    want = slice_header(hdr, STREAM_IDENTITY) if hdr else None
    if want and want.decode(errors="replace") != ident:
        raise E.JSConsumerStreamIdentityMismatchF(msg=ident)
    return b"NATS/1.0\r\n%s: %s\r\n\r\n" % (STREAM_IDENTITY, ident.encode())


# verb tokens -> (response type, handler, number of argument tokens). Like nats-server's
# subscriptions ("$JS.API.STREAM.CREATE.*"), a subject with the wrong number of tokens
# matches nothing and gets no answer.
_TABLE: dict[tuple[str, ...], tuple[str, Handler, int]] = {
    ("INFO",): ("account_info_response", account_info, 0),
    ("STREAM", "CREATE"): ("stream_create_response", stream_create, 1),
    ("STREAM", "UPDATE"): ("stream_update_response", stream_update, 1),
    ("STREAM", "INFO"): ("stream_info_response", stream_info, 1),
    ("STREAM", "DELETE"): ("stream_delete_response", stream_delete, 1),
    ("STREAM", "NAMES"): ("stream_names_response", stream_names, 0),
    ("STREAM", "LIST"): ("stream_list_response", stream_list, 0),
    ("STREAM", "PURGE"): ("stream_purge_response", stream_purge, 1),
    ("STREAM", "MSG", "GET"): ("stream_msg_get_response", msg_get, 1),
    ("STREAM", "MSG", "DELETE"): ("stream_msg_delete_response", msg_delete, 1),
    # A negative count means "at least that many" (CONSUMER.CREATE.<stream>[.<name>[.<filter>]]).
    ("CONSUMER", "CREATE"): ("consumer_create_response", consumer_create, -1),
    ("CONSUMER", "DURABLE", "CREATE"): ("consumer_create_response", consumer_durable_create, 2),
    ("CONSUMER", "INFO"): ("consumer_info_response", consumer_info, 2),
    ("CONSUMER", "DELETE"): ("consumer_delete_response", consumer_delete, 2),
    ("CONSUMER", "NAMES"): ("consumer_names_response", consumer_names, 1),
    ("CONSUMER", "LIST"): ("consumer_list_response", consumer_list, 1),
    ("CONSUMER", "PAUSE"): ("consumer_pause_response", consumer_pause, 2),
    ("CONSUMER", "UNPIN"): ("consumer_unpin_response", consumer_unpin, 2),
    ("STREAM", "SNAPSHOT"): ("stream_snapshot_response", stream_snapshot, 1),
    ("STREAM", "RESTORE"): ("stream_restore_response", stream_restore, 1),
    # Cluster requests; see standalone.py for the ones nats-server leaves unanswered.
    ("STREAM", "LEADER", "STEPDOWN"): ("stream_leader_stepdown_response", cluster_required, 1),
    ("CONSUMER", "LEADER", "STEPDOWN"): ("consumer_leader_stepdown_response", cluster_required, 2),
    ("STREAM", "PEER", "REMOVE"): ("stream_remove_peer_response", cluster_required, 1),
    ("STREAM", "PEER", "EVACUATE"): ("stream_evacuate_peer_response", cluster_required, 1),
    ("STREAM", "CANCEL_MOVE"): ("stream_cancel_move_response", cluster_required, 1),
}


def lookup_verb(toks: list[str]) -> tuple[str, Handler, list[str]] | None:
    for n in (3, 2, 1):
        if len(toks) < n:
            continue
        hit = _TABLE.get(tuple(toks[:n]))
        if hit is not None and (
            len(toks) == n + hit[2] or (hit[2] < 0 and len(toks) >= n - hit[2])
        ):
            return hit[0], hit[1], toks[n:]
    return None
