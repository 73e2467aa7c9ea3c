"""Cluster interest: what this server tells its route peers, and what they told it.

Pure: no I/O and no asyncio. The route connections (connection/route.py) own the wire; they
encode the deltas this module produces as ``RS+``/``RS-`` and feed it the ones they parse.

* ``LocalInterest`` owns, per account, a refcount of (subject, queue) over every subscription
  the server holds, client or internal. It listens to each account's ``Sublist`` through
  ``Sublist.on_change`` (None on a server without routes, so such a server pays one ``is None``
  check per subscribe and nothing per message) and reports changes the way nats-server's
  ``updateRouteSubscriptionMap`` sends them: ``RS+`` on the first reference of a plain
  subject and ``RS-`` on the last; for a queue group ``RS+`` carrying the weight (the number
  of local members) on every change, ``RS-`` when the last member leaves. ``snapshot()`` is
  the whole table for a new route (nats-server's ``sendSubsToRoute``).
* ``RemoteInterest`` owns what peers told us, per route id. Each account's remote interest is
  one ``Sublist`` of ``RemoteSub``, so a publish finds in one (cached) match a
  ``ForwardPlan``: the routes with plain interest, each once however many of its
  subscriptions match, and per queue group the routes that have members with their summed
  weights. ``assign()`` then picks one member per queue group cluster-wide. A peer is
  untrusted: its subjects are validated as the client path validates SUB, and its number of
  subscriptions is capped.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from random import random
from typing import Any, Final

from natsd.core.subjects import is_valid_queue, is_valid_subject
from natsd.router.sublist import CACHE_MAX, Sublist

__all__ = [
    "MAX_QUEUE_WEIGHT",
    "DeltaSink",
    "ForwardPlan",
    "InterestRefused",
    "LocalInterest",
    "RemoteGroup",
    "RemoteInterest",
    "RemoteSub",
    "assign",
]

# (account, subject, queue | None, weight): weight 0 means RS-; a plain subject has weight 1.
DeltaSink = Callable[[bytes, bytes, bytes | None, int], None]

# nats-server keeps a queue weight in an int32.
MAX_QUEUE_WEIGHT: Final = 2**31 - 1

_Key = tuple[bytes, bytes | None]


# ----------------------------------------------------------------------------- local side


class _AccountHook:
    """The ``Sublist.on_change`` listener of one account."""

    __slots__ = ("name", "owner", "table")

    def __init__(self, owner: LocalInterest, name: bytes, table: dict[_Key, int]) -> None:
        self.owner = owner
        self.name = name
        self.table = table

    def changed(self, subject: bytes, queue: bytes | None, delta: int) -> None:
        table = self.table
        key = (subject, queue)
        n = table.get(key, 0) + delta
        if n <= 0:
            if key in table:
                del table[key]
                if not self.owner.mute:
                    self.owner.emit(self.name, subject, queue, 0)
            return
        table[key] = n
        if self.owner.mute:
            return
        if queue is not None:
            self.owner.emit(self.name, subject, queue, n)
        elif n == 1 and delta > 0:
            self.owner.emit(self.name, subject, None, 1)


class LocalInterest:
    """Per account, how many local subscriptions hold each (subject, queue)."""

    __slots__ = ("_hooks", "_sublists", "emit", "mute")

    def __init__(self, emit: DeltaSink) -> None:
        # Called with every change to send to the routes (all of them: one hop).
        self.emit = emit
        # While set, changes are counted but not emitted: a connection moving between
        # workers (cluster/handoff.py) re-homes its interest at the peers itself.
        self.mute = False
        self._hooks: dict[bytes, _AccountHook] = {}
        self._sublists: dict[bytes, Sublist[Any]] = {}

    def attach(self, account: str, sublist: Sublist[Any]) -> None:
        """Follow ``sublist`` from now on; what it already holds is counted (and emitted)."""
        name = account.encode()
        if name in self._hooks:
            raise ValueError(f"account {account!r} is already attached")
        if sublist.on_change is not None:
            raise ValueError(f"the Sublist of account {account!r} already has a listener")
        hook = _AccountHook(self, name, {})
        self._hooks[name] = hook
        self._sublists[name] = sublist
        for sub in sublist:
            if not sublist.is_quiet(sub):
                hook.changed(sub.subject, sub.queue, 1)
        sublist.on_change = hook.changed

    def detach(self, account: str) -> None:
        """Stop following an account; its interest is withdrawn (RS- for each entry)."""
        name = account.encode()
        hook = self._hooks.pop(name)
        self._sublists.pop(name).on_change = None
        for subject, queue in list(hook.table):
            del hook.table[(subject, queue)]
            self.emit(name, subject, queue, 0)

    def detach_all(self) -> None:
        """Leave every Sublist listener-free again (the last route is gone): no deltas."""
        for sl in self._sublists.values():
            sl.on_change = None
        self._hooks.clear()
        self._sublists.clear()

    def snapshot(self) -> list[tuple[bytes, bytes, bytes | None, int]]:
        """Everything a new route must be told: (account, subject, queue, weight)."""
        out: list[tuple[bytes, bytes, bytes | None, int]] = []
        for name, hook in self._hooks.items():
            for (subject, queue), n in hook.table.items():
                out.append((name, subject, queue, n if queue is not None else 1))
        return out

    def count(self, account: str, subject: bytes, queue: bytes | None = None) -> int:
        hook = self._hooks.get(account.encode())
        return 0 if hook is None else hook.table.get((subject, queue), 0)

    def __len__(self) -> int:
        return sum(len(h.table) for h in self._hooks.values())


# ---------------------------------------------------------------------------- remote side


class InterestRefused(Exception):
    """A peer's RS+ that this server will not take; ``str()`` is the text for ``-ERR``."""


class RemoteSub:
    """One (account, subject, queue) a route told us about. Satisfies ``SubLike``."""

    __slots__ = ("account", "queue", "route", "subject", "weight")

    def __init__(
        self, route: int, account: bytes, subject: bytes, queue: bytes | None, weight: int
    ) -> None:
        self.route = route
        self.account = account
        self.subject = subject
        self.queue = queue
        self.weight = weight

    def __repr__(self) -> str:
        q = f" {self.queue!r} w={self.weight}" if self.queue is not None else ""
        return f"<RemoteSub route={self.route} {self.account!r} {self.subject!r}{q}>"


class RemoteGroup:
    """The remote members of one queue group for one subject: routes and their weights."""

    __slots__ = ("cumulative", "queue", "routes", "total")

    def __init__(self, queue: bytes, routes: list[int], weights: list[int]) -> None:
        self.queue = queue
        self.routes = routes
        cum: list[int] = []
        t = 0
        for w in weights:
            t += w
            cum.append(t)
        self.cumulative = cum
        self.total = t

    def choose(self, nlocal: int, prefer_local: bool = False) -> int:
        """-1 for a local member, else the route id, weighted as nats-server weighs them:
        each local member counts once, each route as many times as its queue weight.
        ``prefer_local``: any local member wins (not nats-server's rule for a message from
        a client; it is its rule for one from a route, which never goes back out anyway)."""
        if prefer_local and nlocal:
            return -1
        # random() rather than randrange: a third of the cost, and the bias of flooring a
        # float is far below anything a queue group's spread could show.
        x = int(random() * (nlocal + self.total))
        if x < nlocal:
            return -1
        return self.routes[bisect_right(self.cumulative, x - nlocal)]


class ForwardPlan:
    """Where a message on one subject must go across routes (before the queue picks)."""

    __slots__ = ("groups", "routes")

    def __init__(self, routes: list[int], groups: list[RemoteGroup]) -> None:
        self.routes = routes  # routes with plain interest, each once
        self.groups = groups


def _plan(psubs: list[RemoteSub], qsubs: list[list[RemoteSub]]) -> ForwardPlan:
    routes: list[int] = list(dict.fromkeys([s.route for s in psubs])) if psubs else []
    groups: list[RemoteGroup] = []
    for group in qsubs:
        # Overlapping subscriptions of one route in one group (foo.* and foo.>) add up, as
        # nats-server's match result lists each remote queue sub weight times.
        weights: dict[int, int] = {}
        for s in group:
            weights[s.route] = weights.get(s.route, 0) + s.weight
        groups.append(RemoteGroup(group[0].queue or b"", list(weights), list(weights.values())))
    return ForwardPlan(routes, groups)


def assign(
    plan: ForwardPlan, local_members: Callable[[bytes], int], prefer_local: bool = False
) -> tuple[dict[int, list[bytes]], list[bytes]]:
    """Pick, for one message, one member of each queue group across the cluster.

    ``local_members(queue)`` is how many local subscribers the group has for this subject.
    Returns the routes to send one RMSG each, with the queue names that route must deliver
    (an empty list: its plain subscriptions only), and the queue groups that went to a route,
    which local delivery must then skip. Like nats-server for a message from a client
    (``processMsgResults``): one weighted pick over every member, local or remote, unless
    ``prefer_local``. nats-server moves on to the next candidate when a local member cannot
    take the message (no echo, a deny rule); the caller does the same with ``choose(0)``.
    """
    targets: dict[int, list[bytes]] = {r: [] for r in plan.routes}
    remote: list[bytes] = []
    for g in plan.groups:
        rid = g.choose(local_members(g.queue), prefer_local)
        if rid < 0:
            continue
        remote.append(g.queue)
        qs = targets.get(rid)
        if qs is None:
            targets[rid] = [g.queue]
        else:
            qs.append(g.queue)
    return targets, remote


class _Head:
    """The remote subscriptions whose first token is one literal: how many have a wildcard
    (or nothing) as second token, and how many each literal second token has."""

    __slots__ = ("seconds", "wild")

    def __init__(self) -> None:
        self.wild = 0
        self.seconds: dict[bytes, int] = {}


def _split2(subject: bytes) -> tuple[bytes, bytes | None]:
    """The first token and the second (None when there is none) of ``subject``."""
    i = subject.find(b".")
    if i < 0:
        return subject, None
    j = subject.find(b".", i + 1)
    return subject[:i], subject[i + 1 :] if j < 0 else subject[i + 1 : j]


class _AccountRemote:
    """One account's remote subscriptions, and a two-token index of them that answers
    "nobody" without a Sublist walk: most local deliveries (a reply to a unique inbox, a
    PubAck) have no remote interest, and on a cluster every one of them asks."""

    __slots__ = ("heads", "plans", "sublist", "wild")

    def __init__(self) -> None:
        self.sublist: Sublist[RemoteSub] = Sublist()
        self.wild = 0  # subscriptions whose first token is a wildcard: no shortcut
        self.heads: dict[bytes, _Head] = {}
        # subject -> (the two lists of the match result the plan was built from, the plan).
        # A Sublist change that touches the subject makes match return new lists (a cached
        # result's lists are never mutated), so identity tells a stale plan without a second
        # invalidation scheme. The lists, not the result tuple: compiled, a tuple is boxed
        # afresh each time it crosses into Python objects.
        self.plans: dict[bytes, tuple[list[RemoteSub], list[list[RemoteSub]], ForwardPlan]] = {}

    def index(self, subject: bytes, delta: int) -> None:
        first, second = _split2(subject)
        if first in (b"*", b">"):
            self.wild += delta
            return
        head = self.heads.get(first)
        if head is None:
            head = self.heads[first] = _Head()
        if second is None or second in (b"*", b">"):
            head.wild += delta
        else:
            n = head.seconds.get(second, 0) + delta
            if n:
                head.seconds[second] = n
            else:
                del head.seconds[second]
        if not head.wild and not head.seconds:
            del self.heads[first]

    def surely_none(self, subject: bytes) -> bool:
        """True when no remote subscription can match ``subject`` (False: maybe)."""
        if self.wild:
            return False
        first, second = _split2(subject)
        head = self.heads.get(first)
        if head is None:
            return True
        if head.wild or second is None:
            return False
        return second not in head.seconds


_RKey = tuple[bytes, bytes, bytes | None]


class RemoteInterest:
    """Subscriptions the route peers hold, by route id (the connection layer's handle)."""

    __slots__ = ("_accounts", "_routes", "max_subs")

    def __init__(self, max_subs: int = 0) -> None:
        # Per route; 0 means no limit.
        self.max_subs = max_subs
        self._accounts: dict[bytes, _AccountRemote] = {}
        self._routes: dict[int, dict[_RKey, RemoteSub]] = {}

    def add(
        self, route: int, account: bytes, subject: bytes, queue: bytes | None, weight: int = 1
    ) -> bool:
        """Apply an RS+. Returns False if it changed nothing (a repeated plain RS+ or an
        unchanged weight); raises ``InterestRefused`` for input a peer must not send."""
        if not account or not is_valid_queue(account):
            raise InterestRefused("Invalid Account")
        if not is_valid_subject(subject):
            raise InterestRefused("Invalid Subject")
        if queue is not None:
            if not is_valid_queue(queue):
                raise InterestRefused("Invalid Queue")
            if not 1 <= weight <= MAX_QUEUE_WEIGHT:
                raise InterestRefused("Invalid Queue Weight")
        else:
            weight = 1
        subs = self._routes.get(route)
        if subs is None:
            subs = self._routes[route] = {}
        key = (account, subject, queue)
        old = subs.get(key)
        if old is not None:
            if old.weight == weight:
                return False
            # Re-inserted so the Sublist evicts its cached results, and with them our plans.
            sl = self._accounts[account].sublist
            sl.remove(old)
            old.weight = weight
            sl.insert(old)
            return True
        if self.max_subs and len(subs) >= self.max_subs:
            raise InterestRefused("maximum subscriptions exceeded")
        sub = RemoteSub(route, account, subject, queue, weight)
        subs[key] = sub
        table = self._accounts.get(account)
        if table is None:
            table = self._accounts[account] = _AccountRemote()
        table.sublist.insert(sub)
        table.index(subject, 1)
        return True

    def remove(self, route: int, account: bytes, subject: bytes, queue: bytes | None) -> bool:
        """Apply an RS-. An unknown one is ignored (False), as nats-server ignores it."""
        subs = self._routes.get(route)
        if subs is None:
            return False
        sub = subs.pop((account, subject, queue), None)
        if sub is None:
            return False
        if not subs:
            del self._routes[route]
        self._drop(sub)
        return True

    def remove_route(self, route: int) -> int:
        """Withdraw everything a route told us (it closed). Returns how many entries."""
        subs = self._routes.pop(route, None)
        if subs is None:
            return 0
        for sub in subs.values():
            self._drop(sub)
        return len(subs)

    def _drop(self, sub: RemoteSub) -> None:
        table = self._accounts[sub.account]
        table.sublist.remove(sub)
        table.index(sub.subject, -1)
        if not len(table.sublist):
            del self._accounts[sub.account]

    def match(self, account: bytes, subject: bytes) -> ForwardPlan | None:
        """Where a message published locally on ``subject`` must go; None: nowhere."""
        table = self._accounts.get(account)
        if table is None or table.surely_none(subject):
            return None
        psubs, qsubs = table.sublist.match(subject)
        if not psubs and not qsubs:
            return None
        plans = table.plans
        hit = plans.get(subject)
        if hit is not None and hit[0] is psubs and hit[1] is qsubs:
            return hit[2]
        plan = _plan(psubs, qsubs)
        if len(plans) >= CACHE_MAX:
            plans.clear()
        plans[subject] = (psubs, qsubs, plan)
        return plan

    def has_exact(self, account: bytes, subject: bytes, queue: bytes | None) -> bool:
        """Whether a peer subscribes on exactly ``subject`` (in group ``queue`` when one
        is given, in any group or none otherwise): a push consumer's deliver subject."""
        table = self._accounts.get(account)
        if table is None:
            return False
        psubs, qsubs = table.sublist.match(subject)
        if queue is None and any(s.subject == subject for s in psubs):
            return True
        return any(
            s.subject == subject and (queue is None or s.queue == queue)
            for grp in qsubs
            for s in grp
        )

    def route_subs(self, route: int) -> int:
        subs = self._routes.get(route)
        return 0 if subs is None else len(subs)

    def iter_route(self, route: int) -> Iterator[RemoteSub]:
        """A route's subscriptions (for ``/routez?subs=1``)."""
        subs = self._routes.get(route)
        return iter(()) if subs is None else iter(list(subs.values()))

    def snapshot(self) -> set[tuple[int, bytes, bytes, bytes | None, int]]:
        return {
            (s.route, s.account, s.subject, s.queue, s.weight)
            for subs in self._routes.values()
            for s in subs.values()
        }

    def __len__(self) -> int:
        return sum(len(subs) for subs in self._routes.values())

    @property
    def accounts(self) -> int:
        return len(self._accounts)
