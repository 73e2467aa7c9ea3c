"""The meta group's state machine and placement (cluster/meta.py), without a cluster."""

from __future__ import annotations

import random

import pytest

from natsd.cluster.meta import (
    MetaError,
    MetaState,
    NoPeers,
    PendingPlacements,
    decode_op,
    encode_op,
    place,
)


def _state(*servers: str, tags: dict[str, list[str]] | None = None) -> MetaState:
    st = MetaState()
    for i, name in enumerate(servers, 1):
        st.apply(i, encode_op("server", name=name, tags=(tags or {}).get(name, [])))
    return st


def _assign(st: MetaState, name: str, peers: list[str], account: str = "A", **cfg: object) -> None:
    config = {"name": name, "subjects": [name.lower()], **cfg}
    st.apply(st.applied + 1, encode_op("stream", account=account, config=config, peers=peers))


def test_operations_apply_in_order() -> None:
    st = _state("n1", "n2")
    assert sorted(st.servers) == ["n1", "n2"] and st.applied == 2
    op = st.apply(3, encode_op("stream", account="A", config={"name": "S"}, created=7,
                               peers=["n2"], reply="_INBOX.1", origin="n1"))  # fmt: skip
    assert op.assignment is not None and op.previous is None
    assert (op.reply, op.origin) == ("_INBOX.1", "n1")
    a = st.stream("A", "S")
    assert a is not None and a.peers == ["n2"] and a.created == 7
    # an update keeps the peers and the creation time; it reports what it replaced
    op = st.apply(4, encode_op("stream", account="A", config={"name": "S", "max_msgs": 5},
                               created=99, peers=["n1"]))  # fmt: skip
    assert op.previous is not None and op.previous.config == {"name": "S"}
    a = st.stream("A", "S")
    assert a is not None and a.peers == ["n2"] and a.created == 7
    assert a.config["max_msgs"] == 5
    assert [x.name for x in st.placed_on("n2")] == ["S"] and st.placed_on("n1") == []
    op = st.apply(5, encode_op("delete", account="A", stream="S"))
    assert op.previous is not None and st.stream("A", "S") is None and st.streams == {}
    assert st.applied == 5


@pytest.mark.parametrize(
    "entry",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"op":"launch"}',
        b'{"op":"server"}',
        b'{"op":"server","name":"n","tags":"ssd"}',
        b'{"op":"server","name":"n","max_store":"big"}',
        b'{"op":"stream","account":"A","config":{"name":"S"}}',  # no peers
        b'{"op":"stream","account":"A","config":{"name":5},"peers":["n"]}',
        b'{"op":"stream","config":{"name":"S"},"peers":["n"]}',
        b'{"op":"delete","account":"A","stream":"nope"}',
    ],
)
def test_bad_entries_change_nothing(entry: bytes) -> None:
    st = _state("n1")
    before = st.snapshot()
    with pytest.raises(MetaError):
        st.apply(9, entry)
    assert st.snapshot() == before


def test_a_noop_changes_nothing_but_the_applied_index() -> None:
    """The barrier a server whose meta records were damaged proposes (driver.py)."""
    st = _state("n1")
    _assign(st, "S", ["n1"])
    before = MetaState.from_snapshot(st.snapshot())
    op = st.apply(9, encode_op("noop", origin="n1", barrier="X"))
    assert op.op == "noop" and op.doc["barrier"] == "X" and st.applied == 9
    assert (st.servers, st.streams, st.removed) == (before.servers, before.streams, before.removed)


def test_snapshot_round_trip() -> None:
    st = _state("n1", "n2", tags={"n2": ["ssd"]})
    _assign(st, "S1", ["n1"], max_bytes=100)
    _assign(st, "S2", ["n2"], account="B")
    back = MetaState.from_snapshot(st.snapshot())
    assert back.snapshot() == st.snapshot()
    assert back.servers["n2"].tags == ["ssd"] and back.applied == st.applied
    assert back.stream("B", "S2") is not None


def test_decode_op_names_the_operation() -> None:
    assert decode_op(encode_op("delete", account="A", stream="S")).op == "delete"


def test_placement_balances_by_count_and_breaks_ties_at_random() -> None:
    st = _state("n1", "n2", "n3")
    _assign(st, "S1", ["n1"])
    _assign(st, "S2", ["n1"])
    _assign(st, "S3", ["n2"])
    always = lambda _n: True  # noqa: E731
    assert place(st, ["n1", "n2", "n3"], 1, [], always) == ["n3"]
    assert place(st, ["n1", "n2"], 1, [], always) == ["n2"]  # n3 is not alive
    seen = {place(st, ["n2", "n3"], 2, [], always, random.Random(i))[0] for i in range(40)}
    assert seen == {"n3"}  # n3 (0 streams) always comes before n2 (1)
    _assign(st, "S4", ["n3"])
    firsts = {place(st, ["n2", "n3"], 1, [], always, random.Random(i))[0] for i in range(40)}
    assert firsts == {"n2", "n3"}  # equal counts: both get picked


def test_placement_tags_room_and_too_few() -> None:
    st = _state("n1", "n2", "n3", tags={"n2": ["ssd", "eu"], "n3": ["ssd"]})
    always = lambda _n: True  # noqa: E731
    assert place(st, ["n1", "n2", "n3"], 1, ["eu"], always) == ["n2"]
    assert sorted(place(st, ["n1", "n2", "n3"], 2, ["ssd"], always)) == ["n2", "n3"]
    with pytest.raises(NoPeers):
        place(st, ["n1", "n2", "n3"], 1, ["gpu"], always)
    with pytest.raises(NoPeers):
        place(st, ["n1", "n2", "n3"], 4, [], always)
    assert place(st, ["n1", "n2", "n3"], 1, [], lambda n: n == "n1") == ["n1"]
    # a server not in the server table yet is not eligible
    assert place(st, ["n4", "n1"], 1, [], always) == ["n1"]


def test_placement_errors_read_like_nats_servers() -> None:
    st = _state("n1", "n2", "n3", tags={"n1": ["ssd"], "n2": ["ssd", "az:1"]})
    names = ["n1", "n2", "n3"]
    always = lambda _n: True  # noqa: E731
    with pytest.raises(NoPeers) as e:
        place(st, names, 5, [], always)
    assert str(e.value) == "no suitable peers for placement"
    with pytest.raises(NoPeers) as e:
        place(st, names, 1, ["GPU"], always)
    assert str(e.value) == "no suitable peers for placement, tags not matched ['gpu']"
    assert place(st, names, 1, ["SSD", "az:1"], always) == ["n2"]  # tags match without case
    assert place(st, names, 1, ["ssd", "!az:1"], always) == ["n1"]
    with pytest.raises(NoPeers) as e:
        place(st, ["n1"], 2, [], always)
    assert str(e.value) == "no suitable peers for placement, peer offline"
    with pytest.raises(NoPeers) as e:
        place(st, names, 1, [], lambda _n: False)
    assert str(e.value) == "no suitable peers for placement, insufficient storage"
    with pytest.raises(NoPeers) as e:
        place(st, ["n2"], 1, ["!az:1"], always)
    assert str(e.value) == (
        "no suitable peers for placement, peer offline, tags excluded ['az:1']"
    )


def test_placement_prefers_the_requesters_server_among_equals() -> None:
    st = _state("n1", "n2", "n3")
    always = lambda _n: True  # noqa: E731
    names = ["n1", "n2", "n3"]
    for i in range(20):
        assert place(st, names, 1, [], always, random.Random(i), prefer="n2") == ["n2"]
    _assign(st, "S1", ["n2"])
    # fewer streams still come first: n2 is preferred only among the least loaded
    assert place(st, names, 1, [], always, random.Random(1), prefer="n2") != ["n2"]
    assert place(st, names, 1, [], always, prefer="n3") == ["n3"]


def test_placements_in_flight_count_until_applied_or_expired() -> None:
    """Creates in flight together spread: the leader counts what it placed and has not
    seen apply (before this, four creates at once went to the requester's server)."""
    st = _state("n1", "n2")
    always = lambda _n: True  # noqa: E731
    book = PendingPlacements()
    names = ["n1", "n2"]
    got = []
    for i in range(4):
        peers = place(st, names, 1, [], always, prefer="n1", pending=book.peers(100.0))
        book.add("A", f"S{i}", peers, 100.0)
        got += peers
    assert sorted(got) == ["n1", "n1", "n2", "n2"]
    assert sorted(book.peers(100.0)) == ["n1", "n1", "n2", "n2"]
    book.done("A", "S0")
    assert len(book.peers(100.0)) == 3
    assert book.peers(100.0 + PendingPlacements.TTL + 1) == []  # never applied: forgotten
