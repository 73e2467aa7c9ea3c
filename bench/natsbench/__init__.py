"""natsbench: natsd against the reference nats-server, same load, same run (``bench/bench.py``).

Two kinds of code live here, in two kinds of process:

- the orchestrator (the ``bench.py`` process): ``main`` (command line, phases), ``table``
  (the scenarios by name), ``scenario`` (what a scenario is), ``scenarios/`` (one module per
  family: core, publish, consumers, kv), ``fixtures`` (pre-filled data shared by runs),
  ``harness`` (starting workers and collecting their reports), ``servers`` (the server
  processes and their names), ``config`` and ``report`` (header, progress lines, tables);
- the load-generator workers, each a forked OS process speaking the NATS protocol over a raw
  socket: ``loadgen`` (core NATS), ``jsload`` (JetStream publish), ``consumerload``
  (consumers), ``kvload`` (KV and Object Store). They report through a queue only.

Adding a scenario: a ``Scenario`` subclass (``rows``, ``setup`` if it reads pre-filled data,
``run``, ``report``) and one entry in ``table.TABLE``.
"""
