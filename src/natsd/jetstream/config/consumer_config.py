"""Consumer configuration: decoding, defaults, validation and update rules, as nats-server.

``parse_create_request`` decodes a ``CreateConsumerRequest`` (strict Go JSON, the exact
``invalid JSON: ...`` texts); ``set_defaults`` is ``setConsumerConfigDefaults``;
``check_config`` is ``checkConsumerCfg``; ``check_update`` is ``checkNewConsumerConfig``.
Every refusal raises the :class:`~natsd.jetstream.wire.errors.ApiError` nats-server answers.

Durations are nanoseconds, times are RFC 3339 strings as Go re-encodes them (``None`` when
unset). The policies are ``StrEnum`` members whose values are their JSON strings
("all", "explicit", "instant", ...), so they encode unchanged and compare equal to them.

``ack_policy: flow_control`` (nats-server 2.14) is acknowledged through a push consumer's
flow control answers: what mirrors and sources use on workqueue and interest origins.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from natsd.jetstream.config.stream_config import _go_duration as go_duration
from natsd.jetstream.config.stream_types import (
    API_LEVEL_KEY,
    MAX_DESCRIPTION_LEN,
    MAX_METADATA_LEN,
    SERVER_LEVEL_KEY,
    SERVER_VERSION_KEY,
    RetentionPolicy,
    StreamConfig,
    metadata_json,
)
from natsd.jetstream.config.subject_mapping import (
    _is_literal,
    is_valid_name,
    is_valid_subject,
    subject_is_subset_match,
)
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.jetstream.wire.gojson import _GoJSONError, _node_from_py
from natsd.jetstream.wire.gotyped import (
    BOOL,
    DURATION,
    DURATIONS,
    INT,
    MAP,
    STRING,
    STRINGS,
    TIME,
    UINT64,
    GoType,
    StructT,
    decode_nodes,
    decode_request,
    raw_enum,
)

__all__ = [
    "AckPolicy",
    "ConsumerConfig",
    "CreateRequest",
    "DeliverPolicy",
    "PriorityPolicy",
    "ReplayPolicy",
    "check_config",
    "check_update",
    "config_from_stored",
    "gather_filters",
    "go_duration",
    "parse_create_request",
    "rfc3339_to_ns",
    "set_defaults",
]

MS = 1_000_000
SECOND = 1_000_000_000
ACK_WAIT_DEFAULT = 30 * SECOND  # JsAckWaitDefault
DELETE_WAIT_DEFAULT = 5 * SECOND  # JsDeleteWaitTimeDefault
MAX_ACK_PENDING_DEFAULT = 1000  # JsDefaultMaxAckPending
WAIT_QUEUE_DEFAULT_MAX = 512  # JSWaitQueueDefaultMax
PINNED_TTL_DEFAULT = 120 * SECOND  # JsDefaultPinnedTTL
ZERO_TIME = "0001-01-01T00:00:00Z"



# ============================================================================= enums
class DeliverPolicy(StrEnum):
    """nats-server's ``DeliverPolicy``: where a consumer starts."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(StrEnum):
    """nats-server's ``AckPolicy``. ``flow_control`` (2.14) acknowledges like ``all``, through
    the answers to a push consumer's flow control (``consumer/push.py``)."""

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"


class ReplayPolicy(StrEnum):
    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(StrEnum):
    """nats-server's ``PriorityPolicy`` for pull consumers with priority groups."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


@dataclass(slots=True)
class ConsumerConfig:
    """nats-server's ``ConsumerConfig`` field for field (Go zero values as defaults)."""

    durable_name: str = ""
    name: str = ""
    description: str = ""
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    opt_start_seq: int = 0
    opt_start_time: str | None = None
    ack_policy: AckPolicy = AckPolicy.NONE
    ack_wait: int = 0
    max_deliver: int = 0
    backoff: list[int] = field(default_factory=list)
    filter_subject: str = ""
    filter_subjects: list[str] = field(default_factory=list)
    replay_policy: ReplayPolicy = ReplayPolicy.INSTANT
    rate_limit_bps: int = 0
    sample_freq: str = ""
    max_waiting: int = 0
    max_ack_pending: int = 0
    flow_control: bool = False
    headers_only: bool = False
    max_batch: int = 0
    max_expires: int = 0
    max_bytes: int = 0
    deliver_subject: str = ""
    deliver_group: str = ""
    idle_heartbeat: int = 0
    inactive_threshold: int = 0
    num_replicas: int = 0
    mem_storage: bool = False
    direct: bool = False
    sourcing: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    pause_until: str | None = None
    priority_groups: list[str] = field(default_factory=list)
    priority_policy: PriorityPolicy = PriorityPolicy.NONE
    priority_timeout: int = 0

    # ------------------------------------------------------------------ helpers
    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def filters(self) -> list[str]:
        return gather_filters(self.filter_subject, self.filter_subjects)

    def copy(self) -> ConsumerConfig:
        return replace(
            self,
            backoff=list(self.backoff),
            filter_subjects=list(self.filter_subjects),
            metadata=dict(self.metadata),
            priority_groups=list(self.priority_groups),
        )

    def to_json(
        self, *, server_version: str | None = None, api_level: int | None = None
    ) -> dict[str, Any]:
        """The ``config`` object of consumer responses, in nats-server's field order with its
        ``omitempty`` rules. ``server_version`` adds the dynamic ``_nats.ver``/``_nats.level``
        metadata nats-server puts in create/info responses (never stored)."""
        out: dict[str, Any] = {}
        if self.durable_name:
            out["durable_name"] = self.durable_name
        if self.name:
            out["name"] = self.name
        if self.description:
            out["description"] = self.description
        out["deliver_policy"] = str(self.deliver_policy)
        if self.opt_start_seq:
            out["opt_start_seq"] = self.opt_start_seq
        if self.opt_start_time is not None:
            out["opt_start_time"] = self.opt_start_time
        out["ack_policy"] = str(self.ack_policy)
        if self.ack_wait:
            out["ack_wait"] = self.ack_wait
        if self.max_deliver:
            out["max_deliver"] = self.max_deliver
        if self.backoff:
            out["backoff"] = list(self.backoff)
        if self.filter_subject:
            out["filter_subject"] = self.filter_subject
        if self.filter_subjects:
            out["filter_subjects"] = list(self.filter_subjects)
        out["replay_policy"] = str(self.replay_policy)
        if self.rate_limit_bps:
            out["rate_limit_bps"] = self.rate_limit_bps
        if self.sample_freq:
            out["sample_freq"] = self.sample_freq
        if self.max_waiting:
            out["max_waiting"] = self.max_waiting
        if self.max_ack_pending:
            out["max_ack_pending"] = self.max_ack_pending
        if self.flow_control:
            out["flow_control"] = True
        if self.headers_only:
            out["headers_only"] = True
        if self.max_batch:
            out["max_batch"] = self.max_batch
        if self.max_expires:
            out["max_expires"] = self.max_expires
        if self.max_bytes:
            out["max_bytes"] = self.max_bytes
        if self.deliver_subject:
            out["deliver_subject"] = self.deliver_subject
        if self.deliver_group:
            out["deliver_group"] = self.deliver_group
        if self.idle_heartbeat:
            out["idle_heartbeat"] = self.idle_heartbeat
        if self.inactive_threshold:
            out["inactive_threshold"] = self.inactive_threshold
        out["num_replicas"] = self.num_replicas
        if self.mem_storage:
            out["mem_storage"] = True
        if self.direct:
            out["direct"] = True
        if self.sourcing:
            out["sourcing"] = True
        md = metadata_json(self.metadata, server_version, api_level)
        if md:
            out["metadata"] = md
        if self.pause_until is not None:
            out["pause_until"] = self.pause_until
        if self.priority_groups:
            out["priority_groups"] = list(self.priority_groups)
        if self.priority_policy != PriorityPolicy.NONE:
            out["priority_policy"] = str(self.priority_policy)
        if self.priority_timeout:
            out["priority_timeout"] = self.priority_timeout
        return out


@dataclass(slots=True)
class CreateRequest:
    stream_name: str
    config: ConsumerConfig
    action: str  # "", "create" or "update"
    pedantic: bool


def gather_filters(filter_subject: str, filter_subjects: list[str]) -> list[str]:
    """``gatherSubjectFilters``: the subject filters of a config (empty = everything)."""
    out = list(filter_subjects)
    if filter_subject:
        out.append(filter_subject)
    return out


# ---------------------------------------------------------------------- times
_TIME_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))"
)


def rfc3339_to_ns(s: str | None) -> int:
    """Nanoseconds since the epoch of an RFC 3339 time (0 for None / the zero time)."""
    if not s:
        return 0
    m = _TIME_RE.fullmatch(s)
    if m is None:
        return 0
    y, mo, d, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    if y < 1970:
        return 0
    frac = (m.group(7) or "")[:9].ljust(9, "0")
    secs = calendar.timegm((y, mo, d, hh, mm, ss, 0, 0, 0))
    if m.group(8) != "Z":
        off = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        secs -= off if m.group(9) == "+" else -off
    return secs * SECOND + int(frac)


# ---------------------------------------------------------------------- decoding
def _members(enum: type[StrEnum]) -> dict[str, StrEnum]:
    """The raw JSON text (quotes included) of each member, for ``raw_enum``."""
    return {f'"{m.value}"': m for m in enum}


# nats-server's UnmarshalJSON methods; DeliverPolicy also reads "undefined" as deliver all.
_DELIVER = raw_enum({**_members(DeliverPolicy), '"undefined"': DeliverPolicy.ALL})
_ACK = raw_enum(_members(AckPolicy))
_REPLAY = raw_enum(_members(ReplayPolicy))
_PRIORITY = raw_enum(_members(PriorityPolicy), lambda raw: f"unknown priority policy: {raw}")
_ACTION = raw_enum(
    {'"create"': "create", '"update"': "update", '""': ""},
    lambda raw: f"unknown consumer action: {raw}",
)

_CONFIG_FIELDS: dict[str, tuple[str, GoType]] = {
    "durable_name": ("durable_name", STRING),
    "name": ("name", STRING),
    "description": ("description", STRING),
    "deliver_policy": ("deliver_policy", _DELIVER),
    "opt_start_seq": ("opt_start_seq", UINT64),
    "opt_start_time": ("opt_start_time", TIME),
    "ack_policy": ("ack_policy", _ACK),
    "ack_wait": ("ack_wait", DURATION),
    "max_deliver": ("max_deliver", INT),
    "backoff": ("backoff", DURATIONS),
    "filter_subject": ("filter_subject", STRING),
    "filter_subjects": ("filter_subjects", STRINGS),
    "replay_policy": ("replay_policy", _REPLAY),
    "rate_limit_bps": ("rate_limit_bps", UINT64),
    "sample_freq": ("sample_freq", STRING),
    "max_waiting": ("max_waiting", INT),
    "max_ack_pending": ("max_ack_pending", INT),
    "flow_control": ("flow_control", BOOL),
    "headers_only": ("headers_only", BOOL),
    "max_batch": ("max_batch", INT),
    "max_expires": ("max_expires", DURATION),
    "max_bytes": ("max_bytes", INT),
    "deliver_subject": ("deliver_subject", STRING),
    "deliver_group": ("deliver_group", STRING),
    "idle_heartbeat": ("idle_heartbeat", DURATION),
    "inactive_threshold": ("inactive_threshold", DURATION),
    "num_replicas": ("num_replicas", INT),
    "mem_storage": ("mem_storage", BOOL),
    "direct": ("direct", BOOL),
    "sourcing": ("sourcing", BOOL),
    "metadata": ("metadata", MAP),
    "pause_until": ("pause_until", TIME),
    "priority_groups": ("priority_groups", STRINGS),
    "priority_policy": ("priority_policy", _PRIORITY),
    "priority_timeout": ("priority_timeout", DURATION),
}


_CONFIG = StructT("server.ConsumerConfig", _CONFIG_FIELDS, ConsumerConfig)
_REQUEST = StructT(
    "server.CreateConsumerRequest",
    {
        "stream_name": ("stream_name", STRING),
        "config": ("config", _CONFIG),
        "action": ("action", _ACTION),
        "pedantic": ("pedantic", BOOL),
    },
    lambda: {"stream_name": "", "config": None, "action": "", "pedantic": False},
)


def parse_create_request(data: bytes) -> CreateRequest:
    """Decode a consumer create request body (an empty body is an empty request)."""
    doc = decode_request(data, _REQUEST)
    cfg = doc["config"] if doc["config"] is not None else ConsumerConfig()
    return CreateRequest(doc["stream_name"], cfg, doc["action"], bool(doc["pedantic"]))


def config_from_stored(doc: dict[str, Any]) -> ConsumerConfig:
    """A config as stored by natsd (already validated and defaulted)."""
    try:
        cfg: ConsumerConfig = decode_nodes(iter([_node_from_py(doc)]), _CONFIG)
    except _GoJSONError as e:
        raise ValueError(str(e)) from None
    return cfg


# ---------------------------------------------------------------------- defaults
def _pedantic(text: str) -> ApiError:
    return E.JSPedanticErrF(err=text)


def set_defaults(
    cfg: ConsumerConfig, scfg: StreamConfig, pedantic: bool, account_max_ack_pending: int = -1
) -> None:
    """``setConsumerConfigDefaults`` (standalone server, no server ack limits; the
    account's ``max_ack_pending`` caps the default)."""
    if cfg.max_deliver == 0 or cfg.max_deliver < -1:
        if pedantic and cfg.max_deliver < -1:
            raise _pedantic("max_deliver must be set to -1")
        cfg.max_deliver = -1
    if cfg.max_waiting < 0:
        if pedantic:
            raise _pedantic("max_waiting must not be negative")
        cfg.max_waiting = 0
    if cfg.max_ack_pending < -1:
        if pedantic:
            raise _pedantic("max_ack_pending must be set to -1")
        cfg.max_ack_pending = -1
    for attr, text in (
        ("max_batch", "max_batch must not be negative"),
        ("max_expires", "max_expires must not be negative"),
        ("max_bytes", "max_bytes must not be negative"),
        ("idle_heartbeat", "idle_heartbeat must not be negative"),
        ("inactive_threshold", "inactive_threshold must not be negative"),
        ("priority_timeout", "priority_timeout must not be negative"),
    ):
        if getattr(cfg, attr) < 0:
            if pedantic:
                raise _pedantic(text)
            setattr(cfg, attr, 0)
    if not cfg.deliver_subject and cfg.max_waiting == 0:
        cfg.max_waiting = WAIT_QUEUE_DEFAULT_MAX
    if cfg.ack_wait == 0 and cfg.ack_policy in (AckPolicy.EXPLICIT, AckPolicy.ALL):
        cfg.ack_wait = ACK_WAIT_DEFAULT
    if cfg.backoff:
        if pedantic and cfg.ack_wait != cfg.backoff[0]:
            raise _pedantic("first backoff value has to equal batch AckWait")
        cfg.ack_wait = cfg.backoff[0]
    limits = scfg.consumer_limits
    if cfg.max_ack_pending == 0:
        if pedantic and limits.max_ack_pending > 0:
            raise _pedantic("max_ack_pending must be set if it's configured in stream limits")
        cfg.max_ack_pending = limits.max_ack_pending
    if cfg.inactive_threshold == 0:
        if pedantic and limits.inactive_threshold > 0:
            raise _pedantic("inactive_threshold must be set if it's configured in stream limits")
        cfg.inactive_threshold = limits.inactive_threshold
    if cfg.max_ack_pending == 0 and cfg.ack_policy != AckPolicy.NONE:
        cfg.max_ack_pending = MAX_ACK_PENDING_DEFAULT
        if 0 < account_max_ack_pending < MAX_ACK_PENDING_DEFAULT:
            cfg.max_ack_pending = account_max_ack_pending
    if cfg.priority_policy == PriorityPolicy.PINNED_CLIENT and cfg.priority_timeout == 0:
        cfg.priority_timeout = PINNED_TTL_DEFAULT
    if cfg.ack_policy == AckPolicy.FLOW_CONTROL and not pedantic:
        cfg.flow_control = True
        cfg.idle_heartbeat = SECOND


def set_static_metadata(cfg: ConsumerConfig) -> None:
    """``setStaticConsumerMetadata``: the API level the config needs, stored with it."""
    md = {k: v for k, v in cfg.metadata.items() if k not in (SERVER_VERSION_KEY, SERVER_LEVEL_KEY)}
    level = 0
    if cfg.pause_until is not None and cfg.pause_until != ZERO_TIME:
        level = 1
    if cfg.priority_policy != PriorityPolicy.NONE or cfg.priority_timeout or cfg.priority_groups:
        level = max(level, 1)
    if cfg.ack_policy == AckPolicy.FLOW_CONTROL:
        level = 4
    md[API_LEVEL_KEY] = str(level)
    cfg.metadata = md


# ---------------------------------------------------------------------- validation
def _invalid(text: str) -> ApiError:
    return E.JSStreamInvalidConfigF(err=text)


_GROUP_RE = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")


def check_config(
    cfg: ConsumerConfig, scfg: StreamConfig, account_max_ack_pending: int = -1
) -> None:
    """``checkConsumerCfg`` for a standalone server (no server ack-pending limit)."""
    if cfg.name and not is_valid_name(cfg.name):
        raise _invalid("consumer name can not contain '.', '*', '>', '\\', '/'")
    if cfg.durable_name and not is_valid_name(cfg.durable_name):
        raise _invalid("consumer durable name can not contain '.', '*', '>', '\\', '/'")
    if cfg.num_replicas > 0 and cfg.num_replicas > scfg.num_replicas:
        raise E.JSConsumerReplicasExceedsStream()
    if cfg.num_replicas < 0:
        raise E.JSReplicasCountCannotBeNegative()
    if (
        scfg.retention in (RetentionPolicy.INTEREST, RetentionPolicy.WORKQUEUE)
        and cfg.num_replicas != 0
        and cfg.num_replicas != scfg.num_replicas
    ):
        raise E.JSConsumerReplicasShouldMatchStream()
    if any(b < 0 for b in cfg.backoff):
        raise E.JSConsumerBackOffNegativeErr()
    if cfg.ack_wait < 0:
        raise E.JSConsumerAckWaitNegativeErr()
    if cfg.ack_policy == AckPolicy.FLOW_CONTROL:
        if not cfg.deliver_subject:
            raise E.JSConsumerAckFCRequiresPushErr()
        if not cfg.flow_control:
            raise E.JSConsumerAckFCRequiresFCErr()
        if cfg.idle_heartbeat != SECOND:
            raise _invalid("flow control ack policy heartbeat needs to be 1s")
        if cfg.max_ack_pending <= 0:
            raise E.JSConsumerAckFCRequiresMaxAckPendingErr()
        if cfg.ack_wait != 0 or cfg.backoff:
            raise E.JSConsumerAckFCRequiresNoAckWaitErr()
        if cfg.max_deliver > 0:
            raise E.JSConsumerAckFCRequiresNoMaxDeliverErr()
    if cfg.backoff and cfg.max_deliver != -1 and len(cfg.backoff) > cfg.max_deliver:
        raise E.JSConsumerMaxDeliverBackoffErr()
    if len(cfg.description.encode()) > MAX_DESCRIPTION_LEN:
        raise E.JSConsumerDescriptionTooLongErrF(max=MAX_DESCRIPTION_LEN)
    if cfg.deliver_subject:
        if not _is_literal(cfg.deliver_subject):
            raise E.JSConsumerDeliverToWildcardsErr()
        if not is_valid_subject(cfg.deliver_subject):
            raise E.JSConsumerInvalidDeliverSubject()
        if any(subject_is_subset_match(cfg.deliver_subject, s) for s in scfg.subjects):
            raise E.JSConsumerDeliverCycleErr()
        if cfg.max_waiting != 0:
            raise E.JSConsumerPushMaxWaitingErr()
        if cfg.max_ack_pending > 0 and cfg.ack_policy == AckPolicy.NONE:
            raise E.JSConsumerMaxPendingAckPolicyRequiredErr()
        if 0 < cfg.idle_heartbeat < 100 * MS:
            raise E.JSConsumerSmallHeartbeatErr()
    else:
        if cfg.ack_policy == AckPolicy.NONE and scfg.retention == RetentionPolicy.WORKQUEUE:
            raise E.JSConsumerPullRequiresAckErr()
        if cfg.rate_limit_bps > 0:
            raise E.JSConsumerPullWithRateLimitErr()
        if cfg.max_waiting < 0:
            raise E.JSConsumerMaxWaitingNegativeErr()
        if cfg.idle_heartbeat > 0:
            raise E.JSConsumerHBRequiresPushErr()
        if cfg.flow_control:
            raise E.JSConsumerFCRequiresPushErr()
        if cfg.max_batch < 0:
            raise E.JSConsumerMaxRequestBatchNegativeErr()
        if cfg.max_expires != 0 and cfg.max_expires < MS:
            raise E.JSConsumerMaxRequestExpiresTooSmall()
    if 0 < account_max_ack_pending < cfg.max_ack_pending:
        raise E.JSConsumerMaxPendingAckExcessErrF(limit=account_max_ack_pending)
    limits = scfg.consumer_limits
    if limits.max_ack_pending > 0 and cfg.max_ack_pending > limits.max_ack_pending:
        raise E.JSConsumerMaxPendingAckExcessErrF(limit=limits.max_ack_pending)
    if limits.inactive_threshold > 0 and cfg.inactive_threshold > limits.inactive_threshold:
        raise E.JSConsumerInactiveThresholdExcess(limit=go_duration(limits.inactive_threshold))
    if cfg.direct:
        if not cfg.deliver_subject:
            raise E.JSConsumerDirectRequiresPushErr()
        if cfg.durable_name:
            raise E.JSConsumerDirectRequiresEphemeralErr()
    if cfg.filter_subject and cfg.filter_subjects:
        raise E.JSConsumerDuplicateFilterSubjects()
    if cfg.filter_subject and not is_valid_subject(cfg.filter_subject):
        raise _invalid("invalid subject")
    if any(f == "" for f in cfg.filter_subjects):
        raise E.JSConsumerEmptyFilter()
    filters = cfg.filters
    for i, a in enumerate(filters):
        if not is_valid_subject(a):
            raise _invalid("invalid subject")
        for j, b in enumerate(filters):
            if i != j and subject_is_subset_match(a, b):
                raise E.JSConsumerOverlappingSubjectFilters()
    _check_start(cfg)
    if cfg.sample_freq:
        s = cfg.sample_freq[:-1] if cfg.sample_freq.endswith("%") else cfg.sample_freq
        n = _go_atoi(s)
        if n is None:
            text = f'strconv.Atoi: parsing "{s}": invalid syntax'
            raise E.JSConsumerInvalidSamplingErrF(err=text)
        if n < 0:
            raise E.JSConsumerInvalidSamplingErrF(err="<nil>")
    if cfg.flow_control and cfg.idle_heartbeat == 0:
        raise E.JSConsumerWithFlowControlNeedsHeartbeats()
    if cfg.durable_name and cfg.name and cfg.name != cfg.durable_name:
        raise E.JSConsumerCreateDurableAndNameMismatch()
    if sum(len(k.encode()) + len(v.encode()) for k, v in cfg.metadata.items()) > MAX_METADATA_LEN:
        raise E.JSConsumerMetadataLengthErrF(limit=f"{MAX_METADATA_LEN // 1024}KB")
    if cfg.priority_policy != PriorityPolicy.NONE:
        if cfg.deliver_subject:
            raise E.JSConsumerPushWithPriorityGroupErr()
        if not cfg.priority_groups:
            raise E.JSConsumerPriorityPolicyWithoutGroup()
        for g in cfg.priority_groups:
            if not g:
                raise E.JSConsumerEmptyGroupName()
            if not _GROUP_RE.fullmatch(g):
                raise E.JSConsumerInvalidGroupNameErr()
    else:
        if cfg.priority_groups:
            raise E.JSConsumerPriorityGroupWithPolicyNone()
        if cfg.priority_timeout > 0:
            raise E.JSConsumerPinnedTTLWithoutPriorityPolicyNone()
    if scfg.placement is not None and scfg.placement.preferred:
        raise _invalid("preferred server not permitted in placement")


# The deliver policies that take neither a start sequence nor a start time.
_NO_START = (
    DeliverPolicy.ALL,
    DeliverPolicy.LAST,
    DeliverPolicy.NEW,
    DeliverPolicy.LAST_PER_SUBJECT,
)


def _check_start(cfg: ConsumerConfig) -> None:
    def bad(dp: str, start: str) -> ApiError:
        text = f"consumer delivery policy is deliver {dp}, but optional start {start} is also set"
        return E.JSConsumerInvalidPolicyErrF(err=text)

    def not_set(dp: str, what: str) -> ApiError:
        text = f"consumer delivery policy is deliver {dp}, but optional {what} is not set"
        return E.JSConsumerInvalidPolicyErrF(err=text)

    dp = cfg.deliver_policy
    if dp in _NO_START:
        label = "last per subject" if dp == DeliverPolicy.LAST_PER_SUBJECT else str(dp)
        if cfg.opt_start_seq > 0:
            raise bad(label, "sequence")
        if cfg.opt_start_time is not None:
            raise bad(label, "time")
        if dp == DeliverPolicy.LAST_PER_SUBJECT and not cfg.filters:
            raise not_set("last per subject", "filter subject")
    elif dp == DeliverPolicy.BY_START_SEQUENCE:
        if cfg.opt_start_seq == 0:
            raise not_set("by start sequence", "start sequence")
        if cfg.opt_start_time is not None:
            raise bad("by start sequence", "time")
    elif dp == DeliverPolicy.BY_START_TIME:
        if cfg.opt_start_time is None:
            raise not_set("by start time", "start time")
        if cfg.opt_start_seq != 0:
            raise bad("by start time", "start sequence")


def _go_atoi(s: str) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        return None
    return int(s)


# ---------------------------------------------------------------------- updates
def check_update(old: ConsumerConfig, new: ConsumerConfig, deliver_bound: bool) -> None:
    """``checkNewConsumerConfig``: may a consumer configured as ``old`` become ``new``?
    ``deliver_bound`` tells whether the old deliver subject still has interest. Raises
    ``JSConsumerCreateErrF`` with nats-server's text (or its own error)."""
    if old == new:
        return

    def fail(text: str) -> ApiError:
        return E.JSConsumerCreateErrF(err=text)

    if old.deliver_policy != new.deliver_policy:
        raise fail("deliver policy can not be updated")
    if old.mem_storage != new.mem_storage:
        raise fail("storage type can not be updated")
    if old.direct != new.direct:
        raise fail("direct can not be updated")
    if old.sourcing != new.sourcing:
        raise fail("sourcing can not be updated")
    if old.opt_start_seq != new.opt_start_seq:
        raise fail("start sequence can not be updated")
    if (old.opt_start_time is None) != (new.opt_start_time is None) or (
        old.opt_start_time is not None
        and rfc3339_to_ns(old.opt_start_time) != rfc3339_to_ns(new.opt_start_time)
    ):
        raise fail("start time can not be updated")
    if old.ack_policy != new.ack_policy:
        raise fail("ack policy can not be updated")
    if old.replay_policy != new.replay_policy:
        raise fail("replay policy can not be updated")
    if old.idle_heartbeat != new.idle_heartbeat:
        raise fail("heart beats can not be updated")
    if old.flow_control != new.flow_control:
        raise fail("flow control can not be updated")
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            raise fail("can not update pull consumer to push based")
        if not new.deliver_subject:
            raise fail("can not update push consumer to pull based")
        if deliver_bound:
            raise E.JSConsumerNameExistErr()
    if old.max_waiting != new.max_waiting:
        raise fail("max waiting can not be updated")
    if new.backoff and new.max_deliver != -1 and len(new.backoff) > new.max_deliver:
        raise E.JSConsumerMaxDeliverBackoffErr()
