"""Raw client-protocol scenarios compared byte-for-byte between nats-server
(reference) and natsd. Each scenario is a list of chunks sent on one fresh
connection; the normalised transcripts (INFO minus volatile fields, reply
lines, closed flag) must be equal."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import MAX_PAYLOAD
from .harness import Pause, ServerPair, check_raw, compare_raw, scenario

pytestmark = pytest.mark.differential

# Base CONNECT: quiet and non-pedantic, so scenarios isolate the behaviour
# under test (Go defaults are verbose=true, pedantic=true when omitted).
C = b'CONNECT {"verbose":false,"pedantic":false}\r\n'
CH = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
CP = b'CONNECT {"verbose":false,"pedantic":true}\r\n'
PING = b"PING\r\n"
PONG = b"PONG\r\n"


check = check_raw
P = scenario


# ---------------------------------------------------------------------------
# Scenarios on the default server (no auth, default limits)
# ---------------------------------------------------------------------------

DEFAULT_SCENARIOS = [
    # --- INFO only / CONNECT variants -------------------------------------
    P("info-only"),
    P("connect-empty-object-defaults-verbose", b"CONNECT {}\r\n" + PING),
    P("connect-verbose", b'CONNECT {"verbose":true}\r\n' + PING),
    P("connect-not-verbose", b'CONNECT {"verbose":false}\r\n' + PING, until=PONG),
    P(
        "connect-verbose-sub-pub-unsub",
        b'CONNECT {"verbose":true,"pedantic":false}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\n'
        b"UNSUB 1\r\n" + PING,
    ),
    P(
        "connect-verbose-pedantic-bad-subject",
        b'CONNECT {"verbose":true,"pedantic":true}\r\nPUB foo..bar 2\r\nhi\r\n' + PING,
    ),
    P(
        "connect-full-client-fields",
        b'CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"x",'
        b'"lang":"python3","version":"2.9.0","echo":true,"headers":true,'
        b'"no_responders":true}\r\n' + PING,
        until=PONG,
    ),
    P(
        "connect-protocol-1-async-info",
        b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\n' + PING,
    ),
    P(
        "connect-omitted-pedantic-defaults-true",
        b'CONNECT {"verbose":false}\r\nPUB foo..bar 2\r\nhi\r\n' + PING,
        until=PONG,
    ),
    P("connect-protocol-0", b'CONNECT {"verbose":false,"protocol":0}\r\n' + PING, until=PONG),
    P("connect-protocol-2", b'CONNECT {"verbose":false,"protocol":2}\r\n' + PING),
    P("connect-protocol-negative", b'CONNECT {"verbose":false,"protocol":-1}\r\n' + PING),
    P("connect-twice", C + C + PING, until=PONG),
    P("connect-no-args", b"CONNECT\r\n" + PING),
    P("connect-space-no-json", b"CONNECT \r\n" + PING),
    P("connect-invalid-json", b"CONNECT {bad json}\r\n" + PING),
    P("connect-truncated-json", b'CONNECT {"verbose":false\r\n' + PING),
    P("connect-json-wrong-type", b'CONNECT {"verbose":"yes"}\r\n' + PING),
    P("connect-json-array", b"CONNECT []\r\n" + PING),
    P("connect-unknown-fields", b'CONNECT {"verbose":false,"zzz":1}\r\n' + PING, until=PONG),
    P(
        "connect-no-responders-without-headers",
        b'CONNECT {"verbose":false,"no_responders":true}\r\n' + PING,
    ),
    P(
        "connect-no-responders-headers-false",
        b'CONNECT {"verbose":false,"no_responders":true,"headers":false}\r\n' + PING,
    ),
    # --- PING / PONG -------------------------------------------------------
    P("ping-before-connect", PING, until=PONG),
    P("pong-before-connect", b"PONG\r\n" + PING, until=PONG),
    P("sub-pub-before-connect", b"SUB foo 1\r\nPUB foo 2\r\nhi\r\n" + PING, until=PONG),
    P("ping-ping", C + PING + PING, until=PONG + PONG),
    # --- PUB/SUB round trips ----------------------------------------------
    P("pub-sub-echo", C + b"SUB foo 1\r\nPUB foo 5\r\nhello\r\n" + PING, until=PONG),
    P("pub-sub-reply", C + b"SUB foo 1\r\nPUB foo bar 5\r\nhello\r\n" + PING, until=PONG),
    P("pub-empty-payload", C + b"SUB foo 1\r\nPUB foo 0\r\n\r\n" + PING, until=PONG),
    P(
        "pub-payload-with-crlf",
        C + b"SUB foo 1\r\nPUB foo 6\r\na\r\nb\r\n\r\n" + PING,
        until=PONG,
    ),
    P("pub-binary-payload", C + b"SUB foo 1\r\nPUB foo 4\r\n\x00\xff\r\x01\r\n" + PING, until=PONG),
    P(
        "echo-false",
        b'CONNECT {"verbose":false,"echo":false}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\n' + PING,
        until=PONG,
    ),
    P(
        "wildcards",
        C + b"SUB foo.* 1\r\nSUB foo.> 2\r\nSUB > 3\r\nPUB foo.bar 1\r\nx\r\n"
        b"PUB foo.bar.baz 1\r\ny\r\n" + PING,
        until=PONG,
    ),
    P(
        "sub-pub-split-chunks",
        C + b"SUB fo",
        b"o 1\r\nPUB foo 5\r\nhe",
        Pause(0.05),
        b"llo\r",
        Pause(0.05),
        b"\n" + PING,
        until=PONG,
    ),
    P("unsub", C + b"SUB foo 1\r\nUNSUB 1\r\nPUB foo 1\r\nx\r\n" + PING, until=PONG),
    P("unsub-unknown-sid", C + b"UNSUB 99\r\n" + PING, until=PONG),
    P(
        "unsub-max",
        C + b"SUB foo 1\r\nUNSUB 1 2\r\n" + b"PUB foo 1\r\nx\r\n" * 3 + PING,
        until=PONG,
    ),
    P(
        "unsub-max-after-delivered",
        C
        + b"SUB foo 1\r\n"
        + b"PUB foo 1\r\nx\r\n" * 2
        + b"UNSUB 1 1\r\nPUB foo 1\r\ny\r\n"
        + PING,
        until=PONG,
    ),
    P("unsub-max-zero", C + b"SUB foo 1\r\nUNSUB 1 0\r\nPUB foo 1\r\nx\r\n" + PING, until=PONG),
    P(
        "duplicate-sid",
        C + b"SUB foo 1\r\nSUB bar 1\r\nPUB foo 1\r\nx\r\nPUB bar 1\r\ny\r\n" + PING,
        until=PONG,
    ),
    P(
        "duplicate-sid-verbose",
        b'CONNECT {"verbose":true}\r\nSUB foo 1\r\nSUB bar 1\r\n' + PING,
    ),
    P(
        "queue-group-single-member",
        C + b"SUB foo q 1\r\nPUB foo 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P(
        "queue-and-plain-sub",
        C + b"SUB foo 1\r\nSUB foo q 2\r\nPUB foo 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P("sub-too-many-args", C + b"SUB foo q 1 extra\r\n" + PING),
    # --- headers -----------------------------------------------------------
    P(
        "hpub-hmsg",
        CH + b"SUB foo 1\r\nHPUB foo 24 29\r\nNATS/1.0\r\nA: 1\r\nB: 2\r\n\r\nhello\r\n" + PING,
        until=PONG,
    ),
    P(
        "hpub-reply",
        CH + b"SUB foo 1\r\nHPUB foo rep 12 12\r\nNATS/1.0\r\n\r\n\r\n" + PING,
        until=PONG,
    ),
    P(
        "hpub-empty-header-block",
        CH + b"SUB foo 1\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P(
        "hpub-headers-false",
        C + b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" + PING,
    ),
    P(
        "hpub-headers-explicit-false",
        b'CONNECT {"verbose":false,"headers":false}\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n'
        + PING,
    ),
    P("hpub-before-connect", b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" + PING),
    P("hpub-header-larger-than-total", CH + b"HPUB foo 20 10\r\n" + PING),
    P("hpub-missing-total", CH + b"HPUB foo 12\r\n" + PING),
    P(
        "pub-to-headers-sub-delivers-msg",
        CH + b"SUB foo 1\r\nPUB foo 2\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P(
        "no-responders",
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
        b"SUB _INBOX.x 1\r\nPUB nobody _INBOX.x 0\r\n\r\n" + PING,
        until=PONG,
    ),
    P(
        "no-responders-hpub",
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
        b"SUB _INBOX.x 1\r\nHPUB nobody _INBOX.x 12 12\r\nNATS/1.0\r\n\r\n\r\n" + PING,
        until=PONG,
    ),
    P(
        "no-responders-not-requested",
        CH + b"SUB _INBOX.x 1\r\nPUB nobody _INBOX.x 0\r\n\r\n" + PING,
        until=PONG,
    ),
    # --- lexical variants --------------------------------------------------
    P(
        "lowercase-verbs",
        b'connect {"verbose":false}\r\nsub foo 1\r\npub foo 2\r\nhi\r\nping\r\n',
        until=PONG,
    ),
    P(
        "mixed-case-verbs",
        b'CoNnEcT {"verbose":false}\r\nSuB foo 1\r\nPuB foo 2\r\nhi\r\nPiNg\r\n',
        until=PONG,
    ),
    P(
        "lowercase-hpub",
        CH + b"SUB foo 1\r\nhpub foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P("lowercase-unsub", C + b"SUB foo 1\r\nunsub 1\r\nPUB foo 1\r\nx\r\n" + PING, until=PONG),
    P(
        "tab-separators",
        C + b"SUB\tfoo\t1\r\nPUB\tfoo\t2\r\nhi\r\n" + PING,
        until=PONG,
    ),
    P("multiple-spaces", C + b"SUB   foo    1\r\nPUB  foo   2\r\nhi\r\n" + PING, until=PONG),
    P("trailing-space", C + b"SUB foo 1 \r\nPUB foo 2 \r\nhi\r\n" + PING, until=PONG),
    P("lf-only-connect-ping", b'CONNECT {"verbose":false}\nPING\n', until=PONG),
    P("lf-only-sub-pub", C + b"SUB foo 1\nPUB foo 2\nhi\r\n" + PING, until=PONG),
    P("lf-only-after-payload", C + b"SUB foo 1\r\nPUB foo 2\r\nhi\n" + PING),
    P("cr-only", C + b"PING\r" + PING),
    P("ping-with-args", C + b"PING foo\r\n"),
    P("pong-from-client", C + b"PONG\r\n" + PING, until=PONG),
    # --- payload size mismatches -------------------------------------------
    P("payload-longer-than-declared", C + b"PUB foo 2\r\nhello\r\n" + PING),
    P("payload-shorter-than-declared", C + b"PUB foo 10\r\nhi\r\n" + PING),
    P(
        "payload-shorter-then-completed",
        C + b"SUB foo 1\r\nPUB foo 10\r\nhi\r\n",
        Pause(0.05),
        b"abcd\r\n" + PING,
        until=PONG,
    ),
    # --- missing / malformed arguments -------------------------------------
    P("sub-missing-sid", C + b"SUB foo\r\n" + PING),
    P("sub-no-args", C + b"SUB\r\n" + PING),
    P("pub-missing-size", C + b"PUB foo\r\n" + PING),
    P("pub-no-args", C + b"PUB\r\n" + PING),
    P("pub-too-many-args", C + b"PUB foo bar baz 2\r\nhi\r\n" + PING),
    P("unsub-no-args", C + b"UNSUB\r\n" + PING),
    P("unsub-too-many-args", C + b"UNSUB 1 2 3\r\n" + PING),
    P(
        "unsub-non-numeric-max",
        C + b"SUB foo 1\r\nUNSUB 1 abc\r\nPUB foo 1\r\nx\r\n" + PING,
        until=PONG,
    ),
    P("pub-non-numeric-size", C + b"PUB foo abc\r\n" + PING),
    P("pub-negative-size", C + b"PUB foo -1\r\n" + PING),
    P("pub-size-with-plus", C + b"PUB foo +2\r\nhi\r\n" + PING),
    P("pub-huge-size", C + b"PUB foo 99999999999999999999\r\n" + PING),
    P("hpub-non-numeric-size", CH + b"HPUB foo x 12\r\n" + PING),
    # --- unknown verbs / garbage ------------------------------------------
    P("unknown-verb", b"FOO\r\n"),
    P("unknown-verb-after-connect", C + b"FOO bar\r\n" + PING),
    P("unknown-verb-prefix-p", C + b"PX\r\n"),
    P("unknown-verb-prefix-s", C + b"SUX foo 1\r\n"),
    P("verb-without-space", C + b"PINGX\r\n"),
    P("msg-from-client", C + b"MSG foo 1 2\r\nhi\r\n"),
    P("info-from-client", C + b"INFO {}\r\n" + PING),
    P("garbage-bytes", b"\x00\xff\xfe\x01garbage\r\n"),
    P("garbage-after-connect", C + b"\x16\x03\x01\x00\xa5\x01\x00"),
    P("http-request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    P("empty-line", C + b"\r\n" + PING),
    P("empty-line-before-connect", b"\r\n" + PING),
    P("only-spaces", C + b"   \r\n" + PING),
    # --- subject validation (non-pedantic) ---------------------------------
    *[
        P(
            f"pub-subject-{name}-nonpedantic",
            C + b"PUB " + subj + b" 2\r\nhi\r\n" + PING,
            until=PONG,
        )
        for name, subj in [
            ("double-dot", b"foo..bar"),
            ("trailing-dot", b"foo."),
            ("leading-dot", b".foo"),
            ("fwc-middle", b"foo.>.bar"),
            ("star", b"*"),
            ("fwc", b">"),
            ("star-token", b"foo.*"),
        ]
    ],
    *[
        P(f"pub-subject-{name}-pedantic", CP + b"PUB " + subj + b" 2\r\nhi\r\n" + PING, until=PONG)
        for name, subj in [
            ("double-dot", b"foo..bar"),
            ("trailing-dot", b"foo."),
            ("leading-dot", b".foo"),
            ("fwc-middle", b"foo.>.bar"),
            ("star", b"*"),
            ("fwc", b">"),
            ("star-token", b"foo.*"),
            ("valid", b"foo.bar"),
        ]
    ],
    *[
        P(f"sub-subject-{name}-{mode}", con + b"SUB " + subj + b" 1\r\n" + PING, until=PONG)
        for mode, con in [("nonpedantic", C), ("pedantic", CP)]
        for name, subj in [
            ("double-dot", b"foo..bar"),
            ("trailing-dot", b"foo."),
            ("leading-dot", b".foo"),
            ("fwc-middle", b"foo.>.bar"),
            ("partial-wildcard", b"foo.b*r"),
        ]
    ],
    P("pub-reply-wildcard-pedantic", CP + b"PUB foo bar.* 2\r\nhi\r\n" + PING, until=PONG),
    P("sub-queue-invalid-pedantic", CP + b"SUB foo q.* 1\r\n" + PING, until=PONG),
    # --- max_control_line (default 4096) -----------------------------------
    P("sub-control-line-4096", C + b"SUB " + b"a" * (4096 - 2) + b" 1\r\n" + PING),
    P("sub-control-line-4097", C + b"SUB " + b"a" * (4097 - 2) + b" 1\r\n" + PING),
    P(
        "pub-control-line-4096",
        C + b"SUB > 1\r\nPUB " + b"a" * (4096 - 2) + b" 0\r\n\r\n" + PING,
    ),
    P("pub-control-line-4097", C + b"PUB " + b"a" * (4097 - 2) + b" 0\r\n\r\n" + PING),
    P("pub-control-line-8000", C + b"PUB " + b"a" * 8000 + b" 0\r\n\r\n" + PING),
    P("control-line-no-newline-5000", C + b"SUB " + b"a" * 5000),
    P("control-line-split-4097", C + b"PUB " + b"a" * 2000, Pause(0.05), b"a" * 2095 + b" 0\r\n"),
]


@pytest.mark.parametrize(("chunks", "until"), DEFAULT_SCENARIOS)
def test_default_scenario(pair: ServerPair, chunks: list[Any], until: bytes | None) -> None:
    check(pair, chunks, until=until)


# ---------------------------------------------------------------------------
# Flood: 10k small PUBs then PING must get PONG
# ---------------------------------------------------------------------------


def test_flood_then_ping(pair: ServerPair) -> None:
    check(pair, [C + b"PUB foo 1\r\nx\r\n" * 10_000 + PING], until=PONG, quiet=2.0)


def test_flood_with_subscriber(pair: ServerPair) -> None:
    ref, impl = compare_raw(
        pair,
        [C + b"SUB foo 1\r\n" + b"PUB foo 1\r\nx\r\n" * 10_000 + PING],
        until=PONG,
        quiet=2.0,
    )
    assert ref.lines[-1] == "PONG"
    assert impl.comparable() == ref.comparable()


# ---------------------------------------------------------------------------
# max_payload (server started with max_payload: 1024)
# ---------------------------------------------------------------------------

N = MAX_PAYLOAD

PAYLOAD_SCENARIOS = [
    P("info-max-payload"),
    P(
        "pub-exactly-max",
        C + b"SUB foo 1\r\nPUB foo %d\r\n" % N + b"x" * N + b"\r\n" + PING,
        until=PONG,
    ),
    P("pub-max-plus-one", C + b"PUB foo %d\r\n" % (N + 1) + b"x" * (N + 1) + b"\r\n" + PING),
    P("pub-max-plus-one-no-body", C + b"PUB foo %d\r\n" % (N + 1)),
    P("pub-way-over-max", C + b"PUB foo 100000000\r\n"),
    P(
        "hpub-exactly-max",
        CH
        + b"SUB foo 1\r\nHPUB foo 12 %d\r\nNATS/1.0\r\n\r\n" % N
        + b"x" * (N - 12)
        + b"\r\n"
        + PING,
        until=PONG,
    ),
    P(
        "hpub-max-plus-one",
        CH + b"HPUB foo 12 %d\r\nNATS/1.0\r\n\r\n" % (N + 1) + b"x" * (N - 11) + b"\r\n" + PING,
    ),
]


@pytest.mark.parametrize(("chunks", "until"), PAYLOAD_SCENARIOS)
def test_max_payload_scenario(
    small_payload_pair: ServerPair, chunks: list[Any], until: bytes | None
) -> None:
    check(small_payload_pair, chunks, until=until)
