"""The ``nats`` console command: argument parsing and dispatch.

Connection flags (``-s/--server``, ``--user``, ``--password``, ``--creds``, ``--token``,
``--context``, ``--timeout``...) are accepted before or after the sub-command, as with the Go
CLI. Every action is an ``async def (Session, Namespace)``; a ``CliError`` is printed as
``nats: error: ...`` and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["build_parser", "main"]

VERSION = "0.1.0 (natsd)"


def _skip_websocket_support(argv: Sequence[str]) -> None:
    """nats-py imports aiohttp (a third of start-up time) only for ws:// URLs; a console run
    that uses none tells it aiohttp is absent."""
    urls = " ".join([*argv, os.environ.get("NATS_URL", "")])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    if os.path.exists(os.path.join(base, "nats", "context.txt")):
        return  # a selected context may name a websocket URL
    if "ws://" not in urls and "wss://" not in urls and "--context" not in urls:
        sys.modules.setdefault("aiohttp", None)  # type: ignore[arg-type]


def build_parser() -> argparse.ArgumentParser:
    from . import bench, consumer, kv, obj, pubsub, server, stream
    from .conn import add_conn_flags

    common = argparse.ArgumentParser(add_help=False)
    add_conn_flags(common)
    parser = argparse.ArgumentParser(
        prog="nats",
        description="NATS utility: streams, consumers, KV, object store, pub/sub and benchmarks",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"nats {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parents = [common]
    stream.register(sub, parents)
    consumer.register(sub, parents)
    pubsub.register(sub, parents)
    kv.register(sub, parents)
    obj.register(sub, parents)
    server.register(sub, parents)
    bench.register(sub, parents)
    return parser


async def _run(ns: argparse.Namespace) -> int:
    from .conn import Session, options_from_args

    session = Session(options_from_args(ns))
    try:
        rc: Any = await ns.func(session, ns)
        return int(rc) if isinstance(rc, int) else 0
    finally:
        await session.close()


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and "NATS_CONTEXT" not in os.environ:
        _skip_websocket_support(sys.argv[1:])
    parser = build_parser()
    from . import server
    from .output import CliError, err_console

    ns = parser.parse_args(argv)
    try:
        rc = asyncio.run(_run(ns))
    except server.CheckFailed as e:
        rc = e.status
    except CliError as e:
        err_console.print(f"nats: error: {e}", markup=False, highlight=False)
        rc = 1
    except KeyboardInterrupt:
        rc = 130
    except Exception as e:  # a failure nobody foresaw: say what it was, exit non-zero
        err_console.print(f"nats: error: {type(e).__name__}: {e}", markup=False, highlight=False)
        rc = 1
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
