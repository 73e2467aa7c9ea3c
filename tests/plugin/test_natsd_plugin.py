"""natsd's pytest plugin, used as a user's test suite would use it (issue 20): the fixtures
come from the ``pytest11`` entry point, nothing here imports them."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from natsd.testing import ThreadedCluster, ThreadedServer

pytestmark = pytest.mark.timeout(60)


def test_the_plugin_is_registered_for_pytest() -> None:
    names = {ep.value for ep in entry_points(group="pytest11")}
    assert "natsd.testing.plugin" in names


def _raw_roundtrip(url: str) -> bytes:
    """A blocking client on a plain socket: SUB, PUB, and the MSG back."""
    host, port = url.removeprefix("nats://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        f = s.makefile("rb")
        assert f.readline().startswith(b"INFO ")
        s.sendall(b'CONNECT {"verbose":false}\r\nSUB greet 1\r\nPUB greet 5\r\nhello\r\nPING\r\n')
        lines = [f.readline() for _ in range(3)]
    return b"".join(lines)


def test_a_blocking_test_talks_to_the_session_server(natsd_session_server: ThreadedServer) -> None:
    # the server runs on its own thread: this test blocks on a socket and it still answers
    assert _raw_roundtrip(natsd_session_server.url) == b"MSG greet 1 5\r\nhello\r\nPONG\r\n"


def test_threaded_server_as_a_context_manager(tmp_path: Path) -> None:
    with ThreadedServer(jetstream=True, store_dir=str(tmp_path)) as srv:
        assert srv.running and srv.port > 0
        assert _raw_roundtrip(srv.url).startswith(b"MSG greet 1 5")
    assert not srv.running


async def test_client_fixture_and_jetstream(natsd_client: Client) -> None:
    js = natsd_client.jetstream()
    await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    ack = await js.publish("orders.1", b"one")
    assert (ack.stream, ack.seq) == ("ORDERS", 1)


async def test_a_30_second_ack_wait_takes_no_time(
    natsd_server: ThreadedServer, natsd_client: Client
) -> None:
    js = natsd_client.jetstream()
    await js.add_stream(StreamConfig(name="JOBS", subjects=["jobs"]))
    await js.publish("jobs", b"work")
    sub = await js.pull_subscribe(
        "jobs", "worker", config=ConsumerConfig(ack_wait=30, ack_policy=AckPolicy.EXPLICIT)
    )
    (first,) = await sub.fetch(1, timeout=2)
    assert first.metadata.num_delivered == 1
    started = time.monotonic()
    assert natsd_server.advance(31) >= 1  # the ack wait ran out: redelivered
    (again,) = await sub.fetch(1, timeout=2)
    assert again.data == b"work" and again.metadata.num_delivered == 2
    assert time.monotonic() - started < 5  # not 30 s
    await again.ack()


async def test_max_age_and_duplicate_window_follow_advanced_time(
    natsd_server: ThreadedServer, natsd_client: Client
) -> None:
    js = natsd_client.jetstream()
    await js.add_stream(
        StreamConfig(name="EV", subjects=["ev"], max_age=60, duplicate_window=10)
    )
    await js.publish("ev", b"a", headers={"Nats-Msg-Id": "x"})
    dup = await js.publish("ev", b"a", headers={"Nats-Msg-Id": "x"})
    assert dup.duplicate
    natsd_server.advance(11)  # past the duplicate window
    again = await js.publish("ev", b"a", headers={"Nats-Msg-Id": "x"})
    assert not again.duplicate and again.seq == 2
    natsd_server.advance(61)  # past max_age: both expire
    assert (await js.stream_info("EV")).state.messages == 0
    # a message published after time moved is stamped with the moved clock: it stays
    await js.publish("ev", b"b")
    natsd_server.advance(30)
    assert (await js.stream_info("EV")).state.messages == 1


async def test_factory_takes_a_config_file(natsd_factory: Callable[..., ThreadedServer]) -> None:
    srv = natsd_factory(
        """
        authorization { user: app, password: s3cret }
        """
    )
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(srv.url, max_reconnect_attempts=0, allow_reconnect=False)
    nc = await nats.connect(srv.url, user="app", password="s3cret")
    try:
        assert nc.is_connected
    finally:
        await nc.close()


async def test_a_full_disk_refuses_publishes_and_loses_nothing(
    natsd_factory: Callable[..., ThreadedServer],
) -> None:
    srv = natsd_factory(faults=True)
    assert srv.disk is not None
    nc = await nats.connect(srv.url)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="S", subjects=["s"]))
        await js.publish("s", b"kept")
        srv.disk.fill()
        with pytest.raises(nats.js.errors.APIError) as e:
            await js.publish("s", b"refused")
        assert e.value.err_code == 10077, e.value  # JSStreamStoreFailedF
        srv.disk.heal()  # space is back: publishing recovers at once
        await js.publish("s", b"after")
        info = await js.stream_info("S")
        assert info.state.messages == 2
        assert (await js.get_msg("S", info.state.first_seq)).data == b"kept"
    finally:
        await nc.close()


async def test_power_loss_keeps_every_acknowledged_message(
    natsd_factory: Callable[..., ThreadedServer],
) -> None:
    srv = natsd_factory(faults=True)
    nc = await nats.connect(srv.url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="P", subjects=["p"]))
    acked = [(await js.publish("p", b"m%d" % i)).seq for i in range(20)]
    await nc.close()
    srv.power_loss(seed=7)  # restarted on what a power cut leaves, same port
    nc = await nats.connect(srv.url)
    try:
        js = nc.jetstream()
        info = await js.stream_info("P")
        assert info.state.messages == 20 and info.state.last_seq == acked[-1]
        msg = await js.get_msg("P", 20)
        assert msg.data == b"m19"
    finally:
        await nc.close()


async def test_a_three_server_cluster(natsd_cluster: ThreadedCluster) -> None:
    urls = natsd_cluster.urls
    nc = await nats.connect(urls)
    try:
        js = nc.jetstream()
        for _ in range(50):
            try:
                await js.add_stream(StreamConfig(name="R", subjects=["r"], num_replicas=3))
                break
            except nats.js.errors.APIError:
                await asyncio.sleep(0.1)
        for _ in range(100):
            try:
                # (a message id: a retry after a late answer is not stored twice)
                await js.publish("r", b"x", timeout=1, headers={"Nats-Msg-Id": "r-x"})
                break
            except (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError):
                await asyncio.sleep(0.1)  # the stream's group is still electing its leader
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.R", b"")).data)
        assert info["state"]["messages"] == 1
        assert len(info["cluster"]["replicas"]) == 2
    finally:
        await nc.close()
