"""Message schedules (ADR-51: ``allow_msg_schedules``, ``Nats-Schedule``), nats-server 2.15.1
against natsd: the stream config rules, every publish's PubAck (nats-server's errors in its
order), and the schedules firing in real time: ``@at`` (future and past), ``@every``, cron
with a time zone, a source subject with rollup, a client's cancel, a schedule ended by a
plain message, by a delete and by interest retention. What each server stored is read back
message by message (subject, header block, body) and compared; the time of a repeating
schedule's ``Nats-Schedule-Next`` is checked for its form (a whole second, in the schedule's
zone) and then masked, as the two servers fire in different seconds."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import JsRecorder, js_server_pair, run_scenario
from .test_counters import raw_pub
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

T = 10.0
FUT = "@at 2030-01-01T00:00:00Z"
F_SUBJECTS = ["sch.>", "tgt.>", "src.>"]
_WHOLE_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)")


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


def sched(pattern: str, target: str, **more: str) -> dict[str, str]:
    h = {"Nats-Schedule": pattern, "Nats-Schedule-Target": target}
    h.update({k.replace("_", "-"): v for k, v in more.items()})
    return h


def at(seconds: float) -> str:
    """``@at`` this many seconds from now, in RFC 3339 with milliseconds."""
    t = datetime.now(UTC) + timedelta(seconds=seconds)
    return "@at " + t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _mask_next(hdrs: str) -> str:
    """A repeating schedule's Nats-Schedule-Next: its form checked, its time masked."""

    def repl(m: re.Match[str]) -> str:
        value = m.group(1)
        if value == "purge":
            return m.group(0)
        ok = _WHOLE_SECOND.fullmatch(value)
        zone = value[-6:] if ok and value[-1] != "Z" else "Z"
        return f"Nats-Schedule-Next: <{'second' if ok else 'bad: ' + value}{zone}>"

    return re.sub(r"Nats-Schedule-Next: ([^\r]*)", repl, hdrs)


async def stored(js: JsRecorder, label: str, stream: str) -> list[Any]:
    """Every message of ``stream`` by sequence: (seq, subject, header block, body)."""
    info = await js.req("", f"STREAM.INFO.{stream}", record=False)
    last = info["state"]["last_seq"]
    out: list[Any] = []
    for seq in range(1, last + 1):
        r = await js.raw_request(f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        got = json.loads(r.data)
        if "message" not in got:
            continue
        m = got["message"]
        hdrs = base64.b64decode(m.get("hdrs", "")).decode()
        data = base64.b64decode(m.get("data", "")).decode()
        out.append((seq, m["subject"], _mask_next(hdrs), data))
    js.note(label, out)
    js.note(label + " state", {k: info["state"].get(k) for k in ("messages", "first_seq")})
    return out


async def count(js: JsRecorder, stream: str, subject: str) -> int:
    info = await js.req("", f"STREAM.INFO.{stream}", {"subjects_filter": subject}, record=False)
    return int((info["state"].get("subjects") or {}).get(subject, 0))


async def wait_count(js: JsRecorder, stream: str, subject: str, n: int, within: float) -> int:
    """Polls until ``subject`` holds at least ``n`` messages (or ``within`` passed)."""
    deadline = time.monotonic() + within
    while True:
        got = await count(js, stream, subject)
        if got >= n or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.05)


async def make_f(js: JsRecorder, name: str = "F", **more: Any) -> None:
    cfg = {"name": name, "subjects": F_SUBJECTS, "allow_msg_schedules": True,
           "allow_msg_ttl": True, **more}  # fmt: skip
    await js.req("create " + name, f"STREAM.CREATE.{name}", cfg, timeout=T)


async def test_schedule_stream_config(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        base = {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True}
        await js.req("create", "STREAM.CREATE.S", base, timeout=T)
        for label, more in (
            ("discard new", {"discard": "new"}),
            ("rollup off, pedantic", {"allow_rollup_hdrs": False, "pedantic": True}),
            ("deny purge", {"deny_purge": True}),
            ("rollup and deny purge", {"allow_rollup_hdrs": True, "deny_purge": True}),
            ("counter", {"allow_msg_counter": True}),
            ("mirror", {"mirror": {"name": "S"}, "subjects": []}),
            ("sources", {"sources": [{"name": "S"}]}),
            ("memory, workqueue, ttl", {"storage": "memory", "retention": "workqueue",
                                        "allow_msg_ttl": True}),
        ):  # fmt: skip
            await js.req(label, "STREAM.CREATE.X", {**base, "name": "X", **more}, timeout=T)
            await js.req("", "STREAM.DELETE.X", record=False, timeout=T)
        off = {k: v for k, v in base.items() if k != "allow_msg_schedules"}
        await js.req("turned off", "STREAM.UPDATE.S", {**off, "allow_msg_schedules": False},
                     timeout=T)  # fmt: skip
        await js.req("left out", "STREAM.UPDATE.S", off, timeout=T)
        await js.req("plain", "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}, timeout=T)
        await js.req("turned on", "STREAM.UPDATE.P",
                     {"name": "P", "subjects": ["p.>"], "allow_msg_schedules": True},
                     timeout=T)  # fmt: skip
        await js.req("info", "STREAM.INFO.S", timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    assert ref[0][1]["config"]["metadata"]["_nats.req.level"] == "2"
    assert ref[0][1]["config"]["allow_rollup_hdrs"] is True
    assert_same(ref, impl)


async def test_schedule_publish_checks(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await make_f(js, "V")
        await js.req("no ttl", "STREAM.CREATE.N",
                     {"name": "N", "subjects": ["n.>", "nt.>"], "allow_msg_schedules": True},
                     timeout=T)  # fmt: skip
        await js.req("disabled", "STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"]}, timeout=T)
        cases: list[tuple[str, str, dict[str, str]]] = [
            ("ok", "sch.a", sched(FUT, "tgt.a")),
            ("no target", "sch.b", {"Nats-Schedule": FUT}),
            ("target is the subject", "sch.x", sched(FUT, "sch.x")),
            ("target wildcard", "sch.b", sched(FUT, "tgt.*")),
            ("target full wildcard", "sch.b", sched(FUT, "tgt.>")),
            ("target outside", "sch.b", sched(FUT, "other")),
            ("target another schedule's subject", "sch.c", sched(FUT, "sch.a")),
            ("ttl 5m", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_TTL="5m")),
            ("ttl never", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_TTL="never")),
            ("ttl 30", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_TTL="30")),
            ("ttl 500ms", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_TTL="500ms")),
            ("ttl abc", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_TTL="abc")),
            ("schedule rollup all", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_Rollup="all")),
            ("schedule rollup sub", "sch.d", sched(FUT, "tgt.d", Nats_Schedule_Rollup="sub")),
            ("rollup all", "sch.d", sched(FUT, "tgt.d", Nats_Rollup="all")),
            ("rollup sub", "sch.d", sched(FUT, "tgt.d", Nats_Rollup="sub")),
            ("source is target", "sch.e", sched(FUT, "tgt.e", Nats_Schedule_Source="tgt.e")),
            ("source is subject", "sch.e", sched(FUT, "tgt.e", Nats_Schedule_Source="sch.e")),
            ("source wildcard", "sch.e", sched(FUT, "tgt.e", Nats_Schedule_Source="src.*")),
            ("source outside", "sch.e", sched(FUT, "tgt.e", Nats_Schedule_Source="zzz")),
            ("source ok", "sch.e", sched(FUT, "tgt.e", Nats_Schedule_Source="src.e")),
            ("pattern junk", "sch.f", sched("junk", "tgt.f")),
            ("junk with bad ttl", "sch.f", sched("junk", "tgt.f", Nats_Schedule_TTL="abc")),
            ("bad ttl before target", "sch.f", {"Nats-Schedule": FUT, "Nats-Schedule-TTL": "abc"}),
            ("@every 999ms", "sch.f", sched("@every 999ms", "tgt.f")),
            ("@every 1h30m", "sch.f", sched("@every 1h30m", "tgt.f")),
            ("@every 1d", "sch.f", sched("@every 1d", "tgt.f")),
            ("cron 5 fields", "sch.f", sched("30 4 * * *", "tgt.f")),
            ("cron never matches", "sch.f", sched("0 0 0 30 2 *", "tgt.f")),
            ("cron day 7", "sch.f", sched("0 0 0 * * 7", "tgt.f")),
            ("cron names", "sch.f", sched("0 30 4 1,15 feb-mar mon", "tgt.f")),
            ("@hourly", "sch.f", sched("@hourly", "tgt.f")),
            ("@HOURLY", "sch.f", sched("@HOURLY", "tgt.f")),
            (
                "zone with cron",
                "sch.f",
                sched("0 0 9 * * *", "tgt.f", Nats_Schedule_Time_Zone="Europe/Amsterdam"),
            ),
            (
                "zone with @at",
                "sch.f",
                sched(FUT, "tgt.f", Nats_Schedule_Time_Zone="Europe/Amsterdam"),
            ),
            (
                "zone lower case utc",
                "sch.f",
                sched("0 0 9 * * *", "tgt.f", Nats_Schedule_Time_Zone="utc"),
            ),
            (
                "bad zone, junk pattern",
                "sch.f",
                sched("junk", "tgt.f", Nats_Schedule_Time_Zone="Not/A/Zone"),
            ),
            ("@at without zone", "sch.f", sched("@at 2030-01-01T00:00:00", "tgt.f")),
            ("@at offset", "sch.f", sched("@at 2030-01-01T00:00:00-05:00", "tgt.f")),
            (
                "next is a time",
                "tgt.x",
                {"Nats-Schedule-Next": "2030-01-01T00:00:00Z", "Nats-Scheduler": "sch.a"},
            ),
            ("next purge alone", "tgt.x", {"Nats-Schedule-Next": "purge"}),
            (
                "purge on itself",
                "sch.a",
                {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.a"},
            ),
            ("purge wildcard", "tgt.x", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.*"}),
            ("scheduler alone", "tgt.x", {"Nats-Scheduler": "sch.a"}),
            ("PURGE", "tgt.x", {"Nats-Schedule-Next": "PURGE", "Nats-Scheduler": "sch.a"}),
            ("plain on tgt.p", "tgt.p", {"X": "1"}),
            (
                "purge a plain subject",
                "tgt.x",
                {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "tgt.p"},
            ),
            (
                "purge an empty subject",
                "tgt.x",
                {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.none"},
            ),
            (
                "new schedule that purges another",
                "sch.q",
                {**sched(FUT, "tgt.q"), "Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.e"},
            ),
            ("with msg id", "sch.m", {**sched(FUT, "tgt.m"), "Nats-Msg-Id": "m1"}),
            ("with msg id again", "sch.m", {**sched(FUT, "tgt.m"), "Nats-Msg-Id": "m1"}),
        ]
        for label, subject, h in cases:
            await js.pub(label, subject, b"x", h, timeout=T)
        await js.pub("ttl on a stream without TTLs", "n.a",
                     b"x", sched(FUT, "nt.a", Nats_Schedule_TTL="5m"), timeout=T)  # fmt: skip
        await js.pub("bad ttl on a stream without TTLs", "n.a",
                     b"x", sched(FUT, "nt.a", Nats_Schedule_TTL="abc"), timeout=T)  # fmt: skip
        for label, h in (
            ("disabled: valid", sched(FUT, "d.t")),
            ("disabled: junk", sched("junk", "d.t")),
            ("disabled: bad zone only", {"Nats-Schedule-Time-Zone": "Not/A/Zone"}),
            ("disabled: purge", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "d.s"}),
            ("disabled: no pattern", {"Nats-Schedule-Target": "d.s", "Nats-Schedule-TTL": "junk"}),
            ("disabled: lower-case name", {"nats-schedule": FUT}),
        ):
            await js.pub(label, "d.a", b"x", h, timeout=T)
        block = b"NATS/1.0\r\nNats-Schedule: @every 1s \r\nNats-Schedule-Target: tgt.t\r\n\r\n"
        await raw_pub(js, "trailing space in the pattern", "sch.t", block, b"x")
        block = b"NATS/1.0\r\nNats-Schedule-Target: tgt.t\r\nNats-Schedule: @every 1s\r\n\r\n"
        await raw_pub(js, "target first", "sch.t", block, b"x")
        block = b"NATS/1.0\r\nnats-schedule: @every 1s\r\nNats-Schedule-Target: tgt.t\r\n\r\n"
        await raw_pub(js, "lower-case name", "sch.u", block, b"x")
        await stored(js, "stored", "V")

    ref, impl = await run_scenario(js_pair, sc, timeout=120)
    assert ref[3][1] == {"stream": "V", "seq": 1}
    assert_same(ref, impl)


async def test_schedules_fire(js_pair: ServerPair) -> None:
    """``@at`` soon and in the past, ``@every``, cron in a zone; the produced messages."""

    async def sc(js: JsRecorder) -> None:
        await make_f(js)
        await js.pub("at", "sch.a", b"payload-a",
                     {**sched(at(1.2), "tgt.a", Nats_Schedule_TTL="5s"), "X-Custom": "v1",
                      "Nats-Msg-Id": "m1", "Nats-TTL": "1h", "Nats-Expected-Stream": "F"},
                     timeout=T)  # fmt: skip
        await js.pub("past", "sch.b", b"past", sched("@at 2000-01-01T00:00:00Z", "tgt.b"))
        js.note("past fired", await wait_count(js, "F", "tgt.b", 1, 5))
        js.note("at fired", await wait_count(js, "F", "tgt.a", 1, 5))
        await js.pub("every", "sch.c", b"tick", {**sched("@every 1s", "tgt.c"), "H": "x"})
        await js.pub(
            "cron",
            "sch.e",
            b"cron",
            sched("*/2 * * * * *", "tgt.e", Nats_Schedule_Time_Zone="Asia/Tokyo"),
        )
        js.note("every fired twice", await wait_count(js, "F", "tgt.c", 2, 5) >= 2)
        js.note("cron fired", await wait_count(js, "F", "tgt.e", 1, 5) >= 1)
        # the schedules stop: their messages go (a delete, a purge by subject)
        seq_c = (await js.req("", "STREAM.MSG.GET.F", {"last_by_subj": "sch.c"},
                              record=False))["message"]["seq"]  # fmt: skip
        await js.req("delete every", "STREAM.MSG.DELETE.F", {"seq": seq_c})
        await js.req("purge cron", "STREAM.PURGE.F", {"filter": "sch.e"})
        await js.req("", "STREAM.PURGE.F", {"filter": "tgt.>"}, record=False)
        await asyncio.sleep(2.2)
        js.note(
            "nothing fired after", await count(js, "F", "tgt.c") + await count(js, "F", "tgt.e")
        )
        info = await js.req("", "STREAM.INFO.F", record=False)
        js.note("state", {k: info["state"][k] for k in ("messages", "first_seq")})

    ref, impl = await run_scenario(js_pair, sc, timeout=60)
    notes = dict(ref)
    assert notes["at fired"] == 1 and notes["every fired twice"] is True
    assert_same(ref, impl)


async def test_schedule_produced_messages(js_pair: ServerPair) -> None:
    """What a firing stores: header blocks, TTL, rollup, a source subject's last message."""

    async def sc(js: JsRecorder) -> None:
        await make_f(js)
        await js.pub("at", "sch.a", b"payload-a",
                     {**sched(at(0.6), "tgt.a", Nats_Schedule_TTL="5s"), "X-Custom": "v1",
                      "Nats-Msg-Id": "m1", "Nats-TTL": "1h", "Nats-Expected-Stream": "F",
                      "Nats-Schedule-Whatever": "w", "Nats-Expected-Last-Msg-Id": "",
                      "nats-schedule-lower": "l"}, timeout=T)  # fmt: skip
        await js.pub(
            "sample 1", "src.g", b"sample-1", {"S-Hdr": "s1", "Nats-Msg-Id": "s1", "Nats-TTL": "1h"}
        )
        await js.pubs("old targets", "tgt.g", 2, b"old")
        await js.pub("sampling", "sch.g", b"own-body",
                     {**sched("@every 1s", "tgt.g", Nats_Schedule_Source="src.g",
                              Nats_Schedule_Rollup="sub", Nats_Schedule_TTL="10s"),
                      "Own": "o"})  # fmt: skip
        await js.pub(
            "fallback",
            "sch.h",
            b"own-h",
            {**sched(at(0.4), "tgt.h", Nats_Schedule_Source="src.none"), "Own": "h"},
        )
        js.note("sampled", await wait_count(js, "F", "tgt.g", 1, 5))
        js.note("fallback fired", await wait_count(js, "F", "tgt.h", 1, 5))
        js.note("at fired", await wait_count(js, "F", "tgt.a", 1, 5))
        await js.req("stop sampling", "STREAM.PURGE.F", {"filter": "sch.g"})
        await asyncio.sleep(1.2)  # a firing of sch.g in flight lands
        await stored(js, "stored", "F")

    ref, impl = await run_scenario(js_pair, sc, timeout=60)
    assert any(m[1] == "tgt.g" for m in dict(ref)["stored"])
    assert_same(ref, impl)


async def test_schedule_cancel_and_end(js_pair: ServerPair) -> None:
    """A client's cancel (Nats-Schedule-Next: purge), a replacement, a plain message that
    ends a schedule, and an interest stream that keeps no schedule."""

    async def sc(js: JsRecorder) -> None:
        await make_f(js)
        await js.pub("to cancel", "sch.f", b"early", sched(at(1.5), "tgt.f"))
        await js.pub("cancel, wrong sequence", "tgt.x", b"",
                     {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.f",
                      "Nats-Expected-Last-Subject-Sequence": "99",
                      "Nats-Expected-Last-Subject-Sequence-Subject": "sch.f"})  # fmt: skip
        await js.pub("cancel", "tgt.f", b"early",
                     {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.f",
                      "Nats-Expected-Last-Subject-Sequence": "1",
                      "Nats-Expected-Last-Subject-Sequence-Subject": "sch.f"})  # fmt: skip
        await js.pub("replaced", "sch.r", b"first", sched(at(0.5), "tgt.r1"))
        await js.pub("replacement", "sch.r", b"second", sched(at(0.8), "tgt.r2"))
        await js.pub("every, then ended", "sch.i", b"i", sched("@every 1s", "tgt.i"))
        await js.pub("plain ends it", "sch.i", b"plain")
        js.note("replacement fired", await wait_count(js, "F", "tgt.r2", 1, 5))
        await asyncio.sleep(1.6)
        for subject in ("tgt.f", "tgt.r1", "tgt.r2", "tgt.i"):
            js.note(subject, await count(js, "F", subject))
        await stored(js, "stored", "F")
        await js.req("interest", "STREAM.CREATE.I",
                     {"name": "I", "subjects": ["i.>"], "retention": "interest",
                      "allow_msg_schedules": True})  # fmt: skip
        await js.pub("interest schedule", "i.s", b"x", sched("@at 2000-01-01T00:00:00Z", "i.t"))
        await asyncio.sleep(0.6)
        await js.state("interest state", "I")

    ref, impl = await run_scenario(js_pair, sc, timeout=60)
    notes = dict(ref)
    # tgt.f holds the cancel itself; the replaced schedule and the ended one never fired
    assert notes["tgt.f"] == 1 and notes["tgt.r2"] == 1
    assert notes["tgt.r1"] == 0 and notes["tgt.i"] == 0
    assert_same(ref, impl)
