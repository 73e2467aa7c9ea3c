"""The publish checks of message schedules on a stream that allows them
(``jetstream/stream/schedule_check.py``), case by case as nats-server 2.15.1 answered them
(stream V: subjects ``sch.>``, ``tgt.>``, ``src.>``, schedules and TTLs on)."""

from __future__ import annotations

import pytest

from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.stream.schedule_check import Scheduled, check_schedule
from natsd.jetstream.wire.errors import ApiError

FUT = "@at 2030-01-01T00:00:00Z"
V = StreamConfig(name="V", subjects=["sch.>", "tgt.>", "src.>"], allow_msg_schedules=True,
                 allow_msg_ttl=True, allow_rollup_hdrs=True)  # fmt: skip
NO_TTL = StreamConfig(name="V", subjects=["sch.>", "tgt.>", "src.>"], allow_msg_schedules=True,
                      allow_rollup_hdrs=True)  # fmt: skip
LAST = {"sch.a": True, "tgt.f": False}


def check(headers: dict[str, str], subject: str = "sch.a", cfg: StreamConfig = V) -> object:
    hdr = b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
    return check_schedule(cfg, hdr + b"\r\n", subject, 1_800_000_000 * 10**9, LAST.get)


def code(got: object) -> int:
    return got.err_code if isinstance(got, ApiError) else 0


@pytest.mark.parametrize(
    ("headers", "subject", "want"),
    [
        ({"Nats-Schedule": FUT}, "sch.a", 10190),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "sch.x"}, "sch.x", 10190),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.*"}, "sch.a", 10190),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.>"}, "sch.a", 10190),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "other"}, "sch.a", 10190),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-TTL": "500ms"},
         "sch.a", 10191),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-TTL": "abc"},
         "sch.a", 10191),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-Rollup": "all"},
         "sch.a", 10192),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Rollup": "all"},
         "sch.a", 10192),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-Source": "tgt.a"},
         "sch.a", 10203),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-Source": "sch.x"},
         "sch.x", 10203),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-Source": "src.*"},
         "sch.a", 10203),
        ({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-Source": "zzz"},
         "sch.a", 10203),
        ({"Nats-Schedule-Next": "2030-01-01T00:00:00Z", "Nats-Scheduler": "sch.a"}, "tgt.x", 10212),
        ({"Nats-Schedule-Next": "purge"}, "tgt.x", 10212),
        ({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.a"}, "sch.a", 10212),
        ({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.*"}, "tgt.x", 10212),
        ({"Nats-Scheduler": "sch.a"}, "tgt.x", 10212),
        ({"Nats-Schedule-Next": "PURGE", "Nats-Scheduler": "sch.a"}, "tgt.x", 10212),
        ({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "tgt.f"}, "tgt.x", 10212),
        ({"Nats-Schedule": "junk", "Nats-Schedule-TTL": "abc"}, "sch.a", 10189),
        ({"Nats-Schedule": FUT, "Nats-Schedule-TTL": "abc"}, "sch.a", 10191),
        ({"Nats-Schedule": "0 * * * * *", "Nats-Schedule-Time-Zone": "utc",
          "Nats-Schedule-Target": "tgt.a"}, "sch.a", 10223),
        ({"Nats-Schedule": "garbage", "Nats-Schedule-Time-Zone": ""}, "sch.a", 10223),
    ],
)  # fmt: skip
def test_refused_as_nats_server_refuses(headers: dict[str, str], subject: str, want: int) -> None:
    assert code(check(headers, subject)) == want


def test_accepted() -> None:
    ok = check({"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a"})
    assert ok == Scheduled(schedule=True, add_rollup=True)
    for ttl in ("5m", "never", "30"):
        headers = {"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-TTL": ttl}
        got = check(headers)
        assert isinstance(got, Scheduled), ttl
    other_schedule = check({"Nats-Schedule": FUT, "Nats-Schedule-Target": "sch.b"})
    assert isinstance(other_schedule, Scheduled)
    with_rollup = check(
        {"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Rollup": "sub"}
    )
    assert with_rollup == Scheduled(schedule=True, add_rollup=False)
    cancel = check({"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.none"}, "tgt.x")
    assert cancel == Scheduled(purge="sch.none")
    assert check({}, "tgt.x") == Scheduled()
    assert check({"Nats-Schedule": ""}, "sch.a") == Scheduled()  # (empty: a plain message)


def test_ttl_needs_message_ttls() -> None:
    headers = {"Nats-Schedule": FUT, "Nats-Schedule-Target": "tgt.a", "Nats-Schedule-TTL": "5m"}
    assert code(check(headers, cfg=NO_TTL)) == 10166
    headers["Nats-Schedule-TTL"] = "abc"
    assert code(check(headers, cfg=NO_TTL)) == 10191
