"""Unit tests for natsd.router.sublist (subject trie with wildcards, queues and a cache)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import count

from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.core.subjects import subject_matches
from natsd.router import sublist as sublist_mod
from natsd.router.sublist import Sublist

_ids = count()


@dataclass(eq=False)
class Sub:
    subject: bytes
    queue: bytes | None = None
    name: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        q = f" q={self.queue!r}" if self.queue else ""
        return f"Sub({self.subject!r}{q} #{self.name})"


def psubs(sl: Sublist, subject: bytes) -> set[int]:
    return {id(s) for s in sl.match(subject)[0]}


def qgroups(sl: Sublist, subject: bytes) -> dict[bytes, set[int]]:
    out: dict[bytes, set[int]] = {}
    for group in sl.match(subject)[1]:
        assert group, "empty queue group in a match result"
        qs = {s.queue for s in group}
        assert len(qs) == 1, f"queue group mixes queue names: {qs}"
        (q,) = qs
        assert q not in out, f"queue {q!r} split over two groups"
        out[q] = {id(s) for s in group}
    return out


def ids(*subs: Sub) -> set[int]:
    return {id(s) for s in subs}


# ------------------------------------------------------------------ basic matching


def test_empty_sublist() -> None:
    sl: Sublist[Sub] = Sublist()
    assert len(sl) == 0
    assert sl.match(b"foo") == ([], [])
    assert not sl.has_interest(b"foo")
    assert list(sl) == []


def test_literal() -> None:
    sl: Sublist[Sub] = Sublist()
    a, b = Sub(b"foo.bar"), Sub(b"foo")
    sl.insert(a)
    sl.insert(b)
    assert len(sl) == 2
    assert psubs(sl, b"foo.bar") == ids(a)
    assert psubs(sl, b"foo") == ids(b)
    assert psubs(sl, b"foo.baz") == set()
    assert psubs(sl, b"foo.bar.baz") == set()
    assert sl.has_interest(b"foo.bar")


def test_partial_wildcard() -> None:
    sl: Sublist[Sub] = Sublist()
    a, b, c = Sub(b"foo.*"), Sub(b"*.bar"), Sub(b"*")
    for s in (a, b, c):
        sl.insert(s)
    assert psubs(sl, b"foo.bar") == ids(a, b)
    assert psubs(sl, b"foo.baz") == ids(a)
    assert psubs(sl, b"x.bar") == ids(b)
    assert psubs(sl, b"foo") == ids(c)
    assert psubs(sl, b"foo.bar.baz") == set()


def test_full_wildcard() -> None:
    sl: Sublist[Sub] = Sublist()
    a, b, c = Sub(b"foo.>"), Sub(b">"), Sub(b"foo.*.>")
    for s in (a, b, c):
        sl.insert(s)
    assert psubs(sl, b"foo") == ids(b)
    assert psubs(sl, b"foo.bar") == ids(a, b)
    assert psubs(sl, b"foo.bar.baz") == ids(a, b, c)
    assert psubs(sl, b"bar.baz") == ids(b)


def test_mixed_wildcards_and_literals() -> None:
    sl: Sublist[Sub] = Sublist()
    subs = [Sub(x) for x in (b"a.b.c", b"a.*.c", b"a.b.*", b"a.>", b"*.b.>", b"*.*.*", b"a.b")]
    for s in subs:
        sl.insert(s)
    for subject in (b"a.b.c", b"a.b", b"a.x.c", b"x.b.c", b"a", b"a.b.c.d", b"x.y.z"):
        expected = {id(s) for s in subs if subject_matches(subject, s.subject)}
        assert psubs(sl, subject) == expected, subject


def test_literal_tokens_containing_wildcard_characters() -> None:
    sl: Sublist[Sub] = Sublist()
    a, b = Sub(b"foo*"), Sub(b"foo.b>r")
    sl.insert(a)
    sl.insert(b)
    assert psubs(sl, b"foo*") == ids(a)
    assert psubs(sl, b"foox") == set()
    assert psubs(sl, b"foo.b>r") == ids(b)
    assert psubs(sl, b"foo.bar") == set()


def test_same_subject_many_subs_and_duplicate_insert() -> None:
    sl: Sublist[Sub] = Sublist()
    subs = [Sub(b"foo") for _ in range(5)]
    for s in subs:
        sl.insert(s)
    assert psubs(sl, b"foo") == ids(*subs)
    assert len(sl.match(b"foo")[0]) == 5


def test_queue_groups_grouped_by_name() -> None:
    sl: Sublist[Sub] = Sublist()
    q1a, q1b = Sub(b"foo", b"q1"), Sub(b"foo", b"q1")
    q1c = Sub(b"*", b"q1")
    q1d = Sub(b">", b"q1")
    q2 = Sub(b"foo", b"q2")
    plain = Sub(b"foo")
    for s in (q1a, q1b, q1c, q1d, q2, plain):
        sl.insert(s)
    assert psubs(sl, b"foo") == ids(plain)
    assert qgroups(sl, b"foo") == {b"q1": ids(q1a, q1b, q1c, q1d), b"q2": ids(q2)}
    assert qgroups(sl, b"bar") == {b"q1": ids(q1c, q1d)}
    assert psubs(sl, b"bar") == set()
    assert qgroups(sl, b"bar.baz") == {b"q1": ids(q1d)}
    assert sl.has_interest(b"bar")


def test_remove() -> None:
    sl: Sublist[Sub] = Sublist()
    a, b, q = Sub(b"foo.bar"), Sub(b"foo.*"), Sub(b"foo.bar", b"q")
    for s in (a, b, q):
        sl.insert(s)
    assert sl.remove(a) is True
    assert len(sl) == 2
    assert psubs(sl, b"foo.bar") == ids(b)
    assert sl.remove(a) is False
    assert sl.remove(q) is True
    assert qgroups(sl, b"foo.bar") == {}
    assert sl.remove(q) is False
    assert sl.remove(b) is True
    assert len(sl) == 0
    assert sl.match(b"foo.bar") == ([], [])


def test_remove_unknown() -> None:
    sl: Sublist[Sub] = Sublist()
    sl.insert(Sub(b"foo.bar"))
    assert sl.remove(Sub(b"foo.bar")) is False  # same subject, different subscription
    assert sl.remove(Sub(b"nope.x")) is False
    assert sl.remove(Sub(b"foo.bar.baz")) is False
    assert sl.remove(Sub(b"foo")) is False
    assert sl.remove(Sub(b"foo.*")) is False
    assert sl.remove(Sub(b"foo.>")) is False
    assert sl.remove(Sub(b"foo.bar", b"q")) is False
    assert len(sl) == 1


def test_remove_queue_member_keeps_group() -> None:
    sl: Sublist[Sub] = Sublist()
    a, b = Sub(b"foo", b"q"), Sub(b"foo", b"q")
    sl.insert(a)
    sl.insert(b)
    sl.remove(a)
    assert qgroups(sl, b"foo") == {b"q": ids(b)}
    sl.remove(b)
    assert sl.match(b"foo") == ([], [])


def test_iteration_yields_all_subs() -> None:
    sl: Sublist[Sub] = Sublist()
    subs = [
        Sub(b"a"),
        Sub(b"a.b"),
        Sub(b"a.*"),
        Sub(b"a.>"),
        Sub(b">"),
        Sub(b"*"),
        Sub(b"a.b", b"q"),
        Sub(b"a.b", b"q"),
        Sub(b"x.y.z", b"r"),
        Sub(b"*.*.>"),
    ]
    for s in subs:
        sl.insert(s)
    got = list(sl)
    assert len(got) == len(subs)
    assert {id(s) for s in got} == ids(*subs)
    sl.remove(subs[0])
    assert {id(s) for s in sl} == ids(*subs[1:])


# ------------------------------------------------------------------ structure


def _level_empty(level: object) -> bool:
    return not level.nodes and level.pwc is None and level.fwc is None  # type: ignore[attr-defined]


def test_remove_prunes_all_nodes() -> None:
    sl: Sublist[Sub] = Sublist()
    subs = [
        Sub(b"a.b.c"),
        Sub(b"a.b"),
        Sub(b"a.*.c"),
        Sub(b"a.>"),
        Sub(b"*.>"),
        Sub(b">"),
        Sub(b"x.y.z.w", b"q"),
        Sub(b"*"),
        Sub(b"a.b.c"),
    ]
    for s in subs:
        sl.insert(s)
    for s in reversed(subs):
        assert sl.remove(s)
    assert len(sl) == 0
    assert _level_empty(sl._root)


def test_remove_prunes_only_empty_branches() -> None:
    sl: Sublist[Sub] = Sublist()
    keep, leaf = Sub(b"a"), Sub(b"a.b.c")
    sl.insert(keep)
    sl.insert(leaf)
    sl.remove(leaf)
    root = sl._root
    assert list(root.nodes) == [b"a"]
    node_a = root.nodes[b"a"]
    assert node_a.next is None or _level_empty(node_a.next)
    assert psubs(sl, b"a") == ids(keep)


def test_unique_subject_churn_does_not_grow_trie() -> None:
    sl: Sublist[Sub] = Sublist()
    for i in range(2000):
        s = Sub(b"inbox.%d.reply" % i)
        sl.insert(s)
        assert sl.match(b"inbox.%d.reply" % i)[0] == [s]
        sl.remove(s)
    assert _level_empty(sl._root)
    assert len(sl) == 0


# ------------------------------------------------------------------ cache


def test_cache_hit_returns_same_result() -> None:
    sl: Sublist[Sub] = Sublist()
    sl.insert(Sub(b"foo"))
    sl.match(b"foo")  # the first miss only notes the subject (admission)
    r1 = sl.match(b"foo")
    hits = sl.cache_hits
    r2 = sl.match(b"foo")
    assert sl.cache_hits == hits + 1
    assert r2 == r1
    assert r2[0] is r1[0]  # the cached list itself, not a fresh match
    assert sl.cache_size >= 1


def test_cache_invalidated_by_literal_insert() -> None:
    sl: Sublist[Sub] = Sublist()
    assert sl.match(b"foo.bar") == ([], [])
    a = Sub(b"foo.bar")
    sl.insert(a)
    assert psubs(sl, b"foo.bar") == ids(a)


def test_wildcard_insert_after_literal_match_was_cached() -> None:
    sl: Sublist[Sub] = Sublist()
    lit = Sub(b"foo.bar")
    sl.insert(lit)
    assert psubs(sl, b"foo.bar") == ids(lit)  # cached now
    assert psubs(sl, b"other.x") == set()
    pwc, fwc, q = Sub(b"foo.*"), Sub(b">"), Sub(b"*.bar", b"g")
    sl.insert(pwc)
    assert psubs(sl, b"foo.bar") == ids(lit, pwc)
    sl.insert(fwc)
    assert psubs(sl, b"foo.bar") == ids(lit, pwc, fwc)
    assert psubs(sl, b"other.x") == ids(fwc)
    sl.insert(q)
    assert qgroups(sl, b"foo.bar") == {b"g": ids(q)}


def test_cache_invalidated_by_remove() -> None:
    sl: Sublist[Sub] = Sublist()
    lit, pwc, fwc, q = Sub(b"foo.bar"), Sub(b"foo.*"), Sub(b"foo.>"), Sub(b"foo.bar", b"q")
    for s in (lit, pwc, fwc, q):
        sl.insert(s)
    assert psubs(sl, b"foo.bar") == ids(lit, pwc, fwc)
    sl.remove(pwc)
    assert psubs(sl, b"foo.bar") == ids(lit, fwc)
    sl.remove(lit)
    assert psubs(sl, b"foo.bar") == ids(fwc)
    assert qgroups(sl, b"foo.bar") == {b"q": ids(q)}
    sl.remove(q)
    assert qgroups(sl, b"foo.bar") == {}
    sl.remove(fwc)
    assert sl.match(b"foo.bar") == ([], [])


def test_unrelated_insert_keeps_cache_entry() -> None:
    sl: Sublist[Sub] = Sublist()
    a = Sub(b"foo.bar")
    sl.insert(a)
    sl.match(b"foo.bar")
    sl.match(b"foo.bar")
    sl.insert(Sub(b"foo.baz"))
    sl.insert(Sub(b"other.*"))
    hits = sl.cache_hits
    assert psubs(sl, b"foo.bar") == ids(a)
    assert sl.cache_hits == hits + 1


def test_cache_stays_bounded() -> None:
    sl: Sublist[Sub] = Sublist()
    everything = Sub(b">")
    sl.insert(everything)
    n = sublist_mod.CACHE_MAX * 3
    for i in range(n):
        assert sl.match(b"unique.%d" % i)[0] == [everything]
        assert sl.cache_size <= sublist_mod.CACHE_MAX
    # Evicted and recent entries are still correct.
    assert sl.match(b"unique.0")[0] == [everything]
    assert sl.match(b"unique.%d" % (n - 1))[0] == [everything]
    other = Sub(b"unique.*")
    sl.insert(other)
    assert psubs(sl, b"unique.5") == ids(everything, other)
    assert psubs(sl, b"unique.%d" % (n - 1)) == ids(everything, other)


def test_wildcard_churn_with_a_large_cache() -> None:
    """Past INVALIDATE_SCAN_MAX cached subjects a wildcard change drops the whole cache
    instead of checking every entry; answers stay exact and repeating subjects come back
    into the cache on their next match."""
    sl: Sublist[Sub] = Sublist()
    lit = {i: Sub(b"k.%d" % i) for i in range(0, 600, 3)}
    for s in lit.values():
        sl.insert(s)
    n = sublist_mod.INVALIDATE_SCAN_MAX * 4
    for _ in range(2):  # second miss caches (admission)
        for i in range(n):
            sl.match(b"k.%d" % i)
    assert sl.cache_size > sublist_mod.INVALIDATE_SCAN_MAX
    for round_ in range(3):
        w = Sub(b"k.*") if round_ % 2 == 0 else Sub(b">")
        sl.insert(w)
        for i in range(n):
            want = {id(w)} | ({id(lit[i])} if i in lit else set())
            assert psubs(sl, b"k.%d" % i) == want
        sl.remove(w)
        for i in range(n):
            assert psubs(sl, b"k.%d" % i) == ({id(lit[i])} if i in lit else set())
    hits = sl.cache_hits
    sl.match(b"k.1")
    assert sl.cache_hits == hits + 1  # recached after the last drop


def test_counters() -> None:
    sl: Sublist[Sub] = Sublist()
    a = Sub(b"a")
    sl.insert(Sub(b"b"))  # (a literal at the level "a" is looked up at: no shape)
    sl.insert(a)
    sl.remove(a)
    sl.remove(a)
    assert sl.inserts == 2
    assert sl.removes == 1
    sl.match(b"a")
    sl.match(b"a")
    sl.match(b"a")
    assert sl.matches == 2  # cached on its second miss
    assert sl.cache_hits == 1


def test_one_off_subjects_are_not_cached() -> None:
    # Reply inboxes are matched once each: they are noted, never cached, and cannot evict
    # the subjects that repeat.
    sl: Sublist[Sub] = Sublist()
    # (a literal subscription: "orders.new" is then a subject the cache holds, not a shape)
    inbox, orders = Sub(b"_INBOX.abc.*"), Sub(b"orders.new")
    sl.insert(inbox)
    sl.insert(orders)
    sl.match(b"orders.new")
    sl.match(b"orders.new")
    assert sl.cache_size == 1
    for i in range(sublist_mod.CACHE_MAX * 3):
        assert psubs(sl, b"_INBOX.abc.%d" % i) == ids(inbox)
    assert sl.cache_size == 1
    hits = sl.cache_hits
    assert psubs(sl, b"orders.new") == ids(orders)
    assert sl.cache_hits == hits + 1


# ------------------------------------------------------------------ model test

MODEL_TOK = st.sampled_from([b"a", b"b", b"c"])
PAT_TOK = st.sampled_from([b"a", b"b", b"c", b"*"])


@st.composite
def sub_pattern(draw: st.DrawFn) -> bytes:
    toks = draw(st.lists(PAT_TOK, min_size=1, max_size=3))
    if draw(st.integers(0, 3)) == 0:
        toks.append(b">")
    return b".".join(toks)


LITERAL = st.lists(MODEL_TOK, min_size=1, max_size=4).map(b".".join)
OP = st.one_of(
    st.tuples(st.just("insert"), sub_pattern(), st.sampled_from([None, None, b"q1", b"q2"])),
    st.tuples(st.just("remove"), st.integers(0, 1000)),
    st.tuples(st.just("match"), LITERAL),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(OP, min_size=1, max_size=60), probes=st.lists(LITERAL, max_size=10))
def test_model_matches_brute_force(ops: list[tuple], probes: list[bytes]) -> None:
    sl: Sublist[Sub] = Sublist()
    present: list[Sub] = []

    def check(subject: bytes) -> None:
        exp_p = {id(s) for s in present if s.queue is None and subject_matches(subject, s.subject)}
        exp_q: dict[bytes, set[int]] = {}
        for s in present:
            if s.queue is not None and subject_matches(subject, s.subject):
                exp_q.setdefault(s.queue, set()).add(id(s))
        assert psubs(sl, subject) == exp_p
        assert qgroups(sl, subject) == exp_q
        assert sl.has_interest(subject) == bool(exp_p or exp_q)

    for op in ops:
        if op[0] == "insert":
            s = Sub(op[1], op[2])
            sl.insert(s)
            present.append(s)
        elif op[0] == "remove":
            if present:
                s = present.pop(op[1] % len(present))
                assert sl.remove(s)
                assert not sl.remove(s)
        else:
            check(op[1])
        assert len(sl) == len(present)
    for subject in probes:
        check(subject)
    assert {id(s) for s in sl} == {id(s) for s in present}
    for s in list(present):
        assert sl.remove(s)
    assert _level_empty(sl._root)


def test_random_large_model() -> None:
    rng = random.Random(1234)
    toks = [b"a", b"b", b"c", b"d", b"*"]
    sl: Sublist[Sub] = Sublist()
    present: list[Sub] = []
    for _ in range(3000):
        r = rng.random()
        if r < 0.45 or not present:
            n = rng.randint(1, 4)
            pat = [rng.choice(toks) for _ in range(n)]
            if rng.random() < 0.2:
                pat.append(b">")
            s = Sub(b".".join(pat), rng.choice([None, None, b"q1", b"q2"]))
            sl.insert(s)
            present.append(s)
        elif r < 0.7:
            s = present.pop(rng.randrange(len(present)))
            assert sl.remove(s)
        else:
            subject = b".".join(rng.choice(toks[:4]) for _ in range(rng.randint(1, 5)))
            exp = {
                id(s) for s in present if s.queue is None and subject_matches(subject, s.subject)
            }
            assert psubs(sl, subject) == exp


def test_jetstream_ack_subjects_are_matched_but_not_cached() -> None:
    # Ack subjects embed delivery sequences: each is seen once, so caching them would only
    # evict subjects that repeat. They still match like any other subject.
    sl: Sublist = Sublist()
    ack, other = Sub(b"$JS.ACK.S.C.>"), Sub(b"orders.new")
    sl.insert(ack)
    sl.insert(other)
    for i in range(1, 50):
        assert psubs(sl, b"$JS.ACK.S.C.1.%d.%d.1700000000.0" % (i, i)) == ids(ack)
    assert sl.cache_size == 0
    assert psubs(sl, b"orders.new") == ids(other)
    assert psubs(sl, b"orders.new") == ids(other)
    assert sl.cache_size == 1
    sl.remove(ack)
    assert psubs(sl, b"$JS.ACK.S.C.1.1.1.1700000000.0") == set()


def test_a_reply_inbox_family_is_matched_once_by_its_shape() -> None:
    # `_INBOX.abc.<n>` under `_INBOX.abc.*`: the walk looks up no literal at the last
    # level, so one shape entry answers every n (and a match is a walk only once).
    sl: Sublist[Sub] = Sublist()
    inbox, other = Sub(b"_INBOX.abc.*"), Sub(b"_INBOX.xyz.*")
    sl.insert(inbox)
    sl.insert(other)
    for i in range(1000):
        assert psubs(sl, b"_INBOX.abc.%d" % i) == ids(inbox)
    assert sl.matches == 1
    # The same prefix with another token count is another shape.
    assert psubs(sl, b"_INBOX.abc.1.2") == set()
    # A literal subscription under the prefix changes the answer for one n: the shapes
    # go, and the walk now looks the last token up (no shape for this family any more).
    one = Sub(b"_INBOX.abc.7")
    sl.insert(one)
    assert psubs(sl, b"_INBOX.abc.7") == ids(inbox) | ids(one)
    assert psubs(sl, b"_INBOX.abc.8") == ids(inbox)
    sl.remove(one)
    assert psubs(sl, b"_INBOX.abc.7") == ids(inbox)
    sl.remove(inbox)
    assert psubs(sl, b"_INBOX.abc.9") == set()


def test_ack_subjects_share_their_consumers_shape() -> None:
    sl: Sublist[Sub] = Sublist()
    c1, c2 = Sub(b"$JS.ACK.S.C1.>"), Sub(b"$JS.ACK.S.C2.>")
    sl.insert(c1)
    sl.insert(c2)
    for i in range(1, 200):
        assert psubs(sl, b"$JS.ACK.S.C1.1.%d.%d.1700000000.0" % (i, i)) == ids(c1)
        assert psubs(sl, b"$JS.ACK.S.C2.1.%d.%d.1700000000.%d" % (i, i, i)) == ids(c2)
    assert sl.matches == 2
    assert sl.cache_size == 0
