"""Clustered JetStream: the meta group's replica on this server, the Raft groups of the
replicated streams placed here, and everything that keeps their replicas the same.

It ranks between the engine and the API (``tests/unit/test_layers.py``): it proposes typed
entries (``jetstream/stream/entries.py``) and applies the committed ones with plain calls
on streams and consumers, and never imports the API. Which server answers which request is
the API's (``api/routing.py``, ``api/meta_requests.py``, ``api/replicated.py``).

``driver``       the meta driver (``JsCluster``): the meta group, bootstrap, placement, compaction
``local``        what a meta stream entry means on this server (create, update, delete, reconcile)
``servers``      the meta members, SERVER.REMOVE / EVACUATE and META.LEADER.STEPDOWN
``streams``      ``StreamGroups``: every replicated stream's group, leadership, applying entries
``replica``      one replicated stream's replica here: its group, shadow, consumers, states
``membership``   a stream group walked to its assignment's peers by Raft configuration changes
``consumers``    durable consumers of a replicated stream, sharing its group
``catchup``      a replica catching up from the leader's store (snapshots without messages)
``relay``        publishes that met a replica as it stopped leading, passed to the new leader
``info``         the cluster as clients see it (/jsz ``meta_cluster``, a stream's ``cluster``)
``usage``        each server's JetStream usage, summed for the meta leader's account info
``gather``       ask other servers and wait for their answers (STREAM.LIST, account INFO)
``restore``      a stream restored from a backup: placed, built by the server that received
                 it, which founds its group; the other replicas join and catch up
"""
