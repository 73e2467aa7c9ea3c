"""Subject validation and matching, byte-oriented.

Subjects travel through the server as ``bytes`` so that the hot path never decodes or
re-encodes them; these helpers follow nats-server's ``sublist.go`` rules.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "is_valid_literal_subject",
    "is_valid_queue",
    "is_valid_subject",
    "subject_has_wildcard",
    "subject_matches",
    "tokens",
]

_PWC: Final = b"*"
_FWC: Final = b">"


def tokens(subject: bytes) -> list[bytes]:
    return subject.split(b".")


def _has_space(subject: bytes) -> bool:
    """Whitespace, which may never appear in a subject token (nats-server rejects it).

    Spelled out: ``any(c in subject for c in ...)`` builds a generator per call, and this
    runs for every publish of a pedantic client (nats-server's default without CONNECT's
    "pedantic"), where it was the largest single cost in a profile."""
    return (
        b" " in subject
        or b"\t" in subject
        or b"\r" in subject
        or b"\n" in subject
        or b"\f" in subject
    )


def is_valid_subject(subject: bytes) -> bool:
    """A subject usable in SUB: non-empty tokens, ``*`` alone in a token, ``>`` only last."""
    if not subject or _has_space(subject):
        return False
    toks = subject.split(b".")
    last = len(toks) - 1
    for i, t in enumerate(toks):
        if not t:
            return False
        if len(t) > 1 and (_PWC in t or _FWC in t):
            # nats-server treats "foo*" as a literal token; only a lone '*' or '>' is a wildcard.
            continue
        if t == _FWC and i != last:
            return False
    return True


def is_valid_literal_subject(subject: bytes) -> bool:
    """A subject usable in PUB: valid and free of wildcard tokens."""
    if not is_valid_subject(subject):
        return False
    return all(t not in (_PWC, _FWC) for t in subject.split(b"."))


def is_valid_queue(queue: bytes) -> bool:
    """A queue group name as SUB accepts it (the rule of connection/client.py's check)."""
    return bool(queue) and not any(c in queue for c in (b" ", b"\t", b"\r", b"\n"))


def subject_has_wildcard(subject: bytes) -> bool:
    return any(t in (_PWC, _FWC) for t in subject.split(b"."))


def subject_matches(literal: bytes, pattern: bytes) -> bool:
    """True when the literal subject is matched by the (possibly wildcard) pattern."""
    lt = literal.split(b".")
    pt = pattern.split(b".")
    for i, p in enumerate(pt):
        if p == _FWC:
            return len(lt) > i
        if i >= len(lt):
            return False
        if p != _PWC and p != lt[i]:
            return False
    return len(lt) == len(pt)


def subset_match(pattern: bytes, filt: bytes) -> bool:
    """True when every subject matched by ``pattern`` is also matched by ``filt``."""
    pt = pattern.split(b".")
    ft = filt.split(b".")
    for i, f in enumerate(ft):
        if f == _FWC:
            return len(pt) > i
        if i >= len(pt):
            return False
        p = pt[i]
        if p == _FWC:
            return False
        if f == _PWC:
            continue
        if p == _PWC or p != f:
            return False
    return len(pt) == len(ft)
