"""Stream backups in nats-server 2.15's format (``server/stream_backup.go``): an S2 stream
(:mod:`natsd.core.s2`) of a NATSARC1 archive (:mod:`natsd.protocol.natsarc`) holding the
stream's state, its consumers (config and state, JSON) and every message with its sequence
and time. The format names no storage file, so a backup made by natsd restores into
nats-server 2.15 and the other way round, file or memory, R1 or replicated.

:mod:`.snapshot` writes one from a stream; :mod:`.restore` checks one completely and then
builds the stream from it. The API's side (the chunked, acknowledged transfer) is
``jetstream/api/backup.py``.
"""
