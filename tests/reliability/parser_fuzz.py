"""Frame generators and the split-invariance oracle for the parser fuzz tests.

Kept apart from the tests so the socket-level abuse test can reuse the same frames.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Sequence

from hypothesis import strategies as st

from natsd.protocol.parser import OP_ERR, Event, Parser

#: The only error texts the parser documents (None: close without a reason).
ERR_TEXTS = {
    None,
    "Unknown Protocol Operation",
    "maximum control line exceeded",
    "Maximum Payload Violation",
}

#: (max_payload, max_control_line) pairs: the defaults and tiny limits that the generated
#: frames cross often.
LIMITS = [(1024 * 1024, 4096), (64, 48), (8, 16)]

SUBJECTS = ["a", "foo.bar", "x.*", "x.>", "_INBOX.abc.1", "A.B.C.D", "\x7f", "s\x0bt"]
SEPS = [" ", "\t", "  ", " \t "]
SPECIAL = b"\r\n\t 0123456789PUBHSINGOCTFX.*>"


def randcase(word: str, rng: random.Random) -> str:
    return "".join(c.lower() if rng.random() < 0.2 else c for c in word)


def random_frame(rng: random.Random, prefix: str = "") -> bytes:
    """One frame of the client protocol, usually valid, with random case and separators.

    ``prefix`` is put in front of every subject (one per connection keeps fan-out down)."""
    sep = rng.choice(SEPS) if rng.random() < 0.2 else " "
    eol = "\n" if rng.random() < 0.05 else "\r\n"
    subj = rng.choice(SUBJECTS) if rng.random() < 0.9 else "s" * rng.randrange(1, 80)
    subj = prefix + subj
    kind = rng.randrange(9)
    if kind <= 2:
        payload = rng.randbytes(rng.choice([0, 1, 5, 20, 70]))
        reply = f"{sep}_INBOX.r{rng.randrange(99)}" if rng.random() < 0.3 else ""
        head = f"{randcase('PUB', rng)}{sep}{subj}{reply}{sep}{len(payload)}{eol}"
        return head.encode() + payload + b"\r\n"
    if kind == 3:
        hdr = b"NATS/1.0\r\nK: v\r\n\r\n" if rng.random() < 0.9 else b""
        body = rng.randbytes(rng.choice([0, 3, 40]))
        head = f"{randcase('HPUB', rng)}{sep}{subj}{sep}{len(hdr)}{sep}{len(hdr) + len(body)}{eol}"
        return head.encode() + hdr + body + b"\r\n"
    if kind == 4:
        queue = f"{sep}q{rng.randrange(3)}" if rng.random() < 0.3 else ""
        return f"{randcase('SUB', rng)}{sep}{subj}{queue}{sep}{rng.randrange(100)}{eol}".encode()
    if kind == 5:
        mx = f"{sep}{rng.randrange(10)}" if rng.random() < 0.5 else ""
        return f"{randcase('UNSUB', rng)}{sep}{rng.randrange(100)}{mx}{eol}".encode()
    if kind == 6:
        return f"{randcase(rng.choice(['PING', 'PONG']), rng)}{eol}".encode()
    if kind == 7:
        opts = {"verbose": False, "pedantic": rng.random() < 0.5, "name": "x" * rng.randrange(9)}
        return f"{randcase('CONNECT', rng)}{sep}{json.dumps(opts)}{eol}".encode()
    return f"INFO{sep}{{}}{eol}".encode()


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three random edits: flip, insert, delete, duplicate, truncate, swap a digit."""
    b = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i:i] = bytes([rng.choice(SPECIAL) if rng.random() < 0.7 else rng.randrange(256)])
        elif op == 2 and b:
            del b[i : i + rng.randrange(1, 4)]
        elif op == 3:
            j = rng.randrange(len(b) + 1)
            b[i:i] = b[min(i, j) : max(i, j)][:32]
        elif op == 4:
            del b[i:]
        else:
            digits = [k for k, c in enumerate(b) if 48 <= c <= 57]
            if digits:
                b[rng.choice(digits)] = rng.randrange(48, 58)
    return bytes(b)


def frames(rng: random.Random, n: int) -> bytes:
    return b"".join(random_frame(rng) for _ in range(n))


def feed_chunks(limits: tuple[int, int], chunks: Sequence[bytes]) -> list[Event]:
    p = Parser(max_payload=limits[0], max_control_line=limits[1])
    out: list[Event] = []
    for c in chunks:
        out.extend(p.feed(c))
    return out


def check_events(events: list[Event]) -> None:
    """Errors are documented ones and nothing follows an error."""
    for i, ev in enumerate(events):
        if ev[0] == OP_ERR:
            assert ev[1] in ERR_TEXTS, ev
            assert i == len(events) - 1, events[i:]


#: Known natsd bug (pinned by test_parser_pending_line_limit_is_split_independent, xfail):
#: a control line that has not seen its newline yet is cut off at max_control_line + 6 bytes
#: whatever its verb, so PING/PONG/INFO lines with long junk, "CONNECT\t..." and UNSUB lines
#: right at the limit fail when split and pass when whole. The fuzz oracle tolerates exactly
#: that shape (the split run = a prefix of the whole run + that one error) so the fuzzers keep
#: looking for other bugs; set to False once the bug is fixed.
TOLERATE_PENDING_LINE_BUG = False
#: Known natsd bug (pinned by test_parser_stray_cr_in_pub_is_split_independent, xfail): a
#: stray CR inside a PUB line ("PUB a r\r 2", "PUB a 1\rb 1") stays inside the token on the
#: fast path (as in nats-server) but is a separator on the general path, which a tab anywhere
#: in the same read selects: the same line is accepted with another subject/reply, or closes
#: the connection, depending on unrelated bytes. Inputs that hold both a stray CR and a tab
#: get only the no-exception and documented-error checks (skipped[0] counts them).
TOLERATE_PUB_CR_BUG = False
#: Known natsd bug (pinned by test_parser_bare_connect_error_is_split_independent, xfail):
#: "CONNECT\r\n" closes without a reason when whole, but with -ERR 'Unknown Protocol
#: Operation' when the read ends between the CR and the LF. The oracle lets the error text
#: (not the position of the error, nor anything before it) differ.
TOLERATE_ERR_TEXT_BUG = False
STRAY_CR = re.compile(rb"\r(?!\n)")
tolerated = [0]
skipped = [0]


def split_comparable(data: bytes) -> bool:
    if TOLERATE_PUB_CR_BUG and b"\t" in data and STRAY_CR.search(data):
        skipped[0] += 1
        return False
    return True


def _comparable(events: list[Event]) -> list[Event]:
    """An oversized HPUB's error carries its subject and header block when the headers
    came in the same read (to trace it, as nats-server does only then): what the error
    says is compared, not what else the read held."""
    return [ev[:2] if ev[0] == OP_ERR else ev for ev in events]


def same_events(whole: list[Event], split: list[Event]) -> bool:
    whole, split = _comparable(whole), _comparable(split)
    if split == whole:
        return True
    if (
        TOLERATE_ERR_TEXT_BUG
        and len(split) == len(whole)
        and split[:-1] == whole[:-1]
        and split[-1][0] == whole[-1][0] == OP_ERR
    ):
        tolerated[0] += 1
        return True
    if (
        TOLERATE_PENDING_LINE_BUG
        and split
        and split[-1] == (OP_ERR, "maximum control line exceeded")
        and whole[: len(split) - 1] == split[:-1]
    ):
        tolerated[0] += 1
        return True
    return False


def split_at(data: bytes, points: Sequence[int]) -> list[bytes]:
    cuts = [0, *sorted(points), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cuts)]


# --------------------------------------------------------------------- strategies
@st.composite
def frame_streams(draw: st.DrawFn, max_frames: int = 4) -> bytes:
    """A few generated frames, mutated half of the time."""
    rng = draw(st.randoms(use_true_random=False))
    data = frames(rng, draw(st.integers(1, max_frames)))
    if draw(st.booleans()):
        data = mutate(data, rng)
    return data


raw_bytes = st.binary(max_size=80) | st.lists(
    st.sampled_from(
        [
            b"PUB ",
            b"HPUB ",
            b"SUB ",
            b"UNSUB ",
            b"PING",
            b"PONG",
            b"CONNECT ",
            b"INFO ",
            b"\r\n",
            b"\r",
            b"\n",
            b" ",
            b"\t",
            b"a",
            b"1",
            b"12",
            b"0",
        ]
    ),
    max_size=20,
).map(b"".join)
limits = st.sampled_from(LIMITS)
