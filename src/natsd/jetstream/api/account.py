"""``$JS.API.INFO``: the account's JetStream usage, limits and API statistics."""

from __future__ import annotations

from typing import Any

from natsd.jetstream.engine import JsAccount
from natsd.version import API_LEVEL

__all__ = ["account_info"]


def account_info(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    mem, store = ja.engine.usage(ja)
    rmem, rstore = ja.engine.reserved(ja)
    out: dict[str, Any] = {
        "memory": mem,
        "storage": store,
        "reserved_memory": rmem,
        "reserved_storage": rstore,
        "streams": len(ja.streams),
        "consumers": sum(s.consumer_count for s in ja.streams.values()),
        "limits": ja.limits.to_json(),
    }
    if ja.engine.domain:
        out["domain"] = ja.engine.domain
    out["api"] = {"level": API_LEVEL, "total": ja.api.total, "errors": ja.api.errors}
    return out
