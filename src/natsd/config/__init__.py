"""nats-server configuration files -> ServerOptions, failing closed.

``load_config`` / ``apply_config`` read what natsd honours (``apply``), warn about cosmetic
keys and refuse every other key with an error naming it (``policy`` has the tables).
"""

from __future__ import annotations

from natsd.config.apply import ConfigError, apply_config, load_config

__all__ = ["ConfigError", "apply_config", "load_config"]
