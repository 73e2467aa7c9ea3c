"""Subject trie with ``*`` / ``>`` wildcards, queue groups and a match cache.

Modelled on nats-server's ``sublist.go``. Every level maps literal tokens to nodes and keeps
the ``*`` and ``>`` children apart so a match walks at most three branches per token. Match
results are cached per literal subject; an insert or removal evicts only the cached subjects
that the changed subscription could match, so a steady set of subscriptions is matched with
one dict lookup per message.

Not thread-safe: one event loop owns a Sublist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from natsd.core.subjects import subject_matches

if TYPE_CHECKING:
    # Machine integers under mypyc; plain ints when interpreted (annotations only).
    from mypy_extensions import i64

__all__ = [
    "EMPTY_RESULT",
    "ChangeListener",
    "Forward",
    "MatchResult",
    "SubLike",
    "SubListener",
    "Sublist",
]

_PWC: Final = b"*"
_FWC: Final = b">"

# Bounded so a client publishing to endless unique subjects cannot grow the server.
CACHE_MAX: Final = 4096
CACHE_SWEEP_TO: Final = 3072
# A wildcard subscription change must evict every cached subject it could match. Checking
# each entry costs about a microsecond in Python, so past this many entries dropping the
# whole cache is cheaper, and it bounds the cost of SUB/UNSUB churn: a client subscribing
# and unsubscribing wildcards in a loop made every change scan 4,096 entries (71% of the
# server's CPU under tests/reliability's abuse load, and seconds of loop stall). Subjects
# that repeat are cached again on their next miss (they are already in ``_seen``).
INVALIDATE_SCAN_MAX: Final = 128
# JetStream ack subjects embed the delivery's sequences, so each is matched exactly once:
# caching them only churns the cache and evicts subjects that do repeat (measured: 15% of
# the CPU of a push consumer with acks, bench/micro_consumer.py --push).
_UNIQUE_PREFIX: Final = b"$JS.ACK."
# The empty lists of a result that matched nothing of a kind; shared, so never written.
_NO_SUBS: Final[list[Any]] = []
_NO_QSUBS: Final[list[Any]] = []


class SubLike(Protocol):
    subject: bytes
    queue: bytes | None


S = TypeVar("S", bound=SubLike)

# (plain subscriptions, one list per queue group)
MatchResult = tuple[list[S], list[list[S]]]
EMPTY_RESULT: tuple[list[SubLike], list[list[SubLike]]] = ([], [])

# Told (subject, queue, +1 | -1) after each insert and each successful remove: how a server
# with routes keeps its interest table (router/interest.py) in step with its subscriptions.
ChangeListener = Callable[[bytes, bytes | None, int], None]
# Told (subscription, +1 | -1) after each insert and each successful remove of a subscription
# that is not quiet: how an account that imports streams keeps its shadow subscriptions in
# the exporters' Sublists (router/imports.py) in step with its own.
SubListener = Callable[[Any, int], None]


# The cluster's publish path for this Sublist's account, set while routes are up:
# (subject, reply, tail, size, hlen, psubs, qsubs, publisher) -> local deliveries, or -1 when
# nobody in the cluster has interest. Typed loosely: the router's Subscription and Sink live
# above this module.
class Forward(Protocol):
    """What a Sublist's ``forward`` slot holds while routes are up (cluster/forward.py)."""

    def __call__(
        self,
        subject: bytes,
        reply: bytes | None,
        tail: bytes,
        size: int,
        hlen: int,
        psubs: Any,
        qsubs: Any,
        publisher: Any,
    ) -> int:
        """Deliver locally and to the routes with interest; -1 when nobody has any."""

    def deliver_as(
        self,
        to: bytes,
        subject: bytes,
        reply: bytes | None,
        tail: bytes,
        size: int,
        hlen: int,
        psubs: Any,
        qsubs: Any,
    ) -> int:
        """The same for a message matched on ``to`` that carries ``subject`` (a JetStream
        consumer's delivery)."""

    def send_traced(
        self,
        trace: Any,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes,
        payload: bytes,
        qsubs: Any,
    ) -> tuple[int, Any]:
        """A traced message to the routes with interest (router/msgtrace.py)."""

    def has_interest(self, subject: bytes) -> bool:
        """Whether a peer server has interest in ``subject`` (a pull request's reply from a
        client on another server is alive while that server still subscribes to it)."""

    def has_exact(self, subject: bytes, queue: bytes | None) -> bool:
        """Whether a peer server subscribes on exactly ``subject`` (in group ``queue``
        when given): a push consumer's deliver subject bound on another server."""


class _Node(Generic[S]):
    __slots__ = ("next", "plist", "psubs", "qsubs")

    def __init__(self) -> None:
        self.next: _Level[S] | None = None
        self.psubs: dict[S, None] = {}
        # psubs as a list, rebuilt lazily after a change and never mutated once built, so
        # a match result may share it instead of copying (see _Acc).
        self.plist: list[S] | None = None
        self.qsubs: dict[bytes, dict[S, None]] = {}

    def empty(self) -> bool:
        return not self.psubs and not self.qsubs and (self.next is None or self.next.empty())


class _Level(Generic[S]):
    __slots__ = ("fwc", "nodes", "pwc")

    def __init__(self) -> None:
        self.nodes: dict[bytes, _Node[S]] = {}
        self.pwc: _Node[S] | None = None
        self.fwc: _Node[S] | None = None

    def empty(self) -> bool:
        return not self.nodes and self.pwc is None and self.fwc is None


class Sublist(Generic[S]):
    __slots__ = (
        "_cache",
        "_count",
        "_root",
        "_seen",
        "_shape_depth",
        "_shapes",
        "cache_hits",
        "forward",
        "inserts",
        "matches",
        "on_change",
        "on_sub",
        "quiet",
        "removes",
    )

    def __init__(self) -> None:
        self._root: _Level[S] = _Level()
        self._cache: dict[bytes, MatchResult[S]] = {}
        self._seen: dict[bytes, None] = {}  # subjects missed once (see match)
        # Results that do not depend on a subject's last tokens (see match): by the subject
        # cut after the tokens the result depends on, with the subject's token count.
        self._shapes: dict[bytes, tuple[int, MatchResult[S]]] = {}
        # token count -> where the last shape stored for it was cut (in tokens)
        self._shape_depth: dict[int, int] = {}
        self._count = 0
        self.matches = 0
        self.cache_hits = 0
        self.inserts = 0
        self.removes = 0
        # None unless the server has routes: then one `is None` check per insert or remove,
        # and nothing per match.
        self.on_change: ChangeListener | None = None
        # None unless routes are up (cluster/forward.py): the publish paths' whole
        # "has routes" check.
        self.forward: Forward | None = None
        # None unless the account imports streams (router/imports.py).
        self.on_sub: SubListener | None = None
        # Subscriptions inserted quiet: neither listener hears of them. A service import's
        # subscription is one: every server of a cluster holds its own, so announcing it to
        # the routes would have each request taken by every server (nats-server's
        # ``noForward``).
        self.quiet: dict[S, None] = {}

    def is_quiet(self, sub: S) -> bool:
        return sub in self.quiet

    def without_quiet(self, psubs: list[S]) -> list[S]:
        """``psubs`` less the quiet subscriptions: what a message from a route may reach
        (a peer server's clients' requests are its own service imports' to take)."""
        quiet = self.quiet
        return [s for s in psubs if s not in quiet]

    def __len__(self) -> int:
        return self._count

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def insert(self, sub: S, quiet: bool = False) -> None:
        level = self._root
        node: _Node[S] | None = None
        for tok in sub.subject.split(b"."):
            if tok == _PWC:
                if level.pwc is None:
                    level.pwc = _Node()
                node = level.pwc
            elif tok == _FWC:
                if level.fwc is None:
                    level.fwc = _Node()
                node = level.fwc
            else:
                node = level.nodes.get(tok)
                if node is None:
                    node = level.nodes[tok] = _Node()
            if node.next is None:
                node.next = _Level()
            level = node.next
        assert node is not None
        if sub.queue is None:
            node.psubs[sub] = None
            node.plist = None
        else:
            node.qsubs.setdefault(sub.queue, {})[sub] = None
        self._count += 1
        self.inserts += 1
        self._invalidate(sub.subject)
        if quiet:
            self.quiet[sub] = None
            return
        if self.on_change is not None:
            self.on_change(sub.subject, sub.queue, 1)
        if self.on_sub is not None:
            self.on_sub(sub, 1)

    def remove(self, sub: S) -> bool:
        """Remove ``sub``; returns False if it was not present."""
        path: list[tuple[_Level[S], bytes, _Node[S]]] = []
        level: _Level[S] | None = self._root
        node: _Node[S] | None = None
        for tok in sub.subject.split(b"."):
            if level is None:
                return False
            if tok == _PWC:
                node = level.pwc
            elif tok == _FWC:
                node = level.fwc
            else:
                node = level.nodes.get(tok)
            if node is None:
                return False
            path.append((level, tok, node))
            level = node.next
        assert node is not None
        if sub.queue is None:
            if node.psubs.pop(sub, 1) is not None:
                return False
            node.plist = None
        else:
            group = node.qsubs.get(sub.queue)
            if group is None or group.pop(sub, 1) is not None:
                return False
            if not group:
                del node.qsubs[sub.queue]
        self._count -= 1
        self.removes += 1
        # Prune empty nodes bottom-up so churn in unique subjects does not leak memory.
        for lvl, tok, nd in reversed(path):
            if nd.psubs or nd.qsubs or (nd.next is not None and not nd.next.empty()):
                break
            if tok == _PWC:
                lvl.pwc = None
            elif tok == _FWC:
                lvl.fwc = None
            else:
                lvl.nodes.pop(tok, None)
        self._invalidate(sub.subject)
        if self.quiet and self.quiet.pop(sub, 1) is None:
            return True
        if self.on_change is not None:
            self.on_change(sub.subject, sub.queue, -1)
        if self.on_sub is not None:
            self.on_sub(sub, -1)
        return True

    def _invalidate(self, pattern: bytes) -> None:
        if self._shapes:
            # A shape stands for every subject of a prefix: any change may touch one.
            self._shapes.clear()
        cache = self._cache
        if not cache:
            return
        if _PWC not in pattern and _FWC not in pattern:
            cache.pop(pattern, None)
            return
        if len(cache) > INVALIDATE_SCAN_MAX:
            cache.clear()
            return
        stale = [k for k in cache if subject_matches(k, pattern)]
        for k in stale:
            del cache[k]

    def match(self, subject: bytes) -> MatchResult[S]:
        res = self._cache.get(subject)
        if res is not None:
            self.cache_hits += 1
            return res
        shapes = self._shapes
        if shapes:
            ntok = _count_tokens(subject)
            depth = self._shape_depth.get(ntok)
            if depth is not None:
                shape = shapes.get(subject[: _cut_at(subject, depth)])
                if shape is not None and shape[0] == ntok:
                    self.cache_hits += 1
                    return shape[1]
        self.matches += 1
        acc: _Acc[S] = _Acc()
        toks = subject.split(b".")
        _match_level(self._root, toks, 0, acc)
        qmap = acc.qmap
        res = (acc.psubs, list(qmap.values()) if qmap is not None else _NO_QSUBS)
        ntok = len(toks)
        depth = acc.depth
        if depth < ntok:
            # The walk looked up none of the tokens from ``depth`` on (their levels held
            # only wildcards), so every subject with these first tokens and this many of
            # them matches the same: a reply inbox under its client's ``_INBOX.<id>.*``,
            # an ack under its consumer's ``$JS.ACK.<stream>.<consumer>.>``. One entry
            # serves them all, where the subject cache would miss every time.
            if len(shapes) >= CACHE_MAX:
                shapes.clear()
            shapes[subject[: _cut_at(subject, depth)]] = (ntok, res)
            self._shape_depth[ntok] = depth
            return res
        if subject.startswith(_UNIQUE_PREFIX):
            return res
        # Admission: a subject is cached on its second miss. Reply inboxes and other
        # one-off subjects then cost a set insert instead of a cache insert plus, every
        # few hundred misses, a sweep that also evicts the subjects that do repeat.
        seen = self._seen
        if subject not in seen:
            if len(seen) >= CACHE_MAX:
                seen.clear()
            seen[subject] = None
            return res
        cache = self._cache
        if len(cache) >= CACHE_MAX:
            # Evict the oldest entries (dicts keep insertion order).
            for k in list(cache)[: CACHE_MAX - CACHE_SWEEP_TO]:
                del cache[k]
        cache[subject] = res
        return res

    def has_interest(self, subject: bytes) -> bool:
        """Interest here or, with routes up, on a peer server."""
        p, q = self.match(subject)
        if p or q:
            return True
        fwd = self.forward
        return fwd is not None and fwd.has_interest(subject)

    def __iter__(self) -> Iterator[S]:
        stack = [self._root]
        while stack:
            lvl = stack.pop()
            nodes = list(lvl.nodes.values())
            if lvl.pwc is not None:
                nodes.append(lvl.pwc)
            if lvl.fwc is not None:
                nodes.append(lvl.fwc)
            for nd in nodes:
                yield from nd.psubs
                for grp in nd.qsubs.values():
                    yield from grp
                if nd.next is not None:
                    stack.append(nd.next)


class _Acc(Generic[S]):
    """What a match has collected so far.

    Most subjects match subscriptions on a single trie node (a reply inbox, a stream's
    subjects), so the result shares that node's ``plist`` instead of copying it, and the
    queue-group map is only created when a queue subscription matches. Results are read-only
    for their users (deliver iterates them) and stay valid after the Sublist changes, since
    a change replaces ``plist`` rather than mutating it.
    """

    __slots__ = ("depth", "owned", "psubs", "qmap")

    def __init__(self) -> None:
        self.psubs: list[S] = _NO_SUBS  # (shared and never written: replaced, see collect)
        self.owned = False  # psubs is our own list (not a node's plist)
        self.qmap: dict[bytes, list[S]] | None = None
        # 1 + the deepest token index looked up among literal tokens: the result does not
        # depend on the tokens from here on (only on how many there are).
        self.depth = 0

    def collect(self, node: _Node[S]) -> None:
        if node.psubs:
            pl = node.plist
            if pl is None:
                pl = node.plist = list(node.psubs)
            if not self.psubs:
                self.psubs = pl
            elif self.owned:
                self.psubs.extend(pl)
            else:
                self.psubs = self.psubs + pl
                self.owned = True
        if node.qsubs:
            qmap = self.qmap
            if qmap is None:
                qmap = self.qmap = {}
            for q, grp in node.qsubs.items():
                lst = qmap.get(q)
                if lst is None:
                    qmap[q] = list(grp)
                else:
                    lst.extend(grp)


def _count_tokens(subject: bytes) -> int:
    """How many tokens ``subject.split(b".")`` gives (compiled: a scan on machine ints)."""
    n: i64 = len(subject)
    dots: i64 = 0
    i: i64 = 0
    while i < n:
        if subject[i] == 46:
            dots += 1
        i += 1
    return dots + 1


def _cut_at(subject: bytes, depth: int) -> int:
    """Where ``subject``'s first ``depth`` tokens end (0 for none)."""
    if depth <= 0:
        return 0
    n: i64 = len(subject)
    left: i64 = depth
    i: i64 = 0
    while i < n:
        if subject[i] == 46:
            left -= 1
            if left == 0:
                return i
        i += 1
    return n


def _match_level(level: _Level[S], toks: list[bytes], i: int, acc: _Acc[S]) -> None:
    last = len(toks) - 1
    while True:
        if level.fwc is not None:
            acc.collect(level.fwc)
        pwc = level.pwc
        if pwc is not None:
            if i == last:
                acc.collect(pwc)
            elif pwc.next is not None:
                _match_level(pwc.next, toks, i + 1, acc)
        nodes = level.nodes
        if not nodes:
            return
        if i >= acc.depth:
            acc.depth = i + 1
        node = nodes.get(toks[i])
        if node is None:
            return
        if i == last:
            acc.collect(node)
            return
        if node.next is None:
            return
        level = node.next
        i += 1
