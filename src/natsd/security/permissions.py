"""Publish/subscribe allow and deny lists, matched with the router's Sublist.

nats-server semantics: a subject is allowed when the allow list is absent or matches it, and
no deny entry matches it. Results are cached per subject (bounded) because permission checks
run on every publish.

``allow_responses`` (nats-server ``ResponsePermission``): a user may also publish to the
reply subject of a message delivered to it, at most ``max_msgs`` times within ``expires``,
even where its publish permissions deny the subject. ``ReplyTracker`` keeps those reply
subjects per connection; only connections of such users have one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from natsd.core.clock import parse_duration
from natsd.core.subjects import subject_matches, subset_match
from natsd.router.sublist import Sublist

__all__ = [
    "PermissionSet",
    "Permissions",
    "ReplyTracker",
    "ResponsePermission",
    "parse_permissions",
]

_CACHE_MAX = 1024
# nats-server DEFAULT_ALLOW_RESPONSE_MAX_MSGS / DEFAULT_ALLOW_RESPONSE_EXPIRATION.
DEFAULT_RESPONSE_MAX_MSGS: Final = 1
DEFAULT_RESPONSE_EXPIRES: Final = 120.0
# nats-server replyPermLimit / replyPruneTime: prune after this many new entries or this long.
_PRUNE_EVERY: Final = 4096
_PRUNE_AFTER: Final = 1.0
# natsd's own hard bound: nats-server keeps every entry of a user with unlimited max and
# expiry forever; past this many the oldest entries are dropped, so memory stays bounded.
REPLY_TRACK_MAX: Final = 1 << 18


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
    return subject_matches(value, pattern)


def _build(patterns: list[str] | None) -> Sublist[_Pattern] | None:
    if patterns is None:
        return None
    sl: Sublist[_Pattern] = Sublist()
    for p in patterns:
        subj = p.split(" ")[0]
        sl.insert(_Pattern(subj.encode()))
    return sl


@dataclass(frozen=True)
class ResponsePermission:
    """``allow_responses``: ``max_msgs`` responses per reply subject (negative: any number),
    within ``expires`` seconds of the delivery (negative: no expiry)."""

    max_msgs: int = DEFAULT_RESPONSE_MAX_MSGS
    expires: float = DEFAULT_RESPONSE_EXPIRES


class ReplyTracker:
    """Reply subjects a connection with ``allow_responses`` may publish to (nats-server
    ``client.replies``, ``responseAllowed`` and ``pruneReplyPerms``).

    Ownership: one per connection, used on the event loop only. ``delivered`` runs for each
    message with a reply subject delivered to the connection; ``allowed`` when the
    connection publishes to a subject its publish permissions deny. Entries leave when used
    up or expired (checked on use and on the periodic prune) and never exceed
    ``REPLY_TRACK_MAX``.
    """

    __slots__ = ("_last_prune", "_since_prune", "expires", "max_msgs", "publish", "replies")

    def __init__(self, perm: ResponsePermission, publish: PermissionSet | None) -> None:
        self.max_msgs = perm.max_msgs
        self.expires = perm.expires
        self.publish = publish
        # reply subject -> [time delivered (monotonic), responses sent]
        self.replies: dict[bytes, list[float]] = {}
        self._since_prune = 0
        self._last_prune = 0.0

    def delivered(self, reply: bytes) -> None:
        pub = self.publish
        if pub is not None and pub.allowed(reply):
            return  # publishing there is allowed anyway; nothing to remember
        # As nats-server (pubAllowedFullCheck with the full check): a reply subject that is
        # tracked already counts this delivery as a use instead of starting afresh.
        if self.allowed(reply):
            return
        now = time.monotonic()
        replies = self.replies
        replies[reply] = [now, 0.0]
        self._since_prune += 1
        if self._since_prune > _PRUNE_EVERY or now - self._last_prune > _PRUNE_AFTER:
            self.prune(now)
        if len(replies) > REPLY_TRACK_MAX:
            # Dicts keep insertion order: the first entries are the oldest deliveries.
            for key in list(replies)[: len(replies) - REPLY_TRACK_MAX]:
                del replies[key]

    def allowed(self, subject: bytes) -> bool:
        """Publishing to ``subject``: True (and one response used) if it is a tracked reply."""
        entry = self.replies.get(subject)
        if entry is None:
            return False
        entry[1] += 1
        if self.max_msgs > 0 and entry[1] > self.max_msgs:
            del self.replies[subject]
            return False
        if self.expires > 0 and time.monotonic() - entry[0] > self.expires:
            del self.replies[subject]
            return False
        return True

    def prune(self, now: float) -> None:
        mm = self.max_msgs
        ttl = self.expires
        self.replies = {
            k: e
            for k, e in self.replies.items()
            if not (mm > 0 and e[1] >= mm) and not (ttl > 0 and now - e[0] > ttl)
        }
        self._since_prune = 0
        self._last_prune = now


@dataclass
class Permissions:
    publish: PermissionSet | None = None
    subscribe: PermissionSet | None = None
    allow_responses: ResponsePermission | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    def reply_tracker(self) -> ReplyTracker | None:
        """A fresh tracker for a connection of this user, or None without allow_responses."""
        if self.allow_responses is None:
            return None
        return ReplyTracker(self.allow_responses, self.publish)


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
    resp = lowered.get("allow_responses", lowered.get("publish_allow_responses"))
    if resp is not None:
        perms.allow_responses = _response_permission(resp)
    if perms.allow_responses is not None:
        # nats-server turns off the blanket publish allow: a responder publishes to reply
        # subjects and to what its allow list names, nothing else.
        if perms.publish is None:
            perms.publish = PermissionSet([], None)
        elif perms.publish.allow is None:
            perms.publish = PermissionSet([], perms.publish.deny)
    return perms


_MAX_KEYS = ("max", "max_msgs", "max_messages", "max_responses")
_EXPIRES_KEYS = ("expires", "expiration", "ttl")


def _response_permission(spec: Any) -> ResponsePermission | None:
    """nats-server ``parseAllowResponses``: ``true`` or ``{max: N, expires: "1m"}``; zero
    means the default, a negative value no limit."""
    if isinstance(spec, bool):
        return ResponsePermission() if spec else None
    if not isinstance(spec, dict):
        raise ValueError("error parsing response permissions, expected a boolean or a map")
    max_msgs = DEFAULT_RESPONSE_MAX_MSGS
    expires = DEFAULT_RESPONSE_EXPIRES
    for raw_key, v in spec.items():
        key = str(raw_key).lower()
        if key in _MAX_KEYS:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"error parsing response permissions: {raw_key} must be a number")
            if v != 0:
                max_msgs = v
        elif key in _EXPIRES_KEYS:
            if not isinstance(v, str):
                raise ValueError("error parsing expires, not a duration string")
            try:
                ttl = parse_duration(v)
            except ValueError as e:
                raise ValueError(f"error parsing expires: {e}") from None
            if ttl != 0:
                expires = ttl
        else:
            raise ValueError(f'Unknown field "{raw_key}" parsing permissions')
    return ResponsePermission(max_msgs, expires)
