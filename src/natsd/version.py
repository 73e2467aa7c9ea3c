"""Version numbers.

``__version__`` is natsd's own. ``SERVER_VERSION`` is the nats-server version whose client
protocol and JetStream features natsd offers; it goes into INFO and ``/varz`` because clients
gate features on it. ``API_LEVEL`` is the JetStream API level (ADR-44) in INFO (``api_lvl``),
``$JS.API.INFO`` (``api.level``), ``/varz`` and ``/jsz`` and the ``_nats.level`` metadata of
stream and consumer configs; clients send ``Nats-Required-Api-Level`` against it.

Why 2.12 and level 2: a level promises every feature nats-server ties to it
(``server/jetstream_versioning.go``). Level 1 (2.11) is per-message TTLs, subject delete
markers, consumer pause and priority groups (pinned / overflow); level 2 (2.12) message
counters, atomic batch publish, message schedules and async persistence (on R1 file
streams; nats-server refuses it on replicated ones too): natsd implements all of them, on R1
and replicated streams. Level 3 is the snapshot ``window_size``, level 4 (2.14) fast batch
publish and ``flow_control`` acks (natsd has both, R1 and replicated), level 5 (2.15) source
stream identities (natsd's sources carry them). natsd's snapshots honour ``window_size``,
but restores are refused on a cluster, so it stays at level 2 until every feature of the
next level works on a cluster too (checked by tests), and a client that asks for level 3 is
told so. Newer behaviour natsd
matches (error texts and the like, recorded against nats-server 2.15.1) does not change that:
the version says which features a client may use.
"""

__version__ = "0.1.0"
SERVER_VERSION = "2.12.0"
API_LEVEL = 2
PROTO = 1
