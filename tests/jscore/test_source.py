"""A stream's sources on a virtual clock: what a sourced message becomes (a new sequence, the
Nats-Stream-Source header, the source's transforms), where a source starts (its
configured start, or after the newest message its header names), how it notices a lost
delivery, and how an update adds and removes sources."""

from __future__ import annotations

import pytest

from natsd.core.clock import rfc3339
from natsd.jetstream.config.stream_types import StreamSource, SubjectTransformConfig
from natsd.jetstream.stream import Stream
from natsd.jetstream.stream.entries import decode_msg
from natsd.jetstream.stream.replica import Replica
from natsd.jetstream.stream.source import iname_of, parse_source_header

from .harness import JsHarness


def _publish(js: JsHarness, subject: str, n: int, hdr: bytes | None = None) -> None:
    for i in range(n):
        assert "error" not in js.js_publish(subject, b"m%d" % i, hdr=hdr)


def _msgs(js: JsHarness, stream: str) -> list[tuple[int, str, str]]:
    """(seq, subject, Nats-Stream-Source) of every message of ``stream``, the header
    without its origin identity (the sixth field, checked by test_origin_identity)."""
    out = []
    st = js.stream(stream).store
    for seq in range(1, st.last_seq() + 1):
        m = st.load_msg(seq)
        if m is None:
            continue
        src = ""
        if m.hdr:
            for line in m.hdr.split(b"\r\n"):
                if line.startswith(b"Nats-Stream-Source:"):
                    src = " ".join(line.split(b":", 1)[1].strip().decode().split(" ")[:5])
        out.append((m.seq, m.subject, src))
    return out


def test_two_sources_fan_in(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"])
    js.add_stream("B", subjects=["b.>"])
    _publish(js, "a.x", 2)
    _publish(js, "b.y", 1)
    out = js.add_stream(
        "S", subjects=[], sources=[{"name": "A"}, {"name": "B", "filter_subject": "b.y"}]
    )
    assert "subjects" not in out["config"] and "duplicate_window" not in out["config"]
    assert [s["active"] for s in out["sources"]] == [-1, -1]
    js.advance(0.25)
    msgs = _msgs(js, "S")
    assert sorted(m[2] for m in msgs) == ["A 1 > > a.x", "A 2 > > a.x", "B 1 b.y > b.y"]
    assert [m[0] for m in msgs] == [1, 2, 3]  # sequences of its own
    _publish(js, "a.z", 1)
    assert _msgs(js, "S")[-1] == (4, "a.z", "A 3 > > a.z")
    info = js.api("STREAM.INFO.S")
    assert sorted((s["name"], s["lag"], s.get("filter_subject")) for s in info["sources"]) == [
        ("A", 0, None),
        ("B", 0, "b.y"),
    ]


def test_transforms_and_the_stream_subjects(js: JsHarness) -> None:
    """nats.py's test_subject_transforms: the origin's own transform, then the source's."""
    js.add_stream(
        "T", subjects=["test", "foo"], subject_transform={"src": ">", "dest": "transformed.>"}
    )
    _publish(js, "test", 3)
    js.add_stream(
        "S", subjects=[],
        sources=[{"name": "T", "subject_transforms": [
            {"src": "transformed.>", "dest": "fromtest.transformed.>"},
            {"src": "foo.>", "dest": "fromtest.foo.>"},
        ]}],
    )  # fmt: skip
    js.advance(0.25)
    msgs = _msgs(js, "S")
    assert [m[1] for m in msgs] == ["fromtest.transformed.test"] * 3
    assert msgs[0][2] == (
        "T 1 transformed.>\ffoo.> fromtest.transformed.>\ffromtest.foo.> transformed.test"
    )
    again = js.api("STREAM.CREATE.S", {"name": "S", "sources": [
        {"name": "T", "subject_transforms": [{"src": ">", "dest": ">"}, {"src": ">", "dest": ">"}]},
    ]})  # fmt: skip
    assert again["error"]["err_code"] == 10147


def test_a_restart_resumes_after_the_newest_header(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"])
    js.add_stream("S", subjects=["s.>"], sources=[{"name": "A"}])
    js.advance(0.25)
    _publish(js, "a.x", 3)
    _publish(js, "s.own", 2)  # its own messages come after the sourced ones
    stream = js.stream("S")
    stream._stop_sources()
    _publish(js, "a.x", 2)  # while the source is not running
    stream._start_sources()
    assert stream.sources[iname_of(StreamSource(name="A"))].sseq == 3
    js.advance(0.25)
    assert [m[2] for m in _msgs(js, "S")][-2:] == ["A 4 > > a.x", "A 5 > > a.x"]
    assert js.api("STREAM.INFO.S")["state"]["messages"] == 7


def test_positions_survive_a_purge_of_the_sourcing_stream(js: JsHarness) -> None:
    """The store keeps where each source is (nats-server 2.15's SourcesState): after the
    sourcing stream is purged, a source starts again after what it copied, not from a
    time (an origin on another server may be on another clock), and without reading the
    stream backwards."""
    js.add_stream("A", subjects=["a.>"])
    js.add_stream("S", subjects=["s.>"], sources=[{"name": "A"}])
    js.advance(0.25)
    _publish(js, "a.x", 3)
    assert js.api("STREAM.PURGE.S")["success"]
    stream = js.stream("S")
    stream._stop_sources()
    _publish(js, "a.x", 2)
    stream._start_sources()
    assert stream.sources[iname_of(StreamSource(name="A"))].sseq == 3
    js.advance(0.25)
    assert [m[2] for m in _msgs(js, "S")] == ["A 4 > > a.x", "A 5 > > a.x"]


def test_start_positions(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"])
    for _ in range(4):
        _publish(js, "a.x", 1)
        js.advance(0.01)
    js.add_stream("S1", subjects=[], sources=[{"name": "A", "opt_start_seq": 3}])
    js.advance(0.25)
    assert [m[2] for m in _msgs(js, "S1")] == ["A 3 > > a.x", "A 4 > > a.x"]
    mid = js.stream("A").store.load_msg(3)
    assert mid is not None
    js.add_stream("S2", subjects=[], sources=[{"name": "A", "opt_start_time": rfc3339(mid.ts)}])
    js.advance(0.25)
    assert [m[2] for m in _msgs(js, "S2")] == ["A 3 > > a.x", "A 4 > > a.x"]


def test_a_lost_delivery_asks_again(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"])
    js.add_stream("S", sources=[{"name": "A"}])
    js.advance(0.25)
    _publish(js, "a.x", 2)
    feed = next(iter(js.stream("S").sources.values()))
    assert feed.dseq == 2 and feed.sseq == 2
    reply = f"$JS.ACK.A.{feed.cname}.1.9.4.{js.clock.time_ns()}.0"
    js.publish(feed._deliver_subject, b"lost before it", reply=reply)
    assert len(_msgs(js, "S")) == 2  # not taken
    _publish(js, "a.x", 1)
    js.advance(2.3)
    assert [m[2] for m in _msgs(js, "S")] == ["A 1 > > a.x", "A 2 > > a.x", "A 3 > > a.x"]


def test_duplicates_and_the_origin_purged(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"])
    js.add_stream("B", subjects=["b.>"])
    js.add_stream("S", sources=[{"name": "A"}, {"name": "B"}], duplicate_window=60_000_000_000)
    js.advance(0.25)
    hdr = b"NATS/1.0\r\nNats-Msg-Id: one\r\n\r\n"
    assert "error" not in js.js_publish("a.x", b"1", hdr=hdr)
    assert "error" not in js.js_publish("b.x", b"1", hdr=hdr)
    assert len(_msgs(js, "S")) == 1  # the same id within the sourcing stream's window
    assert js.api("STREAM.PURGE.A")["success"] is True
    _publish(js, "a.y", 1)
    assert [m[2] for m in _msgs(js, "S")] == ["A 1 > > a.x", "A 2 > > a.y"]


def test_update_adds_and_removes(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"])
    js.add_stream("B", subjects=["b.>"])
    cfg = js.add_stream("S", subjects=["s.>"], sources=[{"name": "A"}])["config"]
    js.advance(0.25)
    _publish(js, "a.x", 1)
    _publish(js, "b.x", 1)
    out = js.api("STREAM.UPDATE.S", {**cfg, "sources": [{"name": "B"}]})
    assert [s["name"] for s in out["sources"]] == ["B"]
    js.advance(0.25)
    _publish(js, "a.x", 1)
    assert [m[2] for m in _msgs(js, "S")] == ["A 1 > > a.x", "B 1 > > b.x"]
    out = js.api("STREAM.UPDATE.S", {**cfg, "sources": []})
    assert "sources" not in out
    assert "error" not in js.js_publish("s.own", b"x")


def test_config_errors(js: JsHarness) -> None:
    js.add_stream("A", subjects=["a.>"], max_msg_size=100)
    small = js.api("STREAM.CREATE.S", {"name": "S", "max_msg_size": 10, "sources": [{"name": "A"}]})
    assert small["error"]["err_code"] == 10046
    cyc = js.api("STREAM.CREATE.C", {"name": "C", "sources": [{"name": "C"}]})
    assert cyc["error"]["description"] == "detected cycle"
    js.add_stream("X", sources=[{"name": "A"}])
    loop = js.api("STREAM.UPDATE.A", {"name": "A", "subjects": ["a.>"], "max_msg_size": 100,
                                       "sources": [{"name": "X"}]})  # fmt: skip
    assert loop["error"]["description"] == "detected cycle"
    hdr = b"NATS/1.0\r\nNats-Stream-Source: A 1 > > a.x\r\n\r\n"
    assert js.js_publish("a.x", b"x", hdr=hdr)["error"]["err_code"] == 10227


def test_header_parsing() -> None:
    assert parse_source_header(b"P 2 p.1 > p.1") == ("P p.1 >", "P", 2, "")
    assert parse_source_header(b"P 2 p.1 > p.1 2RZJUSK7") == ("P p.1 >", "P", 2, "2RZJUSK7")
    assert parse_source_header(b"P 7") == ("", "P", 7, "")
    assert parse_source_header(b"P 7 x") is None
    assert parse_source_header(b"$JS.ACK.P.c.1.12.3.99.0") == ("", "P", 12, "")
    tr = StreamSource(name="P", subject_transforms=[
        SubjectTransformConfig(src="p.2", dest="t.2"),
        SubjectTransformConfig(src="p.0", dest="t.0"),
    ])  # fmt: skip
    assert iname_of(tr) == "P p.2\fp.0 t.2\ft.0"


def test_origin_identity(js: JsHarness) -> None:
    """nats-server 2.15's stream identity: the origin's answer names it, the header's sixth
    field carries it, a restart reads it back; an origin deleted and made again refuses
    the old identity (10225) and the source copies the new one from its start."""
    js.add_stream("A", subjects=["a.>"])
    _publish(js, "a.x", 2)
    js.add_stream("S", subjects=[], sources=[{"name": "A"}])
    js.advance(0.25)
    ident = js.stream("A").identity()
    assert len(ident) == 8
    feed = next(iter(js.stream("S").sources.values()))
    assert feed.ident == ident
    st = js.stream("S").store
    for seq in (1, 2):
        m = st.load_msg(seq)
        assert m is not None and m.hdr is not None
        line = b"Nats-Stream-Source: A %d > > a.x %s\r\n\r\n" % (seq, ident.encode())
        assert m.hdr.endswith(line)
    js.stream("S")._stop_sources()
    js.stream("S")._start_sources()
    feed = next(iter(js.stream("S").sources.values()))
    assert (feed.sseq, feed.ident) == (2, ident)
    js.advance(0.25)
    # the origin goes and comes back (its sequences start over)
    assert js.api("STREAM.DELETE.A")["success"] is True
    js.advance(1.0)
    js.add_stream("A", subjects=["a.>"])
    _publish(js, "a.y", 3)
    js.advance(25.0)  # (the silent feed asks again after its health check)
    got = [m[2] for m in _msgs(js, "S")]
    assert got == ["A 1 > > a.x", "A 2 > > a.x", "A 1 > > a.y", "A 2 > > a.y", "A 3 > > a.y"]
    assert next(iter(js.stream("S").sources.values())).ident == js.stream("A").identity()


class _HeldGroup:
    """A Raft group that commits only when the test says (``commit``): what a replicated
    copy's leader proposes stays in flight until then."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []

    def propose(self, data: bytes) -> bool:
        self.entries.append(data)
        return True

    def is_raft_leader(self) -> bool:
        return True

    def transferring(self) -> bool:
        return False

    def proposable(self) -> bool:
        return True


def _replicated(js: JsHarness, name: str) -> tuple[Stream, _HeldGroup]:
    """Stream ``name`` made the leader of a replicated group whose commits the test makes."""
    stream = js.stream(name)
    group = _HeldGroup()
    stream.replica = Replica(1, group)
    stream.replica.lead(stream.store.last_seq())
    return stream, group


def _commit(stream: Stream, group: _HeldGroup) -> None:
    for e in group.entries:
        stream.apply_entry(decode_msg(e))
    group.entries.clear()


@pytest.mark.parametrize("kind", ["sources", "mirror"])
def test_a_replicated_copy_acknowledges_only_what_its_group_committed(
    js: JsHarness, kind: str
) -> None:
    """ADR-60's durable consumer of a workqueue origin is acknowledged by the copy's flow
    control answers: the workqueue then removes what they name. A replicated copy's leader
    answers once its group has committed the messages it took, and a leader that stops
    leading before that never answers (the next leader copies them again): an answer sent on
    proposal would have let the origin remove messages a lost leader never stored."""
    js.add_stream("W", subjects=["w.>"], retention="workqueue")
    origin = {"name": "W"}
    js.add_stream("C", subjects=[], **{kind: [origin] if kind == "sources" else origin})
    stream, group = _replicated(js, "C")
    js.advance(0.25)
    _publish(js, "w.x", 3)
    assert len(group.entries) == 3  # taken: proposed, not committed
    js.advance(2.5)  # idle heartbeats: the origin asks for its acknowledgement
    assert js.stream("W").store.state().msgs == 3
    assert stream.store.state().msgs == 0
    _commit(stream, group)
    assert stream.store.state().msgs == 3
    assert js.stream("W").store.state().msgs == 0  # answered once committed: acknowledged

    _publish(js, "w.y", 2)
    assert len(group.entries) == 2
    js.advance(2.5)
    assert js.stream("W").store.state().msgs == 2
    stream.replica.follow()  # leadership lost with the two in flight: never answered
    group.entries.clear()
    js.advance(2.5)
    assert js.stream("W").store.state().msgs == 2
