"""A simulated TCP network for whole natsd servers in one ``VirtualLoop``.

Every connection (a route between two servers, or a simulation client's connection to a
server) is a ``Pipe`` of two in-memory transports. A write becomes a delivery timer on the
loop, due after the link's delay; deliveries keep TCP's order per direction (a write is
never due before the one written before it), and a close arrives after the bytes written
before it. Each server *incarnation* (a server object: a restart is a new one) is an
endpoint of its own, so what an old incarnation still does after a crash never reaches
anyone.

Faults, all decided by the simulation's seeded generator:

* ``cut(a, b)``: the connections between two servers reset at both ends, and until
  ``heal`` their dials time out (a partition: the route PINGs of nats-server's protocol do
  not have to notice it);
* ``slow(name, seconds)``: every byte to or from a server takes that much longer (a slow
  follower, a congested link);
* ``crash(endpoint)``: an incarnation's connections reset at the far end, its listener
  goes, and whatever it writes or dials afterwards is dropped.

``fingerprint`` hashes every delivery (time, endpoints, length) in order: two runs of one
seed must produce the same one.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["Endpoint", "Pipe", "SimNetwork", "SimRouteNet", "SimTransport"]

# One-way delay of a link: a loopback-like base plus jitter (seconds).
BASE_DELAY = 0.0002
JITTER = 0.0008
# A dial across a cut gets no answer: it fails when its timeout runs out (at most this).
CUT_DIAL_TIMEOUT = 2.0
# The least time between two arrivals on one direction of a pipe (they stay in order).
_TICK = 1e-6


class Endpoint:
    """One side's identity: a server incarnation (``name`` is the server's) or a client."""

    __slots__ = ("alive", "label", "name")

    def __init__(self, name: str, label: str) -> None:
        self.name = name  # what partitions are about
        self.label = label  # what traces say (n1#2: the second incarnation of n1)
        self.alive = True

    def __repr__(self) -> str:
        return self.label


class SimTransport:
    """One end of a pipe, as an asyncio transport looks to the protocol that owns it."""

    def __init__(self, pipe: Pipe, side: int) -> None:
        self.pipe = pipe
        self.side = side
        self.closing = False
        self.paused = False
        self.held: list[bytes] = []  # deliveries that came while reading was paused

    # -- what connections call
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.closing and data:
            self.pipe.net.send(self.pipe, 1 - self.side, bytes(data))

    def writelines(self, chunks: list[bytes]) -> None:
        self.write(b"".join(chunks))

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.pipe.net.finish(self.pipe, self.side)

    def abort(self) -> None:
        self.close()

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        if self.paused:
            self.paused = False
            held, self.held = self.held, []
            for data in held:
                self.pipe.net.loop.call_soon(self.pipe.deliver, self.side, data)

    def is_reading(self) -> bool:
        return not self.paused

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        p = self.pipe
        if name == "sockname":
            return ("127.0.0.1", p.ports[self.side])
        if name == "peername":
            return ("127.0.0.1", p.ports[1 - self.side])
        return default


class Pipe:
    """A TCP connection: ``ends[0]`` dialed ``ends[1]``."""

    def __init__(
        self,
        net: SimNetwork,
        ends: tuple[Endpoint, Endpoint],
        protocols: tuple[Any, Any],
        ports: tuple[int, int],
    ) -> None:
        self.net = net
        self.ends = ends
        self.protocols = protocols
        self.ports = ports
        self.transports = (SimTransport(self, 0), SimTransport(self, 1))
        self.due = [0.0, 0.0]  # the last delivery's due time towards each side
        self.lost = [False, False]  # side s has had its connection_lost
        self.broken = False  # reset: nothing more is delivered

    def open(self, rng: random.Random) -> None:
        """Both ends' ``connection_made``, the accepting end or the dialing end first."""
        order = (1, 0) if rng.random() < 0.5 else (0, 1)
        for side in order:
            self.protocols[side].connection_made(self.transports[side])

    def deliver(self, side: int, data: bytes) -> None:
        if self.broken or self.lost[side]:
            return
        t = self.transports[side]
        if t.paused:
            t.held.append(data)
            return
        self.net.count(self, side, len(data))
        self.protocols[side].data_received(data)

    def end(self, side: int, exc: Exception | None) -> None:
        if self.lost[side]:
            return
        self.lost[side] = True
        self.transports[side].closing = True
        self.protocols[side].connection_lost(exc)

    def reset(self) -> None:
        """Both ends see the connection reset (what was in flight is gone)."""
        if self.broken:
            return
        self.broken = True
        loop = self.net.loop
        for side in (0, 1):
            if not self.lost[side]:
                loop.call_soon(self.end, side, ConnectionResetError("reset by the simulation"))


class _Handle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Listener:
    def __init__(self, net: SimNetwork, port: int, owner: Endpoint) -> None:
        self.net = net
        self.port = port
        self.owner = owner

    def close(self) -> None:
        cur = self.net.listeners.get(self.port)
        if cur is not None and cur[0] is self.owner:
            del self.net.listeners[self.port]


class SimNetwork:
    def __init__(self, loop: asyncio.AbstractEventLoop, rng: random.Random) -> None:
        self.loop = loop
        self.rng = rng
        self.listeners: dict[int, tuple[Endpoint, Callable[[], Any]]] = {}
        self.pipes: list[Pipe] = []
        self.cuts: set[frozenset[str]] = set()
        self.extra: dict[str, float] = {}  # server name -> added delay (slow)
        self._next_port = 40000
        self._digest = hashlib.blake2b(digest_size=16)
        self.deliveries = 0
        self.bytes = 0

    # ---------------------------------------------------------------- topology
    def endpoint(self, name: str, label: str) -> Endpoint:
        return Endpoint(name, label)

    def route_net(self, me: Endpoint) -> SimRouteNet:
        return SimRouteNet(self, me)

    def cut(self, a: str, b: str) -> None:
        self.cuts.add(frozenset((a, b)))
        for p in self.pipes:
            if {p.ends[0].name, p.ends[1].name} == {a, b}:
                p.reset()
        self._prune()

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        if a is None:
            self.cuts.clear()
        else:
            self.cuts.discard(frozenset((a, b)))

    def is_cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cuts

    def slow(self, name: str, seconds: float) -> None:
        if seconds > 0:
            self.extra[name] = seconds
        else:
            self.extra.pop(name, None)

    def crash(self, me: Endpoint) -> None:
        me.alive = False
        for port, (owner, _f) in list(self.listeners.items()):
            if owner is me:
                del self.listeners[port]
        for p in self.pipes:
            if me in p.ends:
                p.reset()
        self._prune()

    def _prune(self) -> None:
        self.pipes = [p for p in self.pipes if not p.broken and not all(p.lost)]

    # ---------------------------------------------------------------- traffic
    def delay(self, a: Endpoint, b: Endpoint) -> float:
        return (
            BASE_DELAY
            + self.rng.random() * JITTER
            + self.extra.get(a.name, 0.0)
            + self.extra.get(b.name, 0.0)
        )

    def due(self, pipe: Pipe, to: int, delay: float) -> float:
        """When a write (or close) towards side ``to`` arrives: after its delay, and
        strictly after the one before it (asyncio orders timers due at the same instant
        arbitrarily: equal due times would reorder the byte stream)."""
        due = max(self.loop.time() + delay, pipe.due[to] + _TICK)
        pipe.due[to] = due
        return due

    def send(self, pipe: Pipe, to: int, data: bytes) -> None:
        src, dst = pipe.ends[1 - to], pipe.ends[to]
        if pipe.broken or not src.alive:
            return
        due = self.due(pipe, to, self.delay(src, dst))
        self.loop.call_at(due, pipe.deliver, to, data)

    def finish(self, pipe: Pipe, side: int) -> None:
        """Side ``side`` closed: it hears so at once, the far end after the bytes in flight."""
        loop = self.loop
        loop.call_soon(pipe.end, side, None)
        if pipe.broken or not pipe.ends[side].alive:
            return
        to = 1 - side
        due = self.due(pipe, to, self.delay(pipe.ends[side], pipe.ends[to]))
        loop.call_at(due, self._fin, pipe, to)

    def _fin(self, pipe: Pipe, side: int) -> None:
        if not pipe.broken:
            pipe.end(side, None)
        self._prune()

    def count(self, pipe: Pipe, side: int, n: int) -> None:
        self.deliveries += 1
        self.bytes += n
        self._digest.update(
            struct.pack("<dI", self.loop.time(), n)
            + pipe.ends[1 - side].label.encode()
            + b">"
            + pipe.ends[side].label.encode()
        )

    def fingerprint(self) -> str:
        return self._digest.copy().hexdigest()

    # ---------------------------------------------------------------- connections
    def connect(
        self,
        me: Endpoint,
        port: int,
        factory: Callable[[], Any],
        timeout: float,
        done: Callable[[Any, str], None],
    ) -> _Handle:
        """Dial the listener on ``port`` with a protocol ``factory`` makes once connected;
        ``done(protocol or None, why)`` once, unless cancelled."""
        h = _Handle()
        loop = self.loop
        target = self.listeners.get(port)
        if target is not None and self.is_cut(me.name, target[0].name):
            loop.call_later(min(timeout, CUT_DIAL_TIMEOUT), self._dial_failed, h, done, "timeout")
            return h
        loop.call_later(self.delay(me, me), self._dialed, h, me, port, factory, timeout, done)
        return h

    def _dial_failed(self, h: _Handle, done: Callable[[Any, str], None], why: str) -> None:
        if not h.cancelled:
            done(None, why)

    def _dialed(
        self,
        h: _Handle,
        me: Endpoint,
        port: int,
        factory: Callable[[], Any],
        timeout: float,
        done: Callable[[Any, str], None],
    ) -> None:
        if h.cancelled or not me.alive:
            return
        target = self.listeners.get(port)
        if target is None:
            done(None, "connection refused")
            return
        owner, accept = target
        if self.is_cut(me.name, owner.name):
            self.loop.call_later(
                min(timeout, CUT_DIAL_TIMEOUT), self._dial_failed, h, done, "timeout"
            )
            return
        self._next_port += 1
        proto = factory()
        pipe = Pipe(self, (me, owner), (proto, accept()), (self._next_port, port))
        self.pipes.append(pipe)
        pipe.open(self.rng)
        done(proto, "")


class SimRouteNet:
    """One server incarnation's ``RouteNet`` (connection/route_net.py) on the network."""

    def __init__(self, net: SimNetwork, me: Endpoint) -> None:
        self.net = net
        self.me = me

    async def listen(self, host: str, port: int, factory: Callable[[], Any]) -> tuple[Any, int]:
        if not self.me.alive:
            raise OSError("crashed")
        cur = self.net.listeners.get(port)
        if cur is not None and cur[0].alive:
            raise OSError(f"address in use: {port}")
        self.net.listeners[port] = (self.me, factory)
        return _Listener(self.net, port, self.me), port

    def dial(
        self,
        host: str,
        port: int,
        factory: Callable[[], Any],
        timeout: float,
        done: Callable[[Any, str], None],
    ) -> _Handle:
        return self.net.connect(self.me, port, factory, timeout, done)

    async def wait_closed(self, timeout: float) -> None:
        return None
