"""Shared helpers for the *_check.py scripts: record each step's result or error as JSON."""

import asyncio
import json
import os
import sys
from dataclasses import asdict, is_dataclass
from datetime import datetime

URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
STEP_TIMEOUT = float(os.environ.get("STEP_TIMEOUT", "8"))


def _plain(v):
    if is_dataclass(v) and not isinstance(v, type):
        try:
            return {k: _plain(x) for k, x in asdict(v).items()}
        except TypeError:
            return {k: _plain(getattr(v, k)) for k in v.__dataclass_fields__}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, datetime):
        return "<time>"
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return repr(v)


def err_info(exc: BaseException) -> dict:
    out = {"error": type(exc).__name__, "msg": str(exc)[:300]}
    for attr in ("code", "error_code", "err_code", "description"):
        if getattr(exc, attr, None) is not None:
            out[attr] = _plain(getattr(exc, attr))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        out["cause"] = {"error": type(cause).__name__, "msg": str(cause)[:200]}
    return out


class Report:
    def __init__(self, package: str):
        self.data = {"package": package, "url": URL, "steps": {}}

    async def step(self, name, coro_or_fn, *, timeout: float | None = None):
        """Run one step; record {"ok": result} or the error. Returns the result (or None)."""
        try:
            aw = coro_or_fn() if callable(coro_or_fn) else coro_or_fn
            res = await asyncio.wait_for(aw, timeout or STEP_TIMEOUT)
            self.data["steps"][name] = {"ok": _plain(res)}
            return res
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.data["steps"][name] = err_info(exc)
            return None

    def note(self, key, value):
        self.data[key] = _plain(value)

    def dump(self):
        json.dump(self.data, sys.stdout, indent=1, sort_keys=False)
        sys.stdout.write("\n")


async def collect(aiter, limit=100):
    out = []
    async for x in aiter:
        out.append(x)
        if len(out) >= limit:
            break
    return out


async def mapped(coro, fn):
    """``fn`` of what ``coro`` returns: a step's result in the form it is recorded."""
    return fn(await coro)


def run(main, report: Report) -> None:
    """Run a check's ``main`` and print its report (a crash recorded as ``fatal``)."""
    try:
        asyncio.run(main())
    except BaseException as exc:
        report.note("fatal", repr(exc))
    report.dump()
