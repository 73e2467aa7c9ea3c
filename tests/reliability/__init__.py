"""Fault-injection reliability suite (issue 7).

- checker.py: publish history vs. what a stream holds (lost / corrupt / unexpected /
  duplicated / out of order); test_checker.py tests it on synthetic histories.
- test_kill9.py: SIGKILL under load, 50 cycles in CI, 1,000 with ``-m soak``; restart to
  ready for a ~100 MB store.
- test_protocol_abuse.py (+ parser_fuzz.py, rr_client.py): Hypothesis on the parser, exact
  limits vs nats-server, abusive connections, random JSON to $JS.API.
- test_slow_consumers.py: slow consumer cut-off, 1,000 connections, stale connections,
  10,000 bad credentials.
- helpers.py / conftest.py: servers as subprocesses (RSS, fds, SIGKILL).

Run: ``pytest tests/reliability`` (CI tier), ``make soak`` (soak tier).
"""
