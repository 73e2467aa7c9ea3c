"""The JetStream engine: per-account stream namespaces, group commit, and the verbs.

Like nats-server's jetstream_api.go, JetStream is a set of internal subscriptions on each
account's Sublist (the API's and every stream's subjects); replies go out by publishing to
the reply subject. The engine reaches stores only through the StreamCatalog it is given,
and clients only through the router. Which API answers ``$JS.API.>`` is the composition
root's choice: the server passes ``api`` (``natsd.jetstream.api.subscribe_api``), the engine
inserts the subscriptions it returns for each account. So the engine never imports the API.

The verbs are nats-server's: ``add_stream`` (``Account.addStream``) and ``add_consumer``
(``stream.addConsumer``), called both by the API handlers (which decode, call the verb and
encode) and by recovery (``JetStream.restore``) with what it read from disk; and
``update_stream`` / ``delete_stream``. Each stream gets a ``StreamHost``, the engine's
``StreamContext``: what the stream and its consumers need from up here.

Ownership: everything runs on the server's event loop, except ``StreamStore.sync()`` which
the Committer runs on its worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.core.scheduler import SYSTEM_CLOCK, Cancellable, Clock, Scheduler
from natsd.jetstream.config.account_limits import (
    AccountLimits,
    check_stream_create,
    check_stream_update,
)
from natsd.jetstream.config.consumer_config import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    check_config,
    check_update,
    config_from_stored,
    set_defaults,
)
from natsd.jetstream.config.stream_config import (
    check_update as check_stream_config_update,
)
from natsd.jetstream.config.stream_config import parse_stream_config
from natsd.jetstream.config.stream_types import (
    API_LEVEL_KEY,
    MAX_NAME_LEN,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from natsd.jetstream.config.subject_mapping import is_valid_name, overlaps
from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.consumer.pull import PullDelivery
from natsd.jetstream.stream.batch import BatchLimits, cut_partial_batch
from natsd.jetstream.stream.commit import Committer
from natsd.jetstream.stream.fastbatch import FastLimits
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ErrorDef
from natsd.protocol.parser import DEFAULT_MAX_PAYLOAD
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import InternalCallback, Subscription
from natsd.storage.catalog import ConsumerRecord, StreamCatalog
from natsd.storage.store import StoreError, StreamStore, file_msg_size, mem_msg_size

__all__ = [
    "ApiSubscriber",
    "ConsumerRecovery",
    "JetStream",
    "JsAccount",
    "StreamHost",
    "StreamRecovery",
    "add_consumer",
    "add_stream",
    "check_new_stream",
    "delete_stream",
    "find_consumer",
    "new_stream_store",
    "set_aside_stream",
    "update_stream",
]

# Policy members compared per message, bound once: on Python 3.11 `StorageType.MEMORY`
# is a call to EnumType.__getattr__ (~70 ns); a module global is one dict lookup.
_MEMORY: Final = StorageType.MEMORY

log = logging.getLogger("natsd")

# How often max_age / per-message TTL expiry runs (seconds).
EXPIRE_INTERVAL = 0.25

_ALNUM = string.ascii_letters + string.digits


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
    # domain-prefixed forms), as the API layer made them.
    api_subs: list[Subscription] = field(default_factory=list)
    # origin stream name -> the mirrors with ``mirror_direct`` that answer its direct gets
    # (once caught up), in the origin's stead or beside it (``Stream.mirror_caught_up``)
    mirror_direct: dict[str, list[Stream]] = field(default_factory=dict)


# Given a JetStream account, the subscriptions that serve its API (not yet inserted).
ApiSubscriber = Callable[[JsAccount], list[Subscription]]
# The callback that answers ``$JS.API.DIRECT.GET.<stream>[.>]`` for an account (the API's):
# what a stream's replicas on a cluster subscribe with (``Stream.serve_direct``), or, given
# a mirror, what the mirror answers its origin's with (``Stream.serve_origin_direct``).
DirectAnswerer = Callable[[JsAccount, Stream | None], InternalCallback]


class StreamHost:
    """The ``StreamContext`` of one stream of ``ja`` (``stream/context.py``): the account's
    Sublist and storage limits, the engine's committer, catalog, clock and scheduler."""

    __slots__ = (
        "_engine",
        "_ja",
        "account_name",
        "catalog",
        "clock",
        "committer",
        "domain",
        "scheduler",
        "sublist",
    )

    def direct_answerer(self, mirror: object = None) -> InternalCallback | None:
        assert mirror is None or isinstance(mirror, Stream)
        return self._engine.direct_answerer(self._ja, mirror)

    @property
    def clustered(self) -> bool:
        return self._engine.cluster_info is not None

    @property
    def max_payload(self) -> int:
        return self._engine.max_payload

    @property
    def batch_limits(self) -> BatchLimits:
        return self._engine.batch_limits

    @property
    def fast_limits(self) -> FastLimits:
        return self._engine.fast_limits

    def __init__(self, engine: JetStream, ja: JsAccount) -> None:
        self._engine = engine
        self._ja = ja
        self.clock: Clock = engine.clock
        self.scheduler: Scheduler = engine.scheduler
        self.sublist: Sublist[Subscription] = ja.account.sublist
        self.committer: Committer = engine.committer
        self.catalog: StreamCatalog = engine.catalog
        self.account_name: str = ja.account.name
        self.domain: str = engine.domain

    def send(self, subject: bytes, payload: bytes, hdr: bytes | None = None) -> None:
        publish(self.sublist, subject, None, hdr, payload)

    def serve_mirror_direct(self, origin: str, stream: object, on: bool) -> None:
        assert isinstance(stream, Stream)
        pool = self._ja.mirror_direct
        mirrors = [s for s in pool.get(origin, []) if s is not stream]
        if on:
            mirrors.append(stream)
        if mirrors:
            pool[origin] = mirrors
        else:
            pool.pop(origin, None)

    def advise(
        self, subject: str, typ: str, body: dict[str, Any], system_too: bool = False
    ) -> None:
        self._engine.advise(self._ja, subject, typ, body, system_too)

    def limits_set(self) -> bool:
        return self._engine.limits_set(self._ja)

    def storage_exceeded(
        self, memory: bool, subject: str, hdr: bytes | None, data: bytes
    ) -> ErrorDef | None:
        return self._engine.storage_exceeded(self._ja, memory, subject, hdr, data)


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
        api: ApiSubscriber | None = None,
        direct: DirectAnswerer | None = None,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        system: Account | None = None,
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
        # the server's (a reload changes it here too)
        self.max_payload = max_payload
        self.batch_limits = BatchLimits()
        self.fast_limits = FastLimits()
        self.accounts: dict[str, JsAccount] = {}
        # the system account: some advisories go there too, naming their account
        self.system = system
        self.committer = Committer(self.scheduler, sync_interval, sync_always)
        # None: no $JS.API subscriptions (an engine driven directly, without its API).
        self._api = api
        self._direct = direct
        self._expiry_timer: Cancellable | None = None
        self._nuid = Nuid()
        # On a cluster: the ``cluster`` block of the infos of a stream (by name) and its
        # consumers (``join_cluster``); None when standalone.
        self.cluster_info: Callable[[JsAccount, str], dict[str, Any]] | None = None
        # On a cluster: STREAM.INFO's ``alternates`` of a stream (itself and its mirrors),
        # None when there are none; None when standalone, as nats-server reports none.
        self.alternates: Callable[[JsAccount, str], list[dict[str, str]] | None] | None = None

    def direct_answerer(
        self, ja: JsAccount, mirror: Stream | None = None
    ) -> InternalCallback | None:
        """What answers a DIRECT.GET of ``ja``'s streams, or with ``mirror`` what that
        mirror answers for its origin (None: an engine without its API)."""
        return self._direct(ja, mirror) if self._direct is not None else None

    def join_cluster(
        self,
        cluster_info: Callable[[JsAccount, str], dict[str, Any]],
        alternates: Callable[[JsAccount, str], list[dict[str, str]] | None] | None = None,
    ) -> None:
        """This engine runs on a cluster (``jetstream/cluster/driver.py`` calls it once, before
        anything is restored): its replicated streams wait for their groups, and infos
        carry the ``cluster`` block ``cluster_info`` gives (and STREAM.INFO the
        ``alternates`` that ``alternates`` gives)."""
        self.cluster_info = cluster_info
        self.alternates = alternates

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
                try:
                    s.expire(now)
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
        if self._api is not None:
            ja.api_subs = self._api(ja)
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
        """Re-open the streams persisted by the catalog, and their consumers, through the
        same verbs the API uses."""
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
                # (a stored mirror or source was accepted when it was made)
                cfg = parse_stream_config(
                    meta["config"], name_in_subject=None, allow_mirrors=True,
                    allow_sources=True,
                )  # fmt: skip
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
            if cfg.allow_atomic and cfg.num_replicas <= 1:
                # (a replicated stream's batches are whole in its Raft log)
                cut = cut_partial_batch(rec.store)
                if cut:
                    log.warning(
                        "stream %s/%s: an atomic batch cut short by a crash was dropped "
                        "(%d messages, never acknowledged)", rec.account, rec.name, cut,
                    )  # fmt: skip
            stream = add_stream(ja, cfg, StreamRecovery(rec.store, created))
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
            for crec in rec.consumers:
                self._restore_consumer(ja, stream, crec)

    def _restore_consumer(self, ja: JsAccount, stream: Stream, rec: ConsumerRecord) -> None:
        try:
            meta = orjson.loads(rec.meta)
            cfg = config_from_stored(meta["config"])
            name = str(meta.get("name") or rec.name)
            created = int(meta.get("created", self.clock.time_ns()))
            state = orjson.loads(rec.state) if rec.state else None
        except Exception as e:
            log.error(
                "consumer %s > %s: unreadable metadata (%s); left untouched",
                stream.name,
                rec.name,
                e,
            )
            return
        add_consumer(ja, stream, cfg, recovered=ConsumerRecovery(name, created, state))

    # ------------------------------------------------------------------ messaging
    def send(self, ja: JsAccount, subject: bytes, payload: bytes, hdr: bytes | None = None) -> None:
        publish(ja.account.sublist, subject, None, hdr, payload)

    # ------------------------------------------------------------------ advisories
    def advise(
        self,
        ja: JsAccount,
        subject: str,
        typ: str,
        body: dict[str, Any],
        system_too: bool = False,
    ) -> None:
        """Publish a ``$JS.EVENT.ADVISORY.*`` event, built only when someone listens; with
        ``system_too`` also in the system account, with an ``account`` field (nats-server's
        ``publishAdvisory(nil, ...)``), and there only when ``ja`` is the system account."""
        subj = subject.encode()
        system = self.system if system_too else None
        if (system is None or system is not ja.account) and ja.account.sublist.has_interest(subj):
            self.send(ja, subj, orjson.dumps(self._advisory(typ, body)))
        if system is not None and system.sublist.has_interest(subj):
            doc = self._advisory(typ, {"account": ja.account.name, **body})
            publish(system.sublist, subj, None, None, orjson.dumps(doc))

    def _advisory(self, typ: str, body: dict[str, Any]) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": typ,
            "id": self._nuid.next(),
            "timestamp": rfc3339(self.clock.time_ns()),
        }
        doc.update(body)
        if self.domain:
            doc["domain"] = self.domain
        return doc

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

    def signal_pull_consumers(self) -> bool:
        """The first step of a shutdown (nats-server's ``signalPullConsumers``): the
        waiting pull requests of the consumers that end with this server hear ``409 Server
        Shutdown``; those are the consumers of R1 streams and the ephemeral ones of
        replicated streams (which live on the leader alone). A replicated durable consumer's
        requests are left to its next leader. True when a status was sent."""
        sent = False
        for ja in self.accounts.values():
            for s in ja.streams.values():
                for c in s.consumers.values():
                    if (
                        isinstance(c, Consumer)
                        and isinstance(c.delivery, PullDelivery)
                        and (s.replica is None or not c.cfg.durable_name)
                    ):
                        sent = c.delivery.signal_shutdown() or sent
        return sent

    async def shutdown(self) -> None:
        """Pending commits synced, every stream stopped, the fsync worker ended. Each step
        runs even when one before it fails (a disk gone, a power loss in the tests): the
        first failure is raised at the end, and no worker thread or store is left behind
        holding the engine."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        failed: BaseException | None = None
        try:
            await self.committer.drain()
        except BaseException as e:  # re-raised below, once everything is stopped
            failed = e
        for ja in self.accounts.values():
            for s in ja.streams.values():
                try:
                    s.stop()
                except BaseException as e:  # re-raised below, once everything is stopped
                    failed = failed or e
        self.committer.close()
        if failed is not None:
            raise failed


# ---------------------------------------------------------------------- stream verbs
@dataclass(slots=True)
class StreamRecovery:
    """What recovery found on disk for one stream: its opened store and creation time."""

    store: StreamStore
    created_ns: int


def add_stream(
    ja: JsAccount, cfg: StreamConfig, recovered: StreamRecovery | None = None, created: int = 0
) -> Stream:
    """nats-server ``addStream``: the stream ``cfg`` of ``ja``, subscribed to its subjects.

    From the API (``recovered`` is None) the account and server limits are checked, an
    existing stream with the same config is returned as it is (another config is an error),
    subjects may not overlap another stream's, and the store is created through the
    catalog. Recovery passes the store it opened and the creation time it read: the config
    passed these checks when it was created; the duplicate window is rebuilt from the
    stored messages before the stream takes publishes. ``created``: the creation time a
    cluster's meta group gave the stream (every replica has the same), else now."""
    engine = ja.engine
    if recovered is None:
        check_new_stream(ja, cfg)
        existing = ja.streams.get(cfg.name)
        if existing is not None:
            if existing.cfg.to_json() == cfg.to_json():
                return existing
            raise E.JSStreamNameExistErr()
        store, created = new_stream_store(ja, cfg, created)
    else:
        store, created = recovered.store, recovered.created_ns
        store.update_config(cfg.to_store_config())
    stream = Stream(StreamHost(engine, ja), cfg, store, created)
    if recovered is not None:
        # Before the stream takes publishes: a retry of a message stored before the
        # restart must still be answered as a duplicate.
        try:
            stream.rebuild_dedupe(engine.clock.time_ns())
        except StoreError as e:
            log.error(
                "stream %s/%s: duplicate window not rebuilt (%s); a retried publish"
                " may be stored twice",
                ja.account.name,
                cfg.name,
                e,
            )
    ja.streams[cfg.name] = stream
    if cfg.num_replicas <= 1 or engine.cluster_info is None:
        # a replicated stream's group leader subscribes (jetstream/cluster/streams.py)
        stream.subscribe()
    if recovered is None:
        engine.stream_action(ja, cfg.name, "create")
    return stream


def new_stream_store(
    ja: JsAccount, cfg: StreamConfig, created: int = 0
) -> tuple[StreamStore, int]:
    """The empty store of a new stream ``cfg`` (its subjects checked against the account's
    other streams, its config persisted with it), and its creation time: what
    ``add_stream`` opens a new stream on, and what a restore fills before the stream
    starts (``StreamRecovery``). The caller has checked the limits and the name."""
    _check_overlap(ja, _own_subjects(cfg), None)
    engine = ja.engine
    created = created or engine.clock.time_ns()
    meta = orjson.dumps({"config": cfg.to_json(), "created": created})
    try:
        store = engine.catalog.create(
            ja.account.name, cfg.name, cfg.storage, cfg.to_store_config(), meta
        )
    except (OSError, StoreError) as e:
        raise E.JSStreamCreateErrF(err=str(e)) from None
    except ValueError:
        # A name the file system cannot hold (NUL): refused as nats-server refuses it.
        raise E.JSStreamCreateErrF(err="error creating store for stream") from None
    return store, created


def check_new_stream(ja: JsAccount, cfg: StreamConfig) -> None:
    """The account and server limits a new stream ``cfg`` must fit in (``add_stream``'s
    first check; a restore makes it before it takes the archive)."""
    check_stream_create(ja.limits, cfg, *_limit_context(ja, cfg.storage))


def set_aside_stream(ja: JsAccount, stream: Stream) -> str:
    """Take a stream out of service deleting nothing: its consumers save their state, its
    store closes, and the catalog moves its files where loading no longer finds them.
    Returns where they went ("" for a memory stream, which keeps nothing)."""
    stream.stop()
    del ja.streams[stream.name]
    return ja.engine.catalog.set_aside(ja.account.name, stream.name, stream.cfg.storage)


def update_stream(ja: JsAccount, cfg: StreamConfig, clustered: bool = False) -> Stream:
    """nats-server ``stream.update``: apply an allowed config change to an existing stream
    (limits, subject overlap and the update rules checked first), persisted before it
    takes effect. ``clustered``: a replica applying the meta group's update (more than
    one replica is allowed there)."""
    stream = ja.streams.get(cfg.name)
    if stream is None:
        raise E.JSStreamNotFoundErr()
    cfg = check_stream_config_update(stream.cfg, cfg, clustered=clustered)
    check_stream_update(ja.limits, stream.cfg, cfg, *_limit_context(ja, cfg.storage))
    _check_overlap(ja, _own_subjects(cfg), cfg.name)
    engine = ja.engine
    meta = orjson.dumps({"config": cfg.to_json(), "created": stream.created_ns})
    engine.catalog.save_meta(ja.account.name, cfg.name, cfg.storage, meta)
    promoted = stream.cfg.mirror is not None and cfg.mirror is None
    stream.apply_config(cfg)
    stream.store.update_config(cfg.to_store_config())
    rep = stream.replica
    if stream.subs or (
        (promoted and (rep is None or rep.leading)) or (rep is None and cfg.mirror is None)
    ):
        # (a replicated stream's follower takes no publishes; a sourcing stream may have
        # had no subjects, or its first sources now)
        stream.resubscribe()
    engine.stream_action(ja, cfg.name, "update")
    return stream


def delete_stream(ja: JsAccount, stream: Stream) -> None:
    """Delete a stream, its consumers and its files."""
    stream.delete()
    del ja.streams[stream.name]
    ja.engine.catalog.remove(ja.account.name, stream.name, stream.cfg.storage, stream.store)
    ja.engine.stream_action(ja, stream.name, "delete")


def delete_msg(stream: Stream, seq: int, no_erase: bool) -> None:
    """Remove message ``seq`` of ``stream``, overwriting it unless ``no_erase``; a miss
    raises the ApiError nats-server answers, which depends on the store: the file store
    reports sequences outside the stream as a failed delete ("no message found" below it,
    "stream store EOF" past it); everything else is "sequence N not found"."""
    ok = seq > 0 and (stream.store.remove_msg(seq) if no_erase else stream.store.erase_msg(seq))
    if ok:
        return
    if stream.cfg.storage != StorageType.MEMORY:
        st = stream.store.state()
        if seq == 0 or seq < st.first_seq:
            raise E.JSStreamMsgDeleteFailedF(err="no message found")
        if seq > st.last_seq:
            raise E.JSStreamMsgDeleteFailedF(err="stream store EOF")
    raise E.JSSequenceNotFoundErrF(seq=seq)


def _own_subjects(cfg: StreamConfig) -> list[str]:
    """The subjects a stream takes publishes on (a mirror or a sourcing stream configured
    without subjects takes none)."""
    if cfg.subjects or cfg.mirror is not None or cfg.sources:
        return cfg.subjects
    return [cfg.name]


def _check_overlap(ja: JsAccount, subjects: list[str], skip: str | None) -> None:
    for other in ja.streams.values():
        theirs = other.cfg.subjects or (
            [] if other.cfg.mirror is not None or other.cfg.sources else [other.name]
        )
        if other.name != skip and overlaps(subjects, theirs):
            raise E.JSStreamSubjectOverlapErr()


def _limit_context(ja: JsAccount, storage: str) -> tuple[list[StreamConfig], int, int]:
    """The account's stream configs, and the server's limit and reservations for
    ``storage``, for the checks in ``account_limits``."""
    engine = ja.engine
    memory = storage == StorageType.MEMORY
    server_max = engine.max_memory if memory else engine.max_store
    configs = [s.cfg for s in ja.streams.values()]
    return configs, server_max, engine.server_reserved(memory) if server_max >= 0 else 0


# ---------------------------------------------------------------------- consumer verb
@dataclass(slots=True)
class ConsumerRecovery:
    """What recovery read for one consumer: its name, creation time and saved state."""

    name: str
    created_ns: int
    state: dict[str, Any] | None


def find_consumer(stream: Stream, name: str) -> Consumer | None:
    """The consumer ``name`` of ``stream`` (a stream holds them as its listeners)."""
    c = stream.consumers.get(name)
    return c if isinstance(c, Consumer) else None


def add_consumer(
    ja: JsAccount,
    stream: Stream,
    cfg: ConsumerConfig,
    *,
    action: str = "",
    pedantic: bool = False,
    recovered: ConsumerRecovery | None = None,
    initial: dict[str, Any] | None = None,
) -> Consumer:
    """nats-server ``addConsumerWithAssignment`` for a standalone server: the consumer
    ``cfg`` of ``stream``, started and attached to it.

    From the API (``recovered`` is None) the config gets its defaults and checks, an
    existing consumer of that name is updated (``action`` "create" refuses a different
    config, "update" requires one to exist), the account and workqueue rules apply, a name
    is chosen for an unnamed consumer, and the config is persisted before the consumer
    starts. Recovery passes the name, creation time and state it read: the consumer
    resumes from that state (from scratch when the state does not apply), without checks
    or advisories, as nats-server's ``isRecovering``. ``initial``: a new consumer (checked
    as from the API) that starts at this saved state instead of its start position: a
    restored backup's consumer (``addConsumerForRestore``)."""
    if recovered is None:
        existing = _check_consumer(ja, stream, cfg, action, pedantic)
        if existing is not None:
            return existing
        name = _consumer_name(stream, cfg)
        # (``initial``: a restored consumer's state, taken as a recovered one's)
        created, state = stream.clock.time_ns(), initial
        # (a direct consumer lives in memory only, as nats-server's: the mirror or source
        # that made it asks for another after a restart)
        persist = (
            stream.cfg.storage != StorageType.MEMORY and not cfg.mem_storage and not cfg.direct
        )
    else:
        name, created, state = recovered.name, recovered.created_ns, recovered.state
        persist = True
    c = Consumer(stream, name, cfg, created, persist)
    if recovered is None:
        if persist:
            try:
                c.save_meta()
            except (OSError, ValueError) as e:
                raise E.JSConsumerStoreFailedErrF(err=str(e)) from None
        c.start(state)
        if state is not None:
            c.saver.mark_dirty()
    elif stream.cfg.num_replicas > 1 and ja.engine.cluster_info is not None:
        # a replicated stream's consumer waits for its group (cluster/consumers.py, adopt):
        # until then nothing may deliver from, or acknowledge into, this copy
        c.start_passive(state)
    else:
        try:
            c.start(state)
        except Exception as e:
            log.error("consumer %s > %s: cannot restore state (%s)", stream.name, name, e)
            c = Consumer(stream, name, cfg, created, True)
            c.start(None)
    stream.attach(c)
    if recovered is None:
        c.adv.consumer_action("create")
    else:
        log.info("  Restored consumer %s > %s", stream.name, name)
    return c


def _sans_level(cfg: ConsumerConfig) -> ConsumerConfig:
    out = cfg.copy()
    out.metadata.pop(API_LEVEL_KEY, None)
    return out


def _check_consumer(
    ja: JsAccount, stream: Stream, cfg: ConsumerConfig, action: str, pedantic: bool
) -> Consumer | None:
    """Defaults and checks of a consumer added through the API. An existing consumer of
    the name is updated and returned; None means a new one may be created."""
    set_defaults(cfg, stream.cfg, pedantic, ja.limits.max_ack_pending)
    check_config(cfg, stream.cfg, ja.limits.max_ack_pending)
    workqueue = stream.cfg.retention == RetentionPolicy.WORKQUEUE
    name = cfg.durable_name or cfg.name
    eo = find_consumer(stream, name) if name else None
    if eo is not None:
        if action == "create" and _sans_level(cfg) != _sans_level(eo.cfg):
            raise E.JSConsumerAlreadyExists()
        if workqueue and not stream.partition_unique(name, cfg.filters):
            raise E.JSConsumerWQConsumerNotUniqueErr()
        check_update(eo.cfg, cfg, bool(eo.cfg.deliver_subject) and eo.delivery.has_interest())
        if cfg.pause_until is None and eo.cfg.pause_until is not None:
            cfg.pause_until = eo.cfg.pause_until
        if not cfg.durable_name and cfg.inactive_threshold <= 0:
            cfg.inactive_threshold = eo.cfg.inactive_threshold
        eo.update_config(cfg)
        eo.save_meta()
        return eo
    if action == "update":
        raise E.JSConsumerDoesNotExist()
    maxc = stream.cfg.max_consumers
    acct = ja.limits.max_consumers
    if maxc <= 0 or (0 < acct < maxc):
        maxc = acct
    limitable = sum(
        1
        for o in stream.consumers.values()
        if not (isinstance(o, Consumer) and (o.cfg.direct or o.cfg.sourcing))
    )
    if maxc > 0 and limitable >= maxc:
        raise E.JSMaximumConsumersLimitErr()
    if workqueue and not cfg.direct and not cfg.sourcing:
        if cfg.ack_policy not in (AckPolicy.EXPLICIT, AckPolicy.FLOW_CONTROL):
            raise E.JSConsumerWQRequiresExplicitAckErr()
        if cfg.deliver_policy != DeliverPolicy.ALL:
            raise E.JSConsumerWQConsumerNotDeliverAllErr()
        if limitable > 0:
            if not cfg.filters:
                raise E.JSConsumerWQMultipleUnfilteredErr()
            if not stream.partition_unique(name, cfg.filters):
                raise E.JSConsumerWQConsumerNotUniqueErr()
    return None


def _consumer_name(stream: Stream, cfg: ConsumerConfig) -> str:
    """The new consumer's name: its durable name, its given name, or 8 random
    characters no other consumer of the stream has."""
    name = cfg.durable_name or cfg.name
    if cfg.durable_name:
        if len(cfg.durable_name.encode()) > MAX_NAME_LEN:
            raise E.JSConsumerNameTooLongErrF(max=MAX_NAME_LEN)
        name = cfg.durable_name
    elif not name:
        name = "".join(random.choices(_ALNUM, k=8))
        while name in stream.consumers:
            name = "".join(random.choices(_ALNUM, k=8))
    if not is_valid_name(name):
        raise E.JSConsumerBadDurableNameErr()
    return name


def _unanswered(
    sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
) -> None:
    return None
