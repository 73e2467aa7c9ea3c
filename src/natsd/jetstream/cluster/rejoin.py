"""``python -m natsd.jetstream.cluster.rejoin STORE_DIR``: drop a stopped server's meta group
records, so that it rejoins the meta group and takes the meta state from its leader.

What it is for: the meta records of most servers of a cluster are damaged (each logs so at
start, ``jetstream/cluster/driver.py``). A damaged server votes for no one, so no meta
leader can be elected and JetStream stays unavailable. If a server that reports no damage
holds the whole meta state, dropping one damaged server's meta records (this tool) gives
that server its vote back: it starts with an empty meta log, votes for the healthy server,
and takes the meta state from it, as the other damaged servers then do. Meta entries that
only the damaged servers held are lost; restoring the store from a backup taken while the
server was stopped is the other way out.

What it does: opens the server's node log (``<STORE_DIR>/jetstream/_cluster/wal``) and
appends a DROP record for the meta group; nothing else changes (streams, their Raft logs,
consumers). The server's next start finds the meta group dropped and rejoins it
(``JsCluster.start``). The server must be stopped: the tool refuses when the log does not
say it was closed cleanly (a server still running, or one that crashed: then ``--force``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from natsd.cluster.meta import META_GROUP
from natsd.storage.wal import CLOSED, Wal

__all__ = ["drop_meta", "main", "wal_dir"]

USAGE = "usage: python -m natsd.jetstream.cluster.rejoin [--force] STORE_DIR"


def wal_dir(path: str) -> str:
    """The node log's directory for a JetStream store directory (or the log's own)."""
    if os.path.isdir(os.path.join(path, "jetstream", "_cluster", "wal")):
        return os.path.join(path, "jetstream", "_cluster", "wal")
    return path


def drop_meta(path: str, force: bool = False) -> str:
    """Drop the meta group's records from the node log of ``path`` (a store directory or
    the log's); returns what was done. ValueError when there is nothing to do or it is
    not safe."""
    d = wal_dir(path)
    if not os.path.isdir(d) or not any(n.endswith(".wal") for n in os.listdir(d)):
        raise ValueError(f"{path}: no node log here (expected {d})")
    if not force and not os.path.exists(os.path.join(d, CLOSED)):
        raise ValueError(f"{d}: the log was not closed cleanly: the server is running, or it"
                         " crashed; stop it (after a crash: --force)")  # fmt: skip
    wal = Wal.open(d)
    try:
        if META_GROUP not in wal.groups:
            raise ValueError(f"{d}: the log holds no meta group records")
        g = wal.groups[META_GROUP]
        state = "damaged" if g.damaged else "not damaged"
        wal.append_drop(META_GROUP)
    finally:
        wal.close()
    return (f"{d}: meta group records dropped (they were {state}); on its next start the"
            " server rejoins the meta group and takes the meta state from its leader")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    force = "--force" in args
    rest = [a for a in args if a != "--force"]
    if len(rest) != 1 or rest[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        print(drop_meta(rest[0], force))
    except (ValueError, OSError) as e:
        print(f"natsd: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
