"""natsd's Raft consensus engine: a port of etcd-io/raft v3.7.0 (see NOTICE).

A pure layer (rank 2): no sockets, no asyncio, no files, no clocks, no logging module. It
takes messages and ticks and says what to persist and what to send; the cluster layer does
the I/O."""
