"""Publish/subscribe allow and deny lists, matched with the router's Sublist.

nats-server semantics: a subject is allowed when the allow list is absent or matches it, and
no deny entry matches it. Results are cached per subject (bounded) because permission checks
run on every publish.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from natsd.core.subjects import subset_match
from natsd.router.sublist import Sublist

__all__ = ["PermissionSet", "Permissions", "parse_permissions"]

_CACHE_MAX = 1024


class _Pattern:
    __slots__ = ("queue", "subject")

    def __init__(self, subject: bytes, queue: bytes | None = None) -> None:
        self.subject = subject
        self.queue = queue


class PermissionSet:
    """One direction (publish or subscribe) of a user's permissions."""

    __slots__ = ("_allow", "_cache", "_deny", "allow", "deny")

    def __init__(self, allow: Iterable[str] | None, deny: Iterable[str] | None) -> None:
        self.allow = list(allow) if allow is not None else None
        self.deny = list(deny) if deny is not None else None
        self._allow = _build(self.allow)
        # Queue-qualified deny entries ("subject queue") only refuse queue SUBs; they must
        # not filter deliveries to plain subscriptions.
        plain_deny = [p for p in self.deny if " " not in p.strip()] if self.deny else None
        self._deny = _build(plain_deny) if plain_deny else None
        self._cache: dict[bytes, bool] = {}

    def allowed(self, subject: bytes) -> bool:
        ok = self._cache.get(subject)
        if ok is not None:
            return ok
        ok = True
        if self._allow is not None:
            ok = self._allow.has_interest(subject)
        if ok and self._deny is not None:
            ok = not self._deny.has_interest(subject)
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[subject] = ok
        return ok

    def sub_allowed(self, subject: bytes, queue: bytes | None) -> bool:
        """SUB check: the (possibly wildcard) subject must fall inside an allow pattern."""
        if self.allow is not None:
            if not any(_allows(p, subject, queue) for p in self.allow):
                return False
        if self.deny is not None:
            # A deny entry only rejects the SUB when it covers the whole subscription; a
            # wildcard SUB that merely overlaps a deny is filtered at delivery time instead.
            for p in self.deny:
                if _allows(p, subject, queue):
                    return False
        return True

    def deny_overlaps(self, subject: bytes) -> bool:
        """True when some deny entry could match messages of a (wildcard) subscription."""
        if self.deny is None:
            return False
        from natsd.core.subjects import subject_matches

        for p in self.deny:
            pb = p.split(" ")[0].encode()
            if subject_matches(pb, subject) or subset_match(pb, subject):
                return True
        return False

    def denied(self, subject: bytes) -> bool:
        return self._deny is not None and self._deny.has_interest(subject)


def _allows(pattern: str, subject: bytes, queue: bytes | None) -> bool:
    # Permission entries may be "subject queue" to restrict queue subscriptions.
    subj, _, q = pattern.partition(" ")
    if q and (queue is None or not _match_token(q.encode(), queue)):
        return False
    return subset_match(subject, subj.encode())


def _match_token(pattern: bytes, value: bytes) -> bool:
    from natsd.core.subjects import subject_matches

    return subject_matches(value, pattern)


def _build(patterns: list[str] | None) -> Sublist[_Pattern] | None:
    if patterns is None:
        return None
    sl: Sublist[_Pattern] = Sublist()
    for p in patterns:
        subj = p.split(" ")[0]
        sl.insert(_Pattern(subj.encode()))
    return sl


@dataclass
class Permissions:
    publish: PermissionSet | None = None
    subscribe: PermissionSet | None = None
    allow_responses: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def _allow_deny(spec: Any) -> tuple[list[str] | None, list[str] | None]:
    # Accepts a string, a list (= allow), or {allow: ..., deny: ...}.
    if spec is None:
        return None, None
    if isinstance(spec, str):
        return [spec], None
    if isinstance(spec, list):
        return [str(s) for s in spec], None
    if isinstance(spec, dict):
        allow = spec.get("allow")
        deny = spec.get("deny")
        if isinstance(allow, str):
            allow = [allow]
        if isinstance(deny, str):
            deny = [deny]
        return (
            [str(s) for s in allow] if allow is not None else None,
            [str(s) for s in deny] if deny is not None else None,
        )
    raise ValueError(f"bad permission specification: {spec!r}")


def parse_permissions(spec: dict[str, Any] | None) -> Permissions | None:
    if not spec:
        return None
    lowered = {str(k).lower(): v for k, v in spec.items()}
    perms = Permissions(raw=dict(spec))
    pub = lowered.get("publish", lowered.get("pub"))
    sub = lowered.get("subscribe", lowered.get("sub"))
    if pub is not None:
        perms.publish = PermissionSet(*_allow_deny(pub))
    if sub is not None:
        perms.subscribe = PermissionSet(*_allow_deny(sub))
    resp = lowered.get("allow_responses")
    if resp:
        perms.allow_responses = resp if isinstance(resp, dict) else {}
    return perms
