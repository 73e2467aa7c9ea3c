"""Stream subject filters over ``str`` subjects (the storage and JetStream layers work in
text; the router's byte-oriented matching is in ``core.subjects``)."""

from __future__ import annotations

__all__ = ["is_all", "is_literal", "match_tokens", "subject_matches"]


def is_all(filter: str) -> bool:
    """"" and ">" select every subject."""
    return filter == "" or filter == ">"


def is_literal(subject: str) -> bool:
    if "*" not in subject and ">" not in subject:
        return True
    return all(t != "*" and t != ">" for t in subject.split("."))


def match_tokens(subject: str, ftoks: list[str]) -> bool:
    """True when a literal subject matches a filter already split into tokens (callers
    matching many subjects against one filter split it once)."""
    stoks = subject.split(".")
    n = len(stoks)
    for i, f in enumerate(ftoks):
        if f == ">":
            return n > i
        if i >= n:
            return False
        if f != "*" and f != stoks[i]:
            return False
    return n == len(ftoks)


def subject_matches(subject: str, pattern: str) -> bool:
    """nats-server subject matching: ``*`` is one token, ``>`` one or more trailing tokens."""
    if pattern == subject:
        return True
    if "*" not in pattern and ">" not in pattern:
        return False
    return match_tokens(subject, pattern.split("."))
