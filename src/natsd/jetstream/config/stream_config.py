"""Stream configuration: decoding, validation and normalisation, as nats-server does it.

``parse_stream_config`` is nats-server 2.15.1's stream-create path up to the point where the
stream would be stored: the strict JSON decode of the request (``StreamConfigRequest``), the
request checks of ``jsStreamCreateRequest``, ``checkStreamCfg`` (defaults, validation) and
``setStaticStreamMetadata`` (``_nats.req.level``). Every refusal raises the
:class:`~natsd.jetstream.wire.errors.ApiError` nats-server answers, with the same ``err_code`` and
description; ``tests/jetstream/test_stream_config.py`` checks that against the real binary.
``check_update`` is ``configUpdateCheck``.

Order of checks on create (observed on 2.15.1, first failure wins):

1. JSON decode (syntax, then unknown fields / types / enum values in document order) ->
   ``JSInvalidJSONErr`` with Go's error text;
2. name in subject == name in body -> ``JSStreamMismatchErr``;
3. ``\\`` or ``/`` in the name -> ``JSStreamNameContainsPathSeparatorsErr``;
4. ``sealed`` -> "stream configuration for create can not be sealed";
5. ``mirror_direct`` without ``mirror`` -> "stream has no mirror but does have mirror direct";
6. ``checkStreamCfg`` (see ``_check_stream_cfg``, same order as the Go code);
7. ``num_replicas > 1`` -> ``JSStreamReplicasNotSupportedErr`` (standalone server).

What is left to the caller (the engine), in nats-server's order: account stream count /
storage reservation (``JSMaximumStreamsLimitErr``, ``JSStorageResourcesExceededErr``...), an
existing stream of that name (same config: answer with it; else ``JSStreamNameExistErr``), and
subjects overlapping another stream (``JSStreamSubjectOverlapErr``; :func:`subjects_collide`).

On update nats-server runs ``checkStreamCfg`` first and compares the names afterwards; call
``parse_stream_config(..., action="update")`` then :func:`check_update`.

Mirrors and sources are validated exactly like nats-server, then refused with
``JSStreamInvalidConfigF`` ("stream mirrors are not supported" / "stream sources are not
supported") until natsd implements them (``allow_mirrors`` / ``allow_sources`` lift that).

``compression: s2`` compresses a file stream's payloads (``storage/filestore_format``); a
memory stream accepts it and stores plain, as nats-server's does.

Metadata, as nats-server 2.11+: the stored config carries ``_nats.req.level``, the API level
its features need (1: message TTLs / delete markers; 2: counters, atomic batches, schedules,
async persistence; 4: fast batches); ``_nats.ver`` / ``_nats.level`` sent by a client are
dropped. nats-server adds ``_nats.ver`` and ``_nats.level`` (its version and API level) to
every response without storing them: ``to_json()`` adds them only when given
``server_version`` / ``api_level``.

The JSON decoder here is a small port of Go's ``encoding/json`` behaviour as nats-server uses
it (``DisallowUnknownFields``, case-insensitive keys, first error wins, several top-level
values decoded into the same struct) so that ``invalid JSON: ...`` texts match too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from natsd.jetstream.config.stream_types import (
    _JS_API_PREFIX,
    _MS,
    _SECOND,
    API_LEVEL_KEY,
    DEFAULT_DUPLICATE_WINDOW,
    MAX_DESCRIPTION_LEN,
    MAX_METADATA_LEN,
    MAX_NAME_LEN,
    MAX_REPLICAS,
    SERVER_LEVEL_KEY,
    SERVER_VERSION_KEY,
    AccountLimitsLike,
    Action,
    Compression,
    ConsumerLimits,
    ExternalStream,
    PersistMode,
    Placement,
    RePublish,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamConsumerSource,
    StreamLimits,
    StreamSource,
    SubjectTransformConfig,
)
from natsd.jetstream.config.stream_unmarshal import (
    _decode_request,
    _RequestView,
)
from natsd.jetstream.config.subject_mapping import (
    _ERR_BAD_SUBJECT,
    _is_literal,
    _is_valid_publish_subject,
    _subject_transform_error,
    is_valid_name,
    is_valid_subject,
    subject_is_subset_match,
    subjects_collide,
    validate_mapping,
)
from natsd.jetstream.wire.errors import (
    ApiError,
    JSInvalidJSONErr,
    JSMirrorDurableConsumerCfgInvalid,
    JSMirrorInvalidStreamName,
    JSMirrorInvalidSubjectFilter,
    JSMirrorInvalidTransformDestination,
    JSMirrorMultipleFiltersNotAllowed,
    JSMirrorOverlappingSubjectFilters,
    JSMirrorWithAtomicPublishErr,
    JSMirrorWithBatchPublishErr,
    JSMirrorWithCountersErr,
    JSMirrorWithFirstSeqErr,
    JSMirrorWithMsgSchedulesErr,
    JSMirrorWithSourcesErr,
    JSMirrorWithSubjectsErr,
    JSPedanticErrF,
    JSReplicasCountCannotBeNegative,
    JSSourceDuplicateDetected,
    JSSourceDurableConsumerCfgInvalid,
    JSSourceDurableConsumerDuplicateDetected,
    JSSourceInvalidStreamName,
    JSSourceInvalidSubjectFilter,
    JSSourceInvalidTransformDestination,
    JSSourceMultipleFiltersNotAllowed,
    JSSourceOverlappingSubjectFilters,
    JSSourceWithMsgSchedulesErr,
    JSStreamExternalApiOverlapErrF,
    JSStreamInvalidConfigF,
    JSStreamInvalidExternalDeliverySubjErrF,
    JSStreamMaxBytesRequired,
    JSStreamMaxStreamBytesExceeded,
    JSStreamMirrorNotUpdatableErr,
    JSStreamMismatchErr,
    JSStreamNameContainsPathSeparatorsErr,
    JSStreamReplicasNotSupportedErr,
    JSStreamTransformInvalidDestination,
    JSStreamTransformInvalidSource,
)
from natsd.jetstream.wire.gojson import (
    _go_quote,
    _GoJSONError,
    _Node,
    _node_from_py,
    _Scanner,
    decode_go_json,
)
from natsd.storage.store import DiscardPolicy

__all__ = [
    "API_LEVEL_KEY",
    "DEFAULT_DUPLICATE_WINDOW",
    "MAX_DESCRIPTION_LEN",
    "MAX_METADATA_LEN",
    "MAX_NAME_LEN",
    "MAX_REPLICAS",
    "SERVER_LEVEL_KEY",
    "SERVER_VERSION_KEY",
    "AccountLimitsLike",
    "Compression",
    "ConsumerLimits",
    "DiscardPolicy",
    "ExternalStream",
    "PersistMode",
    "Placement",
    "RePublish",
    "RetentionPolicy",
    "StorageType",
    "StreamConfig",
    "StreamConsumerSource",
    "StreamLimits",
    "StreamSource",
    "SubjectTransformConfig",
    "check_restore_config",
    "check_update",
    "decode_go_json",
    "is_valid_name",
    "is_valid_subject",
    "parse_stream_config",
    "parse_stream_config_json",
    "required_api_level",
    "subject_is_subset_match",
    "subjects_collide",
    "validate_mapping",
]


def _invalid(text: str) -> ApiError:
    return JSStreamInvalidConfigF(err=text)


def _pedantic(text: str) -> ApiError:
    return JSPedanticErrF(err=text)


def required_api_level(cfg: StreamConfig) -> int:
    """The JetStream API level a server needs to host ``cfg`` (``setStaticStreamMetadata``)."""
    level = 0
    if cfg.allow_msg_ttl or cfg.subject_delete_marker_ttl > 0:
        level = 1
    if (
        cfg.allow_msg_counter
        or cfg.allow_atomic
        or cfg.allow_msg_schedules
        or cfg.persist_mode == PersistMode.ASYNC
    ):
        level = 2
    if cfg.allow_batched:
        level = 4
    return level


def _set_static_metadata(cfg: StreamConfig) -> None:
    md = dict(cfg.metadata)
    md.pop(SERVER_VERSION_KEY, None)
    md.pop(SERVER_LEVEL_KEY, None)
    md[API_LEVEL_KEY] = str(required_api_level(cfg))
    cfg.metadata = md


def _source_iname(src: StreamSource) -> tuple[str, ...]:
    """``composeIName``: what makes two sources the same."""
    api = src.external.api if src.external is not None else None
    if not src.subject_transforms:
        source = src.filter_subject or ">"
        dest = ">"
    else:
        source = "\f".join(t.src or ">" for t in src.subject_transforms)
        dest = "\f".join(t.dest or ">" for t in src.subject_transforms)
    return (src.name, str(api), source, dest)


def _check_consumer_source(
    c: StreamConsumerSource, src: StreamSource, err: Callable[[], ApiError]
) -> None:
    if not is_valid_name(c.name):
        raise err()
    if not _is_literal(c.deliver_subject) or not is_valid_subject(c.deliver_subject):
        raise err()
    if src.opt_start_seq != 0 or src.opt_start_time is not None:
        raise err()
    if src.filter_subject:
        raise err()


def _check_stream_cfg(
    cfg: StreamConfig,
    pedantic: bool,
    limits: AccountLimitsLike | None,
    max_duplicate_window: int,
) -> None:
    """``checkStreamCfg``: fill in defaults in place and raise the first violation."""
    if not is_valid_name(cfg.name):
        raise _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if len(cfg.name.encode()) > MAX_NAME_LEN:
        raise _invalid(f"stream name is too long, maximum allowed is {MAX_NAME_LEN}")
    if len(cfg.description.encode()) > MAX_DESCRIPTION_LEN:
        raise _invalid(f"stream description is too long, maximum allowed is {MAX_DESCRIPTION_LEN}")
    md_len = sum(len(k.encode()) + len(v.encode()) for k, v in cfg.metadata.items())
    if md_len > MAX_METADATA_LEN:
        raise _invalid(f"stream metadata exceeds maximum size of {MAX_METADATA_LEN} bytes")

    if cfg.num_replicas == 0:
        cfg.num_replicas = 1
    if cfg.num_replicas > MAX_REPLICAS:
        raise _invalid(f"maximum replicas is {MAX_REPLICAS}")
    if cfg.num_replicas < 0:
        raise JSReplicasCountCannotBeNegative()
    for attr in ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers"):
        v = getattr(cfg, attr)
        if v == 0 or v < -1:
            if pedantic and v < -1:
                raise _pedantic(f"{attr} must be set to -1")
            setattr(cfg, attr, -1)
    if cfg.max_age < 0:
        raise _invalid("max age can not be negative")
    if cfg.max_age != 0 and cfg.max_age < 100 * _MS:
        raise _invalid("max age needs to be >= 100ms")

    if cfg.duplicate_window == 0 and cfg.mirror is None and not cfg.sources:
        max_window = DEFAULT_DUPLICATE_WINDOW
        if 0 < max_duplicate_window < max_window:
            if pedantic:
                raise _pedantic("duplicate window limits are higher than current limits")
            max_window = max_duplicate_window
        if cfg.max_age != 0 and cfg.max_age < max_window:
            if pedantic:
                raise _pedantic("duplicate window cannot be bigger than max age")
            cfg.duplicate_window = cfg.max_age
        else:
            cfg.duplicate_window = max_window
    if cfg.duplicate_window < 0:
        raise _invalid("duplicates window can not be negative")
    if cfg.max_age != 0 and cfg.duplicate_window > cfg.max_age:
        raise _invalid("duplicates window can not be larger then max age")
    if max_duplicate_window > 0 and cfg.duplicate_window > max_duplicate_window:
        raise _invalid(
            "duplicates window can not be larger then server limit of "
            + _go_duration(max_duplicate_window)
        )
    if 0 < cfg.duplicate_window < 100 * _MS:
        raise _invalid("duplicates window needs to be >= 100ms")

    if cfg.deny_purge and cfg.allow_rollup_hdrs:
        raise _invalid("roll-ups require the purge permission")

    if cfg.allow_msg_counter:
        if cfg.discard == DiscardPolicy.NEW:
            raise _invalid("counter stream cannot use discard new")
        if cfg.allow_msg_ttl:
            raise _invalid("counter stream cannot use message TTLs")
        if cfg.allow_msg_schedules:
            raise _invalid("counter stream cannot use message schedules")
        if cfg.retention != RetentionPolicy.LIMITS:
            raise _invalid("counter stream can only use limits retention")

    if cfg.discard_new_per_subject:
        if cfg.discard != DiscardPolicy.NEW:
            raise _invalid("discard new per subject requires discard new policy to be set")
        if cfg.max_msgs_per_subject <= 0:
            raise _invalid("discard new per subject requires max msgs per subject > 0")

    if cfg.subject_delete_marker_ttl > 0:
        if cfg.subject_delete_marker_ttl < _SECOND:
            raise _invalid("subject delete marker TTL must be at least 1 second")
        if not cfg.allow_msg_ttl:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
            cfg.allow_msg_ttl = True
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False
    elif cfg.subject_delete_marker_ttl < 0:
        raise _invalid("subject delete marker TTL must not be negative")

    if cfg.allow_msg_schedules:
        if cfg.discard == DiscardPolicy.NEW:
            raise _invalid("message scheduling cannot use discard new")
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                raise _invalid("message scheduling cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False

    if cfg.persist_mode == PersistMode.ASYNC:
        if cfg.storage != StorageType.FILE:
            raise _invalid("async persist mode is only supported on file storage")
        if cfg.num_replicas > 1:
            raise _invalid("async persist mode is not supported on replicated streams")
        if cfg.allow_atomic:
            raise _invalid("async persist mode is not supported with atomic batch publish")

    delivery_prefixes: list[str] = []
    api_prefixes: list[str] = []

    m = cfg.mirror
    if m is not None:
        if cfg.first_seq > 0:
            raise JSMirrorWithFirstSeqErr()
        if cfg.subjects:
            raise JSMirrorWithSubjectsErr()
        if cfg.sources:
            raise JSMirrorWithSourcesErr()
        if cfg.allow_msg_counter:
            raise JSMirrorWithCountersErr()
        if cfg.allow_atomic:
            raise JSMirrorWithAtomicPublishErr()
        if cfg.allow_batched:
            raise JSMirrorWithBatchPublishErr()
        if cfg.allow_msg_schedules:
            raise JSMirrorWithMsgSchedulesErr()
        if m.consumer is not None:
            _check_consumer_source(m.consumer, m, JSMirrorDurableConsumerCfgInvalid)
        if m.filter_subject and m.subject_transforms:
            raise JSMirrorMultipleFiltersNotAllowed()
        if cfg.subject_delete_marker_ttl > 0:
            raise _invalid("subject delete markers forbidden on mirrors")
        for outer, tr in enumerate(m.subject_transforms):
            if tr.src and not is_valid_subject(tr.src):
                raise JSMirrorInvalidSubjectFilter(err=f"{_ERR_BAD_SUBJECT} {tr.src}")
            e = validate_mapping(tr.src, tr.dest)
            if e is not None:
                raise JSMirrorInvalidTransformDestination(err=e)
            for inner, other in enumerate(m.subject_transforms):
                if inner != outer and subjects_collide(tr.src, other.src):
                    raise JSMirrorOverlappingSubjectFilters()
        if m.external is None:
            if not is_valid_name(m.name):
                raise JSMirrorInvalidStreamName()
        else:
            if m.external.deliver:
                delivery_prefixes.append(m.external.deliver)
            if m.external.api:
                api_prefixes.append(m.external.api)

    if cfg.sources and cfg.allow_msg_schedules:
        raise JSSourceWithMsgSchedulesErr()

    inames: set[tuple[str, ...]] = set()
    cnames: set[tuple[str, ...]] = set()
    for src in cfg.sources:
        if not is_valid_name(src.name):
            raise JSSourceInvalidStreamName()
        iname = _source_iname(src)
        if iname in inames:
            raise JSSourceDuplicateDetected()
        inames.add(iname)
        if src.filter_subject and src.subject_transforms:
            raise JSSourceMultipleFiltersNotAllowed()
        for tr in src.subject_transforms:
            if tr.src and not is_valid_subject(tr.src):
                raise JSSourceInvalidSubjectFilter(err=f"{_ERR_BAD_SUBJECT} {tr.src}")
            e = validate_mapping(tr.src, tr.dest)
            if e is not None:
                raise JSSourceInvalidTransformDestination(err=e)
        for outer, tr in enumerate(src.subject_transforms):
            for inner, other in enumerate(src.subject_transforms):
                if inner != outer and subject_is_subset_match(tr.src, other.src):
                    raise JSSourceOverlappingSubjectFilters()
        if src.consumer is not None:
            _check_consumer_source(src.consumer, src, JSSourceDurableConsumerCfgInvalid)
            cname = (src.name, iname[1], src.consumer.name)
            if cname in cnames:
                raise JSSourceDurableConsumerDuplicateDetected()
            cnames.add(cname)
        if src.external is not None:
            if src.external.deliver:
                delivery_prefixes.append(src.external.deliver)
            if src.external.api:
                api_prefixes.append(src.external.api)

    for pfx in delivery_prefixes:
        if not _is_valid_publish_subject(pfx):
            raise JSStreamInvalidExternalDeliverySubjErrF(prefix=pfx)
        # nats-server also checks the prefix against the origin streams' subjects
        # (JSStreamExternalDelPrefixOverlapsErrF); those streams are not known here.
    for pfx in api_prefixes:
        if not _is_valid_publish_subject(pfx):
            raise _invalid(
                f"stream external api prefix {_go_quote(pfx)} must be a valid subject without"
                " wildcards"
            )
        if subjects_collide(pfx, _JS_API_PREFIX):
            raise JSStreamExternalApiOverlapErrF(prefix=pfx, subject=_JS_API_PREFIX)

    if not cfg.subjects:
        if cfg.mirror is None and not cfg.sources:
            cfg.subjects = [cfg.name]
    else:
        if cfg.mirror is not None:
            raise JSMirrorWithSubjectsErr()
        seen: set[str] = set()
        subjects = cfg.subjects
        for i, subj in enumerate(subjects):
            if not is_valid_subject(subj):
                raise _invalid("invalid subject")
            if subj in seen:
                raise _invalid("duplicate subjects detected")
            if subj == ">":
                if not cfg.no_ack:
                    raise _invalid("capturing all subjects requires no-ack to be true")
                if cfg.num_replicas != 1:
                    raise _invalid("capturing all subjects requires replicas of 1")
            if not cfg.no_ack:
                for ns in ("$JS.>", "$JSC.>", "$NRG.>"):
                    if subjects_collide(subj, ns) and not subject_is_subset_match(
                        subj, "$JS.EVENT.>"
                    ):
                        raise _invalid(
                            "subjects that overlap with jetstream api require no-ack to be true"
                        )
                if subjects_collide(subj, "$SYS.>") and not subject_is_subset_match(
                    subj, "$SYS.ACCOUNT.>"
                ):
                    raise _invalid(
                        "subjects that overlap with system api require no-ack to be true"
                    )
            for later in subjects[i + 1 :]:
                if subjects_collide(later, subj):
                    raise _invalid(f"subject {_go_quote(subj)} overlaps with {_go_quote(later)}")
            seen.add(subj)

    if not cfg.subjects and not cfg.sources and cfg.mirror is None:
        raise _invalid("stream needs at least one configured subject or be a source/mirror")

    if limits is not None:
        limit = (
            limits.memory_max_stream_bytes
            if cfg.storage == StorageType.MEMORY
            else limits.storage_max_stream_bytes
        )
        if limits.max_bytes_required and cfg.max_bytes <= 0:
            raise JSStreamMaxBytesRequired()
        if limit > 0 and cfg.max_bytes > limit:
            raise JSStreamMaxStreamBytesExceeded()

    st = cfg.subject_transform
    if st is not None:
        if st.src and not is_valid_subject(st.src):
            raise JSStreamTransformInvalidSource(err=f"{_ERR_BAD_SUBJECT} {st.src}")
        e = validate_mapping(st.src, st.dest)
        if e is not None:
            raise JSStreamTransformInvalidDestination(err=e)

    rp = cfg.republish
    if rp is not None:
        if not rp.src:
            if pedantic:
                raise _pedantic("republish source can not be empty")
            rp.src = ">"
        if (
            rp.dest == ">"
            and rp.src == ">"
            and st is not None
            and len(cfg.subjects) == 1
            and st.src == cfg.subjects[0]
        ):
            if pedantic:
                raise _pedantic("implicit republish based on subject transform")
            rp.src, rp.dest = st.dest, st.dest
        if any(subjects_collide(rp.dest, s) for s in cfg.subjects):
            raise _invalid("stream configuration for republish destination forms a cycle")
        if _subject_transform_error(rp.src, rp.dest) is not None:
            raise _invalid(
                f"stream configuration for republish with transform from '{rp.src}' to"
                f" '{rp.dest}' not valid"
            )

    if cfg.placement is not None and cfg.placement.is_empty():
        cfg.placement = None
    if cfg.placement is not None and cfg.placement.preferred:
        raise _invalid("preferred server not permitted in placement")


def _go_duration(ns: int) -> str:
    """Go's ``time.Duration.String()`` for whole units (limits are configured like that)."""
    if ns == 0:
        return "0s"
    out = ""
    neg = ns < 0
    ns = abs(ns)
    if ns < _SECOND:
        for unit, size in (("ms", _MS), ("µs", 1000), ("ns", 1)):
            if ns >= size:
                whole, frac = divmod(ns, size)
                txt = str(whole)
                if frac:
                    txt += "." + f"{frac:0{len(str(size)) - 1}d}".rstrip("0")
                return ("-" if neg else "") + txt + unit
    secs, frac_ns = divmod(ns, _SECOND)
    h, rem = divmod(secs, 3600)
    mnt, s = divmod(rem, 60)
    sec = str(s) + (("." + f"{frac_ns:09d}".rstrip("0")) if frac_ns else "")
    if h:
        out = f"{h}h{mnt}m{sec}s"
    elif mnt:
        out = f"{mnt}m{sec}s"
    else:
        out = f"{sec}s"
    return ("-" if neg else "") + out


# ============================================================================= public API
def parse_stream_config(
    req: dict[str, Any] | None,
    *,
    name_in_subject: str | None,
    limits: AccountLimitsLike | None = None,
    action: Action = "create",
    max_duplicate_window: int = 0,
    allow_mirrors: bool = False,
    allow_sources: bool = False,
) -> StreamConfig:
    """Decode, validate and normalise a stream create/update request (or a stored config).

    ``req`` is the already-decoded request body (``None`` for an empty body). For the exact
    ``invalid JSON`` texts of malformed bodies use :func:`parse_stream_config_json`.

    ``name_in_subject`` is the ``<name>`` token of ``$JS.API.STREAM.CREATE.<name>`` (or
    ``UPDATE``); ``None`` skips the request checks (re-reading a stored config).

    ``action``:

    * ``"create"``: the checks of ``jsStreamCreateRequest`` (name match, path separators, no
      ``sealed``, no ``mirror_direct`` without a mirror), ``checkStreamCfg``, then replicas;
    * ``"update"``: ``checkStreamCfg`` first, then the name match, as
      ``jsStreamUpdateRequest``; ``sealed`` is allowed. Pass the result to
      :func:`check_update`, which also refuses replicas > 1 on a standalone server;
    * ``"restore"``: ``checkStreamCfg`` only.

    ``limits`` are the account's stream limits (``max_bytes_required``,
    ``*_max_stream_bytes``); ``max_duplicate_window`` is the server's ``duplicate_window``
    limit in ns (0 = none). ``allow_mirrors`` / ``allow_sources`` stop refusing valid
    mirror / source configs (the checks that need the origin streams, such as max message
    size and cycles, are not done here).
    """
    try:
        nodes: list[_Node] = [] if req is None else [_node_from_py(req)]
        request = _decode_request(iter(nodes))
    except _GoJSONError as e:
        raise JSInvalidJSONErr(err=str(e)) from None
    return _finish(
        request,
        name_in_subject,
        limits,
        action,
        max_duplicate_window,
        allow_mirrors,
        allow_sources,
    )


def parse_stream_config_json(
    data: bytes,
    *,
    name_in_subject: str | None,
    limits: AccountLimitsLike | None = None,
    action: Action = "create",
    max_duplicate_window: int = 0,
    allow_mirrors: bool = False,
    allow_sources: bool = False,
    clustered: bool = False,
) -> StreamConfig:
    """:func:`parse_stream_config` from the raw request body, with Go's JSON error texts
    (syntax errors with offsets, several top-level values, ...)."""
    sc = _Scanner(data)

    def nodes() -> Iterator[_Node]:
        while not sc.at_end():
            yield sc.value()

    try:
        request = _decode_request(nodes())
    except _GoJSONError as e:
        raise JSInvalidJSONErr(err=str(e)) from None
    return _finish(
        request,
        name_in_subject,
        limits,
        action,
        max_duplicate_window,
        allow_mirrors,
        allow_sources,
        clustered,
    )


def _finish(
    request: _RequestView,
    name_in_subject: str | None,
    limits: AccountLimitsLike | None,
    action: Action,
    max_duplicate_window: int,
    allow_mirrors: bool,
    allow_sources: bool,
    clustered: bool = False,
) -> StreamConfig:
    cfg: StreamConfig = object.__getattribute__(request, "cfg")
    pedantic: bool = object.__getattribute__(request, "pedantic")
    from_api = name_in_subject is not None and action != "restore"
    if from_api and action == "create":
        if name_in_subject != cfg.name:
            raise JSStreamMismatchErr()
        if "\\" in cfg.name or "/" in cfg.name:
            raise JSStreamNameContainsPathSeparatorsErr()
        if cfg.sealed:
            raise _invalid("stream configuration for create can not be sealed")
        if cfg.mirror_direct and cfg.mirror is None:
            raise _invalid("stream has no mirror but does have mirror direct")
    _check_stream_cfg(cfg, pedantic, limits, max_duplicate_window)
    if from_api and action == "update" and name_in_subject != cfg.name:
        raise JSStreamMismatchErr()
    # (a stored config, name_in_subject None, was checked when it was created)
    if from_api and action == "create" and cfg.num_replicas > 1 and not clustered:
        raise JSStreamReplicasNotSupportedErr()
    # natsd does not run mirrors and sources yet: refuse them once nats-server would accept.
    # (On update a new mirror is refused by check_update with nats-server's own error.)
    if from_api and cfg.mirror is not None and not allow_mirrors and action != "update":
        raise _invalid("stream mirrors are not supported")
    if from_api and cfg.sources and not allow_sources:
        raise _invalid("stream sources are not supported")
    _set_static_metadata(cfg)
    return cfg


def check_restore_config(
    cfg: StreamConfig, *, limits: AccountLimitsLike | None = None, max_duplicate_window: int = 0
) -> StreamConfig:
    """``checkStreamCfg`` (not pedantic) of the config in a stream restore request."""
    _check_stream_cfg(cfg, False, limits, max_duplicate_window)
    return cfg


def check_update(
    old: StreamConfig,
    new: StreamConfig,
    *,
    clustered: bool = False,
) -> StreamConfig:
    """``configUpdateCheck``: may a stream configured as ``old`` become ``new``?

    ``new`` must come from ``parse_stream_config(..., action="update")``. Returns the config
    to store (sealing forces some values); raises nats-server's error otherwise. Account
    reservations and overlaps with other streams are the
    caller's.
    """
    cfg = new.copy()
    # nats-server validates an update twice: in the API handler and again in
    # configUpdateCheck, on the already normalised config. The second pass is not a no-op:
    # {"allow_msg_counter": true, "subject_delete_marker_ttl": "1s"} is created fine (the
    # marker TTL turns allow_msg_ttl on after the counter check) but can never be updated
    # ("counter stream cannot use message TTLs"). Pedantic checks and limits cannot fail the
    # second time when they passed the first.
    _check_stream_cfg(cfg, False, None, 0)
    if cfg.name != old.name:
        raise _invalid("stream configuration name must match original")
    if cfg.num_replicas > 1 and not clustered:
        raise JSStreamReplicasNotSupportedErr()
    if cfg.storage != old.storage:
        raise _invalid("stream configuration update can not change storage type")
    if cfg.retention != old.retention and RetentionPolicy.WORKQUEUE in (
        cfg.retention,
        old.retention,
    ):
        raise _invalid(
            "stream configuration update can not change retention policy to/from workqueue"
        )
    if not cfg.sealed and old.sealed:
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if not cfg.deny_delete and old.deny_delete:
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if not cfg.deny_purge and old.deny_purge:
        raise _invalid("stream configuration update can not cancel deny purge")
    if cfg.mirror is not None and cfg.mirror != old.mirror:
        raise JSStreamMirrorNotUpdatableErr()
    if cfg.discard_new_per_subject:
        if cfg.discard != DiscardPolicy.NEW:
            raise _invalid("discard new per subject requires discard new policy to be set")
        if cfg.max_msgs_per_subject <= 0:
            raise _invalid("discard new per subject requires max msgs per subject > 0")
    if old.allow_msg_ttl and not cfg.allow_msg_ttl:
        raise _invalid("message TTL status can not be disabled")
    if cfg.allow_msg_counter != old.allow_msg_counter:
        raise _invalid("stream configuration update can not change message counter setting")
    if old.allow_msg_schedules and not cfg.allow_msg_schedules:
        raise _invalid("message schedules can not be disabled")
    if cfg.persist_mode != old.persist_mode:
        raise _invalid("stream configuration update can not change persist mode")
    if cfg.sealed:
        cfg.max_age = 0
        cfg.discard = DiscardPolicy.NEW
        cfg.deny_delete = cfg.deny_purge = True
        cfg.allow_rollup_hdrs = False
    _set_static_metadata(cfg)
    return cfg
