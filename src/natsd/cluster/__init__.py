"""The cluster layer: the route mesh (``mesh``) and the publish path across it (``forward``).

Between the connection layer (one route connection, its handshake and buffers) and
JetStream. The server composes it only when a cluster is configured.
"""
