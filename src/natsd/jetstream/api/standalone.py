"""``$JS.API`` requests a standalone natsd can only refuse, answered as nats-server answers.

* Cluster requests. A standalone nats-server answers stream and consumer leader step-down,
  stream peer remove / evacuate and stream cancel-move with ``JSClusterRequiredErr``
  (503 / 10010), before it looks at ``Nats-Required-Api-Level``. It does not answer
  ``META.LEADER.STEPDOWN``, ``META.RESCUE``, ``SERVER.REMOVE``, ``SERVER.EVACUATE`` or
  ``ACCOUNT.*`` at all (those are system-account requests it only serves in a cluster, and
  ``apiDispatch`` drops them for client accounts), so neither does natsd: they are not in
  the route table.
* Snapshot and restore. nats-server implements them; natsd does not yet. The request is
  checked exactly as nats-server checks it (so a bad request gets nats-server's error), then
  refused at once with nats-server's own "snapshot failed" / "restore failed" errors, rather
  than left unanswered.
"""

from __future__ import annotations

from typing import Any

from natsd.jetstream.config.stream_config import StreamConfig, check_restore_config
from natsd.jetstream.config.stream_unmarshal import RESTORE_SCHEMA
from natsd.jetstream.config.subject_mapping import _is_valid_publish_subject
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.gotyped import (
    BOOL,
    INT,
    STRING,
    StructT,
    decode_request,
    is_empty_request,
)

__all__ = ["cluster_required", "stream_restore", "stream_snapshot"]

NO_SNAPSHOTS = "stream snapshots are not supported by natsd yet"
NO_RESTORES = "stream restores are not supported by natsd yet"

_SNAPSHOT = StructT(
    "server.JSApiStreamSnapshotRequest",
    {
        "deliver_subject": ("deliver_subject", STRING),
        "no_consumers": ("no_consumers", BOOL),
        "chunk_size": ("chunk_size", INT),
        "window_size": ("window_size", INT),
        "jsck": ("jsck", BOOL),
    },
    lambda: {"deliver_subject": "", "no_consumers": False, "chunk_size": 0, "window_size": 0},
)


def cluster_required(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    """Every request only a JetStream cluster can serve."""
    raise E.JSClusterRequiredErr()


def stream_snapshot(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    """``jsStreamSnapshotRequest``'s checks, in its order, then the refusal."""
    if is_empty_request(data):
        raise E.JSBadRequestErr()
    if not args or args[0] not in ja.streams:
        raise E.JSStreamNotFoundErr()
    req = decode_request(data, _SNAPSHOT)
    if not _is_valid_publish_subject(req["deliver_subject"]):
        raise E.JSSnapshotDeliverSubjectInvalidErr()
    raise E.JSStreamSnapshotErrF(err=NO_SNAPSHOTS)


def stream_restore(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    """``jsStreamRestoreRequest``'s checks, in its order, then the refusal. (Its account
    limit check, which needs the stream's state, is not made: the answer is a refusal
    either way.)"""
    if is_empty_request(data):
        raise E.JSBadRequestErr()
    req = decode_request(data, RESTORE_SCHEMA)
    cfg: StreamConfig = req["config"]
    name = args[0] if args else ""
    if not cfg.name:
        cfg.name = name
    if cfg.name != name:
        raise E.JSStreamMismatchErr()
    if "\\" in name or "/" in name:
        raise E.JSStreamNameContainsPathSeparatorsErr()
    check_restore_config(cfg)
    if name in ja.streams:
        raise E.JSStreamNameExistRestoreFailedErr()
    raise E.JSStreamRestoreErrF(err=NO_RESTORES)
