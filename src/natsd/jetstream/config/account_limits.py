"""An account's JetStream limits (``accounts { A { jetstream { ... } } }``), enforced where
nats-server enforces them.

* ``max_streams``: stream create (``jsNonClusteredStreamLimitsCheck``), 10027; 0 or -1 is
  unlimited. Re-creating an existing stream does not count it twice.
* ``max_consumers``: per stream, on consumer create (``engine.add_consumer``), 10026; a
  stream whose own ``max_consumers`` is above it is refused on create and update, 10026.
* ``max_memory`` / ``max_storage``: stream create and update reserve ``max_bytes`` (a stream
  without one counts 1 byte) against what the account's other streams of that storage
  reserve, 10028 / 10047 (``checkBytesLimits``); publishes compare the bytes stored
  (``JetStream.storage_exceeded``). The server's ``max_memory_store`` / ``max_file_store``
  are checked the same way over every account.
* ``max_bytes_required``, ``memory_max_stream_bytes``, ``storage_max_stream_bytes``:
  ``checkStreamCfg`` on create and update, 10113 / 10122 (``stream_config``).
* ``max_ack_pending``: consumer create and update: the default ``max_ack_pending`` is capped
  by it, a larger one is refused with 10121 (``consumer_config``).

nats-server's configuration has no tiers (only JWT accounts do), so neither has natsd, and
account info reports ``limits`` alone, as nats-server does for such an account.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from natsd.config.options import JS_ACCOUNT_LIMIT_KEYS
from natsd.jetstream.config.stream_types import StorageType, StreamConfig
from natsd.jetstream.wire import errors as E

__all__ = ["AccountLimits", "check_stream_create", "check_stream_update", "reservation"]


@dataclass(frozen=True, slots=True)
class AccountLimits:
    """nats-server's ``JetStreamAccountLimits``: -1 (or 0 where noted above) is unlimited.
    Also an ``AccountLimitsLike`` for ``stream_config``."""

    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1
    memory_max_stream_bytes: int = -1
    storage_max_stream_bytes: int = -1
    max_bytes_required: bool = False

    @classmethod
    def from_config(cls, spec: Mapping[str, Any]) -> AccountLimits:
        """From an account's ``jetstream {}`` block, in any of nats-server's spellings (the
        config reader has already checked the keys; embedders get a ValueError here)."""
        values: dict[str, Any] = {}
        for raw, v in spec.items():
            name = JS_ACCOUNT_LIMIT_KEYS.get(str(raw).lower())
            if name is None:
                raise ValueError(f'account jetstream limits: unknown field "{raw}"')
            if name == "max_bytes_required":
                if not isinstance(v, bool):
                    raise ValueError(f"account jetstream limits: {raw} must be a boolean")
            elif isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"account jetstream limits: {raw} must be an integer")
            values[name] = v
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def storage_limit(self, storage: StorageType) -> int:
        return self.max_memory if storage == StorageType.MEMORY else self.max_storage


def reservation(streams: Iterable[StreamConfig], storage: StorageType, skip: str = "") -> int:
    """``tieredReservation``: the ``max_bytes`` the streams of ``storage`` set aside (other
    than ``skip``)."""
    return sum(
        c.max_bytes for c in streams if c.name != skip and c.max_bytes > 0 and c.storage == storage
    )


def _check_bytes(
    limits: AccountLimits,
    storage: StorageType,
    add: int,
    reserved: int,
    server_max: int,
    server_reserved: int,
) -> None:
    """``checkBytesLimits`` for one replica."""
    if add < 0:
        add = 1  # a stream without max_bytes still takes a byte
    error = (
        E.JSMemoryResourcesExceededErr
        if storage == StorageType.MEMORY
        else E.JSStorageResourcesExceededErr
    )
    acct_max = limits.storage_limit(storage)
    if acct_max >= 0 and (reserved > acct_max or add > acct_max - reserved):
        raise error()
    if server_max >= 0 and (server_reserved > server_max or add > server_max - server_reserved):
        raise error()


def _check_max_consumers(limits: AccountLimits, cfg: StreamConfig) -> None:
    if 0 < limits.max_consumers < cfg.max_consumers:
        raise E.JSMaximumConsumersLimitErr()


def check_stream_create(
    limits: AccountLimits,
    cfg: StreamConfig,
    account_streams: Iterable[StreamConfig],
    server_max: int,
    server_reserved: int,
) -> None:
    """``jsNonClusteredStreamLimitsCheck``: may the account add ``cfg``? ``account_streams``
    are the account's streams, ``server_max`` the server's limit for ``cfg.storage`` (-1 for
    none) and ``server_reserved`` what all accounts' streams reserve of it."""
    others = [c for c in account_streams if c.name != cfg.name]
    if limits.max_streams > 0 and len(others) >= limits.max_streams:
        raise E.JSMaximumStreamsLimitErr()
    _check_max_consumers(limits, cfg)
    reserved = reservation(others, cfg.storage)
    _check_bytes(limits, cfg.storage, cfg.max_bytes, reserved, server_max, server_reserved)


def check_stream_update(
    limits: AccountLimits,
    old: StreamConfig,
    new: StreamConfig,
    account_streams: Iterable[StreamConfig],
    server_max: int,
    server_reserved: int,
) -> None:
    """The limits part of ``configUpdateCheck``: only a larger ``max_bytes`` reserves more."""
    _check_max_consumers(limits, new)
    diff = max(max(new.max_bytes, 0) - max(old.max_bytes, 0), 0)
    reserved = reservation(account_streams, new.storage, skip=new.name)
    reserved += max(new.max_bytes, 0) - diff
    _check_bytes(limits, new.storage, diff, reserved, server_max, server_reserved)
