"""natsd's build: the typed hot-path modules compiled with mypyc, as black and mypy ship theirs.

``pip install .``, ``pip install -e .`` and ``python -m build`` all compile them when a C
compiler and Python's headers are present, and build pure Python otherwise (or when
``NATSD_COMPILE=0``); ``natsd --version`` says which build runs. Next to the extension modules
the build writes ``natsd/hotpath.sha256``: the digest of each compiled module's source. At
import, ``natsd.hotpath`` compares it with the sources beside it, so an edited module of an
editable install never runs as its stale compiled twin (natsd falls back to pure Python and
says so). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
DIGEST = "hotpath.sha256"

# The modules on the per-message path (core NATS and the JetStream publish path), the Raft
# engine (natsd/raft, pure and deterministic) with the node WAL and the group driver that run
# it, and the consumer's parts (compiled together: a part's fields are struct reads for the
# consumer's delivery loop). Everything else stays interpreted. All of them are one mypyc
# group, one shared library: calls between them are native calls.
# Note for compiled code: mypyc treats a memoryview as always true, so write loops use
# explicit offsets.
HOT_MODULES = [
    "natsd/protocol/framing.py",
    "natsd/protocol/parser.py",
    "natsd/protocol/route_parser.py",
    "natsd/protocol/route_encode.py",
    "natsd/router/deliver.py",
    "natsd/router/sublist.py",
    "natsd/router/interest.py",
    "natsd/router/subscription.py",
    "natsd/connection/client.py",
    "natsd/connection/route.py",
    "natsd/cluster/forward.py",
    "natsd/router/routed.py",
    "natsd/connection/flusher.py",
    "natsd/connection/transport.py",
    "natsd/connection/fairness.py",
    "natsd/core/subjects.py",
    "natsd/core/filters.py",
    "natsd/core/clock.py",
    "natsd/core/crc.py",
    "natsd/core/source_header.py",
    "natsd/core/s2.py",
    "natsd/protocol/natsarc.py",
    "natsd/jetstream/backup/snapshot.py",
    "natsd/router/publish.py",
    "natsd/storage/store.py",
    "natsd/storage/memstore.py",
    "natsd/storage/filestore.py",
    "natsd/storage/filestore_format.py",
    "natsd/storage/filestore_index.py",
    "natsd/storage/filestore_io.py",
    "natsd/storage/filestore_read.py",
    "natsd/storage/filestore_recovery.py",
    "natsd/storage/filestore_query.py",
    "natsd/storage/sources_index.py",
    "natsd/jetstream/stream/stream.py",
    "natsd/jetstream/stream/headers.py",
    "natsd/jetstream/stream/fastbatch.py",
    "natsd/jetstream/stream/feed.py",
    "natsd/jetstream/stream/mirror.py",
    "natsd/jetstream/stream/source.py",
    "natsd/jetstream/wire/ack_subject.py",
    "natsd/core/headers.py",
    "natsd/jetstream/stream/queries.py",
    "natsd/jetstream/stream/commit.py",
    "natsd/jetstream/stream/replica.py",
    "natsd/jetstream/stream/entries.py",
    "natsd/jetstream/api/direct.py",
    "natsd/jetstream/consumer/shared.py",
    "natsd/jetstream/consumer/advisory.py",
    "natsd/jetstream/consumer/state.py",
    "natsd/jetstream/consumer/ack.py",
    "natsd/jetstream/consumer/pacing.py",
    "natsd/jetstream/consumer/waiting.py",
    "natsd/jetstream/consumer/priority.py",
    "natsd/jetstream/consumer/delivery.py",
    "natsd/jetstream/consumer/pull.py",
    "natsd/jetstream/consumer/push.py",
    "natsd/jetstream/consumer/readahead.py",
    "natsd/jetstream/consumer/consumer.py",
    "natsd/core/goquote.py",
    "natsd/raft/types.py",
    "natsd/raft/quorum.py",
    "natsd/raft/tracker.py",
    "natsd/raft/confchange.py",
    "natsd/raft/logger.py",
    "natsd/raft/codec.py",
    "natsd/raft/describe.py",
    "natsd/raft/log_unstable.py",
    "natsd/raft/storage.py",
    "natsd/raft/log.py",
    "natsd/raft/state.py",
    "natsd/raft/read_only.py",
    "natsd/raft/config.py",
    "natsd/raft/election.py",
    "natsd/raft/leader.py",
    "natsd/raft/follower.py",
    "natsd/raft/core.py",
    "natsd/raft/status.py",
    "natsd/raft/rawnode.py",
    "natsd/storage/wal.py",
    "natsd/cluster/group.py",
    "natsd/cluster/frames.py",
]


def _why_pure() -> str | None:
    """None when this machine can compile the hot path, else the reason it cannot."""
    if os.environ.get("NATSD_COMPILE", "1").lower() in ("0", "false", "no"):
        return "NATSD_COMPILE=0"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc (the mypy package) is not installed in the build environment"
    cc = (sysconfig.get_config_var("CC") or "").split()
    if cc and shutil.which(cc[0]) is None:
        return f"no C compiler ({cc[0]} is not on PATH)"
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        return f"Python's headers are missing ({include}/Python.h)"
    return None


def digest_lines(root: Path) -> str:
    """One line per compiled module: its source's sha256 and its path under ``root``."""
    return "".join(
        f"{hashlib.sha256((root / m).read_bytes()).hexdigest()}  {m}\n" for m in HOT_MODULES
    )


class BuildHotPath(build_ext):
    """build_ext, then the sources' digest beside the extension modules it wrote."""

    def run(self) -> None:
        super().run()
        if not self.extensions:
            return
        out = SRC if self.inplace else Path(self.build_lib)
        (out / "natsd" / DIGEST).write_text(digest_lines(SRC))


def ext_modules() -> list[Any]:
    reason = _why_pure()
    if reason is not None:
        print(f"natsd: building pure Python: {reason}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    # Paths relative to the project root (pip runs setup.py there): mypy names each module
    # from the __init__.py files above it, natsd.protocol.parser and so on.
    os.chdir(HERE)
    return mypycify([f"src/{m}" for m in HOT_MODULES], opt_level="3", group_name="natsd_hotpath")


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildHotPath})
