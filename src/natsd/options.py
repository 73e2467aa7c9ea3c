"""Server options: one flat dataclass filled from defaults, a config file and flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from natsd.security.auth import User

__all__ = ["AccountConfig", "JetStreamConfig", "ServerOptions"]


@dataclass
class JetStreamConfig:
    store_dir: str = ""
    max_memory: int = -1
    max_file: int = -1
    domain: str = ""
    sync_interval: float | None = None  # seconds; None = fsync before every ack (default)
    sync_always: bool = False


@dataclass
class AccountConfig:
    name: str
    jetstream: dict[str, Any] | None = None


@dataclass
class ServerOptions:
    host: str = "0.0.0.0"
    port: int = 4222
    server_name: str = ""
    http_host: str = "0.0.0.0"
    http_port: int = 0  # 0 = monitoring off; -1 = random port
    max_payload: int = 1024 * 1024
    max_control_line: int = 4096
    max_pending: int = 64 * 1024 * 1024
    max_connections: int = 64 * 1024
    max_subs: int = 0
    ping_interval: float = 120.0
    ping_max: int = 2
    auth_timeout: float = 2.0
    write_deadline: float = 10.0
    # auth
    users: list[User] = field(default_factory=list)
    token: str | None = None
    no_auth_user: str | None = None
    accounts: dict[str, AccountConfig] = field(default_factory=dict)
    # jetstream
    jetstream: bool = False
    js: JetStreamConfig = field(default_factory=JetStreamConfig)
    # logging
    debug: bool = False
    trace: bool = False
    log_file: str = ""
    pid_file: str = ""
    config_file: str = ""
    lame_duck_duration: float = 0.0
    lame_duck_grace_period: float = 10.0  # nats-server's default
