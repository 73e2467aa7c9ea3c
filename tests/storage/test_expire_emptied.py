"""``StreamStore.expire(now, emptied)``: the messages whose expiry left their subject empty
(the engine places a subject delete marker for each), on both stores."""

from __future__ import annotations

from dataclasses import replace

from natsd.storage.store import StoreConfig

from .conftest import StoreKit

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
MARKER = b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1s\r\nNats-Rollup: sub\r\n\r\n"


def cfg(**kw: object) -> StoreConfig:
    return replace(StoreConfig(name="S"), **kw)  # type: ignore[arg-type]


def test_max_age_reports_only_last_on_subject(kit: StoreKit) -> None:
    s = kit.make(cfg(max_age_ns=NS, allow_msg_ttl=True))
    s.store_raw("a", None, b"1", 1, T0)
    s.store_raw("a", b"NATS/1.0\r\nX: y\r\n\r\n", b"2", 2, T0)
    s.store_raw("b", None, b"3", 3, T0)
    s.store_raw("c", None, b"4", 4, T0)
    s.store_raw("c", None, b"5", 5, T0 + 5 * NS)  # keeps c alive
    s.store_raw("d", None, b"6", 6, T0, ttl=-1)  # "never": exempt from max_age
    emptied: list = []
    assert s.expire(T0 + NS, emptied) == 4
    # In removal (sequence) order; the whole message, headers included.
    assert [(m.subject, m.seq, m.hdr, m.data) for m in emptied] == [
        ("a", 2, b"NATS/1.0\r\nX: y\r\n\r\n", b"2"),
        ("b", 3, None, b"3"),
    ]
    assert s.load_last_msg("c") is not None and s.load_last_msg("d") is not None


def test_ttl_reports_emptied_subjects(kit: StoreKit) -> None:
    s = kit.make(cfg(allow_msg_ttl=True))
    s.store_raw("a", None, b"1", 1, T0, ttl=1)
    s.store_raw("b", None, b"2", 2, T0, ttl=1)
    s.store_raw("b", None, b"3", 3, T0)
    s.store_raw("m", MARKER, b"", 4, T0, ttl=2)
    emptied: list = []
    assert s.expire(T0 + NS, emptied) == 2
    assert [(m.subject, m.seq) for m in emptied] == [("a", 1)]
    emptied.clear()
    # A marker that expires is reported too; the engine sees its header and stops there.
    assert s.expire(T0 + 2 * NS, emptied) == 1
    assert [(m.subject, m.seq, m.hdr) for m in emptied] == [("m", 4, MARKER)]


def test_expire_without_list_is_unchanged(kit: StoreKit) -> None:
    s = kit.make(cfg(max_age_ns=NS))
    s.store_raw("a", None, b"1", 1, T0)
    assert s.expire(T0 + NS) == 1
    assert s.load_last_msg("a") is None


def test_emptied_after_reopen(kit: StoreKit) -> None:
    """File stores read the emptied message back from disk (nothing cached)."""
    if not kit.persistent:
        return
    s = kit.make(cfg(max_age_ns=NS))
    s.store_raw("a", b"NATS/1.0\r\nK: v\r\n\r\n", b"payload", 1, T0)
    s.flush()
    s = kit.reopen(s)
    emptied: list = []
    assert s.expire(T0 + NS, emptied) == 1
    assert [(m.subject, m.hdr, m.data) for m in emptied] == [
        ("a", b"NATS/1.0\r\nK: v\r\n\r\n", b"payload")
    ]
