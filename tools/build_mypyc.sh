#!/usr/bin/env bash
# Compile natsd's hot-path modules with mypyc into build/mypyc (a copy of src/natsd), leaving
# src/ pure Python. Use it with PYTHONPATH=build/mypyc; `make bench` does.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
# Absolute, since the build runs from inside $OUT.
case "$PY" in /*) ;; */*) PY="$PWD/$PY" ;; esac
OUT=build/mypyc
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r src/natsd "$OUT/"
find "$OUT" -name __pycache__ -prune -exec rm -rf {} +
cd "$OUT"
# The modules on the per-message path (core NATS and the JetStream publish path) and the
# Raft engine (natsd/raft, pure and deterministic), with the node WAL and the group driver that
# run it (storage/wal.py, cluster/group.py: every group's appends and frames each turn).
# The consumer's parts are compiled together (native classes: a part's fields are struct
# reads for the consumer's delivery loop). Everything else stays interpreted. Note for compiled code: mypyc treats a memoryview as
# always true, so write loops use explicit offsets.
"$PY" -m mypyc \
  natsd/protocol/framing.py \
  natsd/protocol/parser.py \
  natsd/protocol/route_parser.py \
  natsd/protocol/route_encode.py \
  natsd/router/deliver.py \
  natsd/router/sublist.py \
  natsd/router/interest.py \
  natsd/router/subscription.py \
  natsd/connection/client.py \
  natsd/connection/route.py \
  natsd/cluster/forward.py \
  natsd/router/routed.py \
  natsd/connection/flusher.py \
  natsd/connection/transport.py \
  natsd/connection/fairness.py \
  natsd/core/subjects.py \
  natsd/core/filters.py \
  natsd/core/clock.py \
  natsd/router/publish.py \
  natsd/storage/store.py \
  natsd/storage/memstore.py \
  natsd/storage/filestore.py \
  natsd/storage/filestore_format.py \
  natsd/storage/filestore_index.py \
  natsd/storage/filestore_io.py \
  natsd/storage/filestore_recovery.py \
  natsd/storage/filestore_query.py \
  natsd/jetstream/stream/stream.py \
  natsd/jetstream/stream/headers.py \
  natsd/jetstream/stream/queries.py \
  natsd/jetstream/stream/commit.py \
  natsd/jetstream/stream/replica.py \
  natsd/jetstream/api/direct.py \
  natsd/jetstream/consumer/shared.py \
  natsd/jetstream/consumer/advisory.py \
  natsd/jetstream/consumer/state.py \
  natsd/jetstream/consumer/ack.py \
  natsd/jetstream/consumer/pacing.py \
  natsd/jetstream/consumer/waiting.py \
  natsd/jetstream/consumer/priority.py \
  natsd/jetstream/consumer/delivery.py \
  natsd/jetstream/consumer/pull.py \
  natsd/jetstream/consumer/push.py \
  natsd/jetstream/consumer/consumer.py \
  natsd/core/goquote.py \
  natsd/raft/types.py \
  natsd/raft/quorum.py \
  natsd/raft/tracker.py \
  natsd/raft/confchange.py \
  natsd/raft/logger.py \
  natsd/raft/codec.py \
  natsd/raft/describe.py \
  natsd/raft/log_unstable.py \
  natsd/raft/storage.py \
  natsd/raft/log.py \
  natsd/raft/state.py \
  natsd/raft/read_only.py \
  natsd/raft/config.py \
  natsd/raft/election.py \
  natsd/raft/leader.py \
  natsd/raft/follower.py \
  natsd/raft/core.py \
  natsd/raft/status.py \
  natsd/raft/rawnode.py \
  natsd/storage/wal.py \
  natsd/cluster/group.py >/dev/null
rm -rf build
echo "compiled natsd hot path into $OUT"
