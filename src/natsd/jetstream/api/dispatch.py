"""The ``$JS.API.>`` handlers, dispatched from a table like nats-server's jetstream_api.go.

Each handler takes (account, subject tokens after ``$JS.API``, request JSON) and returns the
response document; the ``type`` field and error bookkeeping are added here. Unknown API
subjects get no answer, as in nats-server.

``Nats-Required-Api-Level`` (:mod:`.api_level`) is checked here for every routed request
before its handler runs, as nats-server's handlers do first thing, except for the requests
only a cluster serves (their 10010 comes first); direct gets and pull requests (status 412)
and consumer resets check it once their stream / consumer is known to exist, as nats-server,
which only subscribes for those, does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

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
from natsd.jetstream.api.direct import DIRECT_GET_PREFIX, direct_get, on_direct_get, seq_from_time
from natsd.jetstream.api.standalone import cluster_required, stream_restore, stream_snapshot
from natsd.jetstream.config.account_limits import check_stream_create, check_stream_update
from natsd.jetstream.config.stream_config import (
    StreamConfig,
    check_update,
    parse_stream_config_json,
)
from natsd.jetstream.config.stream_types import StorageType
from natsd.jetstream.config.subject_mapping import subjects_collide
from natsd.jetstream.consumer import Consumer
from natsd.jetstream.consumer.attach import stream_deleted, stream_purged
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.api_level import REQUIRED_API_LEVEL_STATUS, level_refused
from natsd.jetstream.wire.errors import ApiError
from natsd.jetstream.wire.gotyped import (
    BOOL,
    INT,
    STRING,
    STRINGS,
    TIME,
    UINT64,
    GoType,
    StructT,
    decode_request,
    go_time_ns,
    is_empty_request,
    is_json_object_or_array,
)
from natsd.router.subscription import Subscription
from natsd.storage.store import StoreError
from natsd.version import API_LEVEL

if TYPE_CHECKING:
    from natsd.jetstream.engine import JsAccount

__all__ = ["make_api_callback"]

# (account, subject tokens after the API verb, raw request body) -> response document
Handler = Callable[["JsAccount", list[str], bytes], dict[str, Any]]

_PREFIX = "io.nats.jetstream.api.v1."
NAMES_LIMIT = 1024
SUBJECTS_LIMIT = 100_000
LIST_LIMIT = 256


def make_api_callback(
    ja: JsAccount,
) -> Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]:
    def on_api(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if subject.startswith(DIRECT_GET_PREFIX):
            if hdr is not None and reply and level_refused(hdr):
                toks = subject.decode(errors="replace").split(".")
                stream = ja.streams.get(toks[4]) if len(toks) > 4 else None
                if stream is not None and stream.cfg.allow_direct:
                    ja.engine.send(ja, reply, b"", REQUIRED_API_LEVEL_STATUS)
                    return
            on_direct_get(ja, subject, reply, data)  # compiled, the KV get path
        else:
            handle(ja, subject, reply, data, hdr)

    return on_api


def _consumer(ja: JsAccount, stream: str, name: str) -> Consumer | None:
    s = ja.streams.get(stream)
    c = s.consumers.get(name) if s is not None else None
    return c if isinstance(c, Consumer) else None


def handle(
    ja: JsAccount, subject: bytes, reply: bytes | None, data: bytes, hdr: bytes | None = None
) -> None:
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
            if c is not None and c.waiting is not None:  # a push consumer answers 409 first
                ja.engine.send(ja, reply, b"", REQUIRED_API_LEVEL_STATUS)
                return
        next_request(ja, toks, reply, data)
        return
    if toks[:2] == ["CONSUMER", "RESET"]:
        if refused and reply and len(toks) == 4 and _consumer(ja, toks[2], toks[3]) is not None:
            refusal = {
                "type": _PREFIX + "consumer_reset_response",
                "error": E.JSRequiredApiLevelErr().to_json(),
                "reset_seq": 0,
            }
            ja.engine.send(ja, reply, orjson.dumps(refusal))
            return
        reset_request(ja, toks, reply, data)
        return
    route = _route(toks)
    if route is None:
        return  # nats-server does not answer unknown API subjects
    rtype, handler, args = route
    try:
        if refused and handler is not cluster_required:
            raise E.JSRequiredApiLevelErr()
        resp = handler(ja, args, data)
        # nats-server reports totals that exclude the request being answered, and does not
        # count successful message gets.
        if handler is not msg_get:
            ja.api.total += 1
    except ApiError as e:
        ja.api.total += 1
        ja.api.errors += 1
        resp = {"error": e.to_json()}
        resp.update(_ERROR_EXTRAS.get(rtype, {}))
    except StoreError as e:
        # A store that failed or was closed under the request (server shutting down): an
        # error answer, not an exception that would tear down the requester's connection.
        ja.api.total += 1
        ja.api.errors += 1
        resp = {"error": E.JSStreamGeneralErrorF(err=str(e) or type(e).__name__).to_json()}
        resp.update(_ERROR_EXTRAS.get(rtype, {}))
    out = {"type": _PREFIX + rtype}
    out.update(resp)
    body = orjson.dumps(out)
    if reply:
        ja.engine.send(ja, reply, body)
    ja.engine.api_audit(ja, subject, data, body)


# Some error responses carry empty paging fields in nats-server.
_ERROR_EXTRAS: dict[str, dict[str, Any]] = {
    "stream_info_response": {"total": 0, "offset": 0, "limit": 0},
    "stream_purge_response": {"purged": 0},
    "stream_names_response": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "stream_list_response": {"total": 0, "offset": 0, "limit": 0, "streams": []},
    "consumer_names_response": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_list_response": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_pause_response": {"paused": False, "pause_until": "0001-01-01T00:00:00Z"},
    "stream_restore_response": {"deliver_subject": ""},
}


# ---------------------------------------------------------------------- request bodies
# nats-server decodes each body into its Go struct (strict: unknown fields are an error) and
# checks it before it looks the stream up, so a bad body wins over a missing stream. Fields
# are {JSON key: (type, zero value)}; handlers get a dict keyed the same way.
def _request(go: str, fields: dict[str, tuple[GoType, Any]]) -> StructT:
    zero = {k: v for k, (_, v) in fields.items()}
    return StructT(go, {k: (k, t) for k, (t, _) in fields.items()}, lambda: dict(zero))


_INFO = _request(
    "server.JSApiStreamInfoRequest",
    {"deleted_details": (BOOL, False), "subjects_filter": (STRING, ""), "offset": (INT, 0)},
)
_NAMES = _request("server.JSApiStreamNamesRequest", {"offset": (INT, 0), "subject": (STRING, "")})
_LIST = _request("server.JSApiStreamListRequest", {"offset": (INT, 0), "subject": (STRING, "")})
_PURGE = _request(
    "server.JSApiStreamPurgeRequest",
    {"seq": (UINT64, 0), "filter": (STRING, ""), "keep": (UINT64, 0)},
)
_MSG_GET = _request(
    "server.JSApiMsgGetRequest",
    {
        "seq": (UINT64, 0),
        "last_by_subj": (STRING, ""),
        "next_by_subj": (STRING, ""),
        "batch": (INT, 0),
        "max_bytes": (INT, 0),
        "start_time": (TIME, None),
        "multi_last": (STRINGS, []),
        "up_to_seq": (UINT64, 0),
        "up_to_time": (TIME, None),
        "no_hdr": (BOOL, False),
    },
)
_MSG_DELETE = _request(
    "server.JSApiMsgDeleteRequest", {"seq": (UINT64, 0), "no_erase": (BOOL, False)}
)


def _optional(data: bytes, schema: StructT) -> dict[str, Any]:
    """A body the handler may go without: nats-server decodes it only if it starts with
    ``{`` or ``[`` (``isJSONObjectOrArray``); ``null``, ``5`` or ``nul`` count as none."""
    if is_json_object_or_array(data):
        out: dict[str, Any] = decode_request(data, schema)
        return out
    zero: dict[str, Any] = schema.factory()
    return zero


def _stream(ja: JsAccount, args: list[str]) -> Stream:
    if not args or not args[0]:
        raise E.JSStreamNotFoundErr()
    s = ja.streams.get(args[0])
    if s is None:
        raise E.JSStreamNotFoundErr()
    return s


# ---------------------------------------------------------------------- handlers
def account_info(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    mem, store = ja.engine.usage(ja)
    rmem, rstore = ja.engine.reserved(ja)
    out: dict[str, Any] = {
        "memory": mem,
        "storage": store,
        "reserved_memory": rmem,
        "reserved_storage": rstore,
        "streams": len(ja.streams),
        "consumers": sum(s.consumer_count for s in ja.streams.values()),
        "limits": ja.limits.to_json(),
    }
    if ja.engine.domain:
        out["domain"] = ja.engine.domain
    out["api"] = {"level": API_LEVEL, "total": ja.api.total, "errors": ja.api.errors}
    return out


def stream_create(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    name = args[0] if args else ""
    cfg = parse_stream_config_json(data or b"{}", name_in_subject=name, limits=ja.limits)
    check_stream_create(ja.limits, cfg, *_limit_context(ja, cfg.storage))
    existing = ja.streams.get(cfg.name)
    if existing is not None:
        if existing.cfg.to_json() == cfg.to_json():
            out = existing.info_json()
            out["did_create"] = True
            return out
        raise E.JSStreamNameExistErr()
    _check_overlap(ja, cfg.subjects or [cfg.name], None)
    created = ja.engine.clock.time_ns()
    meta = orjson.dumps({"config": cfg.to_json(), "created": created})
    try:
        store = ja.engine.catalog.create(
            ja.account.name, cfg.name, cfg.storage, cfg.to_store_config(), meta
        )
    except (OSError, StoreError) as e:
        raise E.JSStreamCreateErrF(err=str(e)) from None
    except ValueError:
        # A name the file system cannot hold (NUL): refused as nats-server refuses it.
        raise E.JSStreamCreateErrF(err="error creating store for stream") from None
    stream = Stream(ja, cfg, store, created)
    ja.streams[cfg.name] = stream
    stream.subscribe()
    ja.engine.stream_action(ja, cfg.name, "create")
    out = stream.info_json()
    out["did_create"] = True
    return out


def _check_overlap(ja: JsAccount, subjects: list[str], skip: str | None) -> None:
    for other in ja.streams.values():
        if other.name == skip:
            continue
        for a in subjects:
            for b in other.cfg.subjects or [other.name]:
                if subjects_collide(a, b):
                    raise E.JSStreamSubjectOverlapErr()


def _collides(subject: str, stream: Stream) -> bool:
    return any(subjects_collide(subject, x) for x in (stream.cfg.subjects or [stream.name]))


def _limit_context(ja: JsAccount, storage: str) -> tuple[list[StreamConfig], int, int]:
    """The account's stream configs, and the server's limit and reservations for
    ``storage``, for the checks in ``account_limits``."""
    engine = ja.engine
    memory = storage == StorageType.MEMORY
    server_max = engine.max_memory if memory else engine.max_store
    configs = [s.cfg for s in ja.streams.values()]
    return configs, server_max, engine.server_reserved(memory) if server_max >= 0 else 0


def stream_update(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    name = args[0] if args else ""
    cfg = parse_stream_config_json(
        data or b"{}", name_in_subject=name, action="update", limits=ja.limits
    )
    stream = ja.streams.get(cfg.name)
    if stream is None:
        raise E.JSStreamNotFoundErr()
    cfg = check_update(stream.cfg, cfg)
    check_stream_update(ja.limits, stream.cfg, cfg, *_limit_context(ja, cfg.storage))
    _check_overlap(ja, cfg.subjects or [cfg.name], cfg.name)
    meta = orjson.dumps({"config": cfg.to_json(), "created": stream.created_ns})
    ja.engine.catalog.save_meta(ja.account.name, cfg.name, cfg.storage, meta)
    stream.apply_config(cfg)
    stream.store.update_config(cfg.to_store_config())
    stream.resubscribe()
    ja.engine.stream_action(ja, cfg.name, "update")
    return stream.info_json()


def stream_info(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    r = _optional(data, _INFO)
    stream = _stream(ja, args)
    info = stream.info_json(r["deleted_details"], r["subjects_filter"])
    out: dict[str, Any] = {"total": 0, "offset": 0, "limit": 0}
    state = info["state"]
    subjects = state.get("subjects")
    if subjects:
        # The paging fields describe state.subjects: sorted, SUBJECTS_LIMIT at a time from
        # ``offset`` (echoed even past the end, where the map is left out).
        offset = max(r["offset"], 0)
        out = {"total": len(subjects), "offset": offset, "limit": SUBJECTS_LIMIT}
        if offset or len(subjects) > SUBJECTS_LIMIT:
            page = sorted(subjects)[offset : offset + SUBJECTS_LIMIT]
            if page:
                state["subjects"] = {subj: subjects[subj] for subj in page}
            else:
                del state["subjects"]
    out.update(info)
    return out


def stream_delete(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    if not is_empty_request(data):
        raise E.JSNotEmptyRequestErr()
    stream = _stream(ja, args)
    stream.unsubscribe()
    stream_deleted(stream)
    ja.engine.committer.on_failure.pop(stream.store, None)
    del ja.streams[stream.name]
    ja.engine.catalog.remove(ja.account.name, stream.name, stream.cfg.storage, stream.store)
    ja.engine.stream_action(ja, stream.name, "delete")
    return {"success": True}


def _page(
    ja: JsAccount, data: bytes, schema: StructT, limit: int
) -> tuple[list[Stream], dict[str, Any]]:
    """The streams (by name, those whose subjects collide with the request's ``subject``)
    on the requested page, and the paging fields."""
    r = _optional(data, schema)
    streams = sorted(ja.streams.values(), key=lambda s: s.name)
    if r["subject"]:
        streams = [s for s in streams if _collides(r["subject"], s)]
    offset = min(max(r["offset"], 0), len(streams))
    paging = {"total": len(streams), "offset": offset, "limit": limit}
    return streams[offset : offset + limit], paging


def stream_names(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    page, out = _page(ja, data, _NAMES, NAMES_LIMIT)
    out["streams"] = [s.name for s in page] if page else None
    return out


def stream_list(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    page, out = _page(ja, data, _LIST, LIST_LIMIT)
    out["streams"] = [s.info_json() for s in page]
    return out


def stream_purge(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    r = _optional(data, _PURGE)
    filt, seq, keep = r["filter"], r["seq"], r["keep"]
    if seq and keep:
        raise E.JSBadRequestErr()
    stream = _stream(ja, args)
    if stream.cfg.sealed:
        raise E.JSStreamSealedErr()
    if stream.cfg.deny_purge:
        raise E.JSStreamPurgeFailedF(err="stream purge not permitted")
    if not filt and not seq and not keep:
        purged = stream.store.purge()
    else:
        purged = stream.store.purge_ex(filt, seq, keep)
    stream_purged(stream, filt, seq, keep)
    return {"success": True, "purged": purged}


def msg_get(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    # The body is not optional: an empty one decodes to nothing selected (a bad request).
    r = decode_request(data, _MSG_GET)
    seq, last_by, next_by, start = r["seq"], r["last_by_subj"], r["next_by_subj"], r["start_time"]
    # No batches here (that is DIRECT.GET); multi_last and up_to_* are read but unused.
    if r["batch"] > 0 or r["max_bytes"] > 0:
        raise E.JSBadRequestErr()
    if (
        (seq and start is not None)
        or (start is not None and last_by)
        or (last_by and next_by)
        or (seq and last_by)
        or (not seq and start is None and not last_by and not next_by)
    ):
        raise E.JSBadRequestErr()
    stream = _stream(ja, args)
    store = stream.store
    if start is not None:
        seq = seq_from_time(store, go_time_ns(start))
    if last_by:
        m = store.load_last_msg(last_by)
    elif next_by:
        m = store.load_next_msg(next_by, seq)
    else:
        m = store.load_msg(seq)
    if m is None:
        raise E.JSNoMessageFoundErr()
    out = stream.stored_msg_json(m)
    if r["no_hdr"]:
        out.pop("hdrs", None)
    return {"message": out}


def msg_delete(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    # Only a body that is empty or {} is a bad request: "null", "  " or "{} {}" decode to
    # sequence 0, which is a miss (below).
    if is_empty_request(data):
        raise E.JSBadRequestErr()
    r = decode_request(data, _MSG_DELETE)
    stream = _stream(ja, args)
    if stream.cfg.sealed:
        raise E.JSStreamSealedErr()
    if stream.cfg.deny_delete:
        raise E.JSStreamMsgDeleteFailedF(err="message delete not permitted")
    seq = r["seq"]
    ok = seq > 0 and (
        stream.store.remove_msg(seq) if r["no_erase"] else stream.store.erase_msg(seq)
    )
    if not ok:
        raise _delete_miss(stream, seq)
    return {"success": True}


def _delete_miss(stream: Stream, seq: int) -> ApiError:
    """nats-server's answer depends on the store: the file store reports sequences outside
    the stream as a failed delete ("no message found" below it, "stream store EOF" past
    it); everything else is "sequence N not found"."""
    if stream.cfg.storage != StorageType.MEMORY:
        st = stream.store.state()
        if seq == 0 or seq < st.first_seq:
            return E.JSStreamMsgDeleteFailedF(err="no message found")
        if seq > st.last_seq:
            return E.JSStreamMsgDeleteFailedF(err="stream store EOF")
    return E.JSSequenceNotFoundErrF(seq=seq)


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
    # Cluster requests; see api_standalone for the ones nats-server leaves unanswered.
    ("STREAM", "LEADER", "STEPDOWN"): ("stream_leader_stepdown_response", cluster_required, 1),
    ("CONSUMER", "LEADER", "STEPDOWN"): ("consumer_leader_stepdown_response", cluster_required, 2),
    ("STREAM", "PEER", "REMOVE"): ("stream_remove_peer_response", cluster_required, 1),
    ("STREAM", "PEER", "EVACUATE"): ("stream_evacuate_peer_response", cluster_required, 1),
    ("STREAM", "CANCEL_MOVE"): ("stream_cancel_move_response", cluster_required, 1),
}


def _route(toks: list[str]) -> tuple[str, Handler, list[str]] | None:
    for n in (3, 2, 1):
        if len(toks) < n:
            continue
        hit = _TABLE.get(tuple(toks[:n]))
        if hit is not None and (
            len(toks) == n + hit[2] or (hit[2] < 0 and len(toks) >= n - hit[2])
        ):
            return hit[0], hit[1], toks[n:]
    return None
