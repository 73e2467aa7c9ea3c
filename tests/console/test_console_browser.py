"""The console on the monitoring port, loaded in a real headless Chromium (Debian's, driven
by Playwright) against a running three-server cluster: each page is checked against what
the cluster holds, and a screenshot of each is kept in ``build/console-screenshots``
(``$NATSD_ARTIFACTS`` to put them elsewhere). A missing Chromium fails under CI=true."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import nats
import pytest
from components import ROOT, require_chromium, require_module
from embedded_cluster import EmbeddedJsCluster, until
from embedded_cluster import api_request as _req
from embedded_cluster import publish_acked as _publish
from embedded_cluster import replica_leader as _leader

pytestmark = pytest.mark.timeout(180)

# As the machine notes say Chromium must start here: no background connections to a
# network it cannot reach, no sandbox (root), no GPU.
_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SHOTS = Path(os.environ.get("NATSD_ARTIFACTS") or ROOT / "build") / "console-screenshots"


@pytest.fixture
async def trio(tmp_path: Path) -> AsyncIterator[EmbeddedJsCluster]:
    t = EmbeddedJsCluster(tmp_path)
    await t.start_all()
    try:
        yield t
    finally:
        for name in list(t.servers):
            await t.stop(name)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    chromium = require_chromium()
    pw = require_module("playwright.async_api", "install natsd[test]: playwright")
    async with pw.async_playwright() as p:
        b = await p.chromium.launch(executable_path=chromium, headless=True, args=_FLAGS)
        try:
            yield b
        finally:
            await b.close()


async def _fill(trio: EmbeddedJsCluster) -> None:
    """ORDERS (R3): 30 messages on two subjects, a durable pull consumer that acked 10;
    LOGS (R1): 3 messages."""
    nc = await nats.connect(trio.url("n1"))
    try:
        js = nc.jetstream()
        cfg = {"name": "ORDERS", "subjects": ["orders.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.ORDERS", cfg)
        cfg = {"name": "LOGS", "subjects": ["logs.>"], "num_replicas": 1, "storage": "memory"}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.LOGS", cfg)
        for i in range(1, 31):
            subject = "orders.b" if i % 3 == 0 else "orders.a"
            # (a message id: a publish retried after a slow first answer is no duplicate)
            hdrs = {"Shop": f"s{i}", "Nats-Msg-Id": f"order-{i}"}
            ack = await _publish(nc, subject, f"order {i}".encode(), hdrs)
            assert ack.get("seq") == i, ack
        for i in range(3):
            ack = await _publish(nc, "logs.x", b"\x00\xffbinary", {"Nats-Msg-Id": f"log-{i}"})
            assert ack.get("seq") == i + 1, ack
        sub = await js.pull_subscribe("orders.>", "PROC", stream="ORDERS")
        for m in await sub.fetch(10, timeout=5):
            await m.ack_sync()
    finally:
        await nc.close()


async def _settles(check: Callable[[], Awaitable[bool]], what: str, within: float = 30) -> None:
    """``check`` holds within ``within`` seconds (the page shows the cluster as it is now,
    refreshed every 300 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        assert loop.time() < deadline, f"the page did not show {what}"
        await asyncio.sleep(0.2)


async def _cell(page: Any, selector: str) -> str:
    return str(await page.locator(selector).first.inner_text()).strip()


async def _rows(page: Any, table: str) -> list[list[str]]:
    """The table's body: each row's cells as the page shows them."""
    rows: list[list[str]] = await page.eval_on_selector_all(
        f"[data-testid={table}] tbody tr",
        "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))",
    )
    return rows


async def test_console_pages_show_the_cluster(trio: EmbeddedJsCluster, browser: Any) -> None:
    await _fill(trio)
    lead = _leader(trio, "ORDERS")
    # the console of a server that does not lead the stream: it shows the whole cluster
    viewer = next(n for n in trio.names if n != lead)
    base = f"http://127.0.0.1:{trio.servers[viewer].monitor_port}/console?interval=300"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # Servers: three, the meta leader marked, each with its two routes; the rate chart
    await page.goto(base + "#/")
    await page.locator("[data-testid=servers] tbody tr").nth(2).wait_for()
    rows = await _rows(page, "servers")
    assert [r[0].removesuffix(" (this)") for r in rows] == ["n1", "n2", "n3"]

    async def meta_marked() -> bool:
        # (the page refreshes; a loaded machine may elect another meta leader meanwhile)
        rows = await _rows(page, "servers")
        return [r[0].removesuffix(" (this)") for r in rows if r[-1] == "leader"] == [trio.leader()]

    await _settles(meta_marked, "the meta leader marked")
    await page.locator("[data-testid=routes] tbody tr").nth(5).wait_for()
    routes = {(r[0], r[1]) for r in await _rows(page, "routes")}
    assert routes == {(a, b) for a in trio.names for b in trio.names if a != b}
    nc = await nats.connect(trio.url(viewer))
    for _ in range(20):
        await nc.publish("core.rate", b"x")
        await asyncio.sleep(0.05)
    await nc.close()
    chart = page.locator("[data-testid=chart-rates]")
    await page.wait_for_function(
        "() => Number(document.querySelector('[data-testid=chart-rates]').dataset.points) >= 3"
    )
    assert await chart.locator("canvas").count() == 1
    await page.screenshot(path=str(SHOTS / "servers.png"), full_page=True)

    # Streams: both, ORDERS led by its leader with the other two as replicas
    await page.goto(base + "#/streams")
    await page.locator("[data-stream=LOGS]").wait_for()
    streams = {r[1]: r for r in await _rows(page, "streams")}
    assert set(streams) == {"LOGS", "ORDERS"}
    orders = streams["ORDERS"]
    assert orders[0] == "$G" and orders[2] == "orders.>" and orders[4] == "3"
    assert orders[6] == "30" and orders[8] == "1"

    async def orders_led() -> bool:
        rows = {r[1]: r for r in await _rows(page, "streams")}
        named = [n.strip() for n in rows["ORDERS"][5].split(",")]
        now = _leader(trio, "ORDERS")
        return named[0] == now and sorted(named[1:]) == sorted(set(trio.names) - {now})

    await _settles(orders_led, "ORDERS's leader first, then its two replicas")
    assert streams["LOGS"][3] == "memory" and streams["LOGS"][6] == "3"
    await page.screenshot(path=str(SHOTS / "streams.png"), full_page=True)

    # A stream: its state, its leader, the consumer's lag (20 pending, ack floor 10)
    await page.click("[data-stream=ORDERS] a >> text=ORDERS")
    await page.locator("[data-consumer=PROC]").wait_for()

    async def leader_shown() -> bool:
        return await _cell(page, "[data-testid=stream-leader]") == _leader(trio, "ORDERS")

    await _settles(leader_shown, "ORDERS's leader")
    assert await _cell(page, "[data-testid=stream-messages]") == "30"
    proc = (await _rows(page, "consumers"))[0]
    assert proc[0] == "PROC" and proc[1] == "pull, durable" and proc[2] == "explicit"
    assert proc[3] == "20" and proc[4] == "0" and proc[7] == "10" and proc[8] == "10"
    await page.locator("[data-testid=chart-stream] canvas").wait_for()
    await page.screenshot(path=str(SHOTS / "stream.png"), full_page=True)

    # Messages: from sequence 5, 25 a page, the next page, a subject filter, binary data
    await page.click("text=Browse messages")
    await page.locator("[data-testid=messages] tbody tr").first.wait_for()
    await page.fill("input[name=start]", "5")
    await page.click("button >> text=Show")
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=messages] tbody tr')?.dataset.seq === '5'"
    )
    msgs = await _rows(page, "messages")
    assert len(msgs) == 25 and [m[0] for m in msgs] == [str(i) for i in range(5, 30)]
    assert msgs[0][1] == "orders.a" and msgs[0][5] == "order 5" and "Shop: s5" in msgs[0][4]
    await page.screenshot(path=str(SHOTS / "messages.png"), full_page=True)
    await page.click("[data-testid=next-page]")
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=messages] tbody tr')?.dataset.seq === '30'"
    )
    assert [m[0] for m in await _rows(page, "messages")] == ["30"]
    await page.fill("input[name=start]", "1")
    await page.fill("input[name=subject]", "orders.b")
    await page.click("button >> text=Show")
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=messages] tbody tr')?.dataset.seq === '3'"
    )
    assert [m[0] for m in await _rows(page, "messages")] == [str(i) for i in range(3, 31, 3)]
    await page.goto(base + "#/messages/%24G/LOGS")
    # (the rows of ORDERS stay on the page until the fetch for LOGS begins: wait for LOGS')
    await page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=messages] tbody tr')]"
        ".map(r => r.cells[1].innerText).join() === 'logs.x,logs.x,logs.x'"
    )
    logs = await _rows(page, "messages")
    assert logs[0][5] == "(binary, base64) AP9iaW5hcnk="
    assert errors == [], errors
    await page.goto(base + "#/messages/%24G/NOPE")
    await page.locator("[data-testid=messages-error]").wait_for()
    assert await _cell(page, "[data-testid=messages-error]") == "stream not found"
    assert errors == [  # (the browser's own line for the answer's 404 status)
        "Failed to load resource: the server responded with a status of 404 (Not Found)"
    ]
    errors.clear()

    # Failover: the stream's leader stops; the console shows the new one
    await page.goto(base + "#/stream/%24G/ORDERS")
    await page.locator("[data-consumer=PROC]").wait_for()
    lead = _leader(trio, "ORDERS")
    if lead == viewer:  # (it moved here meanwhile: the page's server stays up)
        nc = await nats.connect(trio.url(viewer))
        await _req(nc, "$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", {})
        await nc.close()
        await until(lambda: _leader(trio, "ORDERS") not in ("", viewer), timeout=30)
        lead = _leader(trio, "ORDERS")
    await trio.stop(lead)
    await until(lambda: _leader(trio, "ORDERS") not in ("", lead), timeout=30)
    await _settles(leader_shown, "the new leader")

    async def lag_shown() -> bool:
        rows = await _rows(page, "consumers")
        return bool(rows) and rows[0][0] == "PROC" and rows[0][3] == "20"

    await _settles(lag_shown, "PROC's lag from the new leader")
    await page.screenshot(path=str(SHOTS / "failover.png"), full_page=True)
    assert errors == [], errors


async def test_console_api_answers_match_the_cluster(trio: EmbeddedJsCluster) -> None:
    """The page's data: ``/console/api/cluster`` from each server tells the same cluster."""
    await _fill(trio)
    views = []
    async with aiohttp.ClientSession() as http:
        for name in trio.names:
            port = trio.servers[name].monitor_port
            async with http.get(f"http://127.0.0.1:{port}/console/api/cluster") as r:
                assert r.status == 200
                views.append(json.loads(await r.text()))
            async with http.get(f"http://127.0.0.1:{port}/console/nope.js") as r:
                assert r.status == 404
    for v in views:
        assert [s["name"] for s in v["servers"]] == trio.names
        assert [s["name"] for s in v["streams"]] == ["LOGS", "ORDERS"]
        orders = v["streams"][1]
        assert orders["leader"] == _leader(trio, "ORDERS")
        assert orders["messages"] == 30 and orders["consumer_count"] == 1
        (proc,) = orders["consumers"]
        assert (proc["num_pending"], proc["ack_floor"], proc["delivered"]) == (20, 10, 10)
    assert [v["server"] for v in views] == trio.names
