"""Configuration: everything that turns a command line and a configuration file into
``ServerOptions``, and decides what a reload may change. Pure (no sockets, no event loop);
below everything that runs, above ``core`` and ``security``.

- ``options``: ``ServerOptions``, the one dataclass the server is built from.
- ``flags``: the ``natsd`` command line (nats-server's flags, Go flag syntax) on top of a
  configuration file (``build_options``).
- ``parse``: the nats-server configuration file format -> nested maps (``ConfMap``).
- ``policy``: which keys natsd honours, ignores with a warning, or refuses (fail closed).
- ``apply``: maps a parsed file onto ``ServerOptions`` (``load_config``, ``apply_config``).
- ``reload``: which option changes SIGHUP may apply (``plan_reload``), decided before any.

``natsd.main`` (the process entry point) and ``natsd.server`` use these; nothing here imports
them.
"""

from __future__ import annotations

from natsd.config.apply import ConfigError, apply_config, load_config

__all__ = ["ConfigError", "apply_config", "load_config"]
