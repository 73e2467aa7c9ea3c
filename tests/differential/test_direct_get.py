"""Differential tests of DIRECT.GET batch and ``multi_last`` requests (nats-server vs natsd).

A batch or multi_last direct get answers with several messages on the reply subject and
ends with a ``204 EOB`` status; each reply is recorded as ``{status, headers, payload}``
with the raw header order kept (``Nats-Time-Stamp`` masked), so the comparison covers
``Nats-Num-Pending``/``Nats-Last-Sequence``/``Nats-UpTo-Sequence`` values and ordering,
the statuses of refused requests, and where a batch stops (``batch``, ``max_bytes``).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import API, JsRecorder, js_server_pair, parse_header_block, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

#: How long to wait for one more reply of a multi-reply direct get.
REPLY_WAIT = 1.0


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


class Batch:
    """Direct gets whose every reply is recorded with its raw header block."""

    def __init__(self, js: JsRecorder) -> None:
        self.js = js
        self.nc = js.nc
        self._raw: dict[str, list[bytes | None]] = defaultdict(list)
        orig = self.nc._process_msg

        async def process_msg(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes):  # type: ignore[no-untyped-def]
            self._raw[subject.decode()].append(headers or None)
            return await orig(sid, subject, reply, data, headers)

        self.nc._process_msg = process_msg

    async def get(
        self, label: str, subject: str, body: bytes | str | dict[str, Any] | None = b""
    ) -> list[Any]:
        """Send one direct get; collect replies until a status reply (EOB or error), a
        single plain message for a non-batch request, or a quiet REPLY_WAIT."""
        if not subject.startswith("$"):
            subject = f"{API}.DIRECT.GET.{subject}"
        if isinstance(body, dict):
            payload = json.dumps(body).encode()
        elif isinstance(body, str):
            payload = body.encode()
        else:
            payload = body or b""
        multi = isinstance(body, dict) and bool(body.get("batch") or body.get("multi_last"))
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        await self.nc.publish(subject, payload, reply=inbox)
        out: list[Any] = []
        while True:
            try:
                msg = await sub.next_msg(timeout=REPLY_WAIT)
            except TimeoutError:
                if self.js.reference:  # nats-server always ends with a reply or an EOB
                    raise TimeoutError(f"{label}: no (further) reply after {out}") from None
                out.append("<timeout>")
                break
            raw = self._raw[inbox][len(out)] if len(self._raw[inbox]) > len(out) else None
            status, hdrs = parse_header_block(raw)
            out.append(
                {
                    "status": status,
                    "headers": hdrs,
                    "payload": msg.data.decode("utf-8", "backslashreplace"),
                }
            )
            if status != "NATS/1.0" or not multi:
                break
        await sub.unsubscribe()
        self.js.note(label, out)
        return out

    async def msg_time(self, stream: str, seq: int) -> str:
        """The RFC 3339 time of a stored message (differs per server, so not recorded)."""
        msg = await self.nc.request(
            f"{API}.STREAM.MSG.GET.{stream}", json.dumps({"seq": seq}).encode(), timeout=2
        )
        return str(json.loads(msg.data)["message"]["time"])


async def _stream(js: JsRecorder, storage: str, name: str = "B") -> None:
    """Eight messages on b.a / b.b / b.c.d / b.e, some with headers, seq 1 and 6 deleted."""
    subj = name.lower()
    await js.req(
        "create",
        f"STREAM.CREATE.{name}",
        {"name": name, "subjects": [f"{subj}.>"], "allow_direct": True, "storage": storage},
    )
    msgs: list[tuple[str, str, dict[str, str] | None]] = [
        ("a", "one", None),
        ("b", "two", {"X-A": "1", "X-B": "b value"}),
        ("a", "three", None),
        ("c.d", "four", {"Nats-Msg-Id": "m4"}),
        ("b", "", None),
        ("e", "six", None),
        ("a", "seven-long-payload" * 3, {"X-C": "c"}),
        ("c.d", "eight", None),
    ]
    for i, (s, data, hdrs) in enumerate(msgs, 1):
        await js.pub(f"pub {i}", f"{subj}.{s}", data, hdrs)
    await js.req("delete 1", f"STREAM.MSG.DELETE.{name}", {"seq": 1})
    await js.req("delete 6", f"STREAM.MSG.DELETE.{name}", {"seq": 6})


BATCH_REQUESTS: list[tuple[str, Any]] = [
    ("batch from deleted first", {"seq": 1, "batch": 3}),
    ("batch 1", {"seq": 1, "batch": 1}),
    ("batch from middle over a gap", {"seq": 4, "batch": 4}),
    ("batch larger than stream", {"seq": 2, "batch": 100}),
    ("batch past end", {"seq": 50, "batch": 3}),
    ("batch negative", {"seq": 1, "batch": -1}),
    ("batch next_by_subj", {"next_by_subj": "b.a", "batch": 5}),
    ("batch next_by_subj from seq", {"next_by_subj": "b.a", "seq": 4, "batch": 5}),
    ("batch next_by_subj wildcard", {"next_by_subj": "b.*", "batch": 10}),
    ("batch next_by_subj none", {"next_by_subj": "b.zzz", "batch": 3}),
    ("batch max_bytes stops after first", {"seq": 2, "batch": 10, "max_bytes": 5}),
    ("batch max_bytes a few", {"seq": 2, "batch": 10, "max_bytes": 40}),
    ("batch max_bytes negative", {"seq": 2, "batch": 10, "max_bytes": -1}),
    ("batch up_to_seq ignored", {"seq": 2, "batch": 3, "up_to_seq": 3}),
    ("start_time in the past", {"start_time": "2000-01-01T00:00:00Z"}),
    ("start_time batch", {"start_time": "2000-01-01T00:00:00+02:00", "batch": 2}),
    ("start_time in the future", {"start_time": "2100-01-01T00:00:00Z"}),
    ("start_time future batch", {"start_time": "2100-01-01T00:00:00Z", "batch": 2}),
    ("start_time next_by_subj", {"start_time": "2000-01-01T00:00:00Z", "next_by_subj": "b.b"}),
    ("single seq deleted", {"seq": 1}),
    ("single next_by_subj", {"next_by_subj": "b.c.d", "seq": 5}),
    ("last_by_subj with up_to_seq", {"last_by_subj": "b.a", "up_to_seq": 3}),
    ("case-insensitive keys", {"SEQ": 2, "Batch": 2}),
    ("last key wins", {"Seq": 2, "seq": 3}),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_direct_get_batch(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _stream(js, storage)
        b = Batch(js)
        for label, body in BATCH_REQUESTS:
            await b.get(label, "B", body)

    ref, impl = await run_scenario(js_pair, sc)
    assert_same(ref, impl)


MULTI_REQUESTS: list[tuple[str, Any]] = [
    ("all", {"multi_last": ["b.>"]}),
    ("full wildcard", {"multi_last": [">"]}),
    ("overlapping filters", {"multi_last": ["b.a", "b.>", "b.a"]}),
    ("two literals", {"multi_last": ["b.a", "b.b"]}),
    ("single token wildcard", {"multi_last": ["b.*"]}),
    ("no match", {"multi_last": ["x.>"]}),
    ("empty filter", {"multi_last": [""]}),
    ("bare star", {"multi_last": ["*"]}),
    ("up_to_seq", {"multi_last": ["b.>"], "up_to_seq": 4}),
    ("up_to_seq deleted", {"multi_last": ["b.>"], "up_to_seq": 6}),
    ("up_to_seq below first", {"multi_last": ["b.>"], "up_to_seq": 1}),
    ("up_to_seq first", {"multi_last": ["b.>"], "up_to_seq": 2}),
    ("up_to_seq past end", {"multi_last": ["b.>"], "up_to_seq": 100}),
    ("up_to_time past", {"multi_last": ["b.>"], "up_to_time": "2000-01-01T00:00:00Z"}),
    ("up_to_time future", {"multi_last": ["b.>"], "up_to_time": "2100-01-01T00:00:00Z"}),
    ("seq skips", {"multi_last": ["b.>"], "seq": 5}),
    ("seq past all", {"multi_last": ["b.>"], "seq": 99}),
    ("batch 1", {"multi_last": ["b.>"], "batch": 1}),
    ("batch 2", {"multi_last": ["b.>"], "batch": 2}),
    ("batch negative", {"multi_last": ["b.>"], "batch": -1}),
    ("max_bytes", {"multi_last": ["b.>"], "max_bytes": 3}),
    ("max_bytes two", {"multi_last": ["b.>"], "max_bytes": 20}),
    ("seq and batch", {"multi_last": ["b.>"], "seq": 3, "batch": 2}),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_direct_get_multi_last(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _stream(js, storage)
        b = Batch(js)
        for label, body in MULTI_REQUESTS:
            await b.get(label, "B", body)

    ref, impl = await run_scenario(js_pair, sc)
    assert_same(ref, impl)


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_direct_get_times_from_the_stream(js_pair: ServerPair, storage: str) -> None:
    """start_time / up_to_time at a stored message's own timestamp (per server)."""

    async def sc(js: JsRecorder) -> None:
        await _stream(js, storage)
        b = Batch(js)
        t3, t7 = await b.msg_time("B", 3), await b.msg_time("B", 7)
        await b.get("start_time at seq 3", "B", {"start_time": t3})
        await b.get("start_time at seq 3 batch", "B", {"start_time": t3, "batch": 3})
        await b.get("start_time at seq 7 batch", "B", {"start_time": t7, "batch": 5})
        await b.get("up_to_time at seq 3", "B", {"multi_last": ["b.>"], "up_to_time": t3})
        await b.get("up_to_time at seq 7", "B", {"multi_last": ["b.>"], "up_to_time": t7})
        await b.get(
            "up_to_time and up_to_seq", "B", {"multi_last": [">"], "up_to_seq": 3, "up_to_time": t3}
        )

    ref, impl = await run_scenario(js_pair, sc)
    assert_same(ref, impl)


ERROR_REQUESTS: list[tuple[str, str, Any]] = [
    ("empty body", "B", b""),
    ("whitespace body", "B", b" "),
    ("null", "B", b"null"),
    ("empty object", "B", {}),
    ("array", "B", b"[]"),
    ("string", "B", b'"x"'),
    ("trailing garbage", "B", b'{"seq":2} x'),
    ("invalid json", "B", b"{"),
    ("batch alone", "B", {"batch": 3}),
    ("max_bytes alone", "B", {"max_bytes": 3}),
    ("up_to_seq alone", "B", {"up_to_seq": 3}),
    ("multi_last empty list", "B", {"multi_last": []}),
    ("multi_last not a list", "B", {"multi_last": "b.a"}),
    ("multi_last non-string", "B", {"multi_last": [1]}),
    ("negative seq", "B", {"seq": -1}),
    ("float seq", "B", {"seq": 2.0}),
    ("bool seq", "B", {"seq": True}),
    ("string batch", "B", {"seq": 2, "batch": "x"}),
    ("float batch", "B", {"seq": 2, "batch": 2.5}),
    ("bad start_time", "B", {"start_time": "yesterday"}),
    ("start_time lowercase t", "B", {"start_time": "2000-01-01t00:00:00Z"}),
    ("start_time day 31 in april", "B", {"start_time": "2000-04-31T00:00:00Z"}),
    ("start_time number", "B", {"start_time": 5}),
    ("start_time null", "B", {"start_time": None, "seq": 2}),
    ("seq and last", "B", {"seq": 2, "last_by_subj": "b.a"}),
    ("seq and start_time", "B", {"seq": 2, "start_time": "2000-01-01T00:00:00Z"}),
    ("last and start_time", "B", {"last_by_subj": "b.a", "start_time": "2000-01-01T00:00:00Z"}),
    ("last and next", "B", {"last_by_subj": "b.a", "next_by_subj": "b.a"}),
    ("last and batch", "B", {"last_by_subj": "b.a", "batch": 2}),
    ("last and negative batch", "B", {"last_by_subj": "b.a", "batch": -1}),
    ("last and multi", "B", {"last_by_subj": "b.a", "multi_last": ["b.a"]}),
    ("next and multi", "B", {"next_by_subj": "b.a", "multi_last": ["b.a"]}),
    (
        "up_to_seq and up_to_time",
        "B",
        {"multi_last": ["b.a"], "up_to_seq": 2, "up_to_time": "2000-01-01T00:00:00Z"},
    ),
    ("subject form", "B.b.a", b""),
    ("subject form missing", "B.b.zzz", b""),
    ("subject form whitespace", "B.b.a", b" "),
    ("subject form null", "B.b.a", b"null"),
    ("subject form empty object", "B.b.a", {}),
    ("subject form unknown key", "B.b.a", {"x": 1}),
    ("subject form max_bytes", "B.b.a", {"max_bytes": 1}),
    ("subject form seq", "B.b.a", {"seq": 1}),
    ("subject form seq 0", "B.b.a", {"seq": 0}),
    ("subject form batch", "B.b.a", {"batch": 2}),
    ("subject form negative batch", "B.b.a", {"batch": -1}),
    ("subject form up_to_seq", "B.b.a", {"up_to_seq": 3}),
    ("subject form same last", "B.b.a", {"last_by_subj": "b.a"}),
    ("subject form empty multi", "B.b.a", {"multi_last": []}),
    ("subject form multi", "B.b.a", {"multi_last": ["b.a"]}),
    ("subject form invalid json", "B.b.a", b"{"),
    ("subject form array", "B.b.a", b"[]"),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_direct_get_refused_requests(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _stream(js, storage)
        b = Batch(js)
        for label, subject, body in ERROR_REQUESTS:
            await b.get(label, subject, body)

    ref, impl = await run_scenario(js_pair, sc)
    assert_same(ref, impl)


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_direct_get_empty_stream(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.E",
            {"name": "E", "subjects": ["e.>"], "allow_direct": True, "storage": storage},
        )
        b = Batch(js)
        await b.get("batch on empty", "E", {"seq": 1, "batch": 2})
        await b.get("multi on empty", "E", {"multi_last": ["e.>"]})
        await b.get("start_time on empty", "E", {"start_time": "2000-01-01T00:00:00Z"})
        await js.pubs("pubs", "e.x", 3)
        await js.req("purge", "STREAM.PURGE.E")
        await b.get("batch after purge", "E", {"seq": 1, "batch": 2})
        await b.get("multi after purge", "E", {"multi_last": [">"]})
        await b.get(
            "multi up_to_time after purge",
            "E",
            {"multi_last": [">"], "up_to_time": "2100-01-01T00:00:00Z"},
        )
        await b.get(
            "start_time after purge", "E", {"start_time": "2000-01-01T00:00:00Z", "batch": 2}
        )

    ref, impl = await run_scenario(js_pair, sc)
    assert_same(ref, impl)


async def test_direct_get_multi_last_too_many(js_pair: ServerPair) -> None:
    """More than 1024 results is 413; a ceiling that keeps 1024 is fine."""

    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.M",
            {"name": "M", "subjects": ["m.>"], "allow_direct": True, "storage": "memory"},
        )
        for i in range(1030):
            await js.nc.publish(f"m.k.{i}", b"v")
        await js.nc.flush()
        for _ in range(50):
            state = await js.req("state", "STREAM.INFO.M", record=False)
            if state["state"]["messages"] == 1030:
                break
            await asyncio.sleep(0.05)
        b = Batch(js)
        await b.get("too many", "M", {"multi_last": ["m.>"]})
        await b.get("too many over filters", "M", {"multi_last": ["m.k.1*", "m.k.1.>", "m.>"]})
        replies = await b.get("1024 allowed", "M", {"multi_last": ["m.>"], "up_to_seq": 1024})
        js.log[-1] = ("1024 allowed", [len(replies), replies[0], replies[-2], replies[-1]])
        await b.get("1025 refused", "M", {"multi_last": ["m.>"], "up_to_seq": 1025})

    ref, impl = await run_scenario(js_pair, sc, timeout=40)
    assert_same(ref, impl)
