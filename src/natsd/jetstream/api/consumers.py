"""``$JS.API.CONSUMER.*`` handlers, as nats-server's jetstream_api.go.

Routes (registered in ``dispatch._TABLE``)::

    CONSUMER.CREATE.<stream>                       legacy ephemeral
    CONSUMER.CREATE.<stream>.<name>[.<filter>]     named (durable or ephemeral)
    CONSUMER.DURABLE.CREATE.<stream>.<durable>     legacy durable
    CONSUMER.INFO|DELETE|PAUSE.<stream>.<consumer>
    CONSUMER.NAMES|LIST.<stream>
    CONSUMER.MSG.NEXT.<stream>.<consumer>          pull requests (no API response; statuses)

Handlers return the response document or raise ApiError, like the stream handlers. They
decode the request and call the engine's verb (``add_consumer``) or the consumer itself;
building and restoring consumers is the engine's.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

import orjson

from natsd.core.clock import rfc3339
from natsd.jetstream.config.consumer_config import (
    ZERO_TIME,
    AckPolicy,
    ConsumerConfig,
    parse_create_request,
    rfc3339_to_ns,
    set_static_metadata,
)
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.engine import JsAccount, add_consumer, find_consumer
from natsd.jetstream.stream.source import get_hash
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.jetstream.wire.gojson import _GoJSONError
from natsd.jetstream.wire.gotyped import (
    INT,
    STRING,
    TIME,
    UINT64,
    StructT,
    decode_request,
    is_empty_request,
    is_json_object_or_array,
    unmarshal,
)

__all__ = [
    "consumer_create",
    "consumer_delete",
    "consumer_delete_request",
    "consumer_durable_create",
    "consumer_info",
    "consumer_list",
    "consumer_names",
    "consumer_pause",
    "consumer_unpin",
    "leader_stepdown",
    "next_request",
    "reset_request",
]

log = logging.getLogger("natsd")

NAMES_LIMIT = 1024
LIST_LIMIT = 256


def _stream(ja: JsAccount, name: str) -> Stream:
    s = ja.streams.get(name) if name else None
    if s is None:
        raise E.JSStreamNotFoundErr()
    return s


def _consumer(stream: Stream, name: str) -> Consumer:
    c = find_consumer(stream, name)
    if c is None:
        raise E.JSConsumerNotFoundErr()
    return c


# ---------------------------------------------------------------------- create
def consumer_create(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    if len(args) == 1:
        return _create(ja, args[0], "", "", "ephemeral", data)
    return _create(ja, args[0], args[1], ".".join(args[2:]), "new", data)


def consumer_durable_create(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    return _create(ja, args[0], args[1], "", "durable", data)


def _create(
    ja: JsAccount, stream_name: str, cname: str, filtered: str, kind: str, data: bytes
) -> dict[str, Any]:
    req = parse_create_request(data)
    if stream_name != req.stream_name:
        raise E.JSStreamMismatchErr()
    cfg = req.config
    check_name = cname or cfg.name
    if check_name and ("\\" in check_name or "/" in check_name):
        raise E.JSConsumerNameContainsPathSeparatorsErr()
    if kind == "durable":
        if not cfg.durable_name:
            raise E.JSConsumerDurableNameNotSetErr()
        if cname != cfg.durable_name:
            raise E.JSConsumerDurableNameNotMatchSubjectErr()
    elif kind == "new":
        if cfg.durable_name and cname != cfg.durable_name:
            raise E.JSConsumerDurableNameNotMatchSubjectErr()
        cfg.name = cname
    elif cfg.durable_name:
        raise E.JSConsumerEphemeralWithDurableNameErr()
    if filtered and cfg.filter_subjects:
        raise E.JSConsumerMultipleFiltersNotAllowed()
    if filtered and cfg.filter_subject != filtered:
        raise E.JSConsumerCreateFilterSubjectMismatchErr()
    if cfg.num_replicas > 1:
        # a replicated stream's consumers share its group (check_config caps the count)
        named = ja.streams.get(req.stream_name)
        if named is None or named.replica is None:
            raise E.JSStreamReplicasNotSupportedErr()
    stream = _stream(ja, req.stream_name)
    if cfg.durable_name and not cfg.name:
        cfg.name = cfg.durable_name
    if cfg.direct and cfg.sourcing and cfg.name:
        cname = _sourcing_consumer(stream, cfg)
    existing = find_consumer(stream, cname or cfg.durable_name or cfg.name)
    if existing is not None:
        cfg.pause_until = existing.cfg.pause_until
        if cfg.sourcing and cfg.durable_name:
            # a durable sourcing consumer asked for again starts where it was made to
            cfg.deliver_policy = existing.cfg.deliver_policy
            cfg.opt_start_seq = existing.cfg.opt_start_seq
            cfg.opt_start_time = existing.cfg.opt_start_time
    set_static_metadata(cfg)
    c = add_consumer(ja, stream, cfg, action=req.action, pedantic=req.pedantic)
    if existing is not None and c.cfg.sourcing and c.cfg.durable_name:
        # (and is moved back to just above what its copy acknowledged: the create is a
        # reset too, nats-server's resetStartingSeq)
        c.reset_to(0)
    return c.info()


def _sourcing_consumer(stream: Stream, cfg: ConsumerConfig) -> str:
    """A mirror's or a source's consumer (``direct`` and ``sourcing``, with the copy's
    stable name), as nats-server 2.14 makes it (ADR-60): on a workqueue or interest origin a
    durable one that the copy acknowledges through its flow control answers, so that
    nothing is lost to a copy that was away; on a limits origin a direct one under the name
    with a random suffix (several servers may copy the same stream). Returns its name."""
    if stream.cfg.retention != RetentionPolicy.LIMITS:
        cfg.direct = False
        cfg.durable_name = cfg.name
        cfg.ack_policy = AckPolicy.FLOW_CONTROL
        cfg.ack_wait = 0
        cfg.max_deliver = -1
        cfg.inactive_threshold = 0
    else:
        cfg.name = f"{cfg.name}-{get_hash(secrets.token_hex(16))}"
    return cfg.name


# ---------------------------------------------------------------------- info / delete
def consumer_info(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    if not is_empty_request(data):
        raise E.JSNotEmptyRequestErr()
    c = _consumer(_stream(ja, args[0]), args[1])
    return c.info()


def consumer_delete_request(ja: JsAccount, args: list[str], data: bytes) -> Consumer:
    """A consumer delete request checked: the consumer it deletes; ApiError for one
    refused. A replicated stream's leader checks it here and puts the delete through its
    group."""
    if not is_empty_request(data):
        raise E.JSNotEmptyRequestErr()
    return _consumer(_stream(ja, args[0]), args[1])


def consumer_delete(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    consumer_delete_request(ja, args, data).delete()
    return {"success": True}


_PAGED = StructT("server.JSApiConsumersRequest", {"offset": ("offset", INT)}, lambda: {"offset": 0})


def _offset(data: bytes) -> int:
    if not is_json_object_or_array(data):
        return 0
    return max(int(decode_request(data, _PAGED)["offset"]), 0)


def _page(
    ja: JsAccount, args: list[str], data: bytes, limit: int
) -> tuple[Stream, list[str], dict[str, Any]]:
    """The stream, the sorted consumer names on the requested page and the paging fields."""
    offset = _offset(data)
    stream = _stream(ja, args[0])
    names = sorted(n for n, c in stream.consumers.items() if not c.direct)
    offset = min(offset, len(names))
    paging = {"total": len(names), "offset": offset, "limit": limit}
    return stream, names[offset : offset + limit], paging


def consumer_names(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    _, page, out = _page(ja, args, data, NAMES_LIMIT)
    out["consumers"] = page
    return out


def consumer_list(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    stream, page, out = _page(ja, args, data, LIST_LIMIT)
    out["consumers"] = [_consumer(stream, n).info(versioned=False) for n in page]
    return out


# ---------------------------------------------------------------------- pause
_PAUSE = StructT(
    "server.JSApiConsumerPauseRequest",
    {"pause_until": ("pause_until", TIME)},
    lambda: {"pause_until": None},
)


def consumer_pause(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    until: str | None = None
    if is_json_object_or_array(data):
        until = decode_request(data, _PAUSE)["pause_until"]
    stream = _stream(ja, args[0])
    c = _consumer(stream, args[1])
    until_ns = rfc3339_to_ns(until)
    new = rfc3339(until_ns) if until_ns else None
    if until is not None and not until_ns and until != ZERO_TIME:
        new = until  # a time before 1970: kept as given
    old = c.cfg.pause_until
    c.set_pause(new)
    set_static_metadata(c.cfg)
    c.save_meta()
    now = stream.clock.time_ns()
    paused = until_ns > now
    shown = new or ZERO_TIME
    if (old or "") != (new or ""):
        c.adv.pause(paused, shown)
    out: dict[str, Any] = {"paused": paused, "pause_until": shown}
    if paused:
        out["pause_remaining"] = until_ns - now
    return out


# ---------------------------------------------------------------------- pull requests
def next_request(ja: JsAccount, toks: list[str], reply: bytes | None, data: bytes) -> None:
    """``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``: nats-server subscribes per
    consumer, so an unknown consumer gets the no-responders status."""
    c: Consumer | None = None
    if len(toks) == 5:
        stream = ja.streams.get(toks[3])
        if stream is not None:
            c = find_consumer(stream, toks[4])
    if not reply:
        return
    if c is None:
        subj = ".".join(["$JS.API", *toks]).encode()
        ja.engine.send(ja, reply, b"", b"NATS/1.0 503\r\nNats-Subject: " + subj + b"\r\n\r\n")
        return
    try:
        c.request_next(reply, data)
    except Exception:
        log.exception("consumer %s > %s: pull request failed", c.stream.name, c.name)


_RESET = StructT(
    "server.JSApiConsumerResetRequest",
    {"seq": ("seq", UINT64)},
    lambda: {"seq": 0},
    strict=False,
)


def reset_request(
    ja: JsAccount,
    toks: list[str],
    reply: bytes | None,
    data: bytes,
    respond: Callable[[bytes], None] | None = None,
) -> None:
    """``$JS.API.CONSUMER.RESET.<stream>.<consumer>``: like pull requests this goes to the
    consumer's own subscription (no answer for an unknown consumer, not an API call).
    ``respond`` takes the answer instead of ``reply`` (see ``dispatch.handle``)."""
    if len(toks) != 4 or not (reply or respond):
        return
    stream = ja.streams.get(toks[2])
    c = find_consumer(stream, toks[3]) if stream is not None else None
    if c is None:
        return
    resp: dict[str, Any] = {"type": "io.nats.jetstream.api.v1.consumer_reset_response"}
    try:
        seq = 0
        if data:
            try:
                seq = int(unmarshal(data, _RESET)["seq"])
            except _GoJSONError as e:
                raise E.JSInvalidJSONErr(err=str(e)) from None
        try:
            reset = c.reset_to(seq)
        except ValueError as e:
            raise E.JSConsumerInvalidResetErr(err=str(e)) from None
        except Exception as e:
            log.exception("consumer %s > %s: reset failed", c.stream.name, c.name)
            raise E.JSConsumerInvalidResetErr(err=str(e)) from None
        resp.update(c.info())
        resp["reset_seq"] = reset
    except ApiError as e:
        resp["error"] = e.to_json()
        resp["reset_seq"] = 0
    if respond is not None:
        respond(orjson.dumps(resp))
    elif reply:
        ja.engine.send(ja, reply, orjson.dumps(resp))


_UNPIN = StructT(
    "server.JSApiConsumerUnpinRequest",
    {"group": ("group", STRING)},
    lambda: {"group": ""},
    strict=False,
)


def consumer_unpin(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    """``$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`` {"group": ...}: drop the pinned
    client of a priority group."""
    try:
        group = str(unmarshal(data, _UNPIN)["group"])
    except _GoJSONError as e:
        raise E.JSInvalidJSONErr(err=str(e)) from None
    if not group:
        raise E.JSInvalidJSONErr(err="consumer group not specified")
    c = _consumer(_stream(ja, args[0]), args[1])
    if group not in c.cfg.priority_groups:
        raise E.JSConsumerInvalidPriorityGroupErr()
    c.delivery.unpin(group)
    return {}


def leader_stepdown(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    raise E.JSClusterRequiredErr()
