"""``only_msg_id``: the shortcut a publish takes when its one ``Nats-`` header is its
message id. Wherever it answers, the answer is the one the full header parse gives, and the
block holds no other ``Nats-`` header (so no publish check can apply)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from natsd.core.headers import HeaderError, parse_headers
from natsd.jetstream.stream.headers import H_MSG_ID, first, only_msg_id

KEYS = ["Nats-Msg-Id", "Nats-TTL", "Nats-Expected-Stream", "nats-msg-id", "X-App", "Source",
        " Nats-Msg-Id", "", "Nats-Msg-Id ", "Nats-Msg-Idx"]  # fmt: skip
VALUES = st.text(alphabet="ab:-Nats é\t\r\n", max_size=12)


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    first_line = draw(st.sampled_from([b"NATS/1.0", b"NATS/1.0 503", b"NATS/1.1", b"HTTP"]))
    lines = [first_line]
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from([b"no colon here", b":empty key", b""])))
        else:
            key = draw(st.sampled_from(KEYS)).encode()
            lines.append(key + b":" + draw(VALUES).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


@given(blocks())
@example(b"NATS/1.0\r\nNats-Msg-Id: abc:0:1\r\n\r\n")
@example(b"NATS/1.0\r\nX-App: 1\r\nNats-Msg-Id:  spaced \r\n\r\n")
@example(b"NATS/1.0\r\nNats-Msg-Id:\r\n\r\n")
@example(b"NATS/1.0\r\nNats-Msg-Id: Nats-x\r\n\r\n")
@example(b"NATS/1.0\r\nNats-Msg-Id: a\rb\n \r\n\r\n")
@example(b"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-Msg-Id: b\r\n\r\n")
@example(b"NATS/1.0\r\nNats-Msg-Id: a\r\nbroken\r\n\r\n")
def test_agrees_with_the_full_parse(block: bytes) -> None:
    got = only_msg_id(block)
    if got is None:
        return
    _status, _desc, h = parse_headers(block)  # (a block it answers for parses)
    assert got == (first(h, H_MSG_ID) or "")
    assert [k for k in h if "Nats-" in k] in ([], [H_MSG_ID])


def test_what_it_leaves_to_the_full_path() -> None:
    assert only_msg_id(b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n") == "a"
    assert only_msg_id(b"NATS/1.0\r\nX: 1\r\n\r\n") is None  # no id: nothing to shortcut
    assert only_msg_id(b"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-TTL: 1s\r\n\r\n") is None
    assert only_msg_id(b"NATS/1.0\r\nX: Nats-\r\nNats-Msg-Id: a\r\n\r\n") is None
    assert only_msg_id(b"NATS/1.0 503\r\nNats-Msg-Id: a\r\n\r\n") is None
    broken = b"NATS/1.0\r\nNats-Msg-Id: a\r\nbroken\r\n\r\n"
    assert only_msg_id(broken) is None
    try:
        parse_headers(broken)
        raise AssertionError("parse_headers accepted a malformed line")
    except HeaderError:
        pass
