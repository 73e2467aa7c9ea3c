"""AccountLimits from an account's jetstream {} block, for embedders that pass one directly
(``natsd.Server(accounts={"A": AccountConfig("A", jetstream={...})})``)."""

from __future__ import annotations

import pytest

from natsd.jetstream.config.account_limits import AccountLimits


def test_every_spelling_maps_to_the_reported_name() -> None:
    lim = AccountLimits.from_config(
        {
            "Mem": 1,
            "disk": 2,
            "streams": 3,
            "consumers": 4,
            "max_ack_pending": 5,
            "mem_max_stream_bytes": 6,
            "disk_max_stream_bytes": 7,
            "max_stream_bytes": True,
        }
    )
    assert lim.to_json() == {
        "max_memory": 1,
        "max_storage": 2,
        "max_streams": 3,
        "max_consumers": 4,
        "max_ack_pending": 5,
        "memory_max_stream_bytes": 6,
        "storage_max_stream_bytes": 7,
        "max_bytes_required": True,
    }
    assert AccountLimits.from_config({}) == AccountLimits()
    assert set(AccountLimits().to_json().values()) == {-1, False}


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ({"tiers": {}}, 'unknown field "tiers"'),
        ({"max_streams": "5"}, "max_streams must be an integer"),
        ({"max_mem": True}, "max_mem must be an integer"),
        ({"max_bytes_required": 1}, "max_bytes_required must be a boolean"),
    ],
)
def test_embedders_get_the_same_refusals(spec: dict[str, object], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        AccountLimits.from_config(spec)
