"""Moving a client connection to the worker its publishes go to (``natsd --workers 2``).

Why: the kernel puts a connection on a worker by a hash of its address, and the meta group
puts a stream on the worker with the fewest, so about half of the publishes cross a route to
their stream and their PubAcks cross back: both workers parse each of them. Two independent
natsd processes with every connection on its stream's process reached 1.54x one process on
this 2-core machine; the workers with half the traffic routed reached 1.04-1.19x. So a
connection whose last ``MOVE_AFTER`` publishes all went to the one peer (and had no local
subscriber) moves there: the socket itself, passed with ``SCM_RIGHTS`` over the peer's Unix
socket, with its state. The client sees nothing.

The move of connection C from this worker (S) to the peer (T), both sides in this module:

1. S stops reading C (what it read is processed: those publishes are on the route to T
   already) and sends PREPARE on the route: C's account, CONNECT, plain subscriptions, and
   the subjects S stops being interested in when C's subscriptions go.
2. T builds C without a socket (its output is held), inserts C's subscriptions with its
   route interest muted (no RS+ may reach S while S still delivers to C; S is told in 3),
   drops S's interest in the subjects S loses, keeps S's routed messages from C (S still
   delivers those itself) and answers READY. T's own messages for C now go to C alone.
3. S, on READY (so after every message T sent before READY, all of which S delivered):
   removes C's subscriptions, takes T's interest in C's subjects, announces again a lost
   subject that a local client subscribed to meanwhile, and sends SWITCHED (after which T
   delivers S's routed messages to C: S sent them after it stopped delivering). Then it
   writes what it still holds for C and waits until the socket has taken it.
4. S passes the socket with the input it read but did not parse; T attaches it, writes the
   held output and parses that input first.

Every message for C is delivered by exactly one side (S for what was ordered before its
switch, T after), and S's writes are in the socket before T's, so nothing is lost,
duplicated or reordered per publisher. Only between exactly two workers with no other
route (``Handoff`` is built only then): a third server's messages in flight to S at its
switch would need the same re-homing there. Not moved: queue subscriptions, subscriptions
with an auto-unsubscribe count, ``allow_responses`` users, a connection with input held by
the read budget, one that moved in the last ``COOLDOWN`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, cast

import orjson

from natsd.cluster.mesh import Mesh
from natsd.connection.client import ClientConnection, CloseReason
from natsd.connection.route import RouteConnection
from natsd.protocol.route_encode import encode_route_rmsg
from natsd.router.account import Account
from natsd.router.subscription import Sink, Subscription

__all__ = ["COOLDOWN", "HANDOFF_ENV", "Handoff", "HandoffHost"]

# Set by the supervisor (natsd --workers 2, no other routes) in each worker's environment:
# the directory of the workers' Unix sockets that sockets are passed over.
HANDOFF_ENV: Final = "NATSD_HANDOFF_DIR"

log = logging.getLogger("natsd")

_PREFIX: Final = b"$NATSD.MOVE."
# A connection moves at most once per COOLDOWN seconds (no ping-pong between workers).
COOLDOWN: Final = 30.0
# How long S waits for READY, and T for the socket, before giving up on a move.
TIMEOUT: Final = 5.0
# How long S waits for C's socket to take what S still writes (then: a slow consumer).
DRAIN_TIMEOUT: Final = 5.0
_MAX_BLOB: Final = 64 * 1024 * 1024
_LEN: Final = struct.Struct(">I")


class HandoffHost(Protocol):
    """What the server gives the mover (implemented by ``natsd.server.Server``)."""

    server_id: str
    accounts: dict[str, Account]

    def new_client(self) -> ClientConnection: ...

    def authenticate(
        self, client: ClientConnection, opts: dict[str, Any]
    ) -> tuple[Account, Any, str] | None: ...

    def admit(self, client: ClientConnection) -> str | None: ...

    @property
    def auth_required(self) -> bool: ...


def _subject(server_id: str) -> bytes:
    return _PREFIX + server_id.encode()


@dataclass
class _Outgoing:
    """S's side of one move."""

    client: ClientConnection
    route: RouteConnection
    lost: list[bytes]
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Incoming:
    """T's side of one move."""

    client: ClientConnection
    route: RouteConnection
    timer: asyncio.TimerHandle | None = None
    switched: bool = False
    subjects: list[bytes] = field(default_factory=list)


class Handoff:
    """Moves client connections between this worker and its one peer (see the module)."""

    def __init__(self, host: HandoffHost, mesh: Mesh, system: Account, directory: str) -> None:
        self.host = host
        self.mesh = mesh
        self.system = system
        self.directory = directory
        self._sub = Subscription(_subject(host.server_id), None, b"move", callback=self._on_ctl)
        self._listener: socket.socket | None = None
        self._out: dict[int, _Outgoing] = {}  # by move id
        self._in: dict[str, _Incoming] = {}  # by move key "<S id>/<move id>"
        self._next = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.moved_out = 0
        self.moved_in = 0
        self.failed = 0

    def path(self, server_id: str) -> str:
        return os.path.join(self.directory, f"{server_id}.sock")

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        path = self.path(self.host.server_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        ls.listen(64)
        ls.setblocking(False)
        self._listener = ls
        asyncio.get_running_loop().add_reader(ls.fileno(), self._on_accept)
        self.system.sublist.insert(self._sub)
        self.mesh.set_mover(self.consider)
        self.mesh.route_gone = self.route_closed

    def stop(self) -> None:
        self.mesh.set_mover(None)
        self.mesh.route_gone = None
        self.system.sublist.remove(self._sub)
        ls, self._listener = self._listener, None
        if ls is not None:
            asyncio.get_running_loop().remove_reader(ls.fileno())
            ls.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path(self.host.server_id))
        for mid in list(self._out):
            self._fail_out(mid, "server stopping")
        for key in list(self._in):
            self._drop_in(key, CloseReason.SERVER_SHUTDOWN)

    # ------------------------------------------------------------------ S: the source
    def consider(self, sink: Sink, rid: int) -> None:
        """``sink`` published only to route ``rid`` for a while: move it there."""
        sink.route_hits = 0
        if not isinstance(sink, ClientConnection) or self._listener is None:
            return
        route = self.mesh.routes.get(rid)
        if route is None or len(self.mesh.routes) != 1 or not route.remote_id:
            log.debug("DEBUG no move: routes %s", list(self.mesh.routes))
            return
        c = sink
        why = c.unmovable()
        if why is not None or time.monotonic() - c.moved_at < COOLDOWN:
            log.debug("cid:%d - not moved: %s", c.cid, why or "moved recently")
            return
        if not os.path.exists(self.path(route.remote_id)):
            return  # the peer is not a worker of ours
        # Begin after this read is processed: its publishes go on the route first.
        asyncio.get_running_loop().call_soon(self._begin, c, route)

    def _begin(self, c: ClientConnection, route: RouteConnection) -> None:
        if c.unmovable() is not None or self.mesh.routes.get(route.rid) is not route:
            return
        self._next += 1
        mid = self._next
        c.pause_for_move()
        c.moved_at = time.monotonic()
        name = c.account.name
        mine: dict[bytes, int] = {}
        for sub in c.subs.values():
            mine[sub.subject] = mine.get(sub.subject, 0) + 1
        local = self.mesh.local
        lost = [s for s, n in mine.items() if local.count(name, s) <= n]
        state = c.move_state()
        state["lost"] = [s.decode("latin-1") for s in lost]
        self._out[mid] = _Outgoing(
            c, route, lost, asyncio.get_running_loop().call_later(TIMEOUT, self._timeout_out, mid)
        )
        self._send(route, {"op": "prepare", "id": mid, "from": self.host.server_id, **state})

    def _on_ready(self, msg: dict[str, Any]) -> None:
        mid = msg.get("id")
        if not isinstance(mid, int):
            return
        m = self._out.get(mid)
        if m is None:
            return
        if msg.get("op") == "refuse":
            log.debug("cid:%d - move refused by the peer: %s", m.client.cid, msg.get("why"))
            self._fail_out(mid, "refused")
            return
        if m.timer is not None:
            m.timer.cancel()
            m.timer = None
        c, route = m.client, m.route
        if c.closed:
            self._send(route, {"op": "abort", "id": mid, "from": self.host.server_id})
            self._restore_interest(m)
            del self._out[mid]
            return
        # The switch: from here the peer delivers everything for C.
        subjects = sorted({s.subject for s in c.subs.values()})
        c.drop_subs_for_move()
        acct = c.account.name.encode()
        remote = self.mesh.remote
        for s in subjects:
            remote.add(route.rid, acct, s, None, 1)
        local = self.mesh.local
        for s in m.lost:
            if local.count(c.account.name, s):
                route.send_sub(acct, s, None, 1)
        self._send(route, {"op": "switched", "id": mid, "from": self.host.server_id})
        c.flush()
        self._task(self._relay(mid))

    async def _relay(self, mid: int) -> None:
        m = self._out[mid]
        c, route = m.client, m.route
        t = c.transport
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while t is not None and not c.closed and t.get_write_buffer_size() > 0:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.001)
        ok = False
        if t is not None and not c.closed and t.get_write_buffer_size() == 0:
            sock = t.get_extra_info("socket")
            if sock is not None:
                ok = self._send_socket(route.remote_id, mid, sock.fileno(), c.unread_input())
        del self._out[mid]
        if ok:
            self.moved_out += 1
            log.debug("cid:%d - connection moved to %s", c.cid, route.remote_name)
            c.detach_moved()
            return
        # The subscriptions are the peer's already: this connection ends (a slow one).
        self.failed += 1
        self._send(route, {"op": "abort", "id": mid, "from": self.host.server_id})
        if not c.closed:
            c.moving = False
            c.close(CloseReason.SLOW_CONSUMER_DEADLINE)

    def _send_socket(self, peer_id: str, mid: int, fd: int, unread: bytes) -> bool:
        # <total length><head length><head JSON><unread input>, the socket with the first
        # bytes. Once sent, the descriptor in flight keeps the connection open for the peer
        # even after ours is closed.
        head = orjson.dumps({"from": self.host.server_id, "id": mid})
        blob = _LEN.pack(len(head)) + head + unread
        full = _LEN.pack(len(blob)) + blob
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2.0)
                s.connect(self.path(peer_id))
                sent = socket.send_fds(s, [full[:65536]], [fd])
                if sent < len(full):
                    s.sendall(full[sent:])
            return True
        except OSError as e:
            log.warning("connection move to %s failed: %s", peer_id, e)
            return False

    def _timeout_out(self, mid: int) -> None:
        m = self._out.get(mid)
        if m is not None:
            m.timer = None
            self._fail_out(mid, "no answer")

    def _fail_out(self, mid: int, why: str) -> None:
        """A move that did not get to the switch: C stays, its interest is ours again."""
        m = self._out.pop(mid, None)
        if m is None:
            return
        if m.timer is not None:
            m.timer.cancel()
        self.failed += 1
        log.debug("cid:%d - connection not moved: %s", m.client.cid, why)
        if not m.route.closed:
            self._send(m.route, {"op": "abort", "id": mid, "from": self.host.server_id})
            self._restore_interest(m)
        m.client.resume_after_failed_move()

    def _restore_interest(self, m: _Outgoing) -> None:
        acct = m.client.account.name.encode()
        for s in m.lost:
            if self.mesh.local.count(m.client.account.name, s):
                m.route.send_sub(acct, s, None, 1)

    # ------------------------------------------------------------------ T: the taker
    def _on_prepare(self, route: RouteConnection, msg: dict[str, Any]) -> None:
        key = f"{route.remote_id}/{msg['id']}"
        if key in self._in:
            return
        c = self.host.new_client()
        why = self._take(c, route, msg)
        if why is not None:
            self._send(route, {"op": "refuse", "id": msg["id"], "why": why})
            return
        inc = _Incoming(c, route)
        inc.timer = asyncio.get_running_loop().call_later(2 * TIMEOUT, self._timeout_in, key)
        self._in[key] = inc
        skip = route.skip
        if skip is None:
            skip = route.skip = set()
        skip.add(c)
        self._send(route, {"op": "ready", "id": msg["id"]})

    def _take(self, c: ClientConnection, route: RouteConnection, msg: dict[str, Any]) -> str | None:
        """Build C from S's state with its subscriptions; why not, or None."""
        try:
            subs = [(s.encode("latin-1"), sid.encode("latin-1")) for s, sid in msg["subs"]]
            lost = [s.encode("latin-1") for s in msg["lost"]]
            c.adopt(msg)
            account = self.host.accounts.get(msg["account"])
            res = self.host.authenticate(c, c.connect_opts)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            return f"bad state: {e}"
        if res is not None:
            account = res[0]
            c.user = res[2]
            c.update_permissions(res[1])
        elif self.host.auth_required:
            return "authentication"
        if account is None or account.name != msg["account"]:
            return "account"
        c.account = account
        if self.host.admit(c) is not None:
            return "maximum connections"
        local = self.mesh.local
        local.mute = True
        try:
            for subject, sid in subs:
                sub = Subscription(subject, None, sid, client=c)
                c.subs[sid] = sub
                account.sublist.insert(sub)
        finally:
            local.mute = False
        acct = account.name.encode()
        for s in lost:
            self.mesh.remote.remove(route.rid, acct, s, None)
        return None

    def _on_switched(self, msg: dict[str, Any]) -> None:
        inc = self._in.get(f"{msg.get('from')}/{msg.get('id')}")
        if inc is not None and not inc.switched:
            inc.switched = True
            self._unskip(inc)

    def _unskip(self, inc: _Incoming) -> None:
        skip = inc.route.skip
        if skip is not None:
            skip.discard(inc.client)
            if not skip:
                inc.route.skip = None

    def _on_accept(self) -> None:
        ls = self._listener
        if ls is None:
            return
        try:
            conn, _ = ls.accept()
        except (BlockingIOError, InterruptedError):
            return
        with conn:
            conn.settimeout(2.0)
            try:
                fd, head, unread = _receive(conn)
            except (OSError, ValueError) as e:
                log.warning("connection move: bad hand-over: %s", e)
                return
        key = f"{head.get('from')}/{head.get('id')}"
        inc = self._in.pop(key, None)
        if inc is None:
            os.close(fd)  # an abandoned move: the client reconnects
            return
        if inc.timer is not None:
            inc.timer.cancel()
        if not inc.switched:
            inc.switched = True
            self._unskip(inc)
        c = inc.client
        if c.closed:
            os.close(fd)
            return
        c.move_input = unread
        sock = socket.socket(fileno=fd)
        sock.setblocking(False)
        self.moved_in += 1
        loop = asyncio.get_running_loop()
        factory = cast("Callable[[], asyncio.Protocol]", lambda: c)
        self._task(loop.connect_accepted_socket(factory, sock))

    def _timeout_in(self, key: str) -> None:
        inc = self._in.get(key)
        if inc is not None:
            inc.timer = None
            self._drop_in(key, CloseReason.SERVER_SHUTDOWN)

    def _drop_in(self, key: str, reason: str) -> None:
        inc = self._in.pop(key, None)
        if inc is None:
            return
        if inc.timer is not None:
            inc.timer.cancel()
        self._unskip(inc)
        inc.client.adopting = False
        inc.client.close(reason)

    def _task(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ control messages
    def _send(self, route: RouteConnection, msg: dict[str, Any]) -> None:
        # On the route itself (never dropped, in order with its messages and interest).
        route.send(
            encode_route_rmsg(
                self.system.name.encode(), _subject(route.remote_id), None, None, orjson.dumps(msg)
            )
        )

    def _on_ctl(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        # From the peer (a server, still not trusted blindly): nothing in it may raise.
        try:
            msg = orjson.loads(data)
            if not isinstance(msg, dict) or not isinstance(msg.get("id"), int):
                raise ValueError("no id")
            self._dispatch(msg)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            log.warning("connection move: bad control message %r: %s", data[:200], e)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op in ("ready", "refuse"):
            self._on_ready(msg)
        elif op == "switched":
            self._on_switched(msg)
        elif op == "abort":
            self._drop_in(f"{msg.get('from')}/{msg.get('id')}", CloseReason.SERVER_SHUTDOWN)
        elif op == "prepare":
            route = self.mesh.by_server.get(str(msg.get("from")))
            if route is not None:
                self._on_prepare(route, msg)

    def route_closed(self, route: RouteConnection) -> None:
        """The peer is gone: moves to or from it end."""
        for mid, m in list(self._out.items()):
            if m.route is route and m.timer is not None:
                self._fail_out(mid, "route closed")
        for key, inc in list(self._in.items()):
            if inc.route is route:
                self._drop_in(key, CloseReason.SERVER_SHUTDOWN)


def _receive(conn: socket.socket) -> tuple[int, dict[str, Any], bytes]:
    msg, fds, _flags, _addr = socket.recv_fds(conn, 65536 + 8, 1)
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ValueError("no socket in the hand-over")
    fd = fds[0]
    try:
        data = bytearray(msg)
        while len(data) < 4:
            more = conn.recv(65536)
            if not more:
                raise ValueError("short hand-over")
            data += more
        (total,) = _LEN.unpack_from(data)
        if total > _MAX_BLOB:
            raise ValueError("hand-over too large")
        while len(data) < 4 + total:
            more = conn.recv(min(1 << 20, 4 + total - len(data)))
            if not more:
                raise ValueError("short hand-over")
            data += more
        (hlen,) = _LEN.unpack_from(data, 4)
        head = orjson.loads(bytes(data[8 : 8 + hlen]))
        unread = bytes(data[8 + hlen : 4 + total])
        if not isinstance(head, dict):
            raise ValueError("bad hand-over head")
    except BaseException:
        os.close(fd)
        raise
    return fd, head, unread
