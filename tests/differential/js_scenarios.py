"""Helpers for the JetStream stream API differential tests.

A scenario is an ``async def scenario(js: JsRecorder) -> None`` that sends requests
(``js.req``), JetStream publishes (``js.pub``) and direct gets (``js.direct``) through one
nats-py connection; every response is normalised and appended to ``js.log`` as
``(label, value)``. :func:`run_scenario` runs the same scenario against nats-server and
natsd (each on its own connection) and returns both logs for comparison.

Normalisation (see :func:`norm`): timestamps (``created``/``ts``/``first_ts``/``last_ts``/
``time``) and server ids / names are masked; ``cluster``, ``api.level`` and the ``_nats.*``
metadata keys describing the server (``_nats.ver``/``_nats.level``, which natsd may omit) are
dropped (``_nats.req.level`` is kept). The account ``api.total``/``api.errors`` counters are
masked unless a scenario asks for them; then they are relative to the start of the scenario
(the servers are shared between tests). Direct-get replies are recorded as status line,
header list (``Nats-Time-Stamp``'s value masked) and payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from .harness import ServerPair, ServerProcess, run_client, run_reference, start_server

API = "$JS.API"

#: Keys dropped altogether: ``cluster`` (``{"leader": <server name>}``) is only sent by
#: nats-server; natsd (standalone only) omits it.
DROP = frozenset({"cluster"})

#: Keys whose values are volatile; they keep their presence, the value is masked.
VOLATILE = frozenset(
    {
        "created",
        "ts",
        "first_ts",
        "last_ts",
        "time",
        "server_id",
        "server_name",
        "leader",
    }
)

TIMEOUT = "<timeout>"
NO_RESPONDERS = "<no responders>"


#: ``_nats.*`` metadata keys that are still compared: the API level a stream's config needs
#: (stored with the stream by nats-server and natsd alike).
KEPT_NATS_METADATA = frozenset({"_nats.req.level"})


def _norm_metadata(md: dict[str, Any]) -> dict[str, Any]:
    """Drop the ``_nats.*`` keys that describe the server (``_nats.ver``, ``_nats.level``,
    which natsd may omit) but keep ``_nats.req.level``."""
    return {k: v for k, v in md.items() if not k.startswith("_nats.") or k in KEPT_NATS_METADATA}


def norm(obj: Any) -> Any:
    """Deep copy of a JSON document with the volatile fields masked / dropped."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for k, val in v.items():
                if k in DROP:
                    continue
                if k in VOLATILE:
                    out[k] = f"<{k}>"
                elif k == "metadata" and isinstance(val, dict):
                    md = _norm_metadata(val)
                    if md:
                        out[k] = walk(md)
                elif k == "api" and isinstance(val, dict):
                    out[k] = {kk: walk(vv) for kk, vv in val.items() if kk != "level"}
                else:
                    out[k] = walk(val)
            return out
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(obj)


def _decode(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return {"<raw>": data.decode("utf-8", "backslashreplace")}


def parse_header_block(raw: bytes | None) -> tuple[str, list[tuple[str, str]]]:
    """``(status line, [(name, value), ...])`` of a raw ``NATS/1.0 ...`` header block;
    the value of ``Nats-Time-Stamp`` is masked."""
    if not raw:
        return "", []
    lines = raw.decode("utf-8", "backslashreplace").split("\r\n")
    status = lines[0]
    hdrs: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        value = value.strip()
        if name == "Nats-Time-Stamp":
            value = "<ts>" if value else value
        hdrs.append((name, value))
    return status, hdrs


_CREATE_RACE_RETRIES = 20


def _lost_create_race(subject: str, out: Any) -> bool:
    """A file-stream create that nats-server failed on its own directory race (see
    :meth:`JsRecorder.req`)."""
    if not subject.startswith(f"{API}.STREAM.CREATE."):
        return False
    err = out.get("error") if isinstance(out, dict) else None
    return isinstance(err, dict) and err.get("err_code") == 10049


class JsRecorder:
    """Wraps a nats-py connection and records normalised responses."""

    def __init__(self, nc: Any, *, api_counters: bool = True, reference: bool = False) -> None:
        self.nc = nc
        #: True on the nats-server side: a request it does not answer raises (see
        #: :meth:`raw_request`) instead of being recorded as ``<timeout>``.
        self.reference = reference
        #: False: account infos show ``api.total``/``api.errors`` as ``"<n>"``.
        self.api_counters = api_counters
        self.log: list[tuple[str, Any]] = []
        self._raw_headers: dict[str, bytes | None] = {}
        self._api_base: tuple[int, int] | None = None
        orig = nc._process_msg

        async def process_msg(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes):  # type: ignore[no-untyped-def]
            self._raw_headers[subject.decode()] = headers or None
            return await orig(sid, subject, reply, data, headers)

        nc._process_msg = process_msg

    # -------------------------------------------------------------- raw requests
    async def raw_request(
        self,
        subject: str,
        body: bytes | str | dict[str, Any] | None = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 2.0,
        expect_silence: bool = False,
    ) -> Any:
        """The reply message, or :data:`NO_RESPONDERS` (an answer: the 503 status), or
        :data:`TIMEOUT`. On the reference side a timeout raises, unless the scenario says
        nats-server stays silent here (``expect_silence``): otherwise two servers that both
        fail to answer would compare equal."""
        import nats.errors

        if isinstance(body, dict):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        elif body is None:
            body = b""
        try:
            return await self.nc.request(subject, body, timeout=timeout, headers=headers)
        except nats.errors.NoRespondersError:
            return NO_RESPONDERS
        except nats.errors.TimeoutError:
            if self.reference and not expect_silence:
                raise TimeoutError(f"no answer to {subject} {body[:200]!r} in {timeout}s") from None
            return TIMEOUT

    async def req(
        self,
        label: str,
        subject: str,
        body: bytes | str | dict[str, Any] | None = b"",
        *,
        timeout: float = 2.0,
        record: bool = True,
        expect_silence: bool = False,
    ) -> Any:
        """A JetStream API request; ``subject`` is relative to ``$JS.API.`` unless it
        starts with ``$``. Records and returns the normalised JSON response."""
        if not subject.startswith("$"):
            subject = f"{API}.{subject}"
        msg = await self.raw_request(
            subject, body, timeout=timeout, expect_silence=expect_silence
        )
        out = msg if isinstance(msg, str) else norm(_decode(msg.data))
        for _ in range(_CREATE_RACE_RETRIES):
            if not (self.reference and _lost_create_race(subject, out)):
                break
            # nats-server 2.15 removes an account's streams directory in the background
            # when its last file stream is deleted (the previous scenario's reset does
            # that), and a file stream created meanwhile fails with 10049 "error creating
            # store for stream" (mkdir: no such file or directory). That is the reference's
            # race, not an answer to compare: ask again, and keep its API counters as if
            # the lost attempt had not happened.
            await asyncio.sleep(0.05)
            if self._api_base is not None:
                self._api_base = (self._api_base[0] + 1, self._api_base[1] + 1)
            msg = await self.raw_request(
                subject, body, timeout=timeout, expect_silence=expect_silence
            )
            out = msg if isinstance(msg, str) else norm(_decode(msg.data))
        if (
            isinstance(out, dict)
            and out.get("type") == "io.nats.jetstream.api.v1.account_info_response"
        ):
            out = self._api_delta(out)
        if record:
            self.log.append((label, out))
        return out

    async def pub(
        self,
        label: str,
        subject: str,
        data: bytes | str = b"",
        headers: dict[str, str] | None = None,
        *,
        timeout: float = 2.0,
        expect_silence: bool = False,
    ) -> Any:
        """A publish with a reply subject (a JetStream publish): records the PubAck."""
        if isinstance(data, str):
            data = data.encode()
        msg = await self.raw_request(
            subject, data, headers=headers, timeout=timeout, expect_silence=expect_silence
        )
        out = msg if isinstance(msg, str) else norm(_decode(msg.data))
        self.log.append((label, out))
        return out

    async def pubs(self, label: str, subject: str, n: int, data: bytes | str = b"x") -> None:
        """``n`` publishes; records the list of acks under one label."""
        acks = []
        for _ in range(n):
            if isinstance(data, str):
                data = data.encode()
            msg = await self.raw_request(subject, data)
            acks.append(msg if isinstance(msg, str) else norm(_decode(msg.data)))
        self.log.append((label, acks))

    async def direct(
        self,
        label: str,
        subject: str,
        body: bytes | str | dict[str, Any] | None = b"",
        *,
        timeout: float = 2.0,
        expect_silence: bool = False,
    ) -> Any:
        """A direct get: records ``{status, headers, payload}`` (or a timeout /
        no-responders marker)."""
        if not subject.startswith("$"):
            subject = f"{API}.DIRECT.GET.{subject}"
        msg = await self.raw_request(subject, body, timeout=timeout, expect_silence=expect_silence)
        if isinstance(msg, str):
            out: Any = msg
        else:
            status, hdrs = parse_header_block(self._raw_headers.get(msg.subject))
            out = {
                "status": status,
                "headers": hdrs,
                "payload": msg.data.decode("utf-8", "backslashreplace"),
            }
        self.log.append((label, out))
        return out

    def note(self, label: str, value: Any) -> None:
        self.log.append((label, value))

    # -------------------------------------------------------------- account info
    async def start(self) -> None:
        """Remember the current API counters; later account infos report deltas."""
        msg = await self.raw_request(f"{API}.INFO")
        if not isinstance(msg, str):
            api = _decode(msg.data).get("api", {})
            self._api_base = (int(api.get("total", 0)), int(api.get("errors", 0)))

    def _api_delta(self, out: dict[str, Any]) -> dict[str, Any]:
        api = out.get("api")
        if not self.api_counters and isinstance(api, dict):
            out = dict(out)
            out["api"] = {k: "<n>" if k in ("total", "errors") else v for k, v in api.items()}
            return out
        if self._api_base is not None and isinstance(api, dict):
            api = dict(api)
            if isinstance(api.get("total"), int):
                # The start() INFO request itself is counted once in between.
                api["total"] = api["total"] - self._api_base[0] - 1
            if isinstance(api.get("errors"), int):
                api["errors"] = api["errors"] - self._api_base[1]
            out = dict(out)
            out["api"] = api
        return out

    async def state(self, label: str, stream: str) -> Any:
        """Record just the ``state`` of a stream's info (or the whole error response)."""
        info = await self.req(label, f"STREAM.INFO.{stream}", record=False)
        out = info["state"] if isinstance(info, dict) and "state" in info else info
        self.log.append((label, out))
        return out


async def reset(nc: Any) -> None:
    """Delete every stream in the connection's account."""
    for _ in range(3):
        msg = await nc.request(f"{API}.STREAM.NAMES", b"", timeout=2)
        names = json.loads(msg.data).get("streams") or []
        if not names:
            return
        for name in names:
            await nc.request(f"{API}.STREAM.DELETE.{name}", b"", timeout=2)


Scenario = Callable[[JsRecorder], Awaitable[None]]


async def _run_one(
    server: ServerProcess,
    scenario: Scenario,
    timeout: float,
    api_counters: bool,
    reference: bool,
    fresh: bool,
) -> Any:
    async def fn(nc: Any) -> Any:
        rec = JsRecorder(nc, api_counters=api_counters, reference=reference)
        if not fresh:
            await reset(nc)
            await rec.start()
        await scenario(rec)
        if not fresh:
            await reset(nc)
        return rec.log

    if reference:
        return await run_reference(server, fn, timeout=timeout)
    return await run_client(server, fn, timeout=timeout)


async def run_scenario(
    pair: ServerPair,
    scenario: Scenario,
    *,
    timeout: float = 20.0,
    api_counters: bool = False,
    fresh: bool = False,
) -> tuple[Any, Any]:
    """Run ``scenario`` against both servers concurrently: ``(ref_log, impl_log)``.

    ``api_counters``: compare the account ``api.total``/``api.errors`` counters (as
    deltas from the start of the scenario); otherwise they are masked. ``fresh``: no
    reset and no start() around the scenario, so the counters are absolute.

    The nats-server side must answer: an exception or a request it leaves unanswered
    (unless marked ``expect_silence``) raises :class:`ReferenceFailure`. natsd's
    exceptions and timeouts are values, compared with nats-server's answers."""
    ref, impl = await asyncio.gather(
        _run_one(pair.ref, scenario, timeout, api_counters, True, fresh),
        _run_one(pair.impl, scenario, timeout, api_counters, False, fresh),
        return_exceptions=True,
    )
    # Both are awaited before raising, so no side is left running after the test.
    for result in (ref, impl):
        if isinstance(result, BaseException):
            raise result
    return ref, impl


# ------------------------------------------------------------------ server pair
@contextlib.contextmanager
def js_server_pair(extra_args: tuple[str, ...] = ()) -> Iterator[ServerPair]:
    """nats-server and natsd, each with ``-js -sd <own tmp dir>``."""
    tmp = Path(tempfile.mkdtemp(prefix="natsd-diff-js-"))
    started: list[ServerProcess] = []
    try:
        for kind in ("nats-server", "natsd"):
            sd = tmp / f"store-{kind}"
            sd.mkdir()
            started.append(start_server(kind, ["-js", "-sd", str(sd), *extra_args], log_dir=tmp))
        yield ServerPair(started[0], started[1])
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
