"""API requests a standalone server can only refuse: answered as standalone nats-server does.

* Stream / consumer leader step-down, stream peer remove / evacuate and stream cancel-move:
  ``503 / 10010 JetStream clustering support required`` (whatever the body or the required
  API level).
* ``META.LEADER.STEPDOWN``, ``META.RESCUE``, ``SERVER.REMOVE``, ``SERVER.EVACUATE`` and
  ``ACCOUNT.PURGE`` / ``ACCOUNT.STREAM.(CANCEL_)MOVE`` from a client account: no answer from
  standalone nats-server (they are system-account requests it serves only in a cluster), so
  natsd stays silent too; both are checked to time out.
* Stream snapshot / restore: nats-server's request checks and errors, then natsd (which does
  not implement them yet) refuses a valid request at once, where nats-server starts the
  transfer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import TIMEOUT, JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

T = 10.0  # per answered request: generous, the machine may be loaded
SILENT = 0.5  # how long a request nats-server never answers is given


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


CLUSTER_ONLY = [
    "STREAM.LEADER.STEPDOWN.S",
    "STREAM.LEADER.STEPDOWN.NOPE",
    "CONSUMER.LEADER.STEPDOWN.S.C",
    "CONSUMER.LEADER.STEPDOWN.S.NOPE",
    "STREAM.PEER.REMOVE.S",
    "STREAM.PEER.EVACUATE.S",
    "STREAM.CANCEL_MOVE.S",
]
NEVER_ANSWERED = [
    "META.LEADER.STEPDOWN",
    "META.RESCUE",
    "SERVER.REMOVE",
    "SERVER.EVACUATE",
    "ACCOUNT.PURGE.A",
    "ACCOUNT.STREAM.MOVE.A.S",
    "ACCOUNT.STREAM.CANCEL_MOVE.A.S",
    "STREAM.LEADER.STEPDOWN",  # wrong number of tokens: no handler
]


async def _setup(js: JsRecorder) -> None:
    await js.req("stream", "STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]}, timeout=T)
    await js.req(
        "consumer",
        "CONSUMER.CREATE.S.C",
        {"stream_name": "S", "config": {"name": "C"}},
        timeout=T,
    )


async def test_cluster_only_requests(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await _setup(js)
        for subject in CLUSTER_ONLY:
            for body in (b"", b'{"bogus": 1}', b'{"placement": {"cluster": "x"}}'):
                await js.req(f"{subject} {body!r}", subject, body, timeout=T)
            msg = await js.raw_request(
                f"$JS.API.{subject}", b"", headers={"Nats-Required-Api-Level": "100"}, timeout=T
            )
            js.note(f"{subject} level 100", json.loads(msg.data))
        await js.req("account info", "INFO", timeout=T)
        # The system-account requests: silence from both (a short wait each).
        for subject in NEVER_ANSWERED:
            await js.req(subject, subject, b"", timeout=SILENT, expect_silence=True)

    ref, impl = await run_scenario(js_pair, sc, timeout=90, api_counters=True)
    answered = 2 + 4 * len(CLUSTER_ONLY)
    for label, answer in ref[2:answered]:
        assert answer["error"]["err_code"] == 10010, (label, answer)
    assert all(answer == TIMEOUT for _, answer in ref[answered + 1 :]), ref
    assert len(ref) == answered + 1 + len(NEVER_ANSWERED)
    assert_same(ref, impl)


# ------------------------------------------------------------------ snapshot / restore
RESTORE_CONFIG = {"name": "R", "subjects": ["r.>"]}
SNAPSHOT_CHECKS: list[tuple[str, str, Any]] = [
    ("snapshot empty", "STREAM.SNAPSHOT.S", b""),
    ("snapshot empty object", "STREAM.SNAPSHOT.S", {}),
    ("snapshot missing stream", "STREAM.SNAPSHOT.NOPE", {"deliver_subject": "snap.x"}),
    ("snapshot missing stream before bad json", "STREAM.SNAPSHOT.NOPE", {"bogus": 1}),
    ("snapshot unknown field", "STREAM.SNAPSHOT.S", {"bogus": 1}),
    ("snapshot bad type", "STREAM.SNAPSHOT.S", {"deliver_subject": 5}),
    ("snapshot bad json", "STREAM.SNAPSHOT.S", b"{"),
    ("snapshot no deliver subject", "STREAM.SNAPSHOT.S", {"no_consumers": True}),
    ("snapshot wildcard deliver subject", "STREAM.SNAPSHOT.S", {"deliver_subject": "a.*"}),
    ("restore empty", "STREAM.RESTORE.R", b""),
    ("restore unknown field", "STREAM.RESTORE.R", {"bogus": 1}),
    ("restore unknown config field", "STREAM.RESTORE.R", {"config": {"pedantic": True}}),
    ("restore bad config type", "STREAM.RESTORE.R", {"config": {"max_msgs": "x"}}),
    ("restore name mismatch", "STREAM.RESTORE.R", {"config": {"name": "Q"}}),
    ("restore bad config", "STREAM.RESTORE.R", {"config": {**RESTORE_CONFIG, "max_age": -1}}),
    ("restore existing stream", "STREAM.RESTORE.S", {"config": {"name": "S"}}),
]


async def test_snapshot_and_restore_checks(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await _setup(js)
        for label, subject, body in SNAPSHOT_CHECKS:
            await js.req(label, subject, body, timeout=T)
        await js.req("account info", "INFO", timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90, api_counters=True)
    assert all("error" in answer for _, answer in ref[2:-1]), ref
    assert_same(ref, impl)


async def test_valid_snapshot_and_restore_start(js_pair: ServerPair) -> None:
    """A valid snapshot request is answered with the stream's config and state (the chunks
    follow: tests/differential/test_backup.py), a valid restore with the subject to send
    the archive to; the stream does not exist until the archive has arrived."""

    async def sc(js: JsRecorder) -> None:
        await _setup(js)
        await js.req("snapshot", "STREAM.SNAPSHOT.S", {"deliver_subject": "snap.x"}, timeout=T)
        await js.req("restore", "STREAM.RESTORE.R", {"config": RESTORE_CONFIG}, timeout=T)
        await js.req("restore, name from subject", "STREAM.RESTORE.R", {"config": {}}, timeout=T)
        await js.req("names", "STREAM.NAMES", timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    for answers in (dict(ref), dict(impl)):
        snap = answers["snapshot"]
        assert snap["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response", snap
        assert snap["config"]["name"] == "S" and snap["state"]["consumer_count"] == 1, snap
        for label in ("restore", "restore, name from subject"):
            r = answers[label]
            assert r["type"] == "io.nats.jetstream.api.v1.stream_restore_response", r
            assert r["deliver_subject"].startswith("$JS.SNAPSHOT.RESTORE.R."), r
        assert answers["names"]["streams"] == ["S"]
    assert dict(impl)["snapshot"]["config"] == dict(ref)["snapshot"]["config"]
