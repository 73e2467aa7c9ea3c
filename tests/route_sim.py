"""Route meshes on a network driven by hand: every start-up ordering of a natsd cluster.

``World`` runs N real ``Mesh`` objects (cluster/mesh.py, its ``RouteDialer``s and
``RouteConnection``s, unchanged) on one virtual clock and a simulated TCP network. Nothing
happens on its own: ``World.choices()`` lists what could happen next and ``World.step``
does one of them:

* ``start i``: server i opens its route listener and starts dialing (before, a dial to it
  is refused);
* ``connect d``: a dial in flight completes at the dialer (its ``connection_made``, then
  the dial's outcome), or is refused when nothing listens yet;
* ``accept c``: the listening server accepts connection c (its ``connection_made``:
  it queues its INFO);
* ``turn i``: server i runs the callbacks its loop has ready (the write ``Flusher``: what
  its connections queued goes onto the wire);
* ``deliver c s``: what is in flight towards side s of connection c arrives in one read
  (``data_received``), or, once the other side has closed and nothing is left, the end of
  the stream (``connection_lost``);
* ``cut c``: the network cuts connection c (with ``cuts``: one route of each pair of
  servers, once): both ends see it end;
* ``fire t``: a redial's back-off timer runs. Against a network with no bound on delays
  the back-off times decide nothing: a timer may run whenever nothing else can happen
  between its two servers, and ``early`` times per pair of servers before something
  that could (a slow start is a ``start`` that comes late, after dials to it were
  refused). Without that bound a dialer could redial for ever while the one message
  that settles it is never delivered: no network does that.

Bytes in flight, closes and reads keep TCP's order per direction; everything else may
happen in any order. ``explore`` walks every ordering (depth first, replaying from the
start for each branch) and skips orderings that reach a state already explored
(``World.fingerprint``); ``random_run`` samples one ordering from a seed. A run ends when
nothing can happen any more; ``World.check`` then says what is wrong with the mesh, if
anything. Keepalive PINGs are outside the model (the simulated network never stalls).
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from natsd.cluster.dialer import DialState
from natsd.cluster.mesh import Mesh
from natsd.config.cluster import parse_go_url
from natsd.config.options import ClusterOptions
from natsd.connection.flusher import Flusher
from natsd.connection.route import RouteConnection, RouteSettings
from natsd.connection.route_net import DialDone, Listener

Choice = tuple[Any, ...]


class _Handle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class SimLoop:
    """One server's Scheduler: its ready callbacks and its timers, on the world's clock."""

    def __init__(self, world: World, idx: int) -> None:
        self.world = world
        self.idx = idx
        self.ready: list[tuple[_Handle, Callable[..., object], tuple[Any, ...]]] = []

    def call_soon(self, callback: Callable[..., object], *args: Any) -> _Handle:
        h = _Handle()
        self.ready.append((h, callback, args))
        return h

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> _Handle:
        h = _Handle()
        if getattr(callback, "__name__", "") in ("_ping_tick", "_abort"):
            # keepalive, and the cut-off of a close that cannot drain: outside the model
            # (the simulated network never stalls)
            return h
        w = self.world
        w.seq += 1
        owner = getattr(callback, "__self__", None)
        peer = w.port_owner.get(getattr(getattr(owner, "url", None), "port", None) or -1, self.idx)
        w.timers.append((w.seq, self.idx, peer, h, callback, args))
        return h


class SimTransport:
    """One end of a simulated TCP connection, as asyncio's transport looks to a protocol."""

    def __init__(self, conn: SimConn, side: int) -> None:
        self.conn = conn
        self.side = side  # 0: the dialing end, 1: the accepting end
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        c = self.conn
        ports = (c.src_port, c.dst_port)
        if name == "sockname":
            return ("127.0.0.1", ports[self.side])
        if name == "peername":
            return ("127.0.0.1", ports[1 - self.side])
        return default

    def write(self, data: bytes) -> None:
        if not self.closing and data:
            self.conn.inflight[1 - self.side].append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.conn.fin[self.side] = True

    def abort(self) -> None:
        self.close()


@dataclass
class SimConn:
    """A TCP connection: dialed by ``src`` towards the listener of ``dst``."""

    ident: tuple[int, int, int]  # (dialing server, listening server, dial number)
    src: int
    dst: int
    src_port: int
    dst_port: int
    ends: list[RouteConnection | None] = field(default_factory=lambda: [None, None])
    transports: list[SimTransport | None] = field(default_factory=lambda: [None, None])
    # what each side is yet to read, one chunk per write (side 0: the dialing end)
    inflight: list[list[bytes]] = field(default_factory=lambda: [[], []])
    fin: list[bool] = field(default_factory=lambda: [False, False])  # side s closed
    lost: list[bool] = field(default_factory=lambda: [False, False])  # side s saw the end
    accepted: bool = False


@dataclass
class _Dial:
    ident: tuple[int, int, int]
    src: int
    port: int
    factory: Callable[[], RouteConnection]
    done: DialDone
    handle: _Handle


class SimNet:
    """One server's RouteNet on the world's network."""

    def __init__(self, world: World, idx: int) -> None:
        self.world = world
        self.idx = idx
        self.dial_count: dict[int, int] = {}

    async def listen(
        self, host: str, port: int, factory: Callable[[], RouteConnection]
    ) -> tuple[Listener, int]:
        self.world.listeners[port] = (self.idx, factory)
        return _Handle(), port

    async def wait_closed(self, timeout: float) -> None:
        return None

    def dial(
        self,
        host: str,
        port: int,
        factory: Callable[[], RouteConnection],
        timeout: float,
        done: DialDone,
    ) -> _Handle:
        n = self.dial_count.get(port, 0) + 1
        self.dial_count[port] = n
        dst = self.world.port_owner[port]
        h = _Handle()
        self.world.dials.append(_Dial((self.idx, dst, n), self.idx, port, factory, done, h))
        return h


class World:
    """N natsd meshes, each configured with every server's route URL (itself included)."""

    def __init__(
        self, n: int, *, eager_turns: bool = False, cuts: bool = False, early: int = 1
    ) -> None:
        self.n = n
        pairs = {frozenset((i, j)) for i in range(n) for j in range(n)}
        # timers each pair of servers (or a server and itself) may still run early
        self.early = dict.fromkeys(pairs, early)
        # cuts: the network may cut one route (up at both ends) of each pair of servers,
        # once; both ends then see the connection end
        self.cuttable = {p for p in pairs if len(p) == 2} if cuts else set()
        # eager_turns: a server's ready callbacks (its writes) run at the end of each of its
        # steps, as part of it, rather than as a step of their own
        self.eager_turns = eager_turns
        self.seq = 0
        # pending timers: (number, server, the peer its dialer dials, handle, callback, args)
        self.timers: list[tuple[int, int, int, _Handle, Callable[..., object], Any]] = []
        self.listeners: dict[int, tuple[int, Callable[[], RouteConnection]]] = {}
        self.dials: list[_Dial] = []
        self.conns: list[SimConn] = []
        self.started = [False] * n
        self.ports = [6000 + i for i in range(n)]
        self.port_owner = {p: i for i, p in enumerate(self.ports)}
        self.loops = [SimLoop(self, i) for i in range(n)]
        self.ids = [f"N{chr(ord('A') + i)}" + "X" * 10 for i in range(n)]
        urls = [parse_go_url(f"nats-route://127.0.0.1:{p}") for p in self.ports]
        self.meshes: list[Mesh] = []
        for i in range(n):
            opts = ClusterOptions(name="sim", host="127.0.0.1", port=self.ports[i], routes=urls)
            settings = RouteSettings(server_id=self.ids[i], cluster="sim", server_name=f"s{i}")
            fields = {"go": "natsd sim", "version": "2.11.0", "jetstream": True}
            mesh = Mesh(
                opts,
                settings,
                Flusher(self.loops[i]),
                {},
                lambda f=fields: dict(f),
                lambda: None,
                net=SimNet(self, i),
                scheduler=self.loops[i],
                rng=_Half(),
            )
            self.meshes.append(mesh)
        self.trace: list[str] = []

    # ---------------------------------------------------------------- choices
    def enabled(self) -> list[tuple[int, Choice]]:
        """Every step that could happen now, with the server it happens on."""
        out: list[tuple[int, Choice]] = [
            (i, ("start", i)) for i in range(self.n) if not self.started[i]
        ]
        out += [(d.src, ("connect", d.ident)) for d in self.dials if not d.handle.cancelled]
        for c in self.conns:
            if not c.accepted:
                out.append((c.dst, ("accept", c.ident)))
            for side in (0, 1):
                if c.ends[side] is None or c.lost[side]:
                    continue
                if c.inflight[side] or c.fin[1 - side]:
                    out.append(((c.src, c.dst)[side], ("deliver", c.ident, side)))
        out += [(i, ("turn", i)) for i in range(self.n) if self.loops[i].ready]
        for c in self.conns:
            if (
                frozenset((c.src, c.dst)) in self.cuttable
                and not any(c.fin)
                and all(e is not None and e.up for e in c.ends)
            ):
                out.append((c.src, ("cut", c.ident)))
        self.timers = [t for t in self.timers if not t[3].cancelled]
        busy = set().union(*(_pairs_of(c, self.n) for _who, c in out if c[0] != "start"))
        out += [
            (t[1], ("fire", (t[1], t[2], t[0])))
            for t in self.timers
            if frozenset(t[1:3]) not in busy or self.early[frozenset(t[1:3])] > 0
        ]
        return out

    def choices(self, reduce: bool = True) -> list[Choice]:
        """What to explore from here. With ``reduce``, a persistent set: only steps that no
        step left out (now or later) can change, so every end state stays reachable. A
        step on one server reads only the head of its own incoming streams, which the
        other ends only append to: steps on different servers commute. What a dial finds
        depends on whether its target has started: the starts, and the refusal of dials
        made before them, come first."""
        en = self.enabled()
        if not en:
            return []
        if reduce and not all(self.started):
            # The start-up phase: which server starts when, and which of the dials made
            # before their target listened are refused. Every other step commutes with
            # the starts and waits until all have happened (a dial refused here is
            # retried after its back-off, once nothing else can happen: a late start).
            out: list[Choice] = [("start", i) for i in range(self.n) if not self.started[i]]
            out += [
                ("refuse", d.ident)
                for d in self.dials
                if not d.handle.cancelled and not self.started[self.port_owner[d.port]]
            ]
            return out
        if reduce and self.eager_turns:
            # Steps on one server that concern different peers commute (different
            # connections, dialers and by_server keys; what crosses between them is gossip
            # INFO, a no-op at a server that dials every configured URL already), and so
            # do steps on different servers: one pair's steps (or one server's route to
            # itself) are explored at a time, in every order among themselves.
            comps: dict[frozenset[int], list[Choice]] = {}
            for c in (c for _who, c in en):
                comps.setdefault(frozenset(c[1][:2]), []).append(c)
            return comps[min(comps, key=sorted)]
        if reduce:
            # a server's writes (its turns) reach every peer: one server at a time
            first = min(who for who, _c in en)
            return [c for who, c in en if who == first]
        return [c for _who, c in en]

    def step(self, choice: Choice) -> None:
        self.trace.append(" ".join(str(x) for x in choice))
        kind = choice[0]
        if kind == "start":
            self._start(choice[1])
        elif kind == "connect":
            self._connect(next(d for d in self.dials if d.ident == choice[1]))
        elif kind == "cut":
            c = self._conn(choice[1])
            self.cuttable.discard(frozenset((c.src, c.dst)))
            c.fin = [True, True]
            c.inflight = [[], []]
        elif kind == "refuse":
            d = next(d for d in self.dials if d.ident == choice[1])
            self.dials.remove(d)
            d.done(None, "connection refused")
        elif kind == "accept":
            self._accept(self._conn(choice[1]))
        elif kind == "deliver":
            self._deliver(self._conn(choice[1]), choice[2])
        elif kind == "turn":
            self._turn(choice[1])
        elif kind == "fire":
            pair = frozenset(choice[1][:2])
            others = [c for c in self.choices(reduce=False) if c[0] not in ("fire", "start")]
            if any(pair in _pairs_of(c, self.n) for c in others):
                self.early[pair] -= 1
            self._fire(choice[1][2])
        else:
            raise ValueError(choice)
        if self.eager_turns:
            while any(lp.ready for lp in self.loops):
                for i in range(self.n):
                    if self.loops[i].ready:
                        self._turn(i)

    def _conn(self, ident: tuple[int, int, int]) -> SimConn:
        return next(c for c in self.conns if c.ident == ident)

    def _start(self, i: int) -> None:
        self.started[i] = True
        coro = self.meshes[i].start()
        try:
            coro.send(None)
        except StopIteration:
            pass
        else:  # pragma: no cover - SimNet.listen never suspends
            raise AssertionError("Mesh.start suspended")

    def _connect(self, d: _Dial) -> None:
        self.dials.remove(d)
        lst = self.listeners.get(d.port)
        if lst is None:
            d.done(None, "connection refused")
            return
        src_port = 40000 + 1000 * d.ident[0] + 100 * d.ident[1] + d.ident[2]
        c = SimConn(d.ident, d.src, lst[0], src_port, d.port)
        self.conns.append(c)
        proto = d.factory()
        t = SimTransport(c, 0)
        c.ends[0], c.transports[0] = proto, t
        proto.connection_made(t)  # type: ignore[arg-type]
        d.done(proto, "")

    def _accept(self, c: SimConn) -> None:
        c.accepted = True
        lst = self.listeners.get(c.dst_port)
        assert lst is not None
        proto = lst[1]()
        t = SimTransport(c, 1)
        c.ends[1], c.transports[1] = proto, t
        proto.connection_made(t)  # type: ignore[arg-type]

    def _deliver(self, c: SimConn, side: int) -> None:
        proto = c.ends[side]
        assert proto is not None
        if c.inflight[side]:
            proto.data_received(c.inflight[side].pop(0))
            return
        c.lost[side] = True
        t = c.transports[side]
        if t is not None:
            t.closing = True
            c.fin[side] = True  # our end goes too (asyncio closes it)
        proto.connection_lost(None)

    def _turn(self, i: int) -> None:
        loop = self.loops[i]
        ready, loop.ready = loop.ready, []
        for h, cb, args in ready:
            if not h.cancelled:
                cb(*args)

    def _fire(self, seq: int) -> None:
        t = next(t for t in self.timers if t[0] == seq)
        self.timers.remove(t)
        t[4](*t[5])

    # ---------------------------------------------------------------- the outcome
    def check(self) -> list[str]:
        """What is wrong with the mesh once nothing more can happen ([] when whole)."""
        errs: list[str] = []
        for i, m in enumerate(self.meshes):
            peers = {self.ids.index(sid): r for sid, r in m.by_server.items()}
            if set(peers) != set(range(self.n)) - {i}:
                errs.append(f"s{i} reaches {sorted(peers)}")
            for j, r in peers.items():
                other = self.meshes[j].by_server.get(self.ids[i])
                if other is None:
                    continue
                if not (r.up and other.up and _same_conn(self, r, other)):
                    errs.append(f"s{i} and s{j} keep different connections")
            if m.expected_size() != self.n:
                errs.append(f"s{i} expects {m.expected_size()} servers")
            for key, d in m.dialers.items():
                ok = (d.state is DialState.CONNECTED and d.route in m.routes.values()) or (
                    d.state is DialState.HELD and d.held_by in m.by_server
                )
                if not ok:
                    errs.append(f"s{i} dialer {key} is {d.state.value}")
        for c in self.conns:
            a, b = c.ends
            installed = [
                e is not None and self.meshes[s].routes.get(e.rid) is e
                for s, e in ((c.src, a), (c.dst, b))
            ]
            if installed[0] != installed[1]:
                errs.append(f"connection {c.ident} is a route at one end only")
            if not installed[0] and not (c.fin[0] or c.fin[1]):
                errs.append(f"connection {c.ident} is left open, unused")
        return errs

    def fingerprint(self) -> bytes:
        """Everything that decides what can happen next, with connections named by who
        dialed whom (not by their rids)."""
        h = hashlib.blake2b(digest_size=16)

        def put(*xs: object) -> None:
            h.update(repr(xs).encode())

        put(self.started, sorted(map(sorted, self.cuttable)))
        put(sorted((sorted(p), k) for p, k in self.early.items()))
        for d in sorted(self.dials, key=lambda d: d.ident):
            put("dial", d.ident)
        where: dict[int, tuple[int, int, int, int]] = {}
        for c in sorted(self.conns, key=lambda c: c.ident):
            put("conn", c.ident, c.accepted, c.fin, c.lost, c.inflight)
            for side, e in enumerate(c.ends):
                if e is not None:
                    where[id(e)] = (*c.ident, side)
                    put(side, e.up, e.closed, e.connect_received, e.remote_id, e.close_reason)
                    put(b"".join(e.out), e.flush_pending)
        for i, m in enumerate(self.meshes):
            put("mesh", i, sorted(where[id(r)] for r in m.routes.values()))
            put(sorted((k, where[id(r)]) for k, r in m.by_server.items()))
            put(sorted(m.self_urls))
            for key in sorted(m.dialers):
                d = m.dialers[key]
                route = where.get(id(d.route)) if d.route is not None else None
                put(key, d.state.value, d.held_by, d.failures, d.delay, d.is_self, route)
            put(len(self.loops[i].ready))
        for _seq, i, peer, hd, cb, _a in self.timers:
            if not hd.cancelled:
                put("timer", i, peer, getattr(getattr(cb, "__self__", None), "key", None))
        return h.digest()


def _pairs_of(c: Choice, n: int) -> set[frozenset[int]]:
    """The pairs of servers (or server and itself) a step concerns: a turn, all its own."""
    if c[0] == "turn":
        return {frozenset((c[1], k)) for k in range(n)}
    return {frozenset(c[1][:2])}


def _same_conn(w: World, a: RouteConnection, b: RouteConnection) -> bool:
    return any(set(map(id, (a, b))) == {id(e) for e in c.ends} for c in w.conns)


class _Half(random.Random):
    """No jitter: the back-off is exactly its nominal delay (the exploration branches on
    timer order instead)."""

    def random(self) -> float:
        return 0.5


@dataclass
class Explored:
    runs: int = 0  # orderings followed to their end
    states: int = 0  # distinct states reached
    steps: int = 0  # steps executed, replays included
    longest: int = 0


class Failure(AssertionError):
    def __init__(self, path: list[Choice], errors: list[str], trace: list[str]) -> None:
        super().__init__(
            "start-up ordering ended with a broken mesh: "
            + "; ".join(errors)
            + "\n  ordering: "
            + " | ".join(trace)
        )
        self.path = path
        self.errors = errors


def _replay(make: Callable[[], World], path: Iterable[Choice]) -> World:
    w = make()
    for c in path:
        w.step(c)
    return w


def explore(
    make: Callable[[], World], *, max_depth: int = 400, max_states: int = 2_000_000
) -> Explored:
    """Follow every ordering from ``make()``'s start to its end, once per distinct state;
    raise ``Failure`` with the first ordering whose end is not a whole mesh, that comes
    back to a state it went through (it could go round for ever), or that runs longer
    than ``max_depth`` steps."""
    stats = Explored()
    seen: set[bytes] = set()
    logging.getLogger("natsd").disabled = True
    try:
        # depth first: (path, the world after it or None to replay, the path's states)
        Chain = tuple[bytes, Any] | None
        stack: list[tuple[list[Choice], World | None, Chain]] = [([], make(), None)]
        while stack:
            path, w, chain = stack.pop()
            if w is None:
                w = _replay(make, path)
                stats.steps += len(path)
            fp = w.fingerprint()
            if fp in seen:
                link = chain
                while link is not None:
                    if link[0] == fp:
                        raise Failure(path, ["it can go round for ever"], w.trace)
                    link = link[1]
                continue
            seen.add(fp)
            stats.states += 1
            if stats.states > max_states:
                raise AssertionError(f"more than {max_states} states")
            options = w.choices()
            if not options:
                stats.runs += 1
                stats.longest = max(stats.longest, len(path))
                errs = w.check()
                if errs:
                    raise Failure(path, errs, w.trace)
                continue
            if len(path) >= max_depth:
                raise Failure(path, [f"no end after {max_depth} steps"], w.trace)
            here: Chain = (fp, chain)
            # the first option continues on this world; the others replay to it later
            for c in options[:0:-1]:
                stack.append(([*path, c], None, here))
            w.step(options[0])
            stats.steps += 1
            stack.append(([*path, options[0]], w, here))
    finally:
        logging.getLogger("natsd").disabled = False
    return stats


def random_run(make: Callable[[], World], seed: int, max_depth: int = 2000) -> World:
    """One ordering chosen by ``seed``; raise ``Failure`` if its end is not a whole mesh."""
    rng = random.Random(seed)
    w = make()
    path: list[Choice] = []
    while True:
        options = w.choices(reduce=False)
        if not options:
            break
        if len(path) >= max_depth:
            raise Failure(path, [f"no end after {max_depth} steps"], w.trace)
        c = rng.choice(options)
        path.append(c)
        w.step(c)
    errs = w.check()
    if errs:
        raise Failure(path, errs, w.trace)
    return w
