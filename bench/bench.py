"""Benchmark natsd against the reference nats-server on loopback.

Starts both servers, runs identical raw-socket load against each (publisher,
subscribers, responder and requester each in their own OS process), and prints
msgs/s for both plus the ratio natsd/nats-server.  JetStream file scenarios also
run nats-server with ``sync_interval: always`` (nats-server-sync, compared with
natsd's fsync-before-ack default) and natsd with nats-server's lazy default
``sync_interval: "2m"`` (natsd-lazy, compared with nats-server).  The consumer scenarios
(pull fetch + ack, push, publish -> consume latency) read pre-filled streams on
nats-server and natsd.  The KV / Object Store scenarios (kvload.py) put on all four
servers and get on nats-server and natsd.  See bench/README.md.

The code is the ``natsbench`` package beside this file (``natsbench/table.py`` lists the
scenarios); this script only runs it.

    .venv/bin/python bench/bench.py --quick
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from natsbench.main import main

if __name__ == "__main__":
    sys.exit(main())
