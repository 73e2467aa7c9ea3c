"""Server-side parser for the NATS client protocol.

``Parser.feed(data)`` returns a list of events. Events are plain tuples whose first item is
an ``OP_*`` tag, because the hot path creates one per message and tuples are the cheapest
immutable value in CPython:

* ``(OP_PUB, subject, reply | None, size, tail)``
* ``(OP_HPUB, subject, reply | None, hdr_len, total_len, tail)``

  ``tail`` is ``b" <size>\r\n<payload>\r\n"`` (for HPUB
  ``b" <hdr> <total>\r\n<headers+payload>\r\n"``): exactly the end of the MSG/HMSG frame
  a subscriber receives, usually one slice of the input, so fan-out only prepends
  ``MSG <subject> <sid>``. ``message_body(tail, size)`` returns the payload (headers
  included for HPUB).
* ``(OP_SUB, subject, queue | None, sid)``, ``(OP_UNSUB, sid, max | None)``
* ``(OP_CONNECT, json_bytes)``, ``(OP_PING,)``, ``(OP_PONG,)``
* ``(OP_ERR, message | None)``: the peer broke the protocol. ``message`` is the text
  nats-server sends in ``-ERR '...'`` (``None`` means nats-server closes without a reason).
  After an error the parser is dead and returns nothing more.

Control lines are located with ``bytes.find`` and payloads sliced by length, never walked byte
by byte. A control line is re-parsed when its payload arrives in a later read; that costs one
extra split per split frame and saves a state machine. Payloads larger than what arrived are
accumulated in a ``bytearray`` so a 1 MB payload in 64 KB reads is not copied quadratically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from natsd.protocol.framing import FrameBuffer

if TYPE_CHECKING:
    # Machine integers under mypyc; plain ints when interpreted (annotations only).
    from mypy_extensions import i64

__all__ = [
    "DEFAULT_MAX_CONTROL_LINE",
    "DEFAULT_MAX_PAYLOAD",
    "OP_CONNECT",
    "OP_ERR",
    "OP_HPUB",
    "OP_INFO",
    "OP_PING",
    "OP_PONG",
    "OP_PUB",
    "OP_SUB",
    "OP_UNSUB",
    "Event",
    "Parser",
    "message_body",
]

OP_PUB: Final = 1
OP_HPUB: Final = 2
OP_SUB: Final = 3
OP_UNSUB: Final = 4
OP_PING: Final = 5
OP_PONG: Final = 6
OP_CONNECT: Final = 7
OP_INFO: Final = 8
OP_ERR: Final = 9

# True when this module runs as a mypyc-compiled extension (see setup.py).
COMPILED: Final = not __file__.endswith(".py")

DEFAULT_MAX_CONTROL_LINE: Final = 4096
DEFAULT_MAX_PAYLOAD: Final = 1024 * 1024

# The events are heterogeneous tuples; consumers unpack by tag.
Event = tuple[Any, ...]

ERR_UNKNOWN_OP: Final = "Unknown Protocol Operation"
ERR_MAX_CONTROL_LINE: Final = "maximum control line exceeded"
ERR_MAX_PAYLOAD: Final = "Maximum Payload Violation"

_PUB_HEADS: Final = (b"PUB ", b"PUB\t")
_HPUB_HEADS: Final = (b"HPUB ", b"HPUB\t")
_PING: Final = (OP_PING,)
_PONG: Final = (OP_PONG,)
# CONNECT may carry a JWT and signatures; it is bounded separately from other control lines.
_MAX_CONNECT_LINE: Final = 1024 * 1024


class Parser(FrameBuffer):
    __slots__ = ("_last_subject",)

    def __init__(
        self,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
    ) -> None:
        super().__init__(max_payload, max_control_line)
        # The subject of the last canonical PUB: a run of publishes to one subject shares
        # one bytes object, so its hash (bytes cache theirs) is computed once for the
        # subscription lookups of the whole run, and no slice is made per message.
        self._last_subject = b""

    def feed(self, data: bytes) -> list[Event]:
        ev: list[Event] = []
        data = self._take(data)
        n = len(data)
        pos = 0
        append = ev.append
        mcl = self.max_control_line
        maxp = self.max_payload
        # Tabs are legal separators; one memchr per read keeps them off the fast path.
        fast = b"\t" not in data
        while pos < n:
            if COMPILED and fast:
                nxt = (
                    self._fast_hpub(data, pos, n, ev)
                    if data[pos] == 72
                    else self._fast_pub(data, pos, n, ev)
                )
                if nxt > 0:
                    pos = nxt
                    continue
                if nxt == 0:
                    return ev  # held: the frame ends in a later read
            if COMPILED:
                # Under mypyc an indexed scan of a ~20-byte control line costs a few ns;
                # a bytes.find() call costs ~130 ns of argument boxing. Interpreted, the
                # opposite holds, so each build uses the search that is fast for it.
                eol = pos
                while eol < n and data[eol] != 10:
                    eol += 1
                if eol == n:
                    eol = -1
            else:
                eol = data.find(b"\n", pos)
            if eol < 0:
                # No complete line yet. Like nats-server's byte-driven parser, reject a frame
                # whose first bytes cannot begin any verb without waiting for a newline.
                if not _could_be_verb(data[pos : pos + 8], n - pos):
                    return self._fail(ev, ERR_UNKNOWN_OP)
                # nats-server limits what follows the verb of an unfinished line (a pending
                # CR excluded) to max_control_line; PING/PONG skip to the newline unchecked.
                if n - pos > mcl and _pending_args_len(data, pos, n) > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                if n - pos > _MAX_CONNECT_LINE:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                break
            end = eol - 1 if eol > pos and data[eol - 1] == 13 else eol
            c0 = data[pos]
            if (
                c0 == 80
                and fast
                and end != eol
                and end - pos > 6
                and end - pos - 4 <= mcl
                and data[pos + 1] == 85
                and data[pos + 2] == 66
                and data[pos + 3] == 32
            ):
                # Fast path for the canonical "PUB <subject> [<reply>] <size>\r\n": single
                # spaces, decimal size. Indexing and find() keep it free of temporary lists;
                # anything unusual falls through to the general path below.
                if COMPILED:
                    sp = pos + 4
                    while sp < end and data[sp] != 32:
                        sp += 1
                    if sp == end:
                        sp = -1
                else:
                    sp = data.find(b" ", pos + 4, end)
                if sp > pos + 4:
                    # The size is the last token: read its digits backwards from the end of
                    # the line, which also finds where a reply subject (if any) ends.
                    size = 0
                    mul = 1
                    i = end - 1
                    while i > sp and mul <= 100_000_000:
                        d = data[i] - 48
                        if d < 0 or d > 9:
                            break
                        size += d * mul
                        mul *= 10
                        i -= 1
                    reply = None
                    if i == end - 1 or data[i] != 32:
                        size = -1  # no digits, or not separated by a single space
                    elif i != sp:
                        reply = data[sp + 1 : i]
                        if not reply or b" " in reply:
                            size = -1
                    if 0 <= size <= maxp:
                        stop = eol + 3 + size
                        if stop > n:
                            self._hold(data, pos, stop - pos)
                            return ev
                        if data[stop - 2] == 13 and data[stop - 1] == 10:
                            append((OP_PUB, data[pos + 4 : sp], reply, size, data[i:stop]))
                            pos = stop
                            continue
            if data.startswith(b"PUB ", pos) or (
                (c0 == 80 or c0 == 112) and data[pos : pos + 4].upper() in _PUB_HEADS
            ):
                args = _split_pub_args(data[pos + 4 : end])
                if end - pos - 4 > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                na = len(args)
                if na == 2:
                    subject, sizeb = args
                    reply = None
                elif na == 3:
                    subject, reply, sizeb = args
                else:
                    return self._fail(ev, None)
                if not sizeb.isdigit() or len(sizeb) > 9:
                    return self._fail(ev, None)
                size = int(sizeb)
                if size > maxp:
                    return self._fail(ev, ERR_MAX_PAYLOAD)
                start = eol + 1
                stop = start + size + 2
                if stop > n:
                    self._hold(data, pos, stop - pos)
                    return ev
                if not data.startswith(b"\r\n", stop - 2):
                    return self._fail(ev, ERR_UNKNOWN_OP)
                ts = end - len(sizeb) - 1
                if data[ts] == 32 and end != eol and data[end - 1] > 32:
                    # Canonical "PUB s 12\r\n": " 12\r\n<payload>\r\n" is one slice.
                    tail = data[ts:stop]
                else:
                    tail = b" " + sizeb + b"\r\n" + data[start:stop]
                append((OP_PUB, subject, reply, size, tail))
                pos = stop
                continue
            if c0 == 72 or c0 == 104:  # 'H' / 'h': HPUB
                if data[pos : pos + 5].upper() not in _HPUB_HEADS:
                    return self._fail(ev, ERR_UNKNOWN_OP)
                if end - pos - 5 > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                args = _split_pub_args(data[pos + 5 : end])
                na = len(args)
                if na == 3:
                    subject, hb, tb = args
                    reply = None
                elif na == 4:
                    subject, reply, hb, tb = args
                else:
                    return self._fail(ev, None)
                if not hb.isdigit() or not tb.isdigit() or len(hb) > 9 or len(tb) > 9:
                    return self._fail(ev, None)
                hlen = int(hb)
                size = int(tb)
                if hlen > size:
                    return self._fail(ev, None)
                if size > self.max_payload:
                    if hlen and eol + 1 + hlen <= n:
                        # The headers came with it: nats-server traces the message (its
                        # ingress, with the error) when they ask for it. (OP_ERR, message,
                        # subject, header block, announced size)
                        self._die()
                        hdr = data[eol + 1 : eol + 1 + hlen]
                        ev.append((OP_ERR, ERR_MAX_PAYLOAD, subject, hdr, size))
                        return ev
                    return self._fail(ev, ERR_MAX_PAYLOAD)
                start = eol + 1
                stop = start + size + 2
                if stop > n:
                    self._hold(data, pos, stop - pos)
                    return ev
                if not data.startswith(b"\r\n", stop - 2):
                    return self._fail(ev, ERR_UNKNOWN_OP)
                ts = end - len(tb) - len(hb) - 2
                if (
                    data[ts] == 32
                    and data[end - len(tb) - 1] == 32
                    and end != eol
                    and data[end - 1] > 32
                ):
                    tail = data[ts:stop]
                else:
                    tail = b" " + hb + b" " + tb + b"\r\n" + data[start:stop]
                if hlen == 0:
                    # An empty header block is a plain message (nats-server: hdr > 0).
                    append((OP_PUB, subject, reply, size, b" " + tb + b"\r\n" + data[start:stop]))
                else:
                    append((OP_HPUB, subject, reply, hlen, size, tail))
                pos = stop
                continue
            line = data[pos:end]
            head4 = line[:4].upper()
            if head4 == b"PING":
                # nats-server reads the verb and skips to the newline: "PINGX" is a PING.
                append(_PING)
                pos = eol + 1
                continue
            if head4 == b"PONG":
                append(_PONG)
                pos = eol + 1
                continue
            # The verb ends at the first space or tab, whichever comes first.
            sp = line.find(b" ")
            tab = line.find(b"\t")
            if sp < 0 or 0 <= tab < sp:
                sp = tab
            if sp < 0:
                # A verb with no separator (e.g. "SUB\r\n") is a parse error in nats-server;
                # a bare CONNECT is closed without a reason.
                bare = line.upper()
                return self._fail(ev, None if bare == b"CONNECT" else ERR_UNKNOWN_OP)
            verb = line[:sp].upper()
            rest = line[sp + 1 :]
            if verb == b"SUB":
                if len(rest) > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                args = _split_args(rest)
                if len(args) == 2:
                    append((OP_SUB, args[0], None, args[1]))
                elif len(args) == 3:
                    append((OP_SUB, args[0], args[1], args[2]))
                else:
                    return self._fail(ev, None)
            elif verb == b"UNSUB":
                if len(rest) > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                args = _split_args(rest)
                if len(args) == 1:
                    append((OP_UNSUB, args[0], None))
                elif len(args) == 2:
                    # A max that is not a number unsubscribes at once, as in nats-server.
                    mx = args[1]
                    append((OP_UNSUB, args[0], int(mx) if mx.isdigit() and len(mx) <= 9 else 0))
                else:
                    return self._fail(ev, None)
            elif verb == b"CONNECT":
                # nats-server reads a line longer than its first 512-byte buffer in pieces
                # and refuses CONNECT/INFO arguments past max_control_line, so in practice
                # always: do the same whether or not the line arrived in one read.
                if len(rest) > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
                append((OP_CONNECT, rest.strip()))
            elif verb == b"INFO":
                # Clients never need to send INFO; nats-server ignores it from clients.
                if len(rest) > mcl:
                    return self._fail(ev, ERR_MAX_CONTROL_LINE)
            else:
                return self._fail(ev, ERR_UNKNOWN_OP)
            pos = eol + 1
        if pos < n:
            self._buf = data[pos:]
        return ev

    def _fast_pub(self, data: bytes, start: int, end: int, ev: list[Event]) -> int:
        """Compiled only: the canonical ``PUB <subject> [<reply>] <size>\\r\\n`` frame (single
        spaces, a decimal size, CRLF) read in one forward pass over the control line on
        machine integers (``i64``: no boxed int per byte). Appends its event and returns
        where the next frame starts; 0 when the frame was held for a later read; -1 for
        anything else, which the general path then reads (and refuses, if it must)."""
        pos: i64 = start
        n: i64 = end
        if pos + 4 >= n:
            return -1
        if data[pos] != 80 or data[pos + 1] != 85 or data[pos + 2] != 66 or data[pos + 3] != 32:
            return -1
        limit: i64 = pos + 4 + self.max_control_line
        if limit > n:
            limit = n
        i: i64 = pos + 4
        sp1: i64 = -1  # the space after the subject
        sp2: i64 = -1  # the space after the reply, if there is one
        size: i64 = 0
        digits: i64 = 0  # of the current token; -1 once it holds something else
        while i < limit:
            c = data[i]
            if c == 32:
                if sp1 < 0:
                    sp1 = i
                elif sp2 < 0:
                    sp2 = i
                else:
                    return -1
                size = 0
                digits = 0
            elif c == 13:
                break
            elif c == 10:
                return -1
            elif 48 <= c <= 57:
                if 0 <= digits < 10:
                    size = size * 10 + (c - 48)
                    digits += 1
            else:
                digits = -1
            i += 1
        # (i: the CR) a subject, a size of 1-9 digits right before the CR, LF after it,
        # and no empty token.
        if i >= limit or digits <= 0 or digits > 9 or sp1 <= pos + 4 or i + 1 >= n:
            return -1
        if data[i + 1] != 10 or (sp2 >= 0 and sp2 == sp1 + 1):
            return -1
        last: i64 = sp2 if sp2 >= 0 else sp1
        if last + 1 == i or size > self.max_payload:
            return -1
        stop: i64 = i + 4 + size
        if stop > n:
            self._hold(data, start, stop - pos)
            return 0
        if data[stop - 2] != 13 or data[stop - 1] != 10:
            return -1
        subject = self._last_subject
        ls: i64 = len(subject)
        same = ls == sp1 - pos - 4
        j: i64 = 0
        while same and j < ls:
            if data[pos + 4 + j] != subject[j]:
                same = False
            j += 1
        if not same:
            subject = data[pos + 4 : sp1]
            self._last_subject = subject
        reply = data[sp1 + 1 : sp2] if sp2 >= 0 else None
        ev.append((OP_PUB, subject, reply, size, data[last:stop]))
        return stop

    def _fast_hpub(self, data: bytes, start: int, end: int, ev: list[Event]) -> int:
        """Compiled only: ``_fast_pub`` for the canonical ``HPUB <subject> [<reply>] <hdr>
        <total>\r\n`` frame (a JetStream publish with a Nats-Msg-Id, a KV put): one forward
        pass on machine integers; the header length is the token before the total. -1 for
        anything else (a header length of 0 or past the total, a total past the limit: the
        general path makes the first a PUB, refuses the others, and traces an oversized
        one)."""
        pos: i64 = start
        n: i64 = end
        if pos + 5 >= n:
            return -1
        if (
            data[pos] != 72
            or data[pos + 1] != 80
            or data[pos + 2] != 85
            or data[pos + 3] != 66
            or data[pos + 4] != 32
        ):
            return -1
        limit: i64 = pos + 5 + self.max_control_line
        if limit > n:
            limit = n
        i: i64 = pos + 5
        sp1: i64 = -1  # the space after the subject
        sp2: i64 = -1
        sp3: i64 = -1  # (a reply: subject, reply, header length, total)
        size: i64 = 0
        digits: i64 = 0  # of the current token; -1 once it holds something else
        prev: i64 = 0  # the token before it, as a number
        prev_digits: i64 = 0
        while i < limit:
            c = data[i]
            if c == 32:
                if sp1 < 0:
                    sp1 = i
                elif sp2 < 0:
                    sp2 = i
                elif sp3 < 0:
                    sp3 = i
                else:
                    return -1
                prev = size
                prev_digits = digits
                size = 0
                digits = 0
            elif c == 13:
                break
            elif c == 10:
                return -1
            elif 48 <= c <= 57:
                if 0 <= digits < 10:
                    size = size * 10 + (c - 48)
                    digits += 1
            else:
                digits = -1
            i += 1
        if i >= limit or sp2 < 0 or sp1 <= pos + 5 or i + 1 >= n or data[i + 1] != 10:
            return -1
        if digits <= 0 or digits > 9 or prev_digits <= 0 or prev_digits > 9:
            return -1
        if sp2 == sp1 + 1 or (sp3 >= 0 and sp3 == sp2 + 1):
            return -1
        last: i64 = sp3 if sp3 >= 0 else sp2  # the space before the total
        hsp: i64 = sp2 if sp3 >= 0 else sp1  # the space before the header length
        if last + 1 == i or prev == 0 or prev > size or size > self.max_payload:
            return -1  # (an empty header block is a plain message: the general path)
        stop: i64 = i + 4 + size
        if stop > n:
            self._hold(data, start, stop - pos)
            return 0
        if data[stop - 2] != 13 or data[stop - 1] != 10:
            return -1
        reply = data[sp1 + 1 : sp2] if sp3 >= 0 else None
        ev.append((OP_HPUB, data[pos + 5 : sp1], reply, prev, size, data[hsp:stop]))
        return stop

    def _fail(self, ev: list[Event], message: str | None) -> list[Event]:
        self._die()
        ev.append((OP_ERR, message))
        return ev


def message_body(tail: bytes, size: int) -> bytes:
    """The payload bytes (headers and body for HPUB) inside a PUB/HPUB event's ``tail``."""
    n = len(tail)
    return tail[n - size - 2 : n - 2]


_VERBS: Final = (b"PUB ", b"HPUB ", b"SUB ", b"UNSUB ", b"PING", b"PONG", b"CONNECT ", b"INFO ")


def _split_args(line: bytes) -> list[bytes]:
    """Split arguments on spaces, tabs and stray CRs only, as nats-server's splitArg does
    (bytes.split() would also split on \x0b and \x0c, which are legal in subjects)."""
    if b"\t" in line or b"\r" in line:
        line = line.replace(b"\t", b" ").replace(b"\r", b" ")
    return [a for a in line.split(b" ") if a]


def _split_pub_args(line: bytes) -> list[bytes]:
    """PUB/HPUB arguments: nats-server's processPub splits on spaces and tabs only, so a
    stray CR stays inside its token (unlike SUB/UNSUB's splitArg)."""
    if b"\t" in line:
        line = line.replace(b"\t", b" ")
    return [a for a in line.split(b" ") if a]


def _pending_args_len(data: bytes, pos: int, n: int) -> int:
    """How many argument bytes an unfinished line starting at ``pos`` holds so far: what
    follows the verb and its separator, minus a CR waiting for its LF. PING/PONG take no
    arguments (nats-server skips anything after them), so they count 0."""
    head = data[pos : pos + 8].upper()
    if head.startswith(b"PING") or head.startswith(b"PONG"):
        return 0
    sp = -1
    for i in range(len(head)):
        if head[i] == 32 or head[i] == 9:
            sp = i
            break
    if sp < 0:
        return 0  # the verb is not complete yet
    return n - pos - sp - 1 - (1 if data[n - 1] == 13 else 0)


def _could_be_verb(head: bytes, pending: int) -> bool:
    """Whether ``head`` (the first bytes of an unfinished line of ``pending`` bytes) can
    start a known verb. A CR that is the last byte so far ends the candidate: "CONNECT\r"
    waits for its LF, and the complete line decides."""
    h = head.upper().replace(b"\t", b" ")
    if pending <= len(h) and h.endswith(b"\r"):
        h = h[:-1]
    for v in _VERBS:
        if v.startswith(h) or h.startswith(v):
            return True
    return h.startswith(b"PING") or h.startswith(b"PONG")
