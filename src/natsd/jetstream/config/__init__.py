"""Stream and consumer configuration as nats-server decodes, defaults and checks it: the typed
configs (``stream_types``, ``consumer_config``), their Go-compatible decoding
(``stream_unmarshal``, ``stream_config``), subject rules (``subject_mapping``) and the account
limits (``account_limits``). Pure: no I/O, no time, no streams; it imports only ``wire``
below it inside ``jetstream`` (and ``storage.store``'s config types)."""
