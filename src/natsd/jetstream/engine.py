"""The JetStream engine: per-account stream namespaces, the API subscription, group commit.

Like nats-server's jetstream_api.go, the engine is a set of internal subscriptions on each
account's Sublist (``$JS.API.>`` and every stream's subjects); replies go out by publishing
to the reply subject. It reaches stores only through the StreamCatalog interface it is
given, and clients only through the router.

Ownership: everything runs on the server's event loop, except ``StreamStore.sync()`` which
the Committer runs on its worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from natsd.core.clock import format_duration, rfc3339
from natsd.core.headers import HeaderError, parse_headers
from natsd.core.ids import Nuid
from natsd.core.scheduler import SYSTEM_CLOCK, Cancellable, Clock, Scheduler
from natsd.jetstream.api.domain import domain_subscriptions
from natsd.jetstream.config.account_limits import AccountLimits
from natsd.jetstream.config.stream_config import parse_stream_config, unsupported_feature
from natsd.jetstream.config.stream_types import StorageType
from natsd.jetstream.stream.commit import Committer
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ErrorDef
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.catalog import StreamCatalog
from natsd.storage.store import StoredMsg, StoreError, file_msg_size, mem_msg_size

__all__ = ["JetStream", "JsAccount"]

# Policy members compared per message, bound once: on Python 3.11 `StorageType.MEMORY`
# is a call to EnumType.__getattr__ (~70 ns); a module global is one dict lookup.
_MEMORY: Final = StorageType.MEMORY

log = logging.getLogger("natsd")

# How often max_age / per-message TTL expiry runs (seconds).
EXPIRE_INTERVAL = 0.25


@dataclass
class ApiStats:
    total: int = 0
    errors: int = 0


@dataclass(eq=False)
class JsAccount:
    engine: JetStream
    account: Account
    limits: AccountLimits = field(default_factory=AccountLimits)
    streams: dict[str, Stream] = field(default_factory=dict)
    api: ApiStats = field(default_factory=ApiStats)
    # The internal subscriptions that take this account's API requests ($JS.API.> and the
    # domain-prefixed forms).
    api_subs: list[Subscription] = field(default_factory=list)


class JetStream:
    def __init__(
        self,
        catalog: StreamCatalog,
        *,
        domain: str = "",
        max_memory: int = -1,
        max_store: int = -1,
        sync_interval: float | None = None,
        sync_always: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: Scheduler | None = None,
    ) -> None:
        # Every stream and consumer of this engine reads time from ``clock`` and sets its
        # timers on ``scheduler`` (the running loop unless a test passes a virtual one).
        self.clock = clock
        self.scheduler: Scheduler = (
            scheduler if scheduler is not None else asyncio.get_running_loop()
        )
        self.catalog = catalog
        self.domain = domain
        self.max_memory = max_memory
        self.max_store = max_store
        self.accounts: dict[str, JsAccount] = {}
        self.committer = Committer(self.scheduler, sync_interval, sync_always)
        self._expiry_timer: Cancellable | None = None
        self._nuid = Nuid()

    def start(self) -> None:
        """Start background work: age and TTL expiry every ``EXPIRE_INTERVAL`` seconds."""
        self._expiry_timer = self.scheduler.call_later(EXPIRE_INTERVAL, self._expire_tick)

    def _expire_tick(self) -> None:
        # max_age and Nats-TTL are applied by the engine; stores only know "as of now".
        # Re-armed after the pass, as the sleep loop it replaces did: a slow pass delays
        # the next one instead of piling passes up.
        self.expire_all(self.clock.time_ns())
        self._expiry_timer = self.scheduler.call_later(EXPIRE_INTERVAL, self._expire_tick)

    def expire_all(self, now: int) -> None:
        """Apply max_age and per-message TTLs of every stream as of ``now`` (wall ns)."""
        for ja in list(self.accounts.values()):
            for s in list(ja.streams.values()):
                if s.cfg.max_age > 0 or s.cfg.allow_msg_ttl:
                    try:
                        if s.cfg.subject_delete_marker_ttl > 0:
                            emptied: list[StoredMsg] = []
                            s.store.expire(now, emptied)
                            place_delete_markers(s, emptied)
                        else:
                            s.store.expire(now)
                    except Exception as e:
                        log.error("stream %s: expiry failed: %s", s.name, e)

    # ------------------------------------------------------------------ accounts
    def enable_account(self, account: Account, limits: dict[str, Any] | None = None) -> JsAccount:
        ja = self.accounts.get(account.name)
        if ja is not None:
            return ja
        # ValueError for a limit nats-server does not know (embedders pass these directly).
        ja = JsAccount(self, account, AccountLimits.from_config(limits or {}))
        self.accounts[account.name] = ja
        from natsd.jetstream.api.dispatch import make_api_callback

        on_api = make_api_callback(ja)
        ja.api_subs.append(Subscription(b"$JS.API.>", None, b"js-api", callback=on_api))
        if self.domain:
            # $JS.<domain>.API.> reaches this API, as nats-server's account mappings do.
            ja.api_subs.extend(domain_subscriptions(self.domain, account.sublist, on_api))
        for sub in ja.api_subs:
            account.sublist.insert(sub)
        return ja

    def stop_answering(self) -> None:
        """Leave API requests unanswered (lame duck, after shutdown): as in nats-server,
        clients that stay connected get silence, not answers from closed stores. The
        subscriptions stay so requests do not turn into no-responders either."""
        for ja in self.accounts.values():
            for sub in ja.api_subs:
                sub.callback = _unanswered

    def restore(self, accounts: dict[str, Account]) -> None:
        """Re-open the streams persisted by the catalog."""
        for rec in self.catalog.load():
            acct = accounts.get(rec.account)
            ja = self.accounts.get(rec.account)
            if acct is None or ja is None:
                log.warning(
                    "stream %s of account %s found on disk but the account has no JetStream;"
                    " left untouched",
                    rec.name,
                    rec.account,
                )
                rec.store.stop()
                continue
            try:
                meta = orjson.loads(rec.meta)
                cfg = parse_stream_config(meta["config"], name_in_subject=None)
                created = int(meta.get("created", self.clock.time_ns()))
            except Exception as e:
                log.error(
                    "stream %s/%s: unreadable metadata (%s); left untouched",
                    rec.account,
                    rec.name,
                    e,
                )
                rec.store.stop()
                continue
            missing = unsupported_feature(cfg)
            if missing is not None:
                # Stored by an older natsd that accepted it: load the data, say it loudly.
                log.warning(
                    "stream %s/%s: %s: the setting is kept but not applied",
                    rec.account,
                    cfg.name,
                    missing,
                )
            rec.store.update_config(cfg.to_store_config())
            stream = Stream(ja, cfg, rec.store, created)
            # Before the stream takes publishes: a retry of a message stored before the
            # restart must still be answered as a duplicate.
            try:
                stream.rebuild_dedupe(self.clock.time_ns())
            except StoreError as e:
                log.error(
                    "stream %s/%s: duplicate window not rebuilt (%s); a retried publish"
                    " may be stored twice",
                    rec.account,
                    rec.name,
                    e,
                )
            ja.streams[cfg.name] = stream
            stream.subscribe()
            report = getattr(rec.store, "recovery_report", None)
            if report:
                for line in report:
                    log.warning("stream %s/%s: %s", rec.account, rec.name, line)
            st = rec.store.state()
            log.info(
                "  Restored stream %s/%s: %d messages, %d bytes",
                rec.account,
                cfg.name,
                st.msgs,
                st.bytes,
            )
            if rec.consumers:
                from natsd.jetstream.api.consumers import restore_consumers

                restore_consumers(ja, stream, rec.consumers)

    # ------------------------------------------------------------------ messaging
    def send(self, ja: JsAccount, subject: bytes, payload: bytes, hdr: bytes | None = None) -> None:
        publish(ja.account.sublist, subject, None, hdr, payload)

    # ------------------------------------------------------------------ advisories
    def advise(self, ja: JsAccount, subject: str, typ: str, body: dict[str, Any]) -> None:
        """Publish a ``$JS.EVENT.ADVISORY.*`` event, built only when someone listens."""
        subj = subject.encode()
        if not ja.account.sublist.has_interest(subj):
            return
        doc: dict[str, Any] = {
            "type": typ,
            "id": self._nuid.next(),
            "timestamp": rfc3339(self.clock.time_ns()),
        }
        doc.update(body)
        if self.domain:
            doc["domain"] = self.domain
        self.send(ja, subj, orjson.dumps(doc))

    def stream_action(self, ja: JsAccount, stream: str, action: str) -> None:
        self.advise(
            ja,
            f"$JS.EVENT.ADVISORY.STREAM.{action.upper()}D.{stream}",
            "io.nats.jetstream.advisory.v1.stream_action",
            {"stream": stream, "action": action},
        )

    def api_audit(self, ja: JsAccount, subject: bytes, request: bytes, response: bytes) -> None:
        self.advise(
            ja,
            "$JS.EVENT.ADVISORY.API",
            "io.nats.jetstream.advisory.v1.api_audit",
            {
                "server": "",
                "subject": subject.decode(errors="replace"),
                "request": request.decode(errors="replace"),
                "response": response.decode(errors="replace"),
            },
        )

    # ------------------------------------------------------------------ usage
    def usage(self, ja: JsAccount) -> tuple[int, int]:
        mem = store = 0
        for s in ja.streams.values():
            b = s.store.state().bytes
            if s.cfg.storage == _MEMORY:
                mem += b
            else:
                store += b
        return mem, store

    def limits_set(self, ja: JsAccount) -> bool:
        """Whether publishes to ``ja``'s streams must check storage limits at all."""
        return (
            self.max_memory >= 0
            or self.max_store >= 0
            or ja.limits.max_memory >= 0
            or ja.limits.max_storage >= 0
        )

    def storage_exceeded(
        self, ja: JsAccount, memory: bool, subject: str, hdr: bytes | None, data: bytes
    ) -> ErrorDef | None:
        """nats-server's checks before storing a message: the error when the
        server's max_memory_store / max_file_store is already passed (``js.limitsExceeded``)
        or the account's limit would be with this message (``jsa.wouldExceedLimits``).
        Usage is summed over the streams, so this is only called when ``limits_set``."""
        server_max = self.max_memory if memory else self.max_store
        if server_max >= 0:
            used = 0
            for other in self.accounts.values():
                used += self.usage(other)[0 if memory else 1]
            if used > server_max:
                return E.JSInsufficientResourcesErr
        acct_max = ja.limits.max_memory if memory else ja.limits.max_storage
        if acct_max >= 0:
            size = mem_msg_size(subject, hdr, data) if memory else file_msg_size(subject, hdr, data)
            if self.usage(ja)[0 if memory else 1] + size > acct_max:
                return E.JSAccountResourcesExceededErr
        return None

    def server_reserved(self, memory: bool) -> int:
        """nats-server's ``js.memReserved`` / ``js.storeReserved``: the max_bytes every
        account's streams of that storage set aside."""
        i = 0 if memory else 1
        return sum(self.reserved(ja)[i] for ja in self.accounts.values())

    def reserved(self, ja: JsAccount) -> tuple[int, int]:
        """nats-server's reserved memory / storage: the max_bytes of the streams that set
        one, by storage type."""
        mem = store = 0
        for s in ja.streams.values():
            if s.cfg.max_bytes > 0:
                if s.cfg.storage == _MEMORY:
                    mem += s.cfg.max_bytes
                else:
                    store += s.cfg.max_bytes
        return mem, store

    async def shutdown(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        await self.committer.drain()
        from natsd.jetstream.consumer.attach import stream_stopped

        for ja in self.accounts.values():
            for s in ja.streams.values():
                stream_stopped(s)
                s.unsubscribe()
                try:
                    s.store.stop()
                except Exception as e:
                    log.error("stream %s: stop failed: %s", s.name, e)
        self.committer.close()


def place_delete_markers(stream: Stream, emptied: list[StoredMsg]) -> None:
    """Subject delete markers (nats-server 2.15): when max_age or a message's TTL removed
    the last message on a subject, an empty message takes its place on that subject with
    ``Nats-Marker-Reason: MaxAge``, ``Nats-TTL: <subject_delete_marker_ttl>`` and
    ``Nats-Rollup: sub``. It is stored through the stream's publish path (no ack, not seen
    by core subscribers) and expires by its own TTL without leaving another marker.
    Removals by the API, purges and max_msgs/max_bytes limits leave no marker."""
    ttl = stream.cfg.subject_delete_marker_ttl // 1_000_000_000
    if not emptied or ttl <= 0:
        return
    hdr = (
        b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: "
        + format_duration(ttl).encode()
        + b"\r\nNats-Rollup: sub\r\n\r\n"
    )
    for m in emptied:
        if m.hdr and _is_marker(m.hdr):
            continue  # a marker that expires is not replaced by another
        if stream.store.load_last_msg(m.subject) is not None:
            continue
        stream.process(m.subject.encode(), None, hdr, b"")


def _is_marker(hdr: bytes) -> bool:
    try:
        _status, _desc, h = parse_headers(hdr)
    except HeaderError:
        return False
    return bool(h.get("Nats-Marker-Reason", [""])[0])


def _unanswered(
    sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
) -> None:
    return None
