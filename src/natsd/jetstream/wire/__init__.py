"""JetStream's wire vocabulary: Go-compatible JSON decoding (``gojson``, ``gotyped``), the API
errors generated from nats-server's ``errors.json`` (``errors``), and the
``Nats-Required-Api-Level`` rule (``api_level``). The lowest rank inside ``jetstream``: it
imports nothing of JetStream above it."""
