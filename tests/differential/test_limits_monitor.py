"""README claims checked against nats-server: ``max_subscriptions``, ``write_deadline`` and
``/accountz`` behave as the reference server's do.

- ``max_subscriptions``: the subscription past the limit gets nats-server's
  ``-ERR 'maximum subscriptions exceeded'`` (its ``ErrTooManySubs``, lower case), is not
  registered, and the connection stays up (raw-socket transcripts compared line for line).
- ``write_deadline``: a subscriber that stops reading is cut off as a slow consumer once a
  write to it has been blocked for ``write_deadline``, far below ``max_pending`` (so the
  deadline, not the pending-bytes limit, cuts it), well before the 10 s default would.
- ``/accountz``: the same document (keys, system account, the configured accounts).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from .conftest import pair_fixture
from .harness import ServerPair, ServerProcess, check_raw, compare_raw

pytestmark = [pytest.mark.differential, pytest.mark.timeout(90)]

MONITOR_RE = re.compile(r"Starting http monitor on (\S+):(\d+)")
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\n'

max_subs_pair = pair_fixture(config="max_subscriptions: 3\n", scope="module")
deadline_pair = pair_fixture(
    config='write_deadline: "500ms"\nhttp: "127.0.0.1:-1"\n', scope="module"
)
accounts_pair = pair_fixture(
    config="""
http: "127.0.0.1:-1"
accounts {
  A { users = [{user: a, password: a}] }
  B { users = [{user: b, password: b}] }
}
""",
    scope="module",
)


def monitor(server: ServerProcess) -> str:
    deadline = time.monotonic() + 10
    while (m := MONITOR_RE.search(server.log())) is None:
        assert time.monotonic() < deadline, f"{server.name}: no monitor port\n{server.log()}"
        time.sleep(0.02)
    return f"http://{m.group(1)}:{m.group(2)}"


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


# ------------------------------------------------------------------ max_subscriptions


def test_max_subscriptions(max_subs_pair: ServerPair) -> None:
    check_raw(
        max_subs_pair,
        [
            CONNECT
            + b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB d 4\r\nPING\r\n"
            # d was refused (no MSG), a still works, and so does the connection.
            + b"PUB d 1\r\nx\r\nPUB a 1\r\ny\r\nPING\r\n"
            # An unsubscribe makes room again.
            + b"UNSUB 1\r\nSUB d 5\r\nPUB d 1\r\nz\r\nPING\r\n"
        ],
        until=b"PONG\r\nMSG d 5 1\r\nz\r\nPONG\r\n",
    )


def test_max_subscriptions_error_text(max_subs_pair: ServerPair) -> None:
    chunks = [CONNECT + b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB d 4\r\nPING\r\n"]
    ref, impl = compare_raw(max_subs_pair, chunks, until=b"PONG\r\n")
    want = ["-ERR 'maximum subscriptions exceeded'", "PONG"]
    assert ref.lines[:2] == want, ref.lines
    assert impl.lines[:2] == want, impl.lines
    assert not ref.closed and not impl.closed


# ------------------------------------------------------------------ write_deadline

SENT = 16 * 1024 * 1024  # far below max_pending (64 MB): only the deadline can cut it
BOUND = 6.0  # the write deadline is 0.5 s; the 10 s default would miss this bound


async def _cut_off_after(server: ServerProcess) -> float | None:
    """Seconds from the end of a 16 MB burst to a non-reading subscriber being counted as a
    slow consumer (``/varz``), or None if it was not within BOUND."""
    url = monitor(server)
    before = get_json(url + "/varz")["slow_consumers"]
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(server.address)
    slow.sendall(CONNECT + b"SUB firehose 1\r\nPING\r\n")
    buf = b""
    while b"PONG\r\n" not in buf:
        buf += slow.recv(4096)
    # From here on the subscriber reads nothing.
    reader, writer = await asyncio.open_connection(*server.address)
    await reader.readline()
    writer.write(CONNECT)
    chunk = b"PUB firehose 65536\r\n" + b"x" * 65536 + b"\r\n"
    for _ in range(SENT // 65536):
        writer.write(chunk)
        await writer.drain()
    writer.write(b"PING\r\n")
    await writer.drain()
    while not (await reader.readline()).startswith(b"PONG"):
        pass
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < BOUND:
            varz = await asyncio.to_thread(get_json, url + "/varz")
            if varz["slow_consumers"] > before:
                return time.monotonic() - t0
            await asyncio.sleep(0.05)
        return None
    finally:
        writer.close()
        slow.close()


async def test_write_deadline_cuts_off_a_stalled_subscriber(deadline_pair: ServerPair) -> None:
    ref = await _cut_off_after(deadline_pair.ref)
    impl = await _cut_off_after(deadline_pair.impl)
    assert ref is not None, f"nats-server did not cut the subscriber off within {BOUND}s"
    assert impl is not None, (
        f"natsd did not cut the subscriber off within {BOUND}s (nats-server: {ref:.2f}s)"
    )


# ------------------------------------------------------------------ /accountz


def _accountz(server: ServerProcess, query: str = "") -> dict[str, Any]:
    doc: dict[str, Any] = get_json(monitor(server) + "/accountz" + query)
    doc.pop("server_id")
    doc.pop("now")
    if isinstance(doc.get("accounts"), list):
        doc["accounts"] = sorted(doc["accounts"])  # nats-server lists them in map order
    return doc


def test_accountz(accounts_pair: ServerPair) -> None:
    ref, impl = _accountz(accounts_pair.ref), _accountz(accounts_pair.impl)
    assert ref == {"system_account": "$SYS", "accounts": ["$G", "$SYS", "A", "B"]}
    assert impl == ref


# nats-server gives every account implicit service imports from $SYS (CONNZ, STATZ, user
# info, $JS.API); natsd has no system services, so those imports and the subscriptions they
# make are the expected difference. Everything else of account_detail is compared.
_DETAIL_DIFFERS = ("imports", "subscriptions", "sublist_stats", "update_time")


def _detail(server: ServerProcess, name: str) -> dict[str, Any]:
    doc = _accountz(server, f"?acc={name}")
    detail = doc.pop("account_detail")
    assert detail["update_time"].endswith("Z")
    assert set(detail["sublist_stats"]) >= {"num_subscriptions", "num_cache", "cache_hit_rate"}
    return {"doc": doc, **{k: v for k, v in detail.items() if k not in _DETAIL_DIFFERS}}


@pytest.mark.parametrize("name", ["A", "$G"])
def test_accountz_account_detail(accounts_pair: ServerPair, name: str) -> None:
    ref, impl = _detail(accounts_pair.ref, name), _detail(accounts_pair.impl, name)
    assert ref["account_name"] == name
    assert ref["doc"] == {"system_account": "$SYS"}
    assert impl == ref


def test_accountz_unknown_account(accounts_pair: ServerPair) -> None:
    answers = []
    for server in (accounts_pair.ref, accounts_pair.impl):
        with pytest.raises(urllib.error.HTTPError) as e:
            get_json(monitor(server) + "/accountz?acc=NOPE")
        answers.append((e.value.code, e.value.read()))
    assert answers[0] == (400, b"Account NOPE does not exist")
    assert answers[1] == answers[0]
