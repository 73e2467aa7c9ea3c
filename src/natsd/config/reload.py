"""Configuration reload (SIGHUP): what may change at run time, decided before anything changes.

nats-server's ``server/reload.go`` compares the running options with the new ones field by
field; a field it cannot change at run time fails the whole reload ("config reload not
supported for Port: old=4222, new=4223") and the server keeps running on the old
configuration. ``plan_reload`` does the same for natsd's ``ServerOptions`` and returns what
``Server.apply_reload`` must do; it changes nothing itself, so a refused reload cannot leave
a partial configuration behind.

Rules, per field (nats-server's list; natsd refuses the JetStream changes it does not do):

- reloaded: max_payload, max_control_line, max_connections, ping_interval, ping_max,
  write_deadline, auth_timeout, users, token, accounts (users and new accounts), debug,
  trace, log_file, pid_file, tls and allow_non_tls (for new connections; the certificate
  files are read again on every reload, so a renewed certificate at the same path is taken);
- refused: host, port (a random port stays), server_name, http_host/http_port,
  max_pending, max_subscriptions, lame_duck_duration, lame_duck_grace_period,
  no_auth_user (except removing it together with its user), JetStream on/off, domain,
  sync settings, store_dir, lowering or unsetting max_memory/max_file, and an existing
  account's JetStream limits;
- a field this module does not know (a new option) is refused until someone decides.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from natsd.config.options import AccountConfig, JetStreamConfig, ServerOptions
from natsd.core.clock import format_duration

__all__ = ["ReloadError", "ReloadPlan", "go_value", "plan_reload"]


class ReloadError(ValueError):
    """The new configuration cannot be applied; the server keeps the old one."""


@dataclass
class ReloadPlan:
    options: ServerOptions
    # "Reloaded: ..." lines, in option order (nats-server logs one per changed option).
    notices: list[str] = field(default_factory=list)
    logging: bool = False
    limits: bool = False
    max_connections: bool = False
    pid_file: bool = False
    # JetStream server limits raised (the only JetStream change allowed at run time).
    js_max_memory: int | None = None
    js_max_store: int | None = None
    # Accounts that appear in the new configuration (created, with JetStream if asked).
    new_accounts: list[AccountConfig] = field(default_factory=list)


# natsd option -> nats-server Options field name, used in the refusal message.
_GO_NAMES: dict[str, str] = {
    "host": "Host",
    "port": "Port",
    "server_name": "ServerName",
    "http_host": "HTTPHost",
    "http_port": "HTTPPort",
    "https_port": "HTTPSPort",
    "max_pending": "MaxPending",
    "max_subs": "MaxSubs",
    "no_auth_user": "NoAuthUser",
    "jetstream": "JetStream",
    "lame_duck_duration": "LameDuckDuration",
    "lame_duck_grace_period": "LameDuckGracePeriod",
    "domain": "JetStreamDomain",
    "sync_interval": "SyncInterval",
    "sync_always": "SyncAlways",
}

_DURATIONS = {"ping_interval", "write_deadline", "lame_duck_duration", "lame_duck_grace_period"}

# Options whose change is applied (with the notice nats-server logs for it).
_NOTICES: dict[str, str] = {
    "trace": "trace = {}",
    "debug": "debug = {}",
    "log_file": "log_file = {}",
    "token": "authorization token",
    "auth_timeout": "authorization timeout = {}",
    "users": "authorization users",
    "max_connections": "max_connections = {}",
    "pid_file": "pid_file = {}",
    "max_control_line": "max_control_line = {}",
    "max_payload": "max_payload = {}",
    "ping_interval": "ping_interval = {}",
    "ping_max": "ping_max = {}",
    "write_deadline": "write_deadline = {}",
    "accounts": "accounts",
    "tls": "tls = {}",
    "allow_non_tls": "allow_non_tls = {}",
}
_LOGGING = {"trace", "debug", "log_file"}
_LIMITS = {
    "max_control_line",
    "max_payload",
    "ping_interval",
    "ping_max",
    "write_deadline",
    "auth_timeout",
}
# Not configuration: where the configuration came from; set with auth_timeout.
_SKIP = {"config_file", "auth_timeout_set"}


def go_value(name: str, v: Any) -> str:
    """A value as Go's %v prints it in nats-server's messages."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "<nil>"
    if name in _DURATIONS and isinstance(v, int | float):
        return format_duration(float(v))
    if name == "tls":
        return "enabled" if v is not None else "disabled"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _refuse(name: str, old: Any, new: Any) -> ReloadError:
    go = _GO_NAMES.get(name) or "".join(p.capitalize() for p in name.split("_"))
    return ReloadError(
        f"config reload not supported for {go}: old={go_value(name, old)}, "
        f"new={go_value(name, new)}"
    )


def plan_reload(
    old: ServerOptions, new: ServerOptions, *, jetstream_enabled: bool, default_store_dir: str
) -> ReloadPlan:
    """Compare the running options with ``new``; raise ReloadError for the first change
    that cannot be made at run time. ``default_store_dir`` is where JetStream stores when
    no store_dir is configured."""
    plan = ReloadPlan(new)
    for f in dataclasses.fields(ServerOptions):
        name = f.name
        if name in _SKIP:
            continue
        ov, nv = getattr(old, name), getattr(new, name)
        if name == "js":
            _plan_jetstream(plan, ov, nv, jetstream_enabled, default_store_dir)
            continue
        if name == "accounts":
            _plan_accounts(plan, ov, nv)
            continue
        if ov == nv:
            continue
        if name == "port" and nv <= 0:
            new.port = old.port  # a random port keeps the one it got (nats-server)
            continue
        if name == "no_auth_user":
            # nats-server allows only dropping no_auth_user along with that user.
            if ov and not nv and all(u.username != ov for u in new.users):
                continue
            raise _refuse(name, ov or "", nv or "")
        if name in _NOTICES:
            plan.notices.append("Reloaded: " + _NOTICES[name].format(go_value(name, nv)))
            plan.logging |= name in _LOGGING
            plan.limits |= name in _LIMITS
            plan.max_connections |= name == "max_connections"
            plan.pid_file |= name == "pid_file" and bool(nv)
            continue
        raise _refuse(name, ov, nv)
    return plan


def _plan_accounts(
    plan: ReloadPlan, old: dict[str, AccountConfig], new: dict[str, AccountConfig]
) -> None:
    for name, acfg in new.items():
        prev = old.get(name)
        if prev is None:
            if acfg.imports or acfg.exports:
                raise ReloadError(
                    f"config reload not supported for the imports and exports of account {name!r}"
                )
            plan.new_accounts.append(acfg)
        elif prev.jetstream != acfg.jetstream:
            raise ReloadError(
                f"config reload not supported for the JetStream limits of account {name!r}"
            )
        elif prev.imports != acfg.imports or prev.exports != acfg.exports:
            raise ReloadError(
                f"config reload not supported for the imports and exports of account {name!r}"
            )
    removed_js = [n for n, a in old.items() if n not in new and a.jetstream is not None]
    if removed_js:
        raise ReloadError(
            f"config reload not supported for removing JetStream account {removed_js[0]!r}"
        )
    if old != new:
        plan.notices.append("Reloaded: accounts")


def _plan_jetstream(
    plan: ReloadPlan,
    old: JetStreamConfig,
    new: JetStreamConfig,
    enabled: bool,
    default_store_dir: str,
) -> None:
    if enabled:
        if (new.store_dir or default_store_dir) != old.store_dir:
            raise ReloadError("config reload not supported for jetstream storage directory")
        new.store_dir = old.store_dir
    for name, ov, nv in (
        ("max_memory", old.max_memory, new.max_memory),
        ("max_file", old.max_file, new.max_file),
    ):
        if ov == nv or not enabled:
            continue
        if ov >= 0 and nv > ov:
            if name == "max_memory":
                plan.js_max_memory = nv
            else:
                plan.js_max_store = nv
            plan.notices.append("Reloaded: JetStream limits")
        elif ov >= 0 and nv < 0:
            raise ReloadError("config reload not supported for jetstream max memory and max store")
        elif ov < 0:
            raise ReloadError(
                "config reload not supported for jetstream dynamic max memory and store"
            )
        else:
            raise ReloadError(
                "config reload not supported for decreasing jetstream max memory and store"
            )
    for name in ("domain", "sync_interval", "sync_always"):
        ov, nv = getattr(old, name), getattr(new, name)
        if ov != nv:
            raise _refuse(name, ov, nv)
