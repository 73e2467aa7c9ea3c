"""The publish checks of message schedules on a stream with ``allow_msg_schedules``
(nats-server 2.14, ``processJetStreamMsg``; /work/notes/schedules-spec.md §2.2), in
nats-server's order, for ``check_schedule``: the schedule headers of a publish, what its
stored header block must add (a schedule replaces the one before it on its subject:
``Nats-Rollup: sub``), or the error. A stream without schedules answers with
``headers.check_schedule_headers`` (everything is "disabled" there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from natsd.core.headers import slice_header
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.config.subject_mapping import _is_valid_publish_subject, subjects_collide
from natsd.jetstream.stream.headers import parse_ttl
from natsd.jetstream.stream.schedule_pattern import load_zone, next_fire
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError

__all__ = ["Scheduled", "check_schedule"]

H_SCHEDULE: Final = "Nats-Schedule"
H_TARGET: Final = "Nats-Schedule-Target"
H_TTL: Final = "Nats-Schedule-TTL"
H_ZONE: Final = "Nats-Schedule-Time-Zone"
H_SOURCE: Final = "Nats-Schedule-Source"
H_ROLLUP: Final = "Nats-Schedule-Rollup"
H_NEXT: Final = "Nats-Schedule-Next"
H_SCHEDULER: Final = "Nats-Scheduler"
H_MSG_ROLLUP: Final = "Nats-Rollup"


@dataclass
class Scheduled:
    """A publish that passed: ``schedule`` (it is one: its stored headers gain
    ``Nats-Rollup: sub`` when ``add_rollup``), and ``purge`` (the subject of a schedule it
    cancels: ``Nats-Schedule-Next: purge`` with ``Nats-Scheduler``)."""

    schedule: bool = False
    add_rollup: bool = False
    purge: str = ""


def check_schedule(
    cfg: StreamConfig,
    hdr: bytes,
    subject: str,
    ts_ns: int,
    last_is_schedule: Callable[[str], bool | None],
) -> Scheduled | ApiError:
    """The schedule headers of a publish on ``subject`` (at ``ts_ns``) to a stream with
    schedules; ``last_is_schedule(subject)``: does that subject's last message carry a
    schedule (None: it has none). Values are read as nats-server's ``sliceHeader`` reads
    them from the header block: the first line with the name in this case, leading spaces
    skipped and trailing ones kept (``@every 1s `` is not a pattern)."""

    def get(key: str) -> str | None:
        v = slice_header(hdr, key.encode())
        return None if v is None else v.decode("utf-8", "replace")

    out = Scheduled()
    zone = get(H_ZONE)
    if zone is not None and load_zone(zone) is None:
        return E.JSMessageSchedulesTimeZoneInvalidErr()
    pattern = get(H_SCHEDULE) or ""
    if pattern:
        if next_fire(pattern, zone, ts_ns, ts_ns) is None:
            return E.JSMessageSchedulesPatternInvalidErr()
        ttl_s = get(H_TTL)
        ttl = parse_ttl(ttl_s) if ttl_s else None
        if ttl_s and ttl is None:
            return E.JSMessageSchedulesTTLInvalidErr()
        rollup = get(H_ROLLUP)
        if rollup and rollup != "sub":
            return E.JSMessageSchedulesRollupInvalidErr()
        if ttl_s and not cfg.allow_msg_ttl:
            return E.JSMessageTTLDisabledErr()
        target = get(H_TARGET) or ""
        if not target or target == subject or not _is_valid_publish_subject(target):
            return E.JSMessageSchedulesTargetInvalidErr()
        source = get(H_SOURCE) or None
        if source is not None and (
            source in (target, subject) or not _is_valid_publish_subject(source)
        ):
            return E.JSMessageSchedulesSourceInvalidErr()
        subjects = cfg.subjects or [cfg.name]
        if not any(subjects_collide(target, s) for s in subjects):
            return E.JSMessageSchedulesTargetInvalidErr()
        if source is not None and not any(subjects_collide(source, s) for s in subjects):
            return E.JSMessageSchedulesSourceInvalidErr()
        msg_rollup = get(H_MSG_ROLLUP)
        if msg_rollup and msg_rollup != "sub":
            return E.JSMessageSchedulesRollupInvalidErr()
        out.schedule = True
        out.add_rollup = not msg_rollup
    nxt = get(H_NEXT)
    scheduler = get(H_SCHEDULER)
    if nxt:
        if nxt != "purge":
            return E.JSMessageSchedulesSchedulerInvalidErr()
        if not scheduler or scheduler == subject or not _is_valid_publish_subject(scheduler):
            return E.JSMessageSchedulesSchedulerInvalidErr()
        if last_is_schedule(scheduler) is False:
            return E.JSMessageSchedulesSchedulerInvalidErr()
        out.purge = scheduler
    elif scheduler:
        return E.JSMessageSchedulesSchedulerInvalidErr()
    return out
