"""A failing reference side is an error, never a value that two failing servers share.

Before, ``run_scenario`` and ``run_client_both`` turned any exception into a value and
``JsRecorder`` recorded an unanswered request as ``<timeout>``: a scenario in which both
servers time out compared equal and passed. These scenarios make both servers fail on
purpose and check that the test now errors with :class:`ReferenceFailure`, while expected
error *answers* (JSON error bodies, an expected silence) still compare as values.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ClientError, ReferenceFailure, ServerPair, run_client_both
from .js_scenarios import TIMEOUT, JsRecorder, js_server_pair, run_scenario

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def _unanswered(js: JsRecorder) -> None:
    # A subscriber that never answers: the request times out on both servers alike.
    await js.nc.subscribe("silent.service")
    await js.raw_request("silent.service", b"", timeout=0.3)
    js.note("after", "reached")


async def test_both_servers_timing_out_is_an_error(js_pair: ServerPair) -> None:
    with pytest.raises(ReferenceFailure, match=r"nats-server .*no answer to silent\.service"):
        await run_scenario(js_pair, _unanswered)


async def test_expected_silence_still_compares(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.nc.subscribe("silent.service")
        msg = await js.raw_request("silent.service", b"", timeout=0.3, expect_silence=True)
        js.note("silence", msg)

    ref, impl = await run_scenario(js_pair, sc)
    assert ref == impl == [("silence", TIMEOUT)]


async def test_error_answers_are_values(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("info missing", "STREAM.INFO.NOPE")

    ref, impl = await run_scenario(js_pair, sc)
    assert ref == impl
    assert ref[0][1]["error"]["err_code"] == 10059  # stream not found: an answer, compared


async def test_reference_exception_is_an_error(js_pair: ServerPair) -> None:
    async def fn(nc: Any) -> Any:
        raise RuntimeError("scenario bug")

    with pytest.raises(ReferenceFailure, match="RuntimeError: scenario bug"):
        await run_client_both(js_pair, fn, reference_must_succeed=True)
    # Without the flag (core tests that expect a client error on both sides) the
    # exception is still a compared value.
    ref, impl = await run_client_both(js_pair, fn)
    assert ref == impl == ClientError("RuntimeError", "scenario bug")
