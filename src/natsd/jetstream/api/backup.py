"""``$JS.API.STREAM.SNAPSHOT`` and ``STREAM.RESTORE``: a stream backup's transfer, as
nats-server's ``jsStreamSnapshotRequest`` / ``jsStreamRestoreRequest`` do it, so the Go
``nats`` command line, jsm.go and natsd's own ``nats`` back up and restore through it.

Snapshot: the answer carries the stream's config and the state the backup is of; then the
archive (``jetstream/backup``) goes to the request's ``deliver_subject`` in chunks of
``chunk_size`` (1 KiB to 1 MiB, 128 KiB by default), each with a reply subject
``$JS.SNAPSHOT.ACK.<stream>.<id>.<size>.<index>`` the receiver acknowledges; at most
``window_size`` bytes (8 MiB by default) are unacknowledged at a time. The last message is
empty with status ``204``; ``408 No Interest`` when the receiver went away, ``408 No Flow
Response`` when nothing was acknowledged for 5 s, ``500 <error>`` when the store failed.

Restore: the answer names ``$JS.SNAPSHOT.RESTORE.<stream>.<id>``, where the client sends
the archive in chunks, each with a reply subject (an empty message acknowledges it), and
then an empty message, whose reply gets the stream create response. The archive is spooled
to a temporary file and checked as it arrives; a fault refuses it at that chunk (the
chunk's reply gets the error), and nothing is created unless all of it checks out
(``jetstream/backup/restore.py``). Nothing arriving for 5 s abandons the restore.

On a cluster a replicated stream's leader makes its backups (its store holds what the
group committed). A restore on a cluster is answered by the meta leader, which checks the
request against the whole cluster's streams (the name unused, 10130 otherwise; the
account's limits; placement, 10005) and takes the archive as above. Once all of it has
arrived and checked out, the stream is placed through the meta group with the archive's
config (``num_replicas`` as it says), on this server first, which builds it from the spool;
a replicated stream's other replicas then join its group and catch up from its store,
consumers included; the answer to the last chunk follows once the stream is in service
(``jetstream/cluster/restore.py``). A restore that fails on the way leaves no stream on any
server. The archive stays on the server that received it: the stream is placed there, so a
placement (tags) that excludes the meta leader is refused with 10005.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from typing import IO, Any, Final

import orjson

from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.core.s2 import FrameWriter
from natsd.core.scheduler import Cancellable
from natsd.jetstream.answer import API_TYPE_PREFIX
from natsd.jetstream.api.meta_requests import MetaRequests
from natsd.jetstream.backup.restore import ArchiveCheck, restore_stream
from natsd.jetstream.backup.snapshot import archive_pieces
from natsd.jetstream.cluster.restore import ClusterRestores
from natsd.jetstream.config.stream_config import StreamConfig, check_restore_config
from natsd.jetstream.config.stream_unmarshal import RESTORE_SCHEMA
from natsd.jetstream.config.subject_mapping import _is_valid_publish_subject
from natsd.jetstream.engine import JsAccount, check_new_stream
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.jetstream.wire.gotyped import (
    BOOL,
    INT,
    STRING,
    StructT,
    decode_request,
    is_empty_request,
)
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.store import StoreError

__all__ = ["ClusteredRestore", "stream_restore", "stream_snapshot"]

log = logging.getLogger("natsd")

DEFAULT_CHUNK: Final = 128 * 1024
DEFAULT_WINDOW: Final = 8 * 1024 * 1024
ACK_TIMEOUT: Final = 5.0  # nats-server's snapshotAckTimeout
RESTORE_IDLE: Final = 5.0  # nats-server's restore activityInterval
INTEREST_WAIT: Final = 2.0
# Chunks sent per turn of the event loop before the sender lets others run.
_PER_TURN: Final = 16

_OK: Final = b"NATS/1.0 204\r\n\r\n"
_NO_INTEREST: Final = b"NATS/1.0 408 No Interest\r\n\r\n"
_NO_FLOW: Final = b"NATS/1.0 408 No Flow Response\r\n\r\n"

_SNAPSHOT = StructT(
    "server.JSApiStreamSnapshotRequest",
    {
        "deliver_subject": ("deliver_subject", STRING),
        "no_consumers": ("no_consumers", BOOL),
        "chunk_size": ("chunk_size", INT),
        "window_size": ("window_size", INT),
        "jsck": ("jsck", BOOL),
    },
    lambda: {"deliver_subject": "", "no_consumers": False, "chunk_size": 0, "window_size": 0},
)

_nuid = Nuid()


# ---------------------------------------------------------------------- snapshot
def stream_snapshot(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    """``jsStreamSnapshotRequest``: its checks in its order, the answer, then the chunks."""
    if is_empty_request(data):
        raise E.JSBadRequestErr()
    stream = ja.streams.get(args[0]) if args else None
    if stream is None:
        raise E.JSStreamNotFoundErr()
    req = decode_request(data, _SNAPSHOT)
    deliver = req["deliver_subject"]
    if not _is_valid_publish_subject(deliver):
        raise E.JSSnapshotDeliverSubjectInvalidErr()
    chunk = int(req["chunk_size"]) or DEFAULT_CHUNK
    window = int(req["window_size"]) or DEFAULT_WINDOW
    chunk = min(max(1024, chunk), 1024 * 1024)
    window = max(min(max(1024, window), 32 * 1024 * 1024), chunk)
    engine = ja.engine
    now = engine.clock.time_ns()
    state, pieces = archive_pieces(stream, not req["no_consumers"], now)
    sender = SnapshotSender(ja, stream, deliver.encode(), chunk, window // chunk, pieces)
    engine.advise(
        ja, f"$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_CREATE.{stream.name}",
        "io.nats.jetstream.advisory.v1.snapshot_create",
        {"stream": stream.name, "state": state},
    )  # fmt: skip
    # (after this answer is sent: the handler's caller publishes it when this returns)
    engine.scheduler.call_soon(sender.start)
    return {"config": stream.cfg.to_json(), "state": state}


class SnapshotSender:
    """Sends one backup's chunks as the receiver acknowledges them (``streamSnapshot``)."""

    def __init__(
        self,
        ja: JsAccount,
        stream: Stream,
        deliver: bytes,
        chunk: int,
        slots: int,
        pieces: Iterator[bytes],
    ) -> None:
        self._ja = ja
        self._stream = stream
        self._sublist = ja.account.sublist
        self._deliver = deliver
        self._chunk = chunk
        self._slots = slots
        self._pieces = pieces
        self._frames = FrameWriter()
        self._out = bytearray()
        self._exhausted = False
        self._index = 1
        self._done = False
        self._had_interest = False
        self._waited = 0.0
        self._scheduled = False
        self._timer: Cancellable | None = None
        self._ack = f"$JS.SNAPSHOT.ACK.{stream.name}.{_nuid.next()}".encode()
        self._ack_sub = Subscription(
            self._ack + b".>", None, b"snapshot-ack", callback=self._on_ack
        )
        self._started_ns = ja.engine.clock.time_ns()

    def start(self) -> None:
        self._sublist.insert(self._ack_sub)
        self._await_interest()

    def _await_interest(self) -> None:
        # (nats-server allows the receiver about 2 s to subscribe, then sends anyway)
        if self._sublist.has_interest(self._deliver) or self._waited >= INTEREST_WAIT:
            self._pump()
            return
        self._waited += 0.1
        self._timer = self._ja.engine.scheduler.call_later(0.1, self._await_interest)

    def _on_ack(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if self._done:
            return
        self._slots += 1
        if not self._scheduled:
            self._scheduled = True
            self._ja.engine.scheduler.call_soon(self._pump)

    def _pump(self) -> None:
        self._scheduled = False
        if self._done:
            return
        if self._sublist.has_interest(self._deliver):
            self._had_interest = True
        elif self._had_interest:
            self._end(_NO_INTEREST, "no interest")
            return
        sent = 0
        while self._slots > 0:
            if sent >= _PER_TURN:
                self._scheduled = True
                self._ja.engine.scheduler.call_soon(self._pump)
                return
            try:
                chunk = self._next_chunk()
            except StoreError as e:
                err = str(e) or type(e).__name__
                self._end(b"NATS/1.0 500 %s\r\n\r\n" % err.encode(), err)
                return
            if chunk is None:
                self._end(_OK, "")
                return
            if len(chunk) < self._chunk:
                # the last, short chunk goes without a reply to acknowledge, as nats-server's
                publish(self._sublist, self._deliver, None, None, chunk)
                self._end(_OK, "")
                return
            reply = b"%s.%d.%d" % (self._ack, len(chunk), self._index)
            publish(self._sublist, self._deliver, reply, None, chunk)
            self._index += 1
            self._slots -= 1
            sent += 1
            self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._ja.engine.scheduler.call_later(ACK_TIMEOUT, self._no_flow)

    def _no_flow(self) -> None:
        self._timer = None
        if not self._done and self._slots <= 0:
            self._end(_NO_FLOW, "no flow response")

    def _next_chunk(self) -> bytes | None:
        out = self._out
        while len(out) < self._chunk and not self._exhausted:
            piece = next(self._pieces, None)
            if piece is None:
                self._exhausted = True
            else:
                out += self._frames.write(piece)
        if not out:
            return None
        chunk = bytes(out[: self._chunk])
        del out[: self._chunk]
        return chunk

    def _end(self, hdr: bytes, error: str) -> None:
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._sublist.remove(self._ack_sub)
        publish(self._sublist, self._deliver, None, hdr, b"")
        engine = self._ja.engine
        body: dict[str, Any] = {
            "stream": self._stream.name,
            "start": rfc3339(self._started_ns),
            "end": rfc3339(engine.clock.time_ns()),
        }
        if error:
            body["error"] = error
            log.warning("Snapshot for stream '%s > %s' failed: %s",
                        self._ja.account.name, self._stream.name, error)  # fmt: skip
        engine.advise(
            self._ja, f"$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE.{self._stream.name}",
            "io.nats.jetstream.advisory.v1.snapshot_complete", body,
        )  # fmt: skip


# ---------------------------------------------------------------------- restore
class ClusteredRestore:
    """What a restore needs of a cluster: the meta leader's checks and placement, and the
    restores this server builds (the ``STREAM.RESTORE`` handler of ``api/routing.py``)."""

    def __init__(self, requests: MetaRequests, restores: ClusterRestores) -> None:
        self.requests = requests
        self.restores = restores

    def __call__(self, ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
        return stream_restore(ja, args, data, self)


def stream_restore(
    ja: JsAccount, args: list[str], data: bytes, cluster: ClusteredRestore | None = None
) -> dict[str, Any]:
    """``jsStreamRestoreRequest``: its checks in its order (on a cluster, those of
    ``jsClusteredStreamRestoreRequest``), then the session that takes the archive."""
    if is_empty_request(data):
        raise E.JSBadRequestErr()
    req = decode_request(data, RESTORE_SCHEMA)
    cfg: StreamConfig = req["config"]
    name = args[0] if args else ""
    if not cfg.name:
        cfg.name = name
    if cfg.name != name:
        raise E.JSStreamMismatchErr()
    if "\\" in name or "/" in name:
        raise E.JSStreamNameContainsPathSeparatorsErr()
    check_restore_config(cfg)
    if cluster is not None:
        cluster.requests.restore_peers(ja, cfg, final=False)
    elif ja.engine.cluster_info is not None:
        raise E.JSStreamRestoreErrF(err="restoring a stream on this server is not possible")
    else:
        check_new_stream(ja, cfg)
        if name in ja.streams:
            raise E.JSStreamNameExistRestoreFailedErr()
    session = RestoreSession(ja, cfg, cluster)
    session.start()
    return {"deliver_subject": session.subject.decode()}


class RestoreSession:
    """Takes one restore's chunks, checks and spools them, then builds the stream."""

    def __init__(
        self, ja: JsAccount, cfg: StreamConfig, cluster: ClusteredRestore | None = None
    ) -> None:
        self._ja = ja
        self._cfg = cfg
        self._cluster = cluster
        self._sublist = ja.account.sublist
        self.subject = f"$JS.SNAPSHOT.RESTORE.{cfg.name}.{_nuid.next()}".encode()
        self._max_body = ja.engine.max_payload
        self._check = ArchiveCheck(self._max_body)
        self._spool: IO[bytes] | None = None
        self._sub = Subscription(self.subject, None, b"restore", callback=self._on_chunk)
        self._timer: Cancellable | None = None
        self._last = 0.0
        self._done = False
        self._receiving = False
        self._total = 0
        self._started_ns = ja.engine.clock.time_ns()
        lim = ja.limits.max_memory if cfg.storage == "memory" else ja.limits.max_storage
        # (a compressed archive is not larger than what it restores, give or take framing)
        self._bound = 2 * lim + (1 << 20) if lim > 0 else -1

    def start(self) -> None:
        # (closed by _close, whichever way the session ends)
        self._spool = tempfile.TemporaryFile(prefix="natsd-restore-")  # noqa: SIM115
        self._sublist.insert(self._sub)
        self._receiving = True
        self._last = self._ja.engine.clock.monotonic()
        self._timer = self._ja.engine.scheduler.call_later(RESTORE_IDLE, self._idle)
        self._ja.engine.advise(
            self._ja, f"$JS.EVENT.ADVISORY.STREAM.RESTORE_CREATE.{self._cfg.name}",
            "io.nats.jetstream.advisory.v1.restore_create", {"stream": self._cfg.name},
        )  # fmt: skip

    def _idle(self) -> None:
        self._timer = None
        if self._done:
            return
        quiet = self._ja.engine.clock.monotonic() - self._last
        if quiet < RESTORE_IDLE:
            self._timer = self._ja.engine.scheduler.call_later(RESTORE_IDLE - quiet, self._idle)
            return
        log.warning("restore for stream '%s > %s' is stalled",
                    self._ja.account.name, self._cfg.name)  # fmt: skip
        self._close()

    def _on_chunk(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if self._done:
            return
        if not reply:
            log.warning("restore for stream '%s > %s' requires reply subject for each chunk",
                        self._ja.account.name, self._cfg.name)  # fmt: skip
            self._close()
            return
        self._last = self._ja.engine.clock.monotonic()
        if not data:
            self._finish(reply)
            return
        self._total += len(data)
        try:
            if 0 <= self._bound < self._total:
                raise E.JSStorageResourcesExceededErr()
            assert self._spool is not None
            self._spool.write(data)
            self._check.feed(data)
        except ApiError as e:
            self._fail(reply, e)
            return
        except (ValueError, OSError) as e:
            self._fail(reply, E.JSStreamRestoreErrF(err=str(e)))
            return
        publish(self._sublist, reply, None, None, b"")

    def _finish(self, reply: bytes) -> None:
        try:
            self._check.finish()
            assert self._spool is not None
            if self._cluster is not None:
                self._place(reply, self._cluster)
                return
            stream = restore_stream(self._ja, self._cfg, self._spool, self._check, self._max_body)
        except ApiError as e:
            self._fail(reply, e)
            return
        except ValueError as e:
            self._fail(reply, E.JSStreamRestoreErrF(err=str(e)))
            return
        self._restored(reply, stream)

    def _place(self, reply: bytes, cluster: ClusteredRestore) -> None:
        """On a cluster: the whole archive checked out; the stream goes through the meta
        group (``cluster/restore.py``), which takes the spool over, and the client is
        answered once it is in service, or has failed."""
        peers = cluster.requests.restore_peers(self._ja, self._cfg, final=True)
        spool, self._spool = self._spool, None
        assert spool is not None
        self._stop_receiving()

        def done(outcome: Stream | ApiError) -> None:
            if isinstance(outcome, ApiError):
                self._fail(reply, outcome)
            else:
                self._restored(reply, outcome)

        try:
            cluster.restores.begin(self._ja, self._cfg, peers, spool, self._check,
                                   self._max_body, done)  # fmt: skip
        except ApiError:
            spool.close()
            raise

    def _restored(self, reply: bytes, stream: Stream) -> None:
        doc = {"type": API_TYPE_PREFIX + "stream_create_response", **stream.info_json()}
        self._complete(reply, doc, "")

    def _fail(self, reply: bytes, err: ApiError) -> None:
        log.warning("Restore failed for stream '%s > %s': %s",
                    self._ja.account.name, self._cfg.name, err.description)  # fmt: skip
        doc = {"type": API_TYPE_PREFIX + "stream_create_response", "error": err.to_json()}
        self._complete(reply, doc, err.description)

    def _complete(self, reply: bytes, doc: dict[str, Any], error: str) -> None:
        self._close()
        publish(self._sublist, reply, None, None, orjson.dumps(doc))
        engine = self._ja.engine
        body: dict[str, Any] = {
            "stream": self._cfg.name,
            "start": rfc3339(self._started_ns),
            "end": rfc3339(engine.clock.time_ns()),
            "bytes": self._total,
        }
        if error:
            body["error"] = error
        engine.advise(
            self._ja, f"$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.{self._cfg.name}",
            "io.nats.jetstream.advisory.v1.restore_complete", body,
        )  # fmt: skip

    def _stop_receiving(self) -> None:
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._receiving:
            self._receiving = False
            self._sublist.remove(self._sub)

    def _close(self) -> None:
        self._stop_receiving()
        if self._spool is not None:
            self._spool.close()
            self._spool = None
