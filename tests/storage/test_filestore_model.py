"""The contract's model-based test, aimed at the file store's own failure modes.

Reuses ``test_model.StoreMachine`` (random operations checked against ``model.Model`` after
every step) with a file store whose blocks hold a handful of records, so rolling, leading
block removal and truncate's rewrite happen constantly, and adds a crash restart (flush,
sync, abandon, reopen) next to the clean one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.stateful import rule, run_state_machine_as_test

from natsd.storage.filestore import FileStore
from natsd.storage.store import StoreConfig, StreamStore, file_msg_size

from .conftest import StoreKit, damage
from .test_model import StoreMachine


def tiny_block_kit(tmp_path: Path, block_size: int = 200, compress: bool = False) -> StoreKit:
    """File stores of ``block_size``-byte blocks (``compress``: ``compression: s2``)."""

    def build(cfg: StoreConfig, d: Path | None) -> StreamStore:
        assert d is not None
        return FileStore(d, replace(cfg, compress=compress or cfg.compress), block_size=block_size)

    return StoreKit("file", file_msg_size, build, _tmp=tmp_path)


class CrashingMachine(StoreMachine):
    @rule()
    def crash_reopen(self) -> None:
        kit = self.kit
        old = self.s
        assert isinstance(old, FileStore)
        d = kit._dirs.pop(id(old))
        old.flush()
        old.sync()
        old._close_fds()  # the process dies: no stop(), no manifest
        old._closed = True
        fresh = kit._build(old.config, d)
        assert isinstance(fresh, FileStore)
        assert damage(fresh.recovery_report) == [], damage(fresh.recovery_report)
        kit._dirs[id(fresh)] = d
        kit._open.append(fresh)
        self.store = fresh
        fresh.register_updates(self._cb)

    @rule()
    def sync(self) -> None:
        self.s.flush()
        self.s.sync()


def run_model(kit: StoreKit, machine: type[CrashingMachine], max_examples: int) -> None:
    """``machine``'s random operations on ``kit``'s stores, checked against the model."""
    bound = type("Machine", (machine,), {"kit": kit})
    try:
        run_state_machine_as_test(
            bound,
            settings=settings(
                max_examples=max_examples,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        kit.close_all()


def test_file_store_with_tiny_blocks_matches_model(tmp_path: Path) -> None:
    run_model(tiny_block_kit(tmp_path), CrashingMachine, 60)
