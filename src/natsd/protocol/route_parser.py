"""Sans-I/O parser for nats-server's route protocol (what one cluster peer sends another).

``RouteParser.feed(data)`` returns a list of events, plain tuples tagged with an ``R_*``
constant as in ``protocol/parser.py``:

* ``(R_RMSG, account, subject, reply | None, queues | None, size, tail)``
* ``(R_HMSG, account, subject, reply | None, queues | None, hdr_len, total_len, tail)``

  ``queues`` is a list of queue group names (nats-server's ``+ <reply> <q>...`` and
  ``| <q>...`` forms), ``None`` when there are none. ``tail`` is ``b" <size>\\r\\n<payload>\\r\\n"``
  (HMSG: ``b" <hdr> <total>\\r\\n<headers+payload>\\r\\n"``), the end of the MSG/HMSG frame a
  local subscriber receives, so delivery only prepends ``MSG <subject> <sid>``.
  ``message_body(tail, size)`` in ``protocol.parser`` returns the payload.
* ``(R_SUB, account, subject, queue | None, weight)``: ``RS+`` (weight 1 without a queue)
* ``(R_UNSUB, account, subject, queue | None)``: ``RS-``
* ``(R_INFO, json_bytes)``, ``(R_CONNECT, json_bytes)``, ``(R_PING,)``, ``(R_PONG,)``,
  ``(R_OK,)``, ``(R_PEER_ERR, text)`` (a ``-ERR '...'`` from the peer, quotes removed)
* ``(R_ERR, reason)``: the peer broke the protocol. The parser is dead afterwards and returns
  nothing more; the connection layer sends ``-ERR`` if it wants and closes. No input makes
  ``feed`` raise.

Scope: what nats-server 2.15 sends on a route that is not pooled and not pinned to an account
(the peer sees no ``route_pool_size`` in our INFO, so it treats us as a one-connection "no
pool" route and puts the account in every RS+/RS-/RMSG/HMSG), and that did not negotiate
``lnoc`` (so it never sends ``LS+``/``LS-``/``LMSG``). Those three verbs, and any other, are
refused with an ``R_ERR`` naming them. A pinned-account route (nats-server's ``cluster {
accounts: [...] }``) leaves the account out of every line, which the parser cannot tell from
a reply subject: the connection layer must refuse an INFO carrying ``route_account``.

Limits: ``max_control_line`` bounds every line (nats-server allows routes 16 times the client
limit, 64 KiB by default), ``max_payload`` bounds RMSG/HMSG sizes (nats-server does not check
sizes from routes; we bound them so a peer cannot make us buffer without limit). A line that
cannot start a known verb is refused before its newline arrives.
"""

from __future__ import annotations

from typing import Any, Final

from natsd.protocol.framing import FrameBuffer

__all__ = [
    "DEFAULT_ROUTE_MAX_CONTROL_LINE",
    "DEFAULT_ROUTE_MAX_PAYLOAD",
    "R_CONNECT",
    "R_ERR",
    "R_HMSG",
    "R_INFO",
    "R_OK",
    "R_PEER_ERR",
    "R_PING",
    "R_PONG",
    "R_RMSG",
    "R_SUB",
    "R_UNSUB",
    "RouteEvent",
    "RouteParser",
]

R_RMSG: Final = 1
R_HMSG: Final = 2
R_SUB: Final = 3
R_UNSUB: Final = 4
R_PING: Final = 5
R_PONG: Final = 6
R_CONNECT: Final = 7
R_INFO: Final = 8
R_OK: Final = 9
R_PEER_ERR: Final = 10
R_ERR: Final = 11

# nats-server: max_control_line (4096) times 16 for routes, gateways and leafnodes.
DEFAULT_ROUTE_MAX_CONTROL_LINE: Final = 4096 * 16
# nats-server's upper bound on any max_payload setting (MAX_PAYLOAD_MAX_SIZE).
DEFAULT_ROUTE_MAX_PAYLOAD: Final = 64 * 1024 * 1024

RouteEvent = tuple[Any, ...]

# True when this module runs as a mypyc-compiled extension (see setup.py).
COMPILED: Final = not __file__.endswith(".py")

_PING: Final = (R_PING,)
_PONG: Final = (R_PONG,)
_OK: Final = (R_OK,)
# Verbs a route may open a line with, upper-cased, separator included where one is required.
_VERBS: Final = (
    b"RMSG ",
    b"HMSG ",
    b"RS+ ",
    b"RS- ",
    b"INFO ",
    b"CONNECT ",
    b"-ERR",
    b"+OK",
    b"PING",
    b"PONG",
    b"LS+ ",
    b"LS- ",
    b"LMSG ",
)


class RouteParser(FrameBuffer):
    __slots__ = ()

    def __init__(
        self,
        max_payload: int = DEFAULT_ROUTE_MAX_PAYLOAD,
        max_control_line: int = DEFAULT_ROUTE_MAX_CONTROL_LINE,
    ) -> None:
        super().__init__(max_payload, max_control_line)

    def feed(self, data: bytes) -> list[RouteEvent]:
        ev: list[RouteEvent] = []
        data = self._take(data)
        n = len(data)
        pos = 0
        mcl = self.max_control_line
        maxp = self.max_payload
        # The fast path below pays off compiled (RMSG ~1 us -> ~0.3-0.4 us); interpreted it
        # measured no gain, so the interpreter goes straight to the general path. Tabs are
        # legal separators; one memchr per read keeps them off the fast path.
        fast = COMPILED and b"\t" not in data
        while pos < n:
            eol = data.find(b"\n", pos)
            if eol < 0:
                if not _could_be_verb(data[pos : pos + 8]):
                    return self._fail(ev, "unknown protocol operation")
                # A CR waiting for its LF does not count, so a split never changes the verdict.
                if n - pos - (1 if data[n - 1] == 13 else 0) > mcl:
                    return self._fail(ev, "maximum control line exceeded")
                break
            end = eol - 1 if eol > pos and data[eol - 1] == 13 else eol
            if end - pos > mcl:
                return self._fail(ev, "maximum control line exceeded")
            if (
                fast
                and end != eol
                and end - pos > 10
                and data[pos] == 82
                and data[pos + 1] == 77
                and data[pos + 2] == 83
                and data[pos + 3] == 71
                and data[pos + 4] == 32
            ):
                # Fast path for the canonical "RMSG <acc> <subj> [<reply>] <size>\r\n" (no
                # queues, single spaces): no temporary lists. Anything else, or anything odd,
                # falls through to the general path below, which decides.
                size = 0
                mul = 1
                i = end - 1
                while i > pos + 5 and mul <= 100_000_000:
                    d = data[i] - 48
                    if d < 0 or d > 9:
                        break
                    size += d * mul
                    mul *= 10
                    i -= 1
                if i < end - 1 and data[i] == 32 and size <= maxp:
                    sp1 = _find_sp(data, pos + 5, i)
                    sp2 = _find_sp(data, sp1 + 1, i) if sp1 > pos + 5 else -2
                    fast_reply: bytes | None = None
                    subj_end = -1
                    if sp2 == -1:
                        subj_end = i
                    elif sp2 > sp1 + 1 and sp2 + 1 < i and _find_sp(data, sp2 + 1, i) == -1:
                        subj_end = sp2
                        fast_reply = data[sp2 + 1 : i]
                    if subj_end > sp1 + 1:
                        stop = eol + 3 + size
                        if stop > n:
                            self._hold(data, pos, stop - pos)
                            return ev
                        if data[stop - 2] == 13 and data[stop - 1] == 10:
                            ev.append(
                                (
                                    R_RMSG,
                                    data[pos + 5 : sp1],
                                    data[sp1 + 1 : subj_end],
                                    fast_reply,
                                    None,
                                    size,
                                    data[i:stop],
                                )
                            )
                            pos = stop
                            continue
            # The canonical upper-case verb is checked first: it is what every peer sends.
            hdr = data.startswith(b"HMSG ", pos)
            if hdr or data.startswith(b"RMSG ", pos) or _is_msg_verb(data, pos, end):
                if not hdr:
                    hdr = data[pos] | 0x20 == 104  # 'h'
                args = _split(data[pos + 5 : end])
                # RMSG: acc subj [reply] size, or acc subj (+ reply | "|") q... size.
                # HMSG: the same with the header size before the total size.
                fixed = 3 if hdr else 2
                na = len(args)
                if na < fixed + 1:
                    return self._fail(ev, _name(hdr) + " has too few arguments")
                reply: bytes | None = None
                queues: list[bytes] | None = None
                if na == fixed + 2:
                    reply = args[2]
                elif na > fixed + 2:
                    ind = args[2]
                    if ind == b"+":
                        reply = args[3]
                        queues = args[4 : na - fixed + 1]
                    elif ind == b"|":
                        queues = args[3 : na - fixed + 1]
                    else:
                        return self._fail(ev, _name(hdr) + " has a bad reply indicator")
                    if not queues:
                        queues = None  # "+ <reply>" alone: nats-server takes it too
                szb = args[na - 1]
                if not szb.isdigit() or len(szb) > 9:  # nats-server's parseSize, inlined
                    return self._fail(ev, _name(hdr) + " has a bad size")
                size = int(szb)
                hlen = 0
                hb = b""
                if hdr:
                    hb = args[na - 2]
                    hlen = _size(hb)
                    if hlen < 0 or hlen > size:
                        return self._fail(ev, "HMSG has a bad header size")
                if size > maxp:
                    return self._fail(ev, "maximum payload exceeded")
                start = eol + 1
                stop = start + size + 2
                if stop > n:
                    self._hold(data, pos, stop - pos)
                    return ev
                if data[stop - 2] != 13 or data[stop - 1] != 10:
                    return self._fail(ev, "message payload not followed by CRLF")
                if hdr:
                    ts = end - len(szb) - len(hb) - 2
                    if (
                        end != eol
                        and data[ts] == 32
                        and data[ts + 1] > 32
                        and data[end - len(szb) - 1] == 32
                        and data[end - 1] > 32
                    ):
                        tail = data[ts:stop]
                    else:
                        tail = b" " + hb + b" " + szb + b"\r\n" + data[start:stop]
                    ev.append((R_HMSG, args[0], args[1], reply, queues, hlen, size, tail))
                else:
                    ts = end - len(szb) - 1
                    if end != eol and data[ts] == 32 and data[end - 1] > 32:
                        tail = data[ts:stop]
                    else:
                        tail = b" " + szb + b"\r\n" + data[start:stop]
                    ev.append((R_RMSG, args[0], args[1], reply, queues, size, tail))
                pos = stop
                continue
            line = data[pos:end]
            up = line[:8].upper()
            if up.startswith(b"PING"):
                ev.append(_PING)
            elif up.startswith(b"PONG"):
                ev.append(_PONG)
            elif up.startswith(b"+OK"):
                ev.append(_OK)
            elif up.startswith(b"-ERR"):
                text = line[4:].strip(b" \t")
                if len(text) >= 2 and text[0] == 39 and text[-1] == 39:
                    text = text[1:-1]
                ev.append((R_PEER_ERR, text.decode("utf-8", "replace")))
            elif up.startswith(b"RS+") and len(line) > 3 and line[3] in b" \t":
                args = _split(line[4:])
                if len(args) == 2:
                    ev.append((R_SUB, args[0], args[1], None, 1))
                elif len(args) == 4:
                    weight = _size(args[3])
                    if weight < 1:
                        return self._fail(ev, "RS+ has a bad queue weight")
                    ev.append((R_SUB, args[0], args[1], args[2], weight))
                else:
                    return self._fail(ev, "RS+ needs <account> <subject> [<queue> <weight>]")
            elif up.startswith(b"RS-") and len(line) > 3 and line[3] in b" \t":
                args = _split(line[4:])
                if len(args) == 2:
                    ev.append((R_UNSUB, args[0], args[1], None))
                elif len(args) == 3:
                    ev.append((R_UNSUB, args[0], args[1], args[2]))
                else:
                    return self._fail(ev, "RS- needs <account> <subject> [<queue>]")
            elif (up.startswith(b"INFO") or up.startswith(b"CONNECT")) and _verb_ends(line):
                is_info = up[0] == 73  # 'I'
                body = line[5 if is_info else 8 :].strip(b" \t")
                if not body:
                    return self._fail(ev, ("INFO" if is_info else "CONNECT") + " has no body")
                ev.append((R_INFO if is_info else R_CONNECT, body))
            elif (up.startswith(b"LS+") or up.startswith(b"LS-") or up.startswith(b"LMSG")) and (
                _verb_ends(line)
            ):
                # Sent only to a peer that announced lnoc (leafnode origin cluster). Without
                # its separator ("LS+RMSG") the verb is unknown, as it is while unfinished
                # (_could_be_verb), so a split never changes the verdict.
                return self._fail(ev, up[:4].strip().decode() + " is not supported (no lnoc)")
            else:
                return self._fail(ev, "unknown protocol operation")
            pos = eol + 1
        if pos < n:
            self._buf = data[pos:]
        return ev

    def _fail(self, ev: list[RouteEvent], reason: str) -> list[RouteEvent]:
        self._die()
        ev.append((R_ERR, reason))
        return ev


def _find_sp(data: bytes, start: int, end: int) -> int:
    """The first space in ``data[start:end]``, -1 if none, -2 if a CR comes first (a stray
    CR separates arguments in nats-server: the general path handles it). Used by the
    compiled fast path only: under mypyc an indexed scan costs a few ns where a bytes.find()
    call costs ~130 ns of argument boxing."""
    i = start
    while i < end:
        c = data[i]
        if c == 32:
            return i
        if c == 13:
            return -2
        i += 1
    return -1


def _name(hdr: bool) -> str:
    return "HMSG" if hdr else "RMSG"


def _split(line: bytes) -> list[bytes]:
    """Arguments separated by spaces, tabs or stray CRs, as nats-server's route parsers split
    them (bytes.split() would also split on \\x0b and \\x0c, which are legal in subjects)."""
    if b"\t" in line or b"\r" in line:
        line = line.replace(b"\t", b" ").replace(b"\r", b" ")
    parts = line.split(b" ")
    if b"" in parts:  # repeated, leading or trailing separators: rare
        return [a for a in parts if a]
    return parts


def _is_msg_verb(data: bytes, pos: int, end: int) -> bool:
    """RMSG/HMSG in any case, followed by a space or a tab (nats-server's parser)."""
    if end <= pos + 4 or data[pos + 4] not in b" \t":
        return False
    head = data[pos : pos + 4].upper()
    return head == b"RMSG" or head == b"HMSG"


def _size(b: bytes) -> int:
    """A decimal size of at most 9 digits (nats-server's parseSize), else -1."""
    if not b or len(b) > 9 or not b.isdigit():
        return -1
    return int(b)


def _verb_ends(line: bytes) -> bool:
    """The verb is followed by a separator, not more letters (INFO, CONNECT, LS+, LS-,
    LMSG)."""
    up = line[:4].upper()
    if up.startswith(b"LS"):
        k = 3
    elif up == b"INFO" or up == b"LMSG":
        k = 4
    else:
        k = 7
    return len(line) > k and line[k] in b" \t"


def _could_be_verb(head: bytes) -> bool:
    """Whether an unfinished line starting with ``head`` can still become a known verb."""
    h = head.upper().replace(b"\t", b" ")
    if h.endswith(b"\r"):
        h = h[:-1]
    return any(v.startswith(h) or h.startswith(v) for v in _VERBS)
