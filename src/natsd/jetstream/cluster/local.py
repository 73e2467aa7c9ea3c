"""What the meta group's stream entries mean on this server: a stream placed here is
created, updated or deleted, its Raft group attached or wound down, and after a restart (or a
meta snapshot taken from the leader) the streams on disk are brought in line with the meta
state. ``JsCluster`` applies the meta log and hands each stream entry here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from natsd.cluster.group import GroupHost
from natsd.cluster.meta import META_GROUP, MetaOp, MetaState, StreamAssignment, encode_op
from natsd.jetstream.answer import add_cluster_block
from natsd.jetstream.cluster.replica import group_name
from natsd.jetstream.cluster.restore import ClusterRestores
from natsd.jetstream.cluster.streams import StreamGroups
from natsd.jetstream.config.stream_config import parse_stream_config
from natsd.jetstream.engine import (
    JetStream,
    JsAccount,
    add_stream,
    delete_stream,
    set_aside_stream,
    update_stream,
)
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.storage.store import StoreError

__all__ = ["LocalStreams"]

log = logging.getLogger("natsd")


class LocalStreams:
    """This server's streams as the meta state places them. Owns no state of its own: the
    streams are the engine's, the groups ``StreamGroups``', the meta state ``JsCluster``'s
    (read through ``meta``, since a snapshot from the leader replaces it)."""

    def __init__(
        self,
        engine: JetStream,
        server_name: str,
        stream_groups: StreamGroups,
        host: GroupHost,
        meta: Callable[[], MetaState],
        respond: Callable[[JsAccount, str, str, dict[str, Any]], bytes],
        propose: Callable[[bytes], bool],
        cluster_block: Callable[[JsAccount, str], dict[str, Any]],
        restores: ClusterRestores,
    ) -> None:
        self.engine = engine
        self.server_name = server_name
        self.stream_groups = stream_groups
        self.host = host
        self.meta = meta
        self.respond = respond
        self.propose = propose
        self.cluster_block = cluster_block
        self.restores = restores

    def applied_stream(self, op: MetaOp, replay: bool) -> None:
        a = op.assignment
        assert a is not None
        if self.server_name not in a.peers:
            if op.previous is not None and self.server_name in op.previous.peers:
                self.stream_groups.reassigned(a)  # its replica here leaves (a peer removal)
            return
        answer = not replay and bool(op.reply)
        ja = self.engine.accounts.get(a.account)
        if ja is None:
            log.error("JetStream cluster: stream %s/%s placed here but the account has no"
                      " JetStream", a.account, a.name)  # fmt: skip
            return
        if replay:
            return  # recovery opened it; _reconcile creates what is missing
        if a.restoring:
            self.restores.applied_restore(ja, a)  # (its restorer builds it first)
            return
        # one replica answers: the first peer (the only one of an R1 stream)
        answer = answer and a.peers[0] == self.server_name
        try:
            cfg = parse_stream_config(a.config, name_in_subject=None)
            local = ja.streams.get(a.name)
            if local is not None and op.previous is None and local.created_ns != a.created:
                self._set_aside(ja, local, "is placed here anew over an earlier one's files")
                local = None
            if local is None:
                stream = add_stream(ja, cfg, created=a.created)
                rtype, extra = "stream_create_response", {"did_create": True}
            elif op.previous is None:
                stream, rtype, extra = local, "stream_create_response", {"did_create": True}
            elif op.previous.config == a.config:
                # only its peers changed (STREAM.PEER.REMOVE): the group follows them
                stream, rtype, extra = local, "stream_update_response", {}
            else:
                stream = update_stream(ja, cfg, clustered=True)
                rtype, extra = "stream_update_response", {}
            if cfg.num_replicas > 1:
                # a server that takes a removed peer's place, or that a scale-up adds, joins
                # the group as it is; an R1 stream scaled up gets a group of its one server
                prev = op.previous
                joining = prev is not None and self.server_name not in prev.peers
                founders = prev.peers if prev is not None and len(prev.peers) == 1 else None
                self.stream_groups.attach(ja, stream, a, joining, founders)
            else:
                self.stream_groups.reassigned(a)  # scaled down to R1: its group winds down
            if answer:
                out = stream.info_json()
                add_cluster_block(rtype, out, self.cluster_block(ja, a.name))
                out.update(extra)
                self.respond(ja, op.reply, rtype, out)
        except (ApiError, StoreError, OSError) as e:
            log.error("JetStream cluster: stream %s/%s not applied: %s", a.account, a.name, e)
            if answer:
                rtype = "stream_update_response" if op.previous else "stream_create_response"
                err = e if isinstance(e, ApiError) else E.JSStreamCreateErrF(err=str(e))
                self.respond(ja, op.reply, rtype, {"error": err.to_json()})
            if op.previous is None and a.name not in ja.streams:
                # the assignment stands for nothing here: withdraw it
                self.propose(encode_op("delete", account=a.account, stream=a.name))

    def applied_restored(self, op: MetaOp, replay: bool) -> None:
        """A stream restored from a backup is built on its restorer: it goes into service
        there, and its other replicas join it (``cluster/restore.py``)."""
        a = op.assignment
        assert a is not None
        ja = self.engine.accounts.get(a.account)
        if replay or ja is None or self.server_name not in a.peers:
            return  # (after a restart, _reconcile does it)
        self.restores.applied_restored(ja, a)

    def gone(self, old: MetaState, new: MetaState) -> None:
        """The meta leader's snapshot replaced this server's meta state (it was away, or
        behind the leader's log): streams placed here that the snapshot no longer has, or
        has as a new stream of the same name, were deleted meanwhile, and no delete entry
        will tell this server. As nats-server (``applyMetaSnapshot``) their replicas here
        leave their groups; their files are set aside rather than deleted. Without this an
        R1 stream would go on taking publishes here, deleted everywhere else."""
        for account, streams in old.streams.items():
            ja = self.engine.accounts.get(account)
            if ja is None:
                continue
            for name, a in streams.items():
                b = new.stream(account, name)
                if b is not None and b.created == a.created:
                    continue
                if not self._held_here(a):
                    continue
                self.stream_groups.detach(a)
                local = ja.streams.get(name)
                if local is not None:
                    self._set_aside(ja, local, "deleted while this server was away")

    def _set_aside(self, ja: JsAccount, local: Stream, why: str) -> None:
        """Take a stream's replica here out of service, its files kept out of the way of
        a new stream of its name (which starts empty)."""
        try:
            where = set_aside_stream(ja, local) or "(memory: nothing kept)"
        except OSError as e:
            # out of service all the same; the files stay where they are
            log.error("JetStream cluster: stream %s/%s %s; its files could not be set aside:"
                      " %s", ja.account.name, local.name, why, e)  # fmt: skip
            return
        log.warning("JetStream cluster: stream %s/%s %s; its files here are set aside in %s",
                    ja.account.name, local.name, why, where)  # fmt: skip

    def applied_delete(self, op: MetaOp, replay: bool) -> None:
        """The stream's server deletes it and answers (as nats-server: with that server
        down the request gets no answer, though the stream is gone from the meta state and
        the server deletes it when it is back)."""
        a = op.previous
        assert a is not None
        ja = self.engine.accounts.get(a.account)
        if ja is None or self.server_name not in a.peers:
            return
        local = ja.streams.get(a.name)
        if local is not None and local.created_ns != a.created:
            # a later stream of the name: this delete is of an earlier one, applied before
            # (an entry applied again after its record was lost to damage, or as a replay)
            local = None
        if replay and local is None:
            return  # (this delete was applied before)
        # on a replay: the entry was committed and the server stopped before applying
        # it, or before the files went
        self.stream_groups.detach(a)
        answer = bool(op.reply) and a.peers[0] == self.server_name and not replay
        if local is not None:
            try:
                delete_stream(ja, local)
            except (StoreError, OSError) as e:
                log.error("JetStream cluster: stream %s/%s not deleted: %s",
                          a.account, a.name, e)  # fmt: skip
                if answer:
                    err = E.JSStreamDeleteErrF(err=str(e))
                    self.respond(ja, op.reply, "stream_delete_response", {"error": err.to_json()})
                return
        self.restores.deleted(a)
        if answer:
            self.respond(ja, op.reply, "stream_delete_response", {"success": True})

    def reconcile(self) -> None:
        """After the replay that follows a restart: streams assigned here that recovery did
        not find are created (empty); a replica removed from its stream's peers meanwhile
        rejoins its group until the group removes it; other local streams the meta group
        does not place here are reported, and set aside once this server is current with
        the meta leader (``set_aside_orphans``; nothing is deleted automatically)."""
        for ja in self.engine.accounts.values():
            assigned = {
                a.name: a
                for a in self.meta().account_streams(ja.account.name)
                if self.server_name in a.peers
            }
            for name, a in assigned.items():
                me = self.server_name
                if a.restoring:
                    # its restorer builds it (or, restarted, withdraws it); the others wait
                    if a.restore == me:
                        self.restores.abandoned(ja, a)
                    continue
                if a.restore == me and self.restores.waiting(a):
                    self.restores.opened(ja, a)  # (``restored`` came in a meta snapshot)
                    continue
                if name not in ja.streams:
                    try:
                        cfg = parse_stream_config(a.config, name_in_subject=None)
                        add_stream(ja, cfg, created=a.created)
                        log.warning("JetStream cluster: stream %s/%s was assigned here but"
                                    " not found on disk; created empty",
                                    ja.account.name, name)  # fmt: skip
                    except (ApiError, StoreError, OSError) as e:
                        log.error("JetStream cluster: stream %s/%s not created: %s",
                                  ja.account.name, name, e)  # fmt: skip
                        continue
                if len(a.peers) > 1:
                    # a restored stream's group is founded by its restorer alone; the
                    # others join it (cluster/restore.py)
                    founders = [me] if a.restore == me else None
                    joining = bool(a.restore) and a.restore != me
                    self.stream_groups.attach(ja, ja.streams[name], a, joining, founders)
            for name in ja.streams:
                if name in assigned:
                    continue
                moved = self.meta().stream(ja.account.name, name)
                wal = self.host.wal
                if moved is not None and len(moved.peers) > 1 and group_name(moved) in wal.groups:
                    # removed from the stream's peers (PEER.REMOVE, EVACUATE) while it was
                    # down: its group may still count it a voter, and then needs it for its
                    # majority until the swap (cluster/membership.py); it rejoins, and leaves
                    # (deleting its copy) once its removal is committed
                    log.info("JetStream cluster: stream %s/%s was removed from this server;"
                             " its replica stays until its group removes it",
                             ja.account.name, name)  # fmt: skip
                    self.stream_groups.attach(ja, ja.streams[name], moved)
                    continue
                log.warning("JetStream cluster: stream %s/%s is on disk but not placed on"
                            " this server; it is set aside once this server is current with"
                            " the meta leader", ja.account.name, name)  # fmt: skip
        self._drop_dead_logs()

    def _held_here(self, a: StreamAssignment) -> bool:
        """Is ``a``'s stream this server's to hold: placed here, or a removed replica that
        rejoined its group at restart (``reconcile``) and stays until the group removes it."""
        return self.server_name in a.peers or group_name(a) in self.stream_groups.members

    def set_aside_orphans(self) -> None:
        """Streams on disk here that the meta group does not place here (orphans): a
        stream from before this server was clustered, a stale copy of a replica removed
        while this server was down. nats-server deletes them (``checkForOrphans``); here
        they leave service and their files are set aside, as for a stream deleted while
        this server was away. Called once this server is current with the meta leader,
        so that its meta state is the cluster's. Otherwise an R1 orphan would go on taking
        publishes, acknowledged by a stream the rest of the cluster does not know (and a
        stream created with its name elsewhere would take them too)."""
        for ja in self.engine.accounts.values():
            for name, s in list(ja.streams.items()):
                a = self.meta().stream(ja.account.name, name)
                if a is None or not self._held_here(a):
                    self._set_aside(ja, s, "is not placed on this server by the meta group")

    def _drop_dead_logs(self) -> None:
        """The node WAL's logs of the groups of streams deleted while this server was down
        or behind, when the meta leader's snapshot rather than the delete entry told it (a
        server that applies the entry leaves the group and drops the log then; ``gone``
        takes attached replicas out when a snapshot tells it). Nothing would ever
        compact such a log, and the WAL segments it sits in, with every later one, would be
        kept for ever. Group names carry the stream's creation time, so no later stream
        reuses one. The stream's files, if any, stay as they are (reported above). A stream
        that still exists keeps its log whatever its replicas (a scale-down to R1 shrinks
        its group first)."""
        live = {group_name(a) for streams in self.meta().streams.values() for a in streams.values()}
        for name in list(self.host.wal.groups):
            if name == META_GROUP or name in live or name in self.stream_groups.members:
                continue
            log.warning("JetStream cluster: Raft log of %s dropped: its stream was deleted"
                        " while this server was down", name.decode(errors="replace"))  # fmt: skip
            self.host.drop(name)
