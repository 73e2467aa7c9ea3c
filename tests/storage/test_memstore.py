"""MemoryStore internals the contract cannot see: indexes and the TTL heap stay bounded."""

from __future__ import annotations

from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig


def test_ttl_heap_is_bounded_when_limits_remove_messages() -> None:
    s = MemoryStore(StoreConfig(name="T", max_msgs=10, allow_msg_ttl=True))
    for _ in range(2000):
        s.store_msg("a", None, b"x", ttl=3600)
    assert s.state().msgs == 10
    assert len(s._ttls) <= 2 * 10 + 64


def test_indexes_drop_dead_slots() -> None:
    s = MemoryStore(StoreConfig(name="I"))
    for i in range(5000):
        s.store_msg(f"s.{i % 2}", None, b"x")
    for seq in range(2, 5000, 3):  # interior removals
        s.remove_msg(seq)
    for seq in range(1, 2400):  # then most of the front
        s.remove_msg(seq)
    live = s.state().msgs
    assert len(s._all.seqs) - s._all.head <= 2 * live + 64
    assert len(s._all.seqs) <= 2 * (len(s._all.seqs) - s._all.head) + 64
    for ss in s._fss.values():
        assert len(ss.seqs) - ss.head <= 2 * ss.n + 64
    # and the answers are still right
    assert s.filtered_state(0, "s.*").msgs == live
    assert s.num_pending(3000, "s.1", False) == sum(
        1 for q in range(3000, 5001) if (m := s.load_msg(q)) is not None and m.subject == "s.1"
    )
