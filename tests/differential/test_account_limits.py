"""Account-level JetStream limits (``accounts { A { jetstream { ... } } }``), nats-server vs
natsd with the same configuration: streams and consumers created at and past each limit,
the error answers, what a created stream or consumer was given, and ``$JS.API.INFO``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, js_config_pair, run_client_both

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

CONFIG = """
jetstream {}
accounts {
  STREAMS: { jetstream: { streams: 2 }, users: [{user: streams, password: p}] }
  CONS: { jetstream: { max_consumers: 2 }, users: [{user: cons, password: p}] }
  ACK: { jetstream: { max_ack_pending: 50 }, users: [{user: ack, password: p}] }
  REQ: {
    jetstream: { max_bytes_required: true, memory_max_stream_bytes: 10KB,
                 store_max_stream_bytes: 20KB }
    users: [{user: req, password: p}]
  }
  BYTES: { jetstream: { max_mem: 100KB, max_file: 200KB }, users: [{user: bytes, password: p}] }
  ZERO: { jetstream: { max_streams: 0, max_consumers: 0 }, users: [{user: zero, password: p}] }
  ALIAS: {
    jetstream: { mem: 1MB, disk: 2MB, streams: 3, consumers: 4, mem_max_stream_bytes: 1KB,
                 disk_max_stream_bytes: 2KB, max_stream_bytes: true, max_ack_pending: 7 }
    users: [{user: alias, password: p}]
  }
  PLAIN: { jetstream: enabled, users: [{user: plain, password: p}] }
}
"""


SERVER_CONFIG = "jetstream { max_memory_store: 100KB, max_file_store: 200KB }\n"


def _pair(config: str) -> Iterator[ServerPair]:
    require_nats_server()
    with js_config_pair(config) as pair:
        yield pair


@pytest.fixture(scope="module")
def pair() -> Iterator[ServerPair]:
    yield from _pair(CONFIG)


@pytest.fixture(scope="module")
def server_pair() -> Iterator[ServerPair]:
    yield from _pair(SERVER_CONFIG)


async def _api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    r = await nc.request(f"$JS.API.{subject}", data, timeout=5)
    out: dict[str, Any] = json.loads(r.data)
    return out


def _outcome(resp: dict[str, Any], *fields: str) -> Any:
    """The error, or the named fields of the created thing's config."""
    if "error" in resp:
        return resp["error"]
    cfg = resp["config"]
    return {f: cfg.get(f) for f in fields}


async def _stream(nc: Any, name: str, verb: str = "CREATE", **cfg: Any) -> Any:
    body = {"name": name, "subjects": [f"{name}.>"], **cfg}
    return _outcome(await _api(nc, f"STREAM.{verb}.{name}", body), "name", "max_bytes")


async def _consumer(nc: Any, stream: str, name: str, **cfg: Any) -> Any:
    cfg.setdefault("ack_policy", "explicit")
    body = {"stream_name": stream, "config": {"durable_name": name, **cfg}}
    resp = await _api(nc, f"CONSUMER.CREATE.{stream}.{name}", body)
    return _outcome(resp, "durable_name", "max_ack_pending", "ack_policy")


async def _info(nc: Any) -> dict[str, Any]:
    info = await _api(nc, "INFO")
    info["api"].pop("level")  # the advertised API level is another change (issue 14 s.2)
    return info


async def both(pair: ServerPair, user: str | None, fn: Any) -> Any:
    auth = {"user": user, "password": "p"} if user else {}
    ref, impl = await run_client_both(pair, fn, capture_errors=False, **auth)
    assert impl == ref
    return ref


async def test_max_streams(pair: ServerPair) -> None:
    async def scenario(nc: Any) -> list[Any]:
        out = [await _info(nc)]
        out += [await _stream(nc, "S1"), await _stream(nc, "S2"), await _stream(nc, "S3")]
        out.append(await _stream(nc, "S1"))  # re-creating an existing one does not count twice
        out.append(await _api(nc, "STREAM.DELETE.S1"))
        out += [await _stream(nc, "S3"), await _info(nc)]
        return out

    res = await both(pair, "streams", scenario)
    assert res[0]["limits"]["max_streams"] == 2
    assert res[3]["err_code"] == 10027
    assert res[4] == {"name": "S1", "max_bytes": -1}


async def test_max_consumers_per_stream(pair: ServerPair) -> None:
    async def scenario(nc: Any) -> list[Any]:
        out = [await _stream(nc, "BIG", max_consumers=5)]  # above the account's 2
        out += [await _stream(nc, "C1"), await _stream(nc, "C2")]
        for stream in ("C1", "C2"):  # the limit is per stream
            out += [await _consumer(nc, stream, n) for n in ("a", "b", "c")]
        out.append(await _stream(nc, "C1", "UPDATE", max_consumers=3))
        out.append(await _info(nc))
        return out

    res = await both(pair, "cons", scenario)
    assert res[0]["err_code"] == 10026
    assert res[5]["err_code"] == 10026 and res[8]["err_code"] == 10026
    assert res[9]["err_code"] == 10026


async def test_zero_means_unlimited(pair: ServerPair) -> None:
    async def scenario(nc: Any) -> list[Any]:
        out = [await _stream(nc, f"Z{i}") for i in range(3)]
        out += [await _consumer(nc, "Z0", n) for n in ("a", "b")]
        return [*out, await _info(nc)]

    res = await both(pair, "zero", scenario)
    assert all("err_code" not in r for r in res[:5])


async def test_max_ack_pending(pair: ServerPair) -> None:
    async def scenario(nc: Any) -> list[Any]:
        out = [await _stream(nc, "A")]
        out.append(await _consumer(nc, "A", "dflt"))  # the default 1000 is capped to 50
        out.append(await _consumer(nc, "A", "none", ack_policy="none"))
        out.append(await _consumer(nc, "A", "at", max_ack_pending=50))
        out.append(await _consumer(nc, "A", "over", max_ack_pending=51))
        out.append(await _consumer(nc, "A", "unl", max_ack_pending=-1))
        out.append(await _consumer(nc, "A", "at", max_ack_pending=60))  # update past it
        out.append(await _consumer(nc, "A", "at", max_ack_pending=20))
        return [*out, await _info(nc)]

    res = await both(pair, "ack", scenario)
    assert res[1]["max_ack_pending"] == 50
    assert res[4] == {
        "code": 400,
        "err_code": 10121,
        "description": "consumer max ack pending exceeds system limit of 50",
    }
    assert res[6]["err_code"] == 10121


async def test_max_bytes_required_and_per_stream_max_bytes(pair: ServerPair) -> None:
    async def scenario(nc: Any) -> list[Any]:
        return [
            await _stream(nc, "R0"),
            await _stream(nc, "R1", max_bytes=-1),
            await _stream(nc, "M1", storage="memory", max_bytes=20 * 1024),
            await _stream(nc, "M2", storage="memory", max_bytes=10 * 1024),
            await _stream(nc, "F1", max_bytes=30 * 1024),
            await _stream(nc, "F2", max_bytes=20 * 1024),
            await _stream(nc, "F2", "UPDATE", max_bytes=30 * 1024),
            await _stream(nc, "F2", "UPDATE", max_bytes=-1),
            await _stream(nc, "F2", "UPDATE", max_bytes=1024),
            await _info(nc),
        ]

    res = await both(pair, "req", scenario)
    assert [r.get("err_code") for r in res[:9]] == [
        10113,
        10113,
        10122,
        None,
        10122,
        None,
        10122,
        10113,
        None,
    ]
    assert res[9]["reserved_memory"] == 10 * 1024 and res[9]["reserved_storage"] == 1024


async def test_account_memory_and_storage_reservations(pair: ServerPair) -> None:
    async def scenario(nc: Any) -> list[Any]:
        kb = 1024
        out = []
        for storage, mx in (("memory", 100 * kb), ("file", 200 * kb)):
            p = storage[0].upper()
            out += [
                await _stream(nc, f"{p}1", storage=storage, max_bytes=mx * 6 // 10),
                await _stream(nc, f"{p}2", storage=storage, max_bytes=mx * 6 // 10),
                await _stream(nc, f"{p}3", storage=storage),  # no max_bytes: one byte
                await _stream(nc, f"{p}4", storage=storage, max_bytes=mx * 4 // 10 - 1),
                await _stream(nc, f"{p}5", storage=storage),
                await _stream(nc, f"{p}1", "UPDATE", storage=storage, max_bytes=mx * 7 // 10),
                await _stream(nc, f"{p}1", "UPDATE", storage=storage, max_bytes=mx * 5 // 10),
                await _stream(nc, f"{p}5", storage=storage),
                await _info(nc),
            ]
        return out

    res = await both(pair, "bytes", scenario)
    # Per storage: the second 60% does not fit; a stream without max_bytes takes one byte,
    # so after 60% + (40% - 1) exactly one more such stream fits; growing the first stream
    # by 10% does not, shrinking it does; re-creating an existing stream is fine.
    codes = [None, 10028, None, None, None, 10028, None, None, None]
    assert [r.get("err_code") for r in res] == codes + [c and 10047 for c in codes]
    assert res[8]["reserved_memory"] == 90 * 1024 - 1


async def test_server_memory_and_file_store_reservations(server_pair: ServerPair) -> None:
    """The server's max_memory_store / max_file_store hold the streams' max_bytes the same
    way for an account without limits of its own."""

    async def scenario(nc: Any) -> list[Any]:
        kb = 1024
        out = []
        for storage, mx in (("memory", 100 * kb), ("file", 200 * kb)):
            p = storage[0].upper()
            out += [
                await _stream(nc, f"{p}1", storage=storage, max_bytes=mx * 6 // 10),
                await _stream(nc, f"{p}2", storage=storage, max_bytes=mx * 6 // 10),
                await _stream(nc, f"{p}3", storage=storage, max_bytes=mx * 4 // 10),
                await _stream(nc, f"{p}4", storage=storage),
                await _stream(nc, f"{p}1", "UPDATE", storage=storage, max_bytes=mx * 5 // 10),
                await _stream(nc, f"{p}4", storage=storage),
            ]
        return [*out, await _info(nc)]

    res = await both(server_pair, None, scenario)
    codes = [None, 10028, None, 10028, None, None]
    assert [r.get("err_code") for r in res[:12]] == codes + [c and 10047 for c in codes]


async def test_account_info_echoes_every_limit(pair: ServerPair) -> None:
    info = await both(pair, "alias", _info)
    assert info["limits"] == {
        "max_memory": 1024**2,
        "max_storage": 2 * 1024**2,
        "max_streams": 3,
        "max_consumers": 4,
        "max_ack_pending": 7,
        "memory_max_stream_bytes": 1024,
        "storage_max_stream_bytes": 2048,
        "max_bytes_required": True,
    }
    plain = await both(pair, "plain", _info)
    assert set(plain["limits"].values()) == {-1, False}
