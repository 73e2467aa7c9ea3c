"""Maps a parsed nats-server configuration file onto ServerOptions.

Only keys natsd implements are applied; every other key produces a warning so nothing that
matters is silently ignored.
"""

from __future__ import annotations

from typing import Any

from natsd.confparse import parse_file
from natsd.core.clock import parse_duration
from natsd.options import AccountConfig, JetStreamConfig, ServerOptions
from natsd.security.auth import User
from natsd.security.permissions import parse_permissions

__all__ = ["ConfigError", "apply_config", "load_config"]


class ConfigError(ValueError):
    pass


# Keys nats-server knows that natsd accepts without acting on them (logging cosmetics).
_HARMLESS = {
    "logtime",
    "logtime_utc",
    "syslog",
    "remote_syslog",
    "log_size_limit",
    "max_traced_msg_len",
    "connect_error_reports",
    "reconnect_error_reports",
}


def _int(v: Any, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(f"{key}: expected a number, got {v!r}")
    return int(v)


def _dur(v: Any, key: str) -> float:
    try:
        return parse_duration(v)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{key}: {e}") from None


def _host_port(v: Any, key: str) -> tuple[str | None, int | None]:
    if isinstance(v, int):
        return None, v
    s = str(v)
    if s.startswith("[") and "]:" in s:
        host, _, port = s[1:].partition("]:")
        return host, int(port)
    if ":" in s:
        host, _, port = s.rpartition(":")
        return host or None, int(port)
    if s.isdigit():
        return None, int(s)
    return s, None


def _users(spec: Any, account: str, where: str) -> list[User]:
    if not isinstance(spec, list):
        raise ConfigError(f"{where}: users must be an array")
    out = []
    for u in spec:
        if not isinstance(u, dict):
            raise ConfigError(f"{where}: each user must be a map")
        low = {str(k).lower(): val for k, val in u.items()}
        name = low.get("user") or low.get("username")
        if not name:
            if "nkey" in low:
                raise ConfigError(f"{where}: nkey users are not supported yet")
            raise ConfigError(f"{where}: user entry without a user name")
        out.append(
            User(
                username=str(name),
                password=str(low.get("password", low.get("pass", ""))),
                account=account,
                permissions=parse_permissions(low.get("permissions")),
            )
        )
    return out


def load_config(path: str, opts: ServerOptions | None = None) -> tuple[ServerOptions, list[str]]:
    data = parse_file(path)
    opts = opts or ServerOptions()
    opts.config_file = path
    warnings = apply_config(opts, data)
    return opts, warnings


def apply_config(opts: ServerOptions, data: dict[str, Any]) -> list[str]:
    """Apply ``data`` to ``opts`` in place; returns warnings for keys not acted upon."""
    warnings: list[str] = []
    for raw_key, v in data.items():
        key = str(raw_key).lower()
        if key == "listen":
            h, p = _host_port(v, key)
            if h is not None:
                opts.host = h
            if p is not None:
                opts.port = p
        elif key in ("host", "net", "addr"):
            opts.host = str(v)
        elif key == "port":
            opts.port = _int(v, key)
        elif key in ("server_name", "name"):
            opts.server_name = str(v)
        elif key in ("http_port", "monitor_port"):
            opts.http_port = _int(v, key)
        elif key == "http":
            h, p = _host_port(v, key)
            if h is not None:
                opts.http_host = h
            if p is not None:
                opts.http_port = p
        elif key == "http_host":
            opts.http_host = str(v)
        elif key == "max_payload":
            opts.max_payload = _int(v, key)
        elif key == "max_control_line":
            opts.max_control_line = _int(v, key)
        elif key == "max_pending":
            opts.max_pending = _int(v, key)
        elif key in ("max_connections", "max_conn"):
            opts.max_connections = _int(v, key)
        elif key in ("max_subscriptions", "max_subs"):
            opts.max_subs = _int(v, key)
        elif key == "ping_interval":
            opts.ping_interval = _dur(v, key)
        elif key in ("ping_max", "max_pings_outstanding"):
            opts.ping_max = _int(v, key)
        elif key == "write_deadline":
            opts.write_deadline = _dur(v, key)
        elif key == "lame_duck_duration":
            opts.lame_duck_duration = _dur(v, key)
        elif key == "lame_duck_grace_period":
            opts.lame_duck_grace_period = _dur(v, key)
        elif key == "authorization":
            _authorization(opts, v, warnings)
        elif key == "no_auth_user":
            opts.no_auth_user = str(v)
        elif key == "accounts":
            _accounts(opts, v, warnings)
        elif key == "jetstream":
            _jetstream(opts, v, warnings)
        elif key == "debug":
            opts.debug = bool(v)
        elif key == "trace":
            opts.trace = bool(v)
        elif key in ("log_file", "logfile"):
            opts.log_file = str(v)
        elif key in ("pid_file", "pidfile"):
            opts.pid_file = str(v)
        elif key in _HARMLESS:
            pass
        else:
            warnings.append(f"config key {raw_key!r} is not supported by natsd and was ignored")
    return warnings


def _authorization(opts: ServerOptions, v: Any, warnings: list[str]) -> None:
    if not isinstance(v, dict):
        raise ConfigError("authorization must be a map")
    low = {str(k).lower(): val for k, val in v.items()}
    perms = parse_permissions(low.get("permissions"))
    if "user" in low:
        opts.users.append(
            User(str(low["user"]), str(low.get("password", low.get("pass", ""))), "$G", perms)
        )
    if "token" in low:
        opts.token = str(low["token"])
    if "users" in low:
        opts.users.extend(_users(low["users"], "$G", "authorization"))
    if "timeout" in low:
        opts.auth_timeout = _dur(low["timeout"], "authorization.timeout")
    for k in low:
        if k not in ("user", "password", "pass", "token", "users", "timeout", "permissions"):
            warnings.append(f"authorization key {k!r} is not supported by natsd and was ignored")


def _accounts(opts: ServerOptions, v: Any, warnings: list[str]) -> None:
    if not isinstance(v, dict):
        raise ConfigError("accounts must be a map")
    for name, spec in v.items():
        acfg = AccountConfig(str(name))
        if isinstance(spec, dict):
            low = {str(k).lower(): val for k, val in spec.items()}
            if "users" in low:
                opts.users.extend(_users(low["users"], acfg.name, f"accounts.{name}"))
            js = low.get("jetstream")
            if js is not None:
                if isinstance(js, dict):
                    acfg.jetstream = {str(k).lower(): val for k, val in js.items()}
                elif js in (True, "enabled", "enable"):
                    acfg.jetstream = {}
                elif js in (False, "disabled", "disable"):
                    acfg.jetstream = None
            for k in low:
                if k not in ("users", "jetstream"):
                    warnings.append(
                        f"accounts.{name} key {k!r} is not supported by natsd and was ignored"
                    )
        opts.accounts[acfg.name] = acfg


def _jetstream(opts: ServerOptions, v: Any, warnings: list[str]) -> None:
    if isinstance(v, bool) or v in ("enabled", "enable", "disabled", "disable"):
        opts.jetstream = v is True or v in ("enabled", "enable")
        return
    if not isinstance(v, dict):
        raise ConfigError("jetstream must be a map or a boolean")
    opts.jetstream = True
    js: JetStreamConfig = opts.js
    for raw_k, val in v.items():
        k = str(raw_k).lower()
        if k in ("store_dir", "storedir", "store"):
            js.store_dir = str(val)
        elif k in ("max_mem", "max_memory", "max_memory_store", "max_mem_store"):
            js.max_memory = _int(val, f"jetstream.{k}")
        elif k in ("max_file", "max_file_store", "max_store"):
            js.max_file = _int(val, f"jetstream.{k}")
        elif k == "domain":
            js.domain = str(val)
        elif k == "sync_interval":
            if str(val).lower() == "always":
                js.sync_always = True
            else:
                js.sync_interval = _dur(val, "jetstream.sync_interval")
        elif k == "enabled":
            opts.jetstream = bool(val)
        else:
            warnings.append(f"jetstream key {raw_k!r} is not supported by natsd and was ignored")
