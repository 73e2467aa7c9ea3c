"""Accounts' imports and exports: streams and services that cross accounts.

As nats-server's ``accounts.go`` and ``client.go`` do it:

* A **stream import** makes what the exporting account publishes on ``frm`` visible in the
  importing account under ``to``. Every subscription of the importer that overlaps ``to``
  gets a *shadow* subscription in the exporter's Sublist, on the exporter's subject; a
  message it matches is delivered to the importer's subscription under the importer's
  subject (``StreamLink.local_subject``). Shadows are ordinary subscriptions of the
  exporter, so the routes carry their interest and a publish on another server of the
  cluster reaches them. Publishing in the importer never reaches the exporter.
* A **service import** makes a request the importer publishes on its local subject arrive
  in the exporting account on the export's subject. Its subscription in the importer is
  *quiet* (never announced to the routes): every server holds its own and handles its own
  clients' requests. The reply subject is replaced by ``_R_.<prefix>.<id>`` of the
  exporter, whose wildcard subscription takes the responses and publishes them to the
  requester's reply in the importer: once for a ``Singleton`` export, until the response
  threshold passes without one (or an empty message ends it) for ``Stream`` and
  ``Chunked``. The request carries ``Nats-Request-Info`` naming the requesting account.

Everything here runs on the server's loop, synchronously inside the publish that caused
it; the response mappings are bounded per exporter and swept on the scheduler.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from typing import Final

import orjson

from natsd.core.headers import replace_header, slice_header
from natsd.core.scheduler import Cancellable, Clock, Scheduler
from natsd.core.subjects import subject_has_wildcard, subset_match
from natsd.core.transform import SubjectTransform
from natsd.router.account import Account
from natsd.router.deliver import deliver
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

__all__ = [
    "DEFAULT_RESPONSE_THRESHOLD",
    "MAX_PENDING_RESPONSES",
    "AccountLinks",
    "ServiceLink",
    "StreamLink",
    "no_responders",
]

# nats-server's DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD.
DEFAULT_RESPONSE_THRESHOLD: Final = 120.0
# Response mappings one exporting account keeps at most; past it the oldest goes (a client
# sending requests nobody answers must not grow the server).
MAX_PENDING_RESPONSES: Final = 100_000
REQUEST_INFO: Final = "Nats-Request-Info"
_REPLY_PREFIX: Final = b"_R_."
_ACK_PREFIX: Final = b"$JS.ACK."
_DIGITS: Final = string.digits + string.ascii_uppercase + string.ascii_lowercase
_SINGLETON: Final = "Singleton"


def _rand62(rng: random.Random, n: int) -> bytes:
    return "".join(rng.choice(_DIGITS) for _ in range(n)).encode()


def _tail(hdr: bytes | None, payload: bytes) -> tuple[bytes, int, int]:
    if hdr:
        hlen = len(hdr)
        size = hlen + len(payload)
        return b" %d %d\r\n%s%s\r\n" % (hlen, size, hdr, payload), size, hlen
    return b" %d\r\n%s\r\n" % (len(payload), payload), len(payload), 0


def _positional(pattern: str) -> list[int]:
    """The token indexes of ``pattern``'s wildcards, in order."""
    return [i for i, t in enumerate(pattern.split(".")) if t in ("*", ">")]


def no_responders(sublist: Sublist[Subscription], subject: bytes, reply: bytes) -> None:
    """Nothing took a request the server handles for the requester (a service import's,
    one JetStream does not serve): the requester's inbox in that account's ``sublist`` gets
    the 503 status nats-server sends (subscribers that read headers only)."""
    psubs, _ = sublist.match(reply)
    hdr = b"NATS/1.0 503\r\nNats-Subject: " + subject + b"\r\n\r\n"
    tail, size, hlen = _tail(hdr, b"")
    for s in psubs:
        c = s.client
        if c is not None and c.headers:
            deliver([s], [], reply, None, tail, size, hlen, None)


class StreamLink:
    """One stream import: ``exporter``'s ``frm`` seen by ``importer`` as ``to``."""

    __slots__ = ("exporter", "frm", "importer", "rtr", "to", "tr", "use_pub")

    def __init__(self, importer: Account, exporter: Account, frm: str, to: str) -> None:
        self.importer = importer
        self.exporter = exporter
        self.frm = frm
        mapping = to or frm
        # the importer's subjects as a pattern: ``$N`` references are wildcards there
        self.to = _untokenize(mapping)
        # A wildcard import kept under its own subject delivers the publish subject as it
        # is; one mapped elsewhere transforms it, both ways (the shadow's subject is the
        # reverse of the importer's).
        self.use_pub = subject_has_wildcard(frm.encode()) and mapping == frm
        self.tr: SubjectTransform | None = None
        self.rtr: SubjectTransform | None = None
        if subject_has_wildcard(frm.encode()) and not self.use_pub:
            self.tr = SubjectTransform(frm, mapping)
            self.rtr = _reverse(frm, mapping)

    def local_subject(self, subject: bytes) -> bytes:
        """The importer's subject of a message the exporter published on ``subject``."""
        if self.tr is not None:
            out = self.tr.apply(subject.decode())
            return out.encode() if out is not None else subject
        if self.use_pub:
            return subject
        return self.to.encode()

    def shadow_subject(self, subject: bytes) -> bytes | None:
        """The exporter's subject a shadow of the importer's ``subject`` subscribes on, or
        None when the two do not overlap (nats-server's ``addShadowSubscriptions``)."""
        to = self.to.encode()
        if subject == to:
            return self._shadow(subject, False)
        if subset_match(subject, to):
            return self._shadow(subject, True)
        if not subject_has_wildcard(subject):
            return None
        if subset_match(to, subject):
            return self._shadow(subject, False)
        # Overlapping wildcards: the subscription made as specific as the import.
        toks = subject.split(b".")
        itoks = to.split(b".")
        for i, t in enumerate(toks):
            if i >= len(itoks):
                break
            if t == b"*" and itoks[i] != b">":
                toks[i] = itoks[i]
        if toks[-1] == b">" and len(itoks) >= len(toks):
            toks[-1] = itoks[len(toks) - 1]
            toks.extend(itoks[len(toks) :])
        overlap = b".".join(toks)
        if overlap != subject and subset_match(overlap, to):
            return self._shadow(overlap, True, overlap)
        return None

    def _shadow(self, subject: bytes, dyn: bool, overlap: bytes = b"") -> bytes:
        if not self.use_pub and dyn and self.rtr is not None:
            out = self.rtr.apply((overlap or subject).decode())
            return out.encode() if out is not None else self.frm.encode()
        if not self.use_pub or overlap or not dyn:
            return overlap or self.frm.encode()
        return subject


def _untokenize(mapping: str) -> str:
    """nats-server's ``transformUntokenize``: ``$N`` and ``{{wildcard(N)}}`` become ``*``."""
    out = []
    for t in mapping.split("."):
        if (t.startswith("$") and t[1:].isdigit()) or t.startswith("{{"):
            out.append("*")
        else:
            out.append(t)
    return ".".join(out)


def _reverse(frm: str, to: str) -> SubjectTransform:
    """The transform from ``to`` back to ``frm`` (nats-server's ``reverse``): ``to``'s
    wildcards (``*``, ``$N``) become wildcards in order and ``frm``'s refer to them."""
    ftoks = frm.split(".")
    ttoks = to.split(".")
    fwild = _positional(frm)
    # to-token index -> the frm wildcard (1-based) it carries
    refs: dict[int, int] = {}
    nth = 0
    for i, t in enumerate(ttoks):
        if t.startswith("$") and t[1:].isdigit():
            refs[i] = int(t[1:])
        elif t.startswith("{{"):
            digits = "".join(c for c in t if c.isdigit())
            refs[i] = int(digits or "0")
        elif t in ("*", ">"):
            nth += 1
            refs[i] = nth
    src = [("*" if i in refs and ttoks[i] != ">" else ttoks[i]) for i in range(len(ttoks))]
    # frm wildcard k -> its position among the reverse source's wildcards
    order = sorted(refs)
    back = {refs[i]: order.index(i) + 1 for i in order}
    dest = list(ftoks)
    for k, fi in enumerate(fwild, start=1):
        if ftoks[fi] == ">":
            continue
        if k in back:
            dest[fi] = f"${back[k]}"
    return SubjectTransform(".".join(src), ".".join(dest))


class ServiceLink:
    """One service import: requests on the importer's ``local`` reach ``exporter`` on
    ``remote``."""

    __slots__ = (
        "exporter",
        "importer",
        "links",
        "local",
        "remote",
        "response_type",
        "sub",
        "threshold",
        "tr",
        "use_pub",
    )

    def __init__(
        self,
        links: AccountLinks,
        importer: Account,
        exporter: Account,
        local: str,
        remote: str,
        response_type: str,
        threshold: float,
    ) -> None:
        self.links = links
        self.importer = importer
        self.exporter = exporter
        self.local = local or remote
        self.remote = remote
        self.response_type = response_type
        self.threshold = threshold or DEFAULT_RESPONSE_THRESHOLD
        wild = subject_has_wildcard(self.local.encode())
        self.use_pub = wild and self.local == remote
        self.tr = SubjectTransform(self.local, remote) if wild and not self.use_pub else None
        self.sub = Subscription(self.local.encode(), None, b"si", callback=self.on_request)

    def remote_subject(self, subject: bytes) -> bytes:
        if self.tr is not None:
            out = self.tr.apply(subject.decode())
            return out.encode() if out is not None else self.remote.encode()
        if self.use_pub:
            return subject
        return self.remote.encode()

    def on_request(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        links = self.links
        if links.chain and self in links.chain:
            return  # a cycle of imports: dropped, as nats-server drops it
        to = self.remote_subject(subject)
        nrr: bytes | None = None
        pending: _Pending | None = None
        if reply:
            if reply.startswith(_ACK_PREFIX):
                nrr = reply  # a pull consumer's ack reply crossing accounts stays as it is
            else:
                pending = links.responses(self.exporter).add(self, reply)
                nrr = pending.subject
        hdr = links.request_info(self, hdr)
        links.chain.append(self)
        try:
            n = publish(self.exporter.sublist, to, nrr, hdr, data)
        finally:
            links.chain.pop()
        if n == 0:
            if pending is not None:
                links.responses(self.exporter).drop(pending.subject)
            if reply:
                no_responders(self.importer.sublist, subject, reply)


class _Pending:
    """A request waiting for its responses: where they go in the requester's account."""

    __slots__ = ("deadline", "importer", "reply", "singleton", "subject", "threshold")

    def __init__(self, subject: bytes, link: ServiceLink, reply: bytes, now: float) -> None:
        self.subject = subject
        self.importer = link.importer
        self.reply = reply
        self.singleton = link.response_type == _SINGLETON
        self.threshold = link.threshold
        self.deadline = now + link.threshold


class _Responses:
    """The response subjects of one exporting account: ``_R_.<prefix>.<id>`` -> the
    request they answer, and the wildcard subscription that takes them."""

    __slots__ = ("account", "links", "pending", "prefix", "sub", "timer")

    def __init__(self, links: AccountLinks, account: Account) -> None:
        self.links = links
        self.account = account
        self.prefix = _REPLY_PREFIX + _rand62(links.rng, 6) + b"."
        self.pending: dict[bytes, _Pending] = {}
        self.timer: Cancellable | None = None
        self.sub = Subscription(self.prefix + b">", None, b"si-resp", callback=self.on_response)
        account.sublist.insert(self.sub)

    def add(self, link: ServiceLink, reply: bytes) -> _Pending:
        pending = self.pending
        while True:
            subject = self.prefix + _rand62(self.links.rng, 6)
            if subject not in pending:
                break
        if len(pending) >= MAX_PENDING_RESPONSES:
            del pending[next(iter(pending))]
        p = pending[subject] = _Pending(subject, link, reply, self.links.clock.monotonic())
        if self.timer is None:
            self.timer = self.links.scheduler.call_later(min(link.threshold, 1.0), self._sweep)
        return p

    def drop(self, subject: bytes) -> None:
        self.pending.pop(subject, None)

    def on_response(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        p = self.pending.get(subject)
        if p is None:
            return
        done = p.singleton or (not data and not hdr)
        if done:
            del self.pending[subject]
        else:
            # a stream of responses lives on while they keep coming
            p.deadline = self.links.clock.monotonic() + p.threshold
        n = publish(p.importer.sublist, p.reply, None, hdr, data)
        if n == 0 and not done:
            del self.pending[subject]

    def _sweep(self) -> None:
        self.timer = None
        now = self.links.clock.monotonic()
        expired = [s for s, p in self.pending.items() if p.deadline <= now]
        for s in expired:
            del self.pending[s]
        if self.pending:
            soonest = min(p.deadline for p in self.pending.values())
            self.timer = self.links.scheduler.call_later(
                max(0.05, min(soonest - now, 1.0)), self._sweep
            )

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.pending.clear()
        self.account.sublist.remove(self.sub)


class _Shadow:
    """The callback of one shadow subscription: deliver to the importer's subscription."""

    __slots__ = ("link", "links", "target")

    def __init__(self, links: AccountLinks, link: StreamLink, target: Subscription) -> None:
        self.links = links
        self.link = link
        self.target = target

    def __call__(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if self.links.chain:
            return  # a service import's request is not exported again as a stream
        dsubj = self.link.local_subject(subject)
        tail, size, hlen = _tail(hdr, data)
        deliver([self.target], [], dsubj, reply, tail, size, hlen, None)


class _Follower:
    """An importer's ``Sublist.on_sub``: its subscriptions' changes, with whose they are."""

    __slots__ = ("account", "links")

    def __init__(self, links: AccountLinks, account: Account) -> None:
        self.links = links
        self.account = account

    def __call__(self, sub: Subscription, delta: int) -> None:
        self.links._sub_changed(self.account, sub, delta)


class AccountLinks:
    """Every import of every account of one server, and the state they need: the shadow
    subscriptions by importer subscription, the exporters' response mappings."""

    def __init__(
        self,
        scheduler: Scheduler,
        clock: Clock,
        rng: random.Random | None = None,
        server_info: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.rng = rng or random.Random()
        self.streams: dict[Account, list[StreamLink]] = {}
        self.services: list[ServiceLink] = []
        # importer subscription -> its shadows (exporter account, shadow subscription)
        self._shadows: dict[Subscription, list[tuple[Account, Subscription]]] = {}
        self._responses: dict[Account, _Responses] = {}
        # the service imports a publish is passing through, innermost last
        self.chain: list[ServiceLink] = []
        self.started = False

    # ------------------------------------------------------------------ set-up
    def add_stream_import(self, importer: Account, exporter: Account, frm: str, to: str) -> None:
        assert not self.started
        self.streams.setdefault(importer, []).append(StreamLink(importer, exporter, frm, to))

    def add_service_import(
        self,
        importer: Account,
        exporter: Account,
        local: str,
        remote: str,
        response_type: str = _SINGLETON,
        threshold: float = 0.0,
    ) -> None:
        assert not self.started
        self.services.append(
            ServiceLink(self, importer, exporter, local, remote, response_type, threshold)
        )

    def start(self) -> None:
        """Install the service imports' subscriptions and follow every importer's Sublist
        (shadowing what it already holds)."""
        self.started = True
        for si in self.services:
            si.importer.sublist.insert(si.sub, quiet=True)
        for acct in self.streams:
            sl = acct.sublist
            for sub in list(sl):
                if not sl.is_quiet(sub):
                    self._sub_changed(acct, sub, 1)
            sl.on_sub = _Follower(self, acct)

    def stop(self) -> None:
        for acct in self.streams:
            acct.sublist.on_sub = None
        for sub in list(self._shadows):
            for exporter, shadow in self._shadows.pop(sub):
                exporter.sublist.remove(shadow)
        for si in self.services:
            si.importer.sublist.remove(si.sub)
        for r in self._responses.values():
            r.close()
        self._responses.clear()
        self.started = False

    # ------------------------------------------------------------------ shadows
    def _sub_changed(self, account: Account, sub: Subscription, delta: int) -> None:
        if delta < 0:
            for exporter, shadow in self._shadows.pop(sub, ()):
                exporter.sublist.remove(shadow)
            return
        if isinstance(sub.callback, _Shadow):
            return  # a shadow is never shadowed again (an import of an import)
        made: list[tuple[Account, Subscription]] = []
        for link in self.streams.get(account, ()):
            subject = link.shadow_subject(sub.subject)
            if subject is None:
                continue
            shadow = Subscription(subject, sub.queue, sub.sid, callback=_Shadow(self, link, sub))
            link.exporter.sublist.insert(shadow)
            made.append((link.exporter, shadow))
        if made:
            self._shadows[sub] = made

    # ------------------------------------------------------------------ services
    def responses(self, exporter: Account) -> _Responses:
        r = self._responses.get(exporter)
        if r is None:
            r = self._responses[exporter] = _Responses(self, exporter)
        return r

    def pending_responses(self, exporter: Account) -> int:
        r = self._responses.get(exporter)
        return len(r.pending) if r is not None else 0

    def request_info(self, link: ServiceLink, hdr: bytes | None) -> bytes:
        """The request's ``Nats-Request-Info``: the requesting account, and on a request
        already passing through another import, the account it passes through now."""
        info: dict[str, object] | None = None
        if len(self.chain) > 0 and hdr:
            raw = slice_header(hdr, REQUEST_INFO.encode())
            if raw:
                try:
                    got = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    got = None
                if isinstance(got, dict):
                    info = got
                    info["svc"] = link.importer.name
        if info is None:
            info = {"acc": link.importer.name}
        return replace_header(hdr or b"NATS/1.0\r\n\r\n", REQUEST_INFO, orjson.dumps(info))

    def shadow_count(self) -> int:
        return sum(len(v) for v in self._shadows.values())
