"""One route URL this server dials and keeps dialing: a small state machine, no coroutine.

Ownership: the mesh makes one ``RouteDialer`` per URL it dials (each configured route, and
each route learned by gossip) and tells it what happens to its connection; the dialer owns
only its own state and its one timer. Its time and randomness are handed in (the mesh's
scheduler and random source), so a test drives every start-up ordering on virtual time
and replays it from a seed.

States and what moves them (nats-server's reConnectToRoute and the reconnect on close):

=========  ===============================================  ==============================
state      meaning                                           leaves on
=========  ===============================================  ==============================
DIALING    a connect is in flight                            ``dialed`` -> CONNECTED, or
                                                             BACKING_OFF / DONE on failure
CONNECTED  our connection exists (in handshake or a route)   ``route_ended`` -> HELD,
                                                             BACKING_OFF or DONE
HELD       the peer is reached over another connection (ours ``peer_gone`` -> BACKING_OFF
           lost a duplicate resolution, or the peer dialed   (a gossiped URL: DONE)
           first while we waited to redial)
BACKING_OFF  waiting before the next dial (jittered,         the timer -> DIALING
           doubling from 50 ms to 1 s)
DONE       the URL is this server itself, a gossiped route   nothing
           ran out of retries, or the mesh stopped
=========  ===============================================  ==============================

A configured route is redialed for ever; a gossiped one ``connect_retries`` failures in a
row. A connection that reached the peer (its INFO named it) resets the back-off.
"""

from __future__ import annotations

import logging
import random
from enum import Enum
from typing import Final, Protocol

from natsd.config.options import RouteURL
from natsd.connection.route import RouteCloseReason, RouteConnection
from natsd.connection.route_net import RouteNet
from natsd.core.scheduler import Cancellable, Scheduler

__all__ = ["DIAL_TIMEOUT", "FIRST_DELAY", "MAX_DELAY", "DialState", "DialerHost", "RouteDialer"]

log = logging.getLogger("natsd")

# nats-server redials a route after DEFAULT_ROUTE_RECONNECT (1 s); we start lower and
# double up to it, so a restarted peer rejoins quickly without a dial storm.
FIRST_DELAY: Final = 0.05
MAX_DELAY: Final = 1.0
DIAL_TIMEOUT: Final = 2.0


class DialState(Enum):
    DIALING = "dialing"
    CONNECTED = "connected"
    HELD = "held"
    BACKING_OFF = "backing off"
    DONE = "done"


class DialerHost(Protocol):
    """What a dialer needs from the mesh."""

    net: RouteNet
    rng: random.Random

    @property
    def scheduler(self) -> Scheduler: ...

    # installed routes by peer server_id
    by_server: dict[str, RouteConnection]

    def new_solicited(
        self, dialer: RouteDialer, credentials: tuple[str, str] | None
    ) -> RouteConnection:
        """A connection for the dial of ``dialer`` (the mesh records whose it is)."""

    def dialer_done(self, dialer: RouteDialer) -> None:
        """``dialer`` stopped for good (DONE): forget it."""

    def reached(self, key: str) -> str:
        """The server_id of the peer an installed route reaches whose route address is
        ``key`` (host:port), or ""."""


class RouteDialer:
    def __init__(
        self,
        host: DialerHost,
        url: RouteURL,
        *,
        configured: bool,
        retries: int,
        credentials: tuple[str, str] | None,
    ) -> None:
        self.host = host
        self.url = url
        self.key = f"{url.host}:{url.port}"
        self.configured = configured
        self.retries = retries
        self.credentials = credentials
        self.state = DialState.BACKING_OFF
        self.route: RouteConnection | None = None  # the connection of the current dial
        self.held_by = ""  # the peer's server_id while HELD
        self.is_self = False  # the URL turned out to be this server
        self.failures = 0
        self.delay = FIRST_DELAY
        self._timer: Cancellable | None = None
        self._dial: Cancellable | None = None

    # ---------------------------------------------------------------- the mesh's calls
    def start(self) -> None:
        self._connect()

    def stop(self) -> None:
        for h in (self._timer, self._dial):
            if h is not None:
                h.cancel()
        self._timer = self._dial = None
        self.state = DialState.DONE

    def made(self, route: RouteConnection) -> None:
        """The connection of the dial in flight exists (its factory ran)."""
        self.route = route

    def dialed(self, route: RouteConnection | None, error: str) -> None:
        """The dial in flight ended: connected (its connection_made ran), or not."""
        if self.state is not DialState.DIALING:
            return
        self._dial = None
        if route is None:
            made = self.route
            self.route = None
            if made is not None and not made.closed:
                # the connect completed as the timeout struck: that connection is not ours
                made.close(RouteCloseReason.CLIENT_CLOSED)
            log.debug("Error trying to connect to route %s: %s", self.key, error)
            self._failed()
            return
        self.route = route
        self.state = DialState.CONNECTED
        if route.closed:
            self.route_ended(route)
        elif self.is_self:
            route.close(RouteCloseReason.DUPLICATE_ROUTE)  # route_ended finishes us

    def route_ended(self, route: RouteConnection) -> None:
        """Our connection closed (for any reason, in its handshake or as a route)."""
        if route is not self.route or self.state is not DialState.CONNECTED:
            return  # an older dial's connection, or the dial's own outcome comes next
        self.route = None
        if self.is_self or (
            route.close_reason == RouteCloseReason.DUPLICATE_ROUTE and not route.remote_id
        ):
            self.to_self()
            return
        sid = route.remote_id
        if sid and sid in self.host.by_server:
            # another connection to that server won; dial again only once it is gone
            if not self.configured:
                self._finish()
                return
            self.state = DialState.HELD
            self.held_by = sid
            return
        if sid:
            self.failures = 0
            self.delay = FIRST_DELAY
        else:
            self.failures += 1
            if self._gave_up():
                return
        self._back_off()

    def peer_gone(self, sid: str) -> None:
        """The route to ``sid`` closed and no other reaches it."""
        if self.state is DialState.HELD and self.held_by == sid:
            self.held_by = ""
            if not self.configured:
                self._finish()
                return
            self.failures = 0
            self.delay = FIRST_DELAY
            self._back_off()

    def to_self(self) -> None:
        """The URL is this server (configs list every server, this one included): told by
        our connection's INFO, or by the other end of it, which this server accepted."""
        if self.state is DialState.DONE:
            return
        if not self.is_self:
            log.debug("Detected route to self, ignoring %s", self.key)
        self.is_self = True
        route = self.route
        if self.state is DialState.CONNECTED and route is not None and not route.closed:
            route.close(RouteCloseReason.DUPLICATE_ROUTE)  # route_ended finishes us
            return
        if self.state is not DialState.DIALING:
            self._finish()
        # DIALING: the dial's outcome comes next, and its connection's close ends us

    # ---------------------------------------------------------------- steps
    def _connect(self) -> None:
        self._timer = None
        if self.state is DialState.DONE:
            return
        sid = self.host.reached(self.key)
        if sid:
            # the server came to us meanwhile (restarted, it dialed first): a dial now
            # would only make a duplicate, and might take the working route's place
            if not self.configured:
                self._finish()
                return
            self.state = DialState.HELD
            self.held_by = sid
            return
        self.state = DialState.DIALING
        self.route = None
        h = self.host
        self._dial = h.net.dial(
            self.url.host,
            self.url.port or 0,
            lambda: h.new_solicited(self, self.credentials),
            DIAL_TIMEOUT,
            self.dialed,
        )

    def _failed(self) -> None:
        self.failures += 1
        if not self._gave_up():
            self._back_off()

    def _gave_up(self) -> bool:
        if not self.configured and self.failures > self.retries:
            self._finish()
            return True
        return False

    def _back_off(self) -> None:
        self.state = DialState.BACKING_OFF
        wait = self.delay * (0.5 + self.host.rng.random())
        self.delay = min(self.delay * 2, MAX_DELAY)
        self._timer = self.host.scheduler.call_later(wait, self._connect)

    def _finish(self) -> None:
        self.stop()
        self.host.dialer_done(self)
