"""Stream configuration types: the dataclasses and enums of a stream's config.

Split out of stream_config.py; see that module for the overall flow.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from natsd.storage.store import DiscardPolicy, StoreConfig

# ----------------------------------------------------------------------------- constants
MAX_NAME_LEN = 255  # JSMaxNameLen (bytes)
MAX_DESCRIPTION_LEN = 4 * 1024  # JSMaxDescriptionLen (bytes)
MAX_METADATA_LEN = 128 * 1024  # JSMaxMetadataLen (sum of key and value bytes)
MAX_REPLICAS = 5  # StreamMaxReplicas
DEFAULT_DUPLICATE_WINDOW = 120_000_000_000  # StreamDefaultDuplicatesWindow, 2 min in ns

_MS = 1_000_000
_SECOND = 1_000_000_000

API_LEVEL_KEY = "_nats.req.level"  # JSRequiredLevelMetadataKey: stored with the config
SERVER_VERSION_KEY = "_nats.ver"  # JSServerVersionMetadataKey: added to responses only
SERVER_LEVEL_KEY = "_nats.level"  # JSServerLevelMetadataKey: added to responses only

_JS_API_PREFIX = "$JS.API"


def metadata_json(
    metadata: dict[str, str], server_version: str | None, api_level: int | None
) -> dict[str, str]:
    """A stream or consumer config's ``metadata`` as nats-server sends it: keys sorted (it is
    a Go map), plus ``_nats.ver`` / ``_nats.level`` when given (responses, never stored)."""
    md = dict(metadata)
    if server_version is not None:
        md[SERVER_VERSION_KEY] = server_version
    if api_level is not None:
        md[SERVER_LEVEL_KEY] = str(api_level)
    return dict(sorted(md.items()))


Action = Literal["create", "update", "restore"]


# ============================================================================= enums
class RetentionPolicy(StrEnum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


class StorageType(StrEnum):
    FILE = "file"
    MEMORY = "memory"


class Compression(StrEnum):
    NONE = "none"
    S2 = "s2"


class PersistMode(StrEnum):
    DEFAULT = "default"
    ASYNC = "async"


# ============================================================================= config types
@dataclass(slots=True)
class Placement:
    cluster: str = ""
    tags: list[str] = field(default_factory=list)
    preferred: str = ""

    def is_empty(self) -> bool:
        return not self.cluster and not self.tags and not self.preferred

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cluster:
            out["cluster"] = self.cluster
        if self.tags:
            out["tags"] = list(self.tags)
        if self.preferred:
            out["preferred"] = self.preferred
        return out


@dataclass(slots=True)
class SubjectTransformConfig:
    src: str = ""
    dest: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"src": self.src, "dest": self.dest}


@dataclass(slots=True)
class RePublish:
    src: str = ""
    dest: str = ""
    headers_only: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.src:
            out["src"] = self.src
        out["dest"] = self.dest
        if self.headers_only:
            out["headers_only"] = True
        return out


@dataclass(slots=True)
class ExternalStream:
    api: str = ""
    deliver: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"api": self.api, "deliver": self.deliver}


@dataclass(slots=True)
class StreamConsumerSource:
    name: str = ""
    deliver_subject: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        if self.deliver_subject:
            out["deliver_subject"] = self.deliver_subject
        return out


@dataclass(slots=True)
class StreamSource:
    """A mirror or source. ``opt_start_time`` is kept as RFC 3339 text (Go re-encoding)."""

    name: str = ""
    opt_start_seq: int = 0
    opt_start_time: str | None = None
    filter_subject: str = ""
    subject_transforms: list[SubjectTransformConfig] = field(default_factory=list)
    external: ExternalStream | None = None
    consumer: StreamConsumerSource | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.opt_start_seq:
            out["opt_start_seq"] = self.opt_start_seq
        if self.opt_start_time is not None:
            out["opt_start_time"] = self.opt_start_time
        if self.filter_subject:
            out["filter_subject"] = self.filter_subject
        if self.subject_transforms:
            out["subject_transforms"] = [t.to_json() for t in self.subject_transforms]
        if self.external is not None:
            out["external"] = self.external.to_json()
        if self.consumer is not None:
            out["consumer"] = self.consumer.to_json()
        return out


@dataclass(slots=True)
class ConsumerLimits:
    inactive_threshold: int = 0  # ns
    max_ack_pending: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.inactive_threshold:
            out["inactive_threshold"] = self.inactive_threshold
        if self.max_ack_pending:
            out["max_ack_pending"] = self.max_ack_pending
        return out


@dataclass(slots=True)
class StreamConfig:
    """A stream's configuration, field for field nats-server's ``StreamConfig``.

    Durations are nanoseconds (Go ``time.Duration``). The defaults are what nats-server fills
    in for a minimal create, so ``StreamConfig(name="S", subjects=["S"])`` equals the parse of
    ``{"name":"S"}`` apart from the ``_nats.req.level`` metadata the parse adds.
    """

    name: str
    description: str = ""
    subjects: list[str] = field(default_factory=list)
    retention: RetentionPolicy = RetentionPolicy.LIMITS
    max_consumers: int = -1
    max_msgs: int = -1
    max_bytes: int = -1
    max_age: int = 0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: DiscardPolicy = DiscardPolicy.OLD
    storage: StorageType = StorageType.FILE
    num_replicas: int = 1
    no_ack: bool = False
    duplicate_window: int = DEFAULT_DUPLICATE_WINDOW
    placement: Placement | None = None
    mirror: StreamSource | None = None
    sources: list[StreamSource] = field(default_factory=list)
    compression: Compression = Compression.NONE
    first_seq: int = 0
    subject_transform: SubjectTransformConfig | None = None
    republish: RePublish | None = None
    allow_direct: bool = False
    mirror_direct: bool = False
    discard_new_per_subject: bool = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    consumer_limits: ConsumerLimits = field(default_factory=ConsumerLimits)
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl: int = 0
    allow_msg_counter: bool = False
    allow_atomic: bool = False
    allow_msg_schedules: bool = False
    persist_mode: PersistMode = PersistMode.DEFAULT
    allow_batched: bool = False
    metadata: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ output
    def to_json(
        self, *, server_version: str | None = None, api_level: int | None = None
    ) -> dict[str, Any]:
        """The ``config`` object of STREAM.INFO / CREATE responses, in nats-server's field
        order with its ``omitempty`` rules.

        The metadata is what is stored (``_nats.req.level`` and the user's keys). nats-server
        adds ``_nats.ver`` and ``_nats.level`` to every response; pass ``server_version`` /
        ``api_level`` to add them (they are never stored).
        """
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        if self.subjects:
            out["subjects"] = list(self.subjects)
        out["retention"] = str(self.retention)
        out["max_consumers"] = self.max_consumers
        out["max_msgs"] = self.max_msgs
        out["max_bytes"] = self.max_bytes
        out["max_age"] = self.max_age
        out["max_msgs_per_subject"] = self.max_msgs_per_subject
        if self.max_msg_size:
            out["max_msg_size"] = self.max_msg_size
        out["discard"] = DiscardPolicy(self.discard).value
        out["storage"] = str(self.storage)
        out["num_replicas"] = self.num_replicas
        if self.no_ack:
            out["no_ack"] = True
        if self.duplicate_window:
            out["duplicate_window"] = self.duplicate_window
        if self.placement is not None:
            out["placement"] = self.placement.to_json()
        if self.mirror is not None:
            out["mirror"] = self.mirror.to_json()
        if self.sources:
            out["sources"] = [s.to_json() for s in self.sources]
        out["compression"] = str(self.compression)
        if self.first_seq:
            out["first_seq"] = self.first_seq
        if self.subject_transform is not None:
            out["subject_transform"] = self.subject_transform.to_json()
        if self.republish is not None:
            out["republish"] = self.republish.to_json()
        out["allow_direct"] = self.allow_direct
        out["mirror_direct"] = self.mirror_direct
        if self.discard_new_per_subject:
            out["discard_new_per_subject"] = True
        out["sealed"] = self.sealed
        out["deny_delete"] = self.deny_delete
        out["deny_purge"] = self.deny_purge
        out["allow_rollup_hdrs"] = self.allow_rollup_hdrs
        out["consumer_limits"] = self.consumer_limits.to_json()
        out["allow_msg_ttl"] = self.allow_msg_ttl
        if self.subject_delete_marker_ttl:
            out["subject_delete_marker_ttl"] = self.subject_delete_marker_ttl
        if self.allow_msg_counter:
            out["allow_msg_counter"] = True
        if self.allow_atomic:
            out["allow_atomic"] = True
        if self.allow_msg_schedules:
            out["allow_msg_schedules"] = True
        if self.persist_mode != PersistMode.DEFAULT:
            out["persist_mode"] = str(self.persist_mode)
        if self.allow_batched:
            out["allow_batched"] = True
        md = metadata_json(self.metadata, server_version, api_level)
        if md:
            out["metadata"] = md
        return out

    def to_store_config(self) -> StoreConfig:
        """The limits the message store enforces itself."""
        return StoreConfig(
            name=self.name,
            subjects=list(self.subjects),
            max_msgs=self.max_msgs,
            max_bytes=self.max_bytes,
            max_age_ns=self.max_age,
            max_msgs_per_subject=self.max_msgs_per_subject,
            max_msg_size=self.max_msg_size,
            discard=self.discard,
            discard_new_per_subject=self.discard_new_per_subject,
            first_seq=self.first_seq,
            allow_msg_ttl=self.allow_msg_ttl,
            compress=self.compression == Compression.S2,
        )

    def copy(self) -> StreamConfig:
        return copy.deepcopy(self)


def _zero_config() -> StreamConfig:
    """Go's zero ``StreamConfig``: what the JSON decode starts from."""
    return StreamConfig(
        name="",
        max_consumers=0,
        max_msgs=0,
        max_bytes=0,
        max_msg_size=0,
        max_msgs_per_subject=0,
        num_replicas=0,
        duplicate_window=0,
    )


class AccountLimitsLike(Protocol):
    """The account limits ``checkStreamCfg`` looks at (``JetStreamAccountLimits``)."""

    @property
    def max_bytes_required(self) -> bool: ...

    @property
    def memory_max_stream_bytes(self) -> int: ...

    @property
    def storage_max_stream_bytes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """A ready-made :class:`AccountLimitsLike`; 0 or -1 means unlimited."""

    max_bytes_required: bool = False
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0


# ============================================================================= Go JSON decode
