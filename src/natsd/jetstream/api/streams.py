"""``$JS.API.STREAM.*`` handlers (and MSG.GET / MSG.DELETE), as nats-server's jetstream_api.go.

Each handler takes (account, subject tokens after the verb, request body) and returns the
response document or raises ApiError; ``dispatch`` routes to it and adds the ``type``.
Handlers decode the request and call the engine's verbs (``add_stream``, ``update_stream``,
``delete_stream``) or the stream; they build nothing themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from natsd.jetstream.config.stream_config import parse_stream_config_json
from natsd.jetstream.config.stream_types import StreamConfig, StreamSource
from natsd.jetstream.config.subject_mapping import overlaps, subjects_collide
from natsd.jetstream.engine import JsAccount, add_stream, delete_msg, delete_stream, update_stream
from natsd.jetstream.stream.queries import seq_from_time
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
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

__all__ = [
    "LIST_LIMIT",
    "LIST_REQUEST",
    "NAMES_LIMIT",
    "NAMES_REQUEST",
    "msg_delete",
    "msg_delete_request",
    "msg_get",
    "optional_request",
    "purge_request",
    "stream_create",
    "stream_delete",
    "stream_info",
    "stream_list",
    "stream_names",
    "stream_purge",
    "stream_update",
]

NAMES_LIMIT = 1024
SUBJECTS_LIMIT = 100_000
LIST_LIMIT = 256


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
_PAGE_FIELDS: dict[str, tuple[GoType, Any]] = {"offset": (INT, 0), "subject": (STRING, "")}
NAMES_REQUEST = _request("server.JSApiStreamNamesRequest", _PAGE_FIELDS)
LIST_REQUEST = _request("server.JSApiStreamListRequest", _PAGE_FIELDS)
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


def optional_request(data: bytes, schema: StructT) -> dict[str, Any]:
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
def stream_create(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    name = args[0] if args else ""
    cfg = parse_stream_config_json(
        data or b"{}", name_in_subject=name, limits=ja.limits, allow_mirrors=True,
        allow_sources=True,
    )  # fmt: skip
    if cfg.mirror is not None or cfg.sources:
        check_origins(_lookup(ja), cfg)
    stream = add_stream(ja, cfg)
    out = stream.info_json()
    out["did_create"] = True
    return out


def _lookup(ja: JsAccount) -> Callable[[str], StreamConfig | None]:
    def config_of(name: str) -> StreamConfig | None:
        s = ja.streams.get(name)
        return s.cfg if s is not None else None

    return config_of


def check_origins(lookup: Callable[[str], StreamConfig | None], cfg: StreamConfig) -> None:
    """The checks of a mirror's or a sourcing stream's config that read the streams it
    copies (``checkStreamCfg``, on create and update): a max message size at least the
    origin's, a mirror's ``mirror_direct`` as its origin's ``allow_direct``, no cycle.
    An origin in another account or domain (``external``) is not read here (an update
    cannot add a mirror: the mirror cannot change).
    ``lookup``: the config of the account's stream of that name (None: none, yet)."""
    m = cfg.mirror
    if m is not None:
        origin = _origin(lookup, cfg, m, E.JSMirrorMaxMessageSizeTooBigErr)
        if origin is not None:
            cfg.mirror_direct = origin.allow_direct
    for src in cfg.sources:
        _origin(lookup, cfg, src, E.JSSourceMaxMessageSizeTooBigErr)
    _check_cycle(lookup, cfg)


def _origin(
    lookup: Callable[[str], StreamConfig | None],
    cfg: StreamConfig,
    src: StreamSource,
    too_big: Callable[[], ApiError],
) -> StreamConfig | None:
    """One mirror's or source's origin checks; the origin's config when it exists here."""
    if src.external is not None:
        return None  # in another account or domain: asked through its API prefix only
    origin = lookup(src.name)
    if origin is not None:
        mine, theirs = cfg.max_msg_size, origin.max_msg_size
        if mine > 0 and theirs > 0 and mine < theirs:
            raise too_big()
    return origin


def _check_cycle(lookup: Callable[[str], StreamConfig | None], cfg: StreamConfig) -> None:
    """nats-server's cycle check: from ``cfg``, through the sources and mirrors of the
    streams here, back to a stream already visited (a source only when the visited stream's
    subjects meet its filter)."""
    to_visit = [cfg]
    visited: set[str] = set()
    while to_visit:
        c = to_visit.pop(0)
        visited.add(c.name)
        for src in c.sources:
            if src.external is not None:
                continue
            if src.name in visited:
                if not src.filter_subject or any(
                    subjects_collide(s, src.filter_subject) for s in c.subjects
                ):
                    raise E.JSStreamInvalidConfigF(err="detected cycle")
            else:
                up = lookup(src.name)
                if up is not None:
                    to_visit.append(up)
        mm = c.mirror
        if mm is not None and mm.external is None:
            if mm.name in visited:
                raise E.JSStreamInvalidConfigF(err="detected cycle")
            up = lookup(mm.name)
            if up is not None:
                to_visit.append(up)


def _collides(subject: str, stream: Stream) -> bool:
    return overlaps([subject], stream.cfg.subjects or [stream.name])


def stream_update(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    name = args[0] if args else ""
    cfg = parse_stream_config_json(
        data or b"{}", name_in_subject=name, action="update", limits=ja.limits,
        allow_sources=True,
    )  # fmt: skip
    if cfg.mirror is not None or cfg.sources:
        check_origins(_lookup(ja), cfg)
    return update_stream(ja, cfg).info_json()


def stream_info(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    r = optional_request(data, _INFO)
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
    delete_stream(ja, _stream(ja, args))
    return {"success": True}


def _page(
    ja: JsAccount, data: bytes, schema: StructT, limit: int
) -> tuple[list[Stream], dict[str, Any]]:
    """The streams (by name, those whose subjects collide with the request's ``subject``)
    on the requested page, and the paging fields."""
    r = optional_request(data, schema)
    streams = sorted(ja.streams.values(), key=lambda s: s.name)
    if r["subject"]:
        streams = [s for s in streams if _collides(r["subject"], s)]
    offset = min(max(r["offset"], 0), len(streams))
    paging = {"total": len(streams), "offset": offset, "limit": limit}
    return streams[offset : offset + limit], paging


def stream_names(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    page, out = _page(ja, data, NAMES_REQUEST, NAMES_LIMIT)
    out["streams"] = [s.name for s in page] if page else None
    return out


def stream_list(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    page, out = _page(ja, data, LIST_REQUEST, LIST_LIMIT)
    out["streams"] = [s.info_json() for s in page]
    return out


def purge_request(ja: JsAccount, args: list[str], data: bytes) -> tuple[Stream, str, int, int]:
    """A purge request checked, as (stream, filter, seq, keep); ApiError for one refused.
    A replicated stream's leader checks it here and puts the purge through its group."""
    r = optional_request(data, _PURGE)
    filt, seq, keep = r["filter"], r["seq"], r["keep"]
    if seq and keep:
        raise E.JSBadRequestErr()
    stream = _stream(ja, args)
    if stream.cfg.sealed:
        raise E.JSStreamSealedErr()
    if stream.cfg.deny_purge:
        raise E.JSStreamPurgeFailedF(err="stream purge not permitted")
    return stream, filt, seq, keep


def stream_purge(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    stream, filt, seq, keep = purge_request(ja, args, data)
    return {"success": True, "purged": stream.purge(filt, seq, keep)}


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


def msg_delete_request(ja: JsAccount, args: list[str], data: bytes) -> tuple[Stream, int, bool]:
    """A message delete request checked, as (stream, seq, no_erase); ApiError for one
    refused. A replicated stream's leader checks it here and puts the delete through its
    group."""
    # Only a body that is empty or {} is a bad request: "null", "  " or "{} {}" decode to
    # sequence 0, which is a miss (delete_msg).
    if is_empty_request(data):
        raise E.JSBadRequestErr()
    r = decode_request(data, _MSG_DELETE)
    stream = _stream(ja, args)
    if stream.cfg.sealed:
        raise E.JSStreamSealedErr()
    if stream.cfg.deny_delete:
        raise E.JSStreamMsgDeleteFailedF(err="message delete not permitted")
    return stream, r["seq"], r["no_erase"]


def msg_delete(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    stream, seq, no_erase = msg_delete_request(ja, args, data)
    delete_msg(stream, seq, no_erase)
    return {"success": True}
