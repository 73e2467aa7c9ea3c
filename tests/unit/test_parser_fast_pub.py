"""The compiled parser's one-pass PUB reader (``Parser._fast_pub``) against the interpreted
parser, which never takes it: the same input gives the same events, byte for byte, and the
same death, however it is split into reads.

Under ``NATSD_PURE=1`` both sides are the interpreted parser (the test then only checks the
reference against itself); the compiled tier of ``make test`` is where it compares the two.
The inputs are built to sit at the edges of what the fast reader accepts: digits in
subjects, double and triple spaces, an empty reply, a bare LF or a CR inside the control
line, sizes that are wrong, too long or past the limit, a payload not followed by CRLF.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_parser import _split

import natsd.protocol.parser as compiled_parser
from natsd.protocol.parser import OP_PUB, Parser


def _interpreted_parser_module(fast: bool = False) -> types.ModuleType:
    """``parser.py`` and ``framing.py`` run from their sources, whatever is installed; with
    ``fast``, taking the compiled build's fast readers (so that the pure tier checks their
    logic too)."""
    root = Path(compiled_parser.__file__).parent
    framing = types.ModuleType("natsd_interpreted_framing")
    framing.__file__ = str(root / "framing.py")
    exec(compile((root / "framing.py").read_text(), framing.__file__, "exec"), framing.__dict__)
    sys.modules[framing.__name__] = framing
    mod = types.ModuleType("natsd_interpreted_parser" + ("_fast" if fast else ""))
    mod.__file__ = str(root / "parser.py")
    text = (root / "parser.py").read_text()
    text = text.replace("from natsd.protocol.framing import", f"from {framing.__name__} import")
    if fast:
        text = text.replace('COMPILED: Final = not __file__.endswith(".py")', "COMPILED = True")
    sys.modules[mod.__name__] = mod
    exec(compile(text, mod.__file__, "exec"), mod.__dict__)
    assert mod.COMPILED is fast
    return mod


REFERENCE = _interpreted_parser_module()
# the fast readers' logic, interpreted (the compiled build runs the same code natively)
FAST = _interpreted_parser_module(fast=True)

TOKEN = st.text(alphabet="ab09.*>_", min_size=0, max_size=5).map(str.encode)
SEP = st.sampled_from([b" ", b" ", b" ", b"  ", b"\r", b"\n", b"x"])


@st.composite
def pub_like(draw: st.DrawFn) -> bytes:
    """A PUB frame, mostly well formed, sometimes broken in one place."""
    subject = draw(TOKEN)
    reply = draw(st.one_of(st.none(), TOKEN))
    payload = draw(st.binary(max_size=12))
    size = draw(st.sampled_from([b"%d" % len(payload)] * 4 + [b"%d" % (len(payload) + 1)]))
    size = draw(st.sampled_from([size, size, b"0" + size, b"1234567890", b"", b"9x"]))
    sep1 = draw(SEP)
    sep2 = draw(SEP)
    args = subject + sep1 + (reply + sep2 if reply is not None else b"") + size
    eol = draw(st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n", b"\r"]))
    end = draw(st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n", b"xx"]))
    return b"PUB " + args + eol + payload + end


@st.composite
def hpub_like(draw: st.DrawFn) -> bytes:
    """An HPUB frame, mostly well formed, sometimes broken in one place."""
    subject = draw(TOKEN)
    reply = draw(st.one_of(st.none(), TOKEN))
    hdr = draw(st.sampled_from([b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nA: b\r\n\r\n", b""]))
    payload = hdr + draw(st.binary(max_size=12))
    hlen = draw(st.sampled_from([b"%d" % len(hdr)] * 4 + [b"%d" % (len(payload) + 1), b"x"]))
    size = draw(st.sampled_from([b"%d" % len(payload)] * 4 + [b"%d" % (len(payload) + 1)]))
    size = draw(st.sampled_from([size, size, b"0" + size, b"1234567890", b"", b"9x"]))
    seps = [draw(SEP) for _ in range(3)]
    args = subject + seps[0] + (reply + seps[1] if reply is not None else b"") + hlen
    args += seps[2] + size
    eol = draw(st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n", b"\r"]))
    end = draw(st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n", b"xx"]))
    return b"HPUB " + args + eol + payload + end


def _events(p: object, chunks: list[bytes]) -> tuple[list[tuple[object, ...]], bool]:
    out: list[tuple[object, ...]] = []
    for c in chunks:
        out.extend(p.feed(c))  # type: ignore[attr-defined]
    return out, bool(p.dead)  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(pub_like(), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 10**6), max_size=4),
    mcl=st.sampled_from([4096, 12, 8]),
    maxp=st.sampled_from([1024 * 1024, 5]),
)
def test_the_fast_reader_agrees_with_the_interpreted_parser(
    frames: list[bytes], cuts: list[int], mcl: int, maxp: int
) -> None:
    data = b"".join(frames)
    chunks = _split(data, cuts)
    want = _events(REFERENCE.Parser(maxp, mcl), chunks)
    got = _events(Parser(maxp, mcl), chunks)
    assert got == want


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(frames=[b"HPUB foo 0 5\r\nhello\r\n"], cuts=[], mcl=4096, maxp=1024 * 1024)
@example(frames=[b"HPUB foo r 0 0\r\n\r\n"], cuts=[], mcl=4096, maxp=1024 * 1024)
@given(
    frames=st.lists(st.one_of(hpub_like(), pub_like()), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 10**6), max_size=4),
    mcl=st.sampled_from([4096, 14, 8]),
    maxp=st.sampled_from([1024 * 1024, 20]),
)
def test_the_fast_readers_agree_with_the_general_path(
    frames: list[bytes], cuts: list[int], mcl: int, maxp: int
) -> None:
    """HPUB and PUB frames: the installed parser (compiled: its fast readers) and the fast
    readers' logic interpreted give the events and the death the general path gives."""
    data = b"".join(frames)
    chunks = _split(data, cuts)
    want = _events(REFERENCE.Parser(maxp, mcl), chunks)
    assert _events(FAST.Parser(maxp, mcl), chunks) == want
    assert _events(Parser(maxp, mcl), chunks) == want


def test_a_run_of_one_subject_shares_one_subject_object() -> None:
    frame = b"PUB orders.eu 3\r\nabc\r\n"
    events = Parser().feed(frame * 5)
    assert [e[0] for e in events] == [OP_PUB] * 5
    assert all(e[1] == b"orders.eu" and e[4] == b" 3\r\nabc\r\n" for e in events)
    if compiled_parser.COMPILED:
        # The point of the fast reader's subject reuse: one object, one hash.
        assert len({id(e[1]) for e in events}) == 1
