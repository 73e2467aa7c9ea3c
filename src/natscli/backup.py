"""``nats stream backup|restore`` and ``nats account backup|restore``, as the Go CLI (jsm.go's
``SnapshotToDirectory`` / ``RestoreSnapshotFromDirectory``) does them.

A backup is a directory holding ``backup.json`` (the stream's config and the state the
backup is of, ``{"config": ..., "state": ...}``, which is also the restore request) and
``stream.arc.s2`` (the server's archive, as it sent it: an S2 stream of a NATSARC1
archive, nats-server 2.15's format). A restore reads ``stream.arc.s2``, or the name older
Go CLIs write, ``stream.tar.s2``. The data file is written under a temporary name and
``backup.json`` last, so a directory with ``backup.json`` holds a whole backup.

Snapshot: each chunk with a reply subject is acknowledged (an empty message) before it is
written; an empty message ends the transfer, with status 204 or an error status. Restore:
64 KiB chunks, each a request whose reply must be empty; then an empty request whose reply
is the stream create response.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .conn import ApiError, JsApi, Session
from .output import (
    CliError,
    confirm,
    console,
    human_bytes,
    parse_size,
    print_section,
    progress_bar,
)

__all__ = [
    "register_account",
    "register_stream",
    "restore_from_directory",
    "snapshot_to_directory",
]

DATA_FILE = "stream.arc.s2"
LEGACY_DATA_FILE = "stream.tar.s2"
META_FILE = "backup.json"
RESTORE_CHUNK = 64 * 1024
DEFAULT_CHUNK = 128 * 1024

Handler = Callable[[Session, argparse.Namespace], Any]
Progress = Callable[[int, int], None]  # (bytes so far, chunks so far)


def data_path(directory: Path) -> Path:
    """The archive of a backup directory: the 2.15 name, else the older one."""
    for name in (DATA_FILE, LEGACY_DATA_FILE):
        p = directory / name
        if p.exists():
            return p
    raise CliError(f"{directory} holds no {DATA_FILE}")


def _raise_for(resp: dict[str, Any]) -> None:
    err = resp.get("error")
    if isinstance(err, dict):
        raise ApiError(
            int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description"))
        )


async def snapshot_to_directory(
    nc: Client,
    api: JsApi,
    stream: str,
    target: Path,
    *,
    consumers: bool = True,
    check: bool = False,
    chunk_size: int = 0,
    window_size: int = 0,
    idle: float = 5.0,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Back ``stream`` up into ``target``; returns the summary (state, chunks, bytes)."""
    meta, data = target / META_FILE, target / DATA_FILE
    if meta.exists():
        raise CliError(f"a backup already exists in {target}")
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target / (DATA_FILE + ".partial")
    inbox = nc.new_inbox()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    received = {"bytes": 0, "chunks": 0}
    last_at = [time.monotonic()]
    out = partial.open("wb")

    async def on_chunk(m: Msg) -> None:
        if done.done():
            return
        if not m.data:
            status = (m.headers or {}).get("Status", "") if m.headers else ""
            if status and "204" not in status:
                desc = (m.headers or {}).get("Description", "")
                done.set_exception(CliError(f"{status} {desc}".strip()))
            else:
                done.set_result(None)
            return
        if m.reply:
            await nc.publish(m.reply, b"")
        out.write(m.data)
        received["bytes"] += len(m.data)
        received["chunks"] += 1
        last_at[0] = time.monotonic()
        if on_progress is not None:
            on_progress(received["bytes"], received["chunks"])

    sub = await nc.subscribe(inbox, cb=on_chunk, pending_msgs_limit=-1, pending_bytes_limit=-1)
    started = time.monotonic()
    try:
        req: dict[str, Any] = {"deliver_subject": inbox, "chunk_size": chunk_size or DEFAULT_CHUNK}
        if not consumers:
            req["no_consumers"] = True
        if check:
            req["jsck"] = True
        if window_size:
            req["window_size"] = window_size
        resp = await api.request(f"STREAM.SNAPSHOT.{stream}", req)
        if on_start is not None:
            on_start(resp)
        wait = max(idle, api.opts.timeout)
        while not done.done():
            await asyncio.wait([done], timeout=0.25)
            if not done.done() and time.monotonic() - last_at[0] > wait:
                raise CliError("backup timed out after receiving no data for a long period")
        done.result()
        out.close()
        os.replace(partial, data)
        meta.write_text(
            json.dumps({"config": resp.get("config"), "state": resp.get("state")}, indent=2)
        )
    finally:
        out.close()
        await sub.unsubscribe()
        if partial.exists():
            partial.unlink()
    return {
        "state": resp.get("state") or {},
        "chunks": received["chunks"],
        "bytes": received["bytes"],
        "seconds": time.monotonic() - started,
    }


async def restore_from_directory(
    nc: Client,
    api: JsApi,
    directory: Path,
    *,
    config: dict[str, Any] | None = None,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Restore the backup in ``directory`` (with ``config`` instead of the backed-up
    one); returns the stream create response."""
    try:
        req = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError) as e:
        raise CliError(f"could not read {directory / META_FILE}: {e}") from e
    if not isinstance(req, dict) or not isinstance(req.get("config"), dict):
        raise CliError(f"{directory / META_FILE} holds no stream configuration")
    name = str(req["config"].get("name", ""))
    if config is not None:
        if config.get("name", name) != name:
            raise CliError("stream names may not be changed during restore")
        req["config"] = {**config, "name": name}
    path = data_path(directory)
    resp = await api.request(f"STREAM.RESTORE.{name}", req)
    deliver = str(resp.get("deliver_subject") or "")
    if not deliver:
        raise CliError("the server named no subject to send the backup to")
    sent = chunks = 0
    with path.open("rb") as f:
        while True:
            chunk = f.read(RESTORE_CHUNK)
            if not chunk:
                break
            ack = await nc.request(deliver, chunk, timeout=api.opts.timeout)
            if ack.data:
                try:
                    _raise_for(json.loads(ack.data))
                except ValueError:
                    pass
                raise CliError(f"restore failed: {ack.data[:200]!r}")
            sent += len(chunk)
            chunks += 1
            if on_progress is not None:
                on_progress(sent, chunks)
    final = await nc.request(deliver, b"", timeout=3600)
    try:
        doc = json.loads(final.data)
    except ValueError as e:
        raise CliError(f"invalid final response: {final.data[:200]!r}") from e
    if not isinstance(doc, dict) or doc.get("type") != (
        "io.nats.jetstream.api.v1.stream_create_response"
    ):
        raise CliError(f"invalid final response: {final.data[:200]!r}")
    _raise_for(doc)
    return doc


# ---------------------------------------------------------------------- commands
def _size(text: str | None) -> int:
    return parse_size(text) if text else 0


async def _backup_one(
    s: Session,
    stream: str,
    target: Path,
    *,
    progress: bool,
    consumers: bool,
    check: bool,
    chunk: int,
    window: int,
) -> None:
    nc, api = await s.nc(), await s.api()
    bar = progress_bar(None, "Backup", progress)
    task = bar.add_task("Backup", total=None)

    def started(resp: dict[str, Any]) -> None:
        total = int((resp.get("state") or {}).get("bytes", 0))
        console.print(f'Starting backup of Stream "{stream}" with {human_bytes(total)}')
        if check:
            console.print(
                "Health Check was requested, this can take a long time without progress reports"
            )
        bar.update(task, total=max(total, 1))
        bar.start()

    def moved(n: int, _chunks: int) -> None:
        bar.update(task, completed=n)

    try:
        summary = await snapshot_to_directory(
            nc,
            api,
            stream,
            target,
            consumers=consumers,
            check=check,
            chunk_size=chunk,
            window_size=window,
            on_start=started,
            on_progress=moved,
        )
    finally:
        bar.stop()
    console.print(
        f"Received {human_bytes(summary['bytes'])} compressed data in {summary['chunks']} chunks"
        f' for stream "{stream}" in {summary["seconds"]:.3f}s'
    )


async def stream_backup(s: Session, a: argparse.Namespace) -> None:
    await _backup_one(
        s,
        a.stream,
        Path(a.target),
        progress=a.progress,
        consumers=a.consumers,
        check=a.check,
        chunk=_size(a.chunk_size),
        window=_size(a.window_size),
    )


async def _restore_one(
    s: Session, directory: Path, *, progress: bool, config: dict[str, Any] | None, a: Any
) -> None:
    nc, api = await s.nc(), await s.api()
    try:
        name = json.loads((directory / META_FILE).read_text())["config"]["name"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CliError(f"restore failed: {e}") from e
    try:
        await api.request(f"STREAM.INFO.{name}")
        raise CliError(f'Stream "{name}" already exist')
    except ApiError as e:
        if e.err_code != 10059:  # stream not found: the restore may go ahead
            raise
    if config is None and (a.cluster or a.tag or getattr(a, "replicas", 0)):
        config = json.loads((directory / META_FILE).read_text())["config"]
    if config is not None:
        if a.cluster or a.tag:
            config["placement"] = {k: v for k, v in (("cluster", a.cluster), ("tags", a.tag)) if v}
        if getattr(a, "replicas", 0):
            config["num_replicas"] = a.replicas
    size = data_path(directory).stat().st_size
    console.print(f'Starting restore of Stream "{name}" from file "{directory}"')
    bar = progress_bar(size, "Restore", progress)
    task = bar.add_task("Restore", total=max(size, 1))
    started = time.monotonic()
    with bar:
        resp = await restore_from_directory(
            nc,
            api,
            directory,
            config=config,
            on_progress=lambda n, _c: bar.update(task, completed=n),
        )
    console.print(f'Restored stream "{name}" in {time.monotonic() - started:.0f}s')
    st = resp.get("state") or {}
    print_section(
        None,
        [
            ("Messages", st.get("messages", 0)),
            ("Bytes", human_bytes(st.get("bytes", 0))),
            ("First Sequence", st.get("first_seq", 0)),
            ("Last Sequence", st.get("last_seq", 0)),
        ],
    )


async def stream_restore(s: Session, a: argparse.Namespace) -> None:
    config = None
    if a.config:
        try:
            config = json.loads(Path(a.config).read_text())
        except (OSError, ValueError) as e:
            raise CliError(f"could not read configuration {a.config}: {e}") from e
        if isinstance(config, dict) and isinstance(config.get("config"), dict):
            config = config["config"]
    await _restore_one(s, Path(a.file), progress=a.progress, config=config, a=a)


async def account_backup(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    infos = await api.paged("STREAM.LIST", "streams")
    if not infos:
        raise CliError("no streams found")
    size = sum(int((i.get("state") or {}).get("bytes", 0)) for i in infos)
    nconsumers = sum(int((i.get("state") or {}).get("consumer_count", 0)) for i in infos)
    print_section(
        f"Performing backup of all streams to {a.target}",
        [("Streams", len(infos)), ("Size", human_bytes(size)), ("Consumers", nconsumers)],
    )
    if not confirm("Perform backup", a.force):
        return
    target = Path(a.target)
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    failures: list[tuple[str, str]] = []
    for i in sorted(infos, key=lambda i: str(i["config"]["name"])):
        name = str(i["config"]["name"])
        try:
            await _backup_one(
                s,
                name,
                target / name,
                progress=False,
                consumers=a.consumers,
                check=a.check,
                chunk=DEFAULT_CHUNK,
                window=0,
            )
        except CliError as e:
            console.print(f"Backup of {name} failed: {e}")
            failures.append((name, str(e)))
        console.print("")
    if failures:
        console.print("Backup failures: ")
        for name, err in failures:
            console.print(f"  {name}: {err}")
        raise CliError("backup failed")


async def account_restore(s: Session, a: argparse.Namespace) -> None:
    root = Path(a.directory)
    dirs = sorted(p for p in root.iterdir())
    api = await s.api()
    known = set(await api.stream_names())
    for d in dirs:
        if not d.is_dir():
            raise CliError(f'expected a directory "{d.name}"')
        if d.name in known:
            raise CliError(f'stream "{d.name}" exists already')
        if not (d / META_FILE).exists():
            raise CliError(f"expected {META_FILE} in {d}")
    console.print(f'Restoring backup of all {len(dirs)} streams in directory "{root}"')
    for d in dirs:
        await _restore_one(s, d, progress=False, config=None, a=a)


def _flag_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Enables or disables progress reporting using a progress bar",
    )


def _flags_backup(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--check", action="store_true", help=f"Checks the {what} for health prior to backup"
    )
    p.add_argument(
        "--consumers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Enable or disable consumer backups",
    )


def _flags_placement(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", help="Place the stream in a specific cluster")
    p.add_argument(
        "--tag",
        action="append",
        default=[],
        help="Place the stream on servers that has specific tags (pass multiple times)",
    )


def register_stream(cmd: Callable[..., Any]) -> None:
    """``nats stream backup`` / ``restore`` (``cmd`` adds a subcommand of ``stream``)."""
    p = cmd(
        "backup",
        stream_backup,
        "Creates a backup of a Stream over the NATS network",
        ["snapshot"],
    )
    p.add_argument("stream", help="Stream to backup")
    p.add_argument("target", help="Directory to create the backup in")
    _flag_progress(p)
    _flags_backup(p, "stream")
    p.add_argument("--chunk-size", help="Sets a specific chunk size that the server will send")
    p.add_argument("--window-size", help="Sets a specific window size that the server will send")
    p = cmd("restore", stream_restore, "Restore a Stream over the NATS network")
    p.add_argument("file", help="The directory holding the backup to restore")
    _flag_progress(p)
    p.add_argument("--config", help="Load a different configuration when restoring the stream")
    _flags_placement(p)
    p.add_argument(
        "--replicas", type=int, default=0, help="Override how many replicas of the data to create"
    )


def register_account(cmd: Callable[..., Any]) -> None:
    """``nats account backup`` / ``restore`` (``cmd`` adds a subcommand of ``account``)."""
    p = cmd(
        "backup",
        account_backup,
        "Creates a backup of all JetStream Streams over the NATS network",
        ["snapshot"],
    )
    p.add_argument("target", help="Directory to create the backup in")
    _flags_backup(p, "Stream")
    p.add_argument("-f", "--force", action="store_true", help="Perform backup without prompting")
    p.add_argument(
        "-w", "--critical-warnings", action="store_true", help="Treat warnings as failures"
    )
    p = cmd("restore", account_restore, "Restore an account backup over the NATS network")
    p.add_argument("directory", help="The directory holding the account backup to restore")
    _flags_placement(p)
