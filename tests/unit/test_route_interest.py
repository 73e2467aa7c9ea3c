"""Unit tests for natsd.router.interest: local interest deltas, remote interest and forwarding
plans, the bounds a peer is held to, and the Sublist hook being inert without routes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from natsd.core.subjects import subject_matches
from natsd.protocol.route_encode import encode_rs_minus, encode_rs_plus
from natsd.protocol.route_parser import R_SUB, R_UNSUB, RouteParser
from natsd.router import interest as interest_mod
from natsd.router.account import Account
from natsd.router.interest import (
    InterestRefused,
    LocalInterest,
    RemoteInterest,
    assign,
)
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

Delta = tuple[bytes, bytes, bytes | None, int]


def sub(subject: bytes, queue: bytes | None = None, sid: bytes = b"1") -> Subscription:
    return Subscription(subject, queue, sid)


def local(*accounts: Account) -> tuple[LocalInterest, list[Delta]]:
    out: list[Delta] = []
    li = LocalInterest(lambda a, s, q, w: out.append((a, s, q, w)))
    for acc in accounts:
        li.attach(acc.name, acc.sublist)
    return li, out


# ------------------------------------------------------------------ local interest deltas


def test_plain_subject_rs_plus_on_first_rs_minus_on_last() -> None:
    acc = Account("$G")
    li, out = local(acc)
    a, b = sub(b"foo"), sub(b"foo")
    acc.sublist.insert(a)
    assert out == [(b"$G", b"foo", None, 1)]
    acc.sublist.insert(b)
    assert len(out) == 1, "a second reference must not be sent"
    assert li.count("$G", b"foo") == 2
    acc.sublist.remove(a)
    assert len(out) == 1
    acc.sublist.remove(b)
    assert out[-1] == (b"$G", b"foo", None, 0)
    assert len(li) == 0
    # A remove the Sublist refuses (not present) changes nothing.
    acc.sublist.remove(b)
    assert len(out) == 2


def test_queue_weight_sent_on_every_change() -> None:
    acc = Account("A")
    _li, out = local(acc)
    members = [sub(b"work.*", b"q", str(i).encode()) for i in range(3)]
    for m in members:
        acc.sublist.insert(m)
    assert out == [
        (b"A", b"work.*", b"q", 1),
        (b"A", b"work.*", b"q", 2),
        (b"A", b"work.*", b"q", 3),
    ]
    out.clear()
    for m in members:
        acc.sublist.remove(m)
    assert out == [
        (b"A", b"work.*", b"q", 2),
        (b"A", b"work.*", b"q", 1),
        (b"A", b"work.*", b"q", 0),
    ]


def test_wildcards_and_groups_are_separate_entries() -> None:
    acc = Account("$G")
    li, out = local(acc)
    for s in (
        sub(b"foo.*"),
        sub(b"foo.>"),
        sub(b"foo.bar"),
        sub(b"foo.*", b"q"),
        sub(b"foo.*", b"r"),
    ):
        acc.sublist.insert(s)
    assert [d[1:3] for d in out] == [
        (b"foo.*", None),
        (b"foo.>", None),
        (b"foo.bar", None),
        (b"foo.*", b"q"),
        (b"foo.*", b"r"),
    ]
    assert len(li) == 5


def test_internal_subscriptions_count_like_client_ones() -> None:
    acc = Account("$G")
    _li, out = local(acc)
    internal = Subscription(b"$JS.API.>", None, b"i1", callback=lambda *a: None)
    acc.sublist.insert(internal)
    assert out == [(b"$G", b"$JS.API.>", None, 1)]


def test_accounts_are_kept_apart() -> None:
    a, b = Account("A"), Account("B")
    _li, out = local(a, b)
    a.sublist.insert(sub(b"x"))
    b.sublist.insert(sub(b"x"))
    assert out == [(b"A", b"x", None, 1), (b"B", b"x", None, 1)]


def test_attach_counts_what_is_there_and_snapshot_is_the_table() -> None:
    acc = Account("$G")
    for s in (sub(b"a"), sub(b"a"), sub(b"b.*", b"q"), sub(b"b.*", b"q"), sub(b"c.>")):
        acc.sublist.insert(s)
    li, out = local(acc)
    assert sorted(out, key=repr)[-1] == (b"$G", b"c.>", None, 1)
    assert sorted(li.snapshot(), key=repr) == sorted(
        [(b"$G", b"a", None, 1), (b"$G", b"b.*", b"q", 2), (b"$G", b"c.>", None, 1)], key=repr
    )
    with pytest.raises(ValueError):
        li.attach("$G", acc.sublist)


def test_detach_withdraws_and_detach_all_leaves_sublists_listener_free() -> None:
    a, b = Account("A"), Account("B")
    li, out = local(a, b)
    a.sublist.insert(sub(b"x", b"q"))
    b.sublist.insert(sub(b"y"))
    out.clear()
    li.detach("A")
    assert out == [(b"A", b"x", b"q", 0)]
    assert a.sublist.on_change is None
    a.sublist.insert(sub(b"z"))
    assert len(out) == 1
    li.detach_all()
    assert b.sublist.on_change is None and li.snapshot() == []


def test_hook_is_inert_without_routes() -> None:
    # A server without routes never sets on_change: nothing listens, nothing is counted.
    acc = Account("$G")
    assert acc.sublist.on_change is None
    s = sub(b"foo")
    acc.sublist.insert(s)
    assert acc.sublist.remove(s)
    assert acc.sublist.on_change is None

    # And even with a listener, a match never calls it: the per-message path pays nothing.
    def boom(subject: bytes, queue: bytes | None, delta: int) -> None:
        raise AssertionError("listener called on a match")

    sl: Sublist[Subscription] = Sublist()
    sl.insert(sub(b"foo.*"))
    sl.on_change = boom
    for _ in range(3):  # miss, admission, cached hit
        assert len(sl.match(b"foo.bar")[0]) == 1


# --------------------------------------------------------------- remote interest and plans


def test_overlapping_wildcards_of_one_route_forward_once() -> None:
    ri = RemoteInterest()
    for subj in (b"foo.*", b"foo.>", b"foo.bar", b">"):
        ri.add(1, b"$G", subj, None)
    ri.add(2, b"$G", b"foo.bar", None)
    for _ in range(3):  # uncached, admitted, cached
        plan = ri.match(b"$G", b"foo.bar")
        assert plan is not None
        assert sorted(plan.routes) == [1, 2]
        assert plan.groups == []
    targets, remote = assign(plan, lambda q: 0)
    assert targets == {1: [], 2: []} and remote == []
    assert ri.match(b"$G", b"nomatch.x.y") is not None  # route 1 has ">"
    assert ri.match(b"OTHER", b"foo.bar") is None


def test_queue_group_candidates_and_one_rmsg_per_route() -> None:
    ri = RemoteInterest()
    ri.add(1, b"$G", b"job.*", None)
    ri.add(1, b"$G", b"job.*", b"workers", 3)
    ri.add(1, b"$G", b"job.>", b"workers", 1)  # overlapping, same group: weights add up
    ri.add(2, b"$G", b"job.a", b"workers", 2)
    ri.add(2, b"$G", b"job.a", b"audit", 1)
    plan = ri.match(b"$G", b"job.a")
    assert plan is not None and plan.routes == [1]
    assert {g.queue for g in plan.groups} == {b"workers", b"audit"}
    w = next(g for g in plan.groups if g.queue == b"workers")
    weights = [w.cumulative[0], w.cumulative[1] - w.cumulative[0]]
    assert dict(zip(w.routes, weights, strict=True)) == {1: 4, 2: 2}
    assert w.total == 6
    random.seed(7)
    for _ in range(50):
        targets, remote = assign(plan, lambda q: 0)
        # One entry per route, whatever it was picked for; audit can only go to route 2.
        assert set(targets) <= {1, 2} and 1 in targets
        assert targets[2].count(b"audit") == 1
        assert sorted(remote) == [b"audit", b"workers"]
        assert sum(qs.count(b"workers") for qs in targets.values()) == 1


def test_weighted_pick_counts_local_members_once_each() -> None:
    ri = RemoteInterest()
    ri.add(1, b"$G", b"s", b"q", 3)
    ri.add(2, b"$G", b"s", b"q", 1)
    plan = ri.match(b"$G", b"s")
    assert plan is not None
    (g,) = plan.groups
    random.seed(1)
    n = 40_000
    picks = Counter(g.choose(4) for _ in range(n))  # 4 local + 3 + 1 remote: 4:3:1
    assert set(picks) == {-1, 1, 2}
    assert abs(picks[-1] / n - 0.5) < 0.02
    assert abs(picks[1] / n - 0.375) < 0.02
    assert abs(picks[2] / n - 0.125) < 0.02
    # No local member: always remote, and assign reports the group as gone remote.
    targets, remote = assign(plan, lambda q: 0)
    assert remote == [b"q"] and sum(len(v) for v in targets.values()) == 1


def test_weight_update_and_removal_refresh_cached_plans() -> None:
    ri = RemoteInterest()
    ri.add(1, b"$G", b"s", b"q", 1)
    for _ in range(3):
        plan = ri.match(b"$G", b"s")
    assert plan is not None and plan.groups[0].total == 1
    assert ri.match(b"$G", b"s") is plan, "a steady subject reuses its plan"
    assert ri.add(1, b"$G", b"s", b"q", 5)
    plan2 = ri.match(b"$G", b"s")
    assert plan2 is not None and plan2.groups[0].total == 5
    assert not ri.add(1, b"$G", b"s", b"q", 5), "same weight: no change"
    assert ri.remove(1, b"$G", b"s", b"q")
    assert ri.match(b"$G", b"s") is None


def test_repeated_and_unknown_protocols_are_harmless() -> None:
    ri = RemoteInterest()
    assert ri.add(1, b"$G", b"foo", None)
    assert not ri.add(1, b"$G", b"foo", None)
    assert len(ri) == 1
    assert not ri.remove(1, b"$G", b"bar", None)
    assert not ri.remove(9, b"$G", b"foo", None)
    assert not ri.remove(1, b"$G", b"foo", b"q")
    assert len(ri) == 1


def test_remove_route_withdraws_everything_at_once() -> None:
    ri = RemoteInterest()
    ri.add(1, b"$G", b"a", None)
    ri.add(1, b"$G", b"b.*", b"q", 2)
    ri.add(1, b"X", b">", None)
    ri.add(2, b"$G", b"a", None)
    assert ri.remove_route(1) == 3
    assert ri.route_subs(1) == 0
    assert ri.snapshot() == {(2, b"$G", b"a", None, 1)}
    plan = ri.match(b"$G", b"a")
    assert plan is not None and plan.routes == [2]
    assert ri.match(b"X", b"anything") is None
    assert ri.accounts == 1
    assert ri.remove_route(1) == 0


def test_route_flapping_leaves_the_tables_as_they_were() -> None:
    # Server A's local interest is sent to B over a route that connects and drops 100 times,
    # through the real encoder and parser; B's tables must end exactly where they started.
    acc = Account("$G")
    li, _ = local(acc)
    subs = [sub(b"a"), sub(b"b.*", b"q"), sub(b"b.*", b"q"), sub(b"c.>")]
    for s in subs:
        acc.sublist.insert(s)
    ri = RemoteInterest(max_subs=10)
    ri.add(7, b"$G", b"steady", None)  # another peer's interest, untouched by the flapping
    before = ri.snapshot()
    for i in range(100):
        rid = 100 + i % 3
        wire = b"".join(encode_rs_plus(a, s, q, w) for a, s, q, w in li.snapshot())
        for ev in RouteParser().feed(wire):
            assert ev[0] == R_SUB
            ri.add(rid, ev[1], ev[2], ev[3], ev[4])
        assert ri.route_subs(rid) == 3
        plan = ri.match(b"$G", b"b.x")
        assert plan is not None and plan.groups[0].total == 2
        if i % 2:
            assert ri.remove_route(rid) == 3
        else:  # an orderly goodbye: RS- for each
            wire = b"".join(encode_rs_minus(a, s, q) for a, s, q, _ in li.snapshot())
            for ev in RouteParser().feed(wire):
                assert ev[0] == R_UNSUB
                ri.remove(rid, ev[1], ev[2], ev[3])
        assert ri.snapshot() == before
    assert len(ri) == 1 and ri.accounts == 1
    table = ri._accounts[b"$G"]
    assert len(table.sublist) == 1
    assert sorted(s.subject for s in table.sublist) == [b"steady"]
    assert ri.match(b"$G", b"a") is None and ri.match(b"$G", b"b.x") is None


def test_local_to_remote_end_to_end_follows_changes() -> None:
    acc = Account("$G")
    ri = RemoteInterest()

    def apply(a: bytes, s: bytes, q: bytes | None, w: int) -> None:
        if w:
            ri.add(1, a, s, q, w)
        else:
            ri.remove(1, a, s, q)

    li = LocalInterest(apply)
    li.attach(acc.name, acc.sublist)
    members = [sub(b"svc", b"q", str(i).encode()) for i in range(3)]
    for m in members:
        acc.sublist.insert(m)
    plan = ri.match(b"$G", b"svc")
    assert plan is not None and plan.groups[0].total == 3
    acc.sublist.remove(members[0])
    plan = ri.match(b"$G", b"svc")
    assert plan is not None and plan.groups[0].total == 2
    for m in members[1:]:
        acc.sublist.remove(m)
    assert ri.match(b"$G", b"svc") is None and len(ri) == 0


# ------------------------------------------------------------------------------ bounds


def test_cap_on_subscriptions_per_route() -> None:
    ri = RemoteInterest(max_subs=3)
    for s in (b"a", b"b", b"c"):
        ri.add(1, b"$G", s, b"q", 1)
    with pytest.raises(InterestRefused, match="maximum subscriptions exceeded"):
        ri.add(1, b"$G", b"d", None)
    assert ri.route_subs(1) == 3 and ri.match(b"$G", b"d") is None
    assert ri.add(1, b"$G", b"a", b"q", 9), "a weight update is not a new subscription"
    assert not ri.add(1, b"$G", b"a", b"q", 9)
    ri.add(2, b"$G", b"d", None)  # the cap is per route
    ri.remove(1, b"$G", b"c", b"q")
    ri.add(1, b"$G", b"d", None)
    assert ri.route_subs(1) == 3


@pytest.mark.parametrize(
    ("account", "subject", "queue", "weight", "err"),
    [
        (b"$G", b"", None, 1, "Invalid Subject"),
        (b"$G", b"foo..bar", None, 1, "Invalid Subject"),
        (b"$G", b"foo.>.bar", None, 1, "Invalid Subject"),
        (b"$G", b".foo", None, 1, "Invalid Subject"),
        (b"$G", b"foo bar", None, 1, "Invalid Subject"),
        (b"$G", b"foo", b"", 1, "Invalid Queue"),
        (b"$G", b"foo", b"a\tb", 1, "Invalid Queue"),
        (b"$G", b"foo", b"q", 0, "Invalid Queue Weight"),
        (b"$G", b"foo", b"q", -3, "Invalid Queue Weight"),
        (b"$G", b"foo", b"q", interest_mod.MAX_QUEUE_WEIGHT + 1, "Invalid Queue Weight"),
        (b"", b"foo", None, 1, "Invalid Account"),
        (b"a b", b"foo", None, 1, "Invalid Account"),
    ],
)
def test_bad_input_from_a_peer_is_refused(
    account: bytes, subject: bytes, queue: bytes | None, weight: int, err: str
) -> None:
    ri = RemoteInterest()
    with pytest.raises(InterestRefused) as e:
        ri.add(1, account, subject, queue, weight)
    assert str(e.value) == err
    assert len(ri) == 0 and ri.accounts == 0 and ri.route_subs(1) == 0


def test_prefer_local_keeps_groups_with_local_members_home() -> None:
    ri = RemoteInterest()
    ri.add(1, b"$G", b"s", b"q", 100)
    ri.add(1, b"$G", b"s", b"r", 1)
    plan = ri.match(b"$G", b"s")
    assert plan is not None
    local_q = {b"q": 1, b"r": 0}
    for _ in range(200):
        targets, remote = assign(plan, lambda q: local_q[q], prefer_local=True)
        assert remote == [b"r"] and targets == {1: [b"r"]}
    # Without it, 100 remote weight against one local member sends q away almost always.
    random.seed(3)
    away = sum(b"q" in assign(plan, lambda q: local_q[q])[1] for _ in range(1000))
    assert away > 950


def _brute(
    subs: dict[tuple[int, bytes, bytes | None], int], subject: bytes
) -> tuple[set[int], dict[bytes, dict[int, int]]]:
    routes: set[int] = set()
    groups: dict[bytes, dict[int, int]] = {}
    for (rid, pattern, queue), w in subs.items():
        if not subject_matches(subject, pattern):
            continue
        if queue is None:
            routes.add(rid)
        else:
            g = groups.setdefault(queue, {})
            g[rid] = g.get(rid, 0) + w
    return routes, groups


def test_cached_plans_always_agree_with_a_brute_force_match() -> None:
    # Random RS+/RS-/weight changes and route drops interleaved with repeated matches (so
    # plans are cached and must be noticed stale): each plan equals a brute-force answer.
    rnd = random.Random(16)
    patterns = [b"a.b", b"a.*", b"a.>", b"*.b", b">", b"x.y", b"a.b.c", b"*.*.c"]
    subjects = [b"a.b", b"a.c", b"x.y", b"a.b.c", b"q.b"]
    queues = [None, None, b"q1", b"q2"]
    ri = RemoteInterest()
    model: dict[tuple[int, bytes, bytes | None], int] = {}
    for _ in range(3000):
        op = rnd.random()
        rid = rnd.randrange(3)
        if op < 0.5:
            pat, q = rnd.choice(patterns), rnd.choice(queues)
            w = rnd.randrange(1, 5) if q else 1
            ri.add(rid, b"$G", pat, q, w)
            model[(rid, pat, q)] = w
        elif op < 0.9:
            pat, q = rnd.choice(patterns), rnd.choice(queues)
            ri.remove(rid, b"$G", pat, q)
            model.pop((rid, pat, q), None)
        else:
            ri.remove_route(rid)
            model = {k: v for k, v in model.items() if k[0] != rid}
        for subject in subjects:
            for _ in range(2):
                plan = ri.match(b"$G", subject)
                routes, groups = _brute(model, subject)
                if plan is None:
                    assert not routes and not groups
                    continue
                assert sorted(plan.routes) == sorted(routes)
                got = {
                    g.queue: dict(
                        zip(
                            g.routes,
                            [c - p for c, p in zip(g.cumulative, [0, *g.cumulative], strict=False)],
                            strict=True,
                        )
                    )
                    for g in plan.groups
                }
                assert got == groups
    assert len(ri) == len(model)


@pytest.mark.parametrize("seed", range(20))
def test_two_token_index_never_hides_interest(seed: int) -> None:
    """The index that answers "no remote interest" without a Sublist walk agrees with the
    Sublist: whenever a remote subscription matches, match() returns a plan, through adds
    and removes of literal and wildcard subscriptions."""
    rng = random.Random(seed)
    toks = [b"a", b"b", b"_INBOX", b"x1", b"*", b">"]
    ri = RemoteInterest()
    live: list[tuple[int, bytes]] = []

    def subject(wild: bool) -> bytes:
        n = rng.randint(1, 4)
        parts = [rng.choice(toks if wild else toks[:4]) for _ in range(n)]
        if wild and b">" in parts:
            parts = parts[: parts.index(b">") + 1]
        return b".".join(parts)

    for _ in range(300):
        if live and rng.random() < 0.35:
            route, subj = live.pop(rng.randrange(len(live)))
            ri.remove(route, b"A", subj, None)
        else:
            route, subj = rng.randint(1, 3), subject(True)
            if (route, subj) not in live:
                ri.add(route, b"A", subj, None)
                live.append((route, subj))
        for _ in range(10):
            pub = subject(False)
            expect = any(subject_matches(pub, s) for _, s in live)
            assert (ri.match(b"A", pub) is not None) == expect, (pub, live)
