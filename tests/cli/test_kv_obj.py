"""``nats kv`` and ``nats object``, checked against nats-py's own KV and Object Store."""

from __future__ import annotations

import asyncio
import os

import nats
import pytest

from .conftest import Cli, ServerProc, finish, wait_for_line

# Many `nats` runs (about 0.3 s each): part of `make test`, left out by -m 'not slow'.
pytestmark = pytest.mark.slow


def test_kv_put_get_del_and_buckets(cli: Cli, server: ServerProc) -> None:
    out = cli.run("kv", "add", "CFG", "--history", "5", "--ttl", "1h").stdout
    assert "Information for Key-Value Store Bucket CFG" in out and "History Kept: 5" in out
    cfg = server.api("STREAM.INFO.KV_CFG")["config"]
    assert cfg["subjects"] == ["$KV.CFG.>"] and cfg["max_msgs_per_subject"] == 5
    assert cfg["max_age"] == 3600 * 10**9 and cfg["allow_rollup_hdrs"] is True
    assert cli.run("kv", "put", "CFG", "color", "blue").stdout.strip() == "blue"
    cli.run("kv", "put", "CFG", "color", "green")
    cli.run("kv", "put", "CFG", "size", input=b"XL")
    assert cli.run("kv", "get", "CFG", "color", "--raw").stdout == "green\n"
    assert "CFG > color revision: 2" in cli.run("kv", "get", "CFG", "color").stdout
    assert cli.json("kv", "get", "CFG", "color", "--revision", "1")["value"] == "blue"
    r = cli.run("kv", "create", "CFG", "color", "red", check=False)
    assert r.returncode == 1 and "exists" in r.stderr
    cli.run("kv", "del", "CFG", "size", "-f")
    r = cli.run("kv", "get", "CFG", "size", check=False)
    assert r.returncode == 1 and "key not found: size" in r.stderr
    cli.run("kv", "create", "CFG", "size", "S")  # allowed again once deleted
    assert cli.json("kv", "ls") == ["CFG"]

    async def read() -> bytes | None:
        nc = await nats.connect(server.url)
        kv = await nc.jetstream().key_value("CFG")
        e = await kv.get("color")
        await nc.close()
        return e.value

    assert asyncio.run(read()) == b"green"
    cli.run("kv", "rm", "CFG", "-f")
    assert cli.json("kv", "ls") == []


def test_kv_ls_history_watch(cli: Cli, server: ServerProc) -> None:
    cli.run("kv", "add", "CFG", "--history", "5")
    for v in ("1", "2", "3"):
        cli.run("kv", "put", "CFG", "n", v)
    cli.run("kv", "put", "CFG", "other", "x")
    assert cli.json("kv", "ls", "CFG") == ["n", "other"]
    hist = cli.json("kv", "history", "CFG", "n")
    assert [(h["revision"], h["value"], h["operation"]) for h in hist] == [
        (1, "1", "PUT"),
        (2, "2", "PUT"),
        (3, "3", "PUT"),
    ]
    assert "History for CFG > n" in cli.run("kv", "history", "CFG", "n").stdout
    w = cli.popen("kv", "watch", "CFG", "n", "--count", "2")
    wait_for_line(w, "Watching CFG > n")
    cli.run("kv", "put", "CFG", "n", "4")
    rc, out, _ = finish(w)
    assert rc == 0 and "PUT CFG > n: 3" in out and "PUT CFG > n: 4" in out


def test_object_put_get_ls_rm(cli: Cli, server: ServerProc) -> None:
    data = os.urandom(300_000)  # three chunks
    (cli.cwd / "blob.bin").write_bytes(data)
    cli.run("object", "add", "FILES", "--description", "test files")
    out = cli.run("object", "put", "FILES", "blob.bin").stdout
    assert "Object information for FILES > blob.bin" in out and "Chunks: 3" in out
    cli.run("object", "put", "FILES", "--name", "notes.txt", input=b"hello notes")
    names = [o["name"] for o in cli.json("object", "ls", "FILES")]
    assert names == ["blob.bin", "notes.txt"]
    table = cli.run("object", "ls", "FILES").stdout
    assert "blob.bin" in table and "293 KiB" in table
    assert cli.json("object", "ls") == ["FILES"]
    cli.run("object", "get", "FILES", "blob.bin", "-O", "copy.bin")
    assert (cli.cwd / "copy.bin").read_bytes() == data
    assert cli.run("object", "get", "FILES", "notes.txt", "-O", "-").stdout == "hello notes"
    # Replacing asks, and -f replaces; the old chunks are purged.
    r = cli.run("object", "put", "FILES", "blob.bin", check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    cli.run("object", "put", "FILES", "blob.bin", "-f")
    assert server.api("STREAM.INFO.OBJ_FILES")["state"]["messages"] == 3 + 1 + 1 + 1
    cli.run("object", "rm", "FILES", "notes.txt", "-f")
    assert [o["name"] for o in cli.json("object", "ls", "FILES")] == ["blob.bin"]
    r = cli.run("object", "get", "FILES", "notes.txt", check=False)
    assert r.returncode == 1 and "not found" in r.stderr


def test_object_interoperates_with_nats_py(cli: Cli, server: ServerProc) -> None:
    data = os.urandom(200_000)
    cli.run("object", "add", "FILES")

    async def put() -> None:
        nc = await nats.connect(server.url)
        obs = await nc.jetstream().object_store("FILES")
        await obs.put("from-py", data)
        await nc.close()

    asyncio.run(put())
    cli.run("object", "get", "FILES", "from-py", "-O", "got.bin")
    assert (cli.cwd / "got.bin").read_bytes() == data

    (cli.cwd / "up.bin").write_bytes(data[::-1])
    cli.run("object", "put", "FILES", "up.bin")

    async def get() -> bytes:
        nc = await nats.connect(server.url)
        obs = await nc.jetstream().object_store("FILES")
        res = await obs.get("up.bin")
        await nc.close()
        return bytes(res.data or b"")

    assert asyncio.run(get()) == data[::-1]


def test_bench(cli: Cli, server: ServerProc) -> None:
    r = cli.json("bench", "pub", "bench.core", "--msgs", "2000", "--size", "64", "--clients", "2")
    assert r["msgs"] == 4000 and r["clients"] == 2 and r["msgs_per_sec"] > 0
    sub = cli.popen("bench", "sub", "bench.s", "--msgs", "500")
    wait_for_line(sub, "Waiting for 500 messages")
    cli.run("bench", "pub", "bench.s", "--msgs", "500", "--size", "16")
    rc, out, _ = finish(sub)
    assert rc == 0 and "NATS Sub stats:" in out
    r = cli.json(
        "bench",
        "js",
        "pub",
        "bench.js",
        "--create",
        "--stream",
        "BENCH",
        "--msgs",
        "1000",
        "--batch",
        "50",
    )
    assert r["msgs"] == 1000
    assert server.api("STREAM.INFO.BENCH")["state"]["messages"] == 1000
    r = cli.json("bench", "js", "fetch", "--stream", "BENCH", "--msgs", "1000")
    assert r["msgs"] == 1000
