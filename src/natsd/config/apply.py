"""Maps a parsed nats-server configuration file onto ServerOptions.

Each reader takes only the keys :mod:`natsd.config.policy` calls supported; the checker
reports every other key (a warning for cosmetic ones, an error for the rest). Values are
checked the way nats-server checks them where natsd would otherwise guess.
"""

from __future__ import annotations

from typing import Any

from natsd.config import policy
from natsd.config.cluster import go_type, parse_cluster
from natsd.config.links import check_links, parse_exports, parse_imports
from natsd.config.options import JS_ACCOUNT_LIMIT_KEYS, AccountConfig, ServerOptions
from natsd.config.parse import ConfigError as ParseError
from natsd.config.parse import ConfMap, parse_file
from natsd.config.policy import Checker, ConfigError
from natsd.config.tls import parse_tls
from natsd.core.clock import parse_duration
from natsd.core.goquote import go_quote
from natsd.security.auth import User
from natsd.security.nkeys import is_valid_public_account_key, is_valid_public_user_key
from natsd.security.permissions import Permissions, parse_permissions

__all__ = ["ConfigError", "apply_config", "check_workers", "load_config"]


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


def _server_tags(v: Any) -> tuple[list[str], str]:
    """nats-server's ``server_tags``: a string or a list of strings, kept as jwt's TagList
    keeps them (trimmed, lower case, without duplicates); or nats-server's error."""
    if isinstance(v, str):
        items = [v]
    elif isinstance(v, list):
        if not all(isinstance(t, str) for t in v):
            return [], "error parsing tags: unsupported type *conf.token where string is expected"
        items = v
    else:
        return [], f"error parsing tags: unsupported type {go_type(v)}"
    out: list[str] = []
    for t in items:
        t = t.strip().lower()
        if t and t not in out:
            out.append(t)
    return out, ""


def check_workers(n: int) -> int:
    """``workers`` / ``--workers``: the number of server processes; 1 is the plain server."""
    if n < 1:
        raise ConfigError(f"workers must be at least 1, got {n}")
    return n


def load_config(path: str, opts: ServerOptions | None = None) -> tuple[ServerOptions, list[str]]:
    """Read ``path`` into ``opts`` (a new ServerOptions by default); returns the options and
    the warnings for cosmetic keys. Raises :class:`ConfigError` listing every key natsd
    cannot honour, and for files that do not parse."""
    try:
        data = parse_file(path)
    except ParseError as e:
        raise ConfigError(str(e)) from None
    opts = opts or ServerOptions()
    opts.config_file = path
    warnings = apply_config(opts, data)
    return opts, warnings


def apply_config(opts: ServerOptions, data: dict[str, Any]) -> list[str]:
    """Apply ``data`` to ``opts`` in place; returns warnings for cosmetic keys and raises
    :class:`ConfigError` with one line per refused or unknown key."""
    chk = Checker()
    store_dir_set = False
    for key, v in chk.supported(policy.TOP, data, ""):
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
        elif key == "https_port":
            opts.https_port = _int(v, key)
        elif key == "https":
            h, p = _host_port(v, key)
            if h is not None:
                opts.http_host = h
            if p is not None:
                opts.https_port = p
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
            _authorization(opts, v, chk)
        elif key == "no_auth_user":
            opts.no_auth_user = str(v)
        elif key == "accounts":
            _accounts(opts, v, chk, data)
        elif key == "jetstream":
            store_dir_set |= _jetstream(opts, v, chk, store_dir_set)
        elif key in ("store_dir", "storedir"):
            if store_dir_set:
                raise ConfigError("Duplicate 'store_dir' configuration")
            opts.js.store_dir = str(v)
            store_dir_set = True
        elif key == "cluster":
            raw = next(k for k in data if str(k).lower() == key)
            parse_cluster(opts, v, chk, chk.where(data, raw))
        elif key == "debug":
            opts.debug = bool(v)
        elif key in ("trace", "trace_verbose", "trace_headers"):
            # nats-server's verbose/header tracing also turns tracing on; what a trace line
            # shows is natsd's own.
            opts.trace = bool(v)
        elif key in ("log_file", "logfile"):
            opts.log_file = str(v)
        elif key in ("pid_file", "pidfile"):
            opts.pid_file = str(v)
        elif key in ("system_account", "system"):
            opts.system_account = str(v)
        elif key == "server_tags":
            raw = next(k for k in data if str(k).lower() == key)
            tags, why = _server_tags(v)
            if why:
                chk.error(data, raw, why)
            else:
                opts.server_tags = tags
        elif key == "workers":
            opts.workers = check_workers(_int(v, key))
        elif key == "tls":
            raw = next(k for k in data if str(k).lower() == key)
            opts.tls = parse_tls(v, "tls", chk, client_port=True, where=chk.where(data, raw))
        elif key == "allow_non_tls":
            opts.allow_non_tls = bool(v)
    if chk.errors:
        raise ConfigError("\n".join(chk.errors))
    return chk.warnings


def _map(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ConfigError(f"{what} must be a map, got {v!r}")
    return v


# ---------------------------------------------------------------------- authorization
def _permissions(v: Any, path: str, chk: Checker) -> Permissions | None:
    """Check a permissions map key by key, then hand it to the security layer with
    nats-server's aliases folded (import/export, publish_allow_responses, max_msgs...)."""
    m = _map(v, path)
    folded: dict[str, Any] = {}
    for key, val in chk.supported(policy.PERMISSIONS, m, path + "."):
        if key in ("pub", "publish", "import", "sub", "subscribe", "export"):
            if isinstance(val, dict):
                # {allow, deny}, any case: lower-cased here so none is missed below.
                val = dict(chk.supported(policy.SUBJECT_PERMISSION, val, f"{path}.{key}."))
            folded["publish" if key in ("pub", "publish", "import") else "subscribe"] = val
        else:
            folded["allow_responses"] = _allow_responses(val, f"{path}.{key}", chk)
    return parse_permissions(folded) if folded else None


def _allow_responses(v: Any, path: str, chk: Checker) -> Any:
    if isinstance(v, bool):
        return v
    out: dict[str, Any] = {}
    for key, val in chk.supported(policy.ALLOW_RESPONSES, _map(v, path), path + "."):
        out["expires" if key in ("expires", "expiration", "ttl") else "max"] = val
    return out


def _users(spec: Any, account: str, path: str, chk: Checker) -> list[User]:
    if not isinstance(spec, list):
        raise ConfigError(f"{path}: users must be an array")
    out = []
    for i, u in enumerate(spec):
        if not isinstance(u, dict):
            raise ConfigError(f"{path}: each user must be a map")
        name = password = nkey = ""
        perms: Permissions | None = None
        where = f"{path}[{i}]"
        for key, val in chk.supported(policy.USER, u, where + "."):
            if key in ("user", "username"):
                name = str(val)
            elif key in ("pass", "password"):
                password = str(val)
            elif key == "nkey":
                nkey = str(val)
            elif key in ("allowed_connection_types", "connection_types", "clients"):
                _connection_types(val, f"{where}.{key}", chk)
            else:
                perms = _permissions(val, f"{where}.{key}", chk)
        if nkey:
            if not is_valid_public_user_key(nkey):
                raise ConfigError(f"{where}: Not a valid public nkey for a user")
            if name or password:
                raise ConfigError(f"{where}: Nkey users do not take usernames or passwords")
            out.append(User(nkey, "", account, perms, nkey=nkey))
            continue
        if not name:
            raise ConfigError(f"{where}: User entry requires a user")
        out.append(User(username=name, password=password, account=account, permissions=perms))
    return out


# nats-server's connection types (jwt.ConnectionType*). natsd serves standard client
# connections only; a user allowed others would be allowed what natsd does not serve.
_CONNECTION_TYPES = frozenset(
    ("STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS")
)


def _connection_types(v: Any, path: str, chk: Checker) -> None:
    """``allowed_connection_types``: STANDARD is what every natsd client connection is; the
    other kinds nats-server knows are refused by name (natsd serves none of them)."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{path}: error parsing allowed connection types: expected strings")
    unknown = [ct for ct in items if ct.upper() not in _CONNECTION_TYPES]
    if unknown:
        # nats-server's convertAllowedConnectionTypes: the unknown ones, as Go's %q of a list
        raise ConfigError(f"{path}: invalid connection types [{' '.join(map(go_quote, unknown))}]")
    for ct in items:
        up = ct.upper()
        if up != "STANDARD":
            chk.errors.append(
                f'config key "{path}" value {up} is not supported by natsd'
                f" (natsd serves no {up} connections)"
            )


def _with_defaults(users: list[User], defaults: Permissions | None) -> list[User]:
    """nats-server's ``applyDefaultPermissions``: users without permissions of their own
    get the block's default permissions."""
    if defaults is not None:
        for u in users:
            if u.permissions is None:
                u.permissions = defaults
    return users


def _authorization(opts: ServerOptions, v: Any, chk: Checker) -> None:
    m = _map(v, "authorization")
    user = password = None
    users: list[User] = []
    perms: Permissions | None = None
    for key, val in chk.supported(policy.AUTHORIZATION, m, "authorization."):
        if key in ("user", "username"):
            user = str(val)
        elif key in ("pass", "password"):
            password = str(val)
        elif key == "token":
            opts.token = str(val)
        elif key == "users":
            users = _users(val, "$G", "authorization.users", chk)
        elif key == "timeout":
            opts.auth_timeout = _dur(val, "authorization.timeout")
            opts.auth_timeout_set = True
        else:
            perms = _permissions(val, f"authorization.{key}", chk)
    if user is not None:
        # nats-server ignores the permissions of this block for its single user; natsd has
        # always applied them, which never grants more than nats-server does.
        opts.users.append(User(user, password or "", "$G", perms))
    opts.users.extend(_with_defaults(users, perms))


# ---------------------------------------------------------------------- accounts
def _accounts(opts: ServerOptions, v: Any, chk: Checker, top: dict[str, Any]) -> None:
    if isinstance(v, list):
        # `accounts: [A, B]`: names only.
        for name in v:
            if not isinstance(name, str):
                raise ConfigError(f"accounts: expected account names, got {name!r}")
            _new_account(opts, name)
        return
    m = _map(v, "accounts")
    used: set[str] = m.used if isinstance(m, ConfMap) else set()
    for name, spec in m.items():
        if name in used:
            continue  # a variable for other accounts, as nats-server skips it
        if not isinstance(spec, dict):
            raise ConfigError(f"accounts.{name}: expected map entries for accounts")
        acfg = _new_account(opts, str(name))
        users: list[User] = []
        defaults: Permissions | None = None
        prefix = f"accounts.{name}."
        for key, val in chk.supported(policy.ACCOUNT, spec, prefix):
            if key == "users":
                users = _users(val, acfg.name, prefix + "users", chk)
            elif key == "jetstream":
                acfg.jetstream = _account_jetstream(val, prefix + "jetstream", chk)
            elif key == "exports":
                acfg.exports = parse_exports(val, spec, prefix + "exports", chk)
            elif key == "imports":
                acfg.imports = parse_imports(val, spec, prefix + "imports", chk)
            elif key == "nkey":
                if not isinstance(val, str) or not is_valid_public_account_key(val):
                    raise ConfigError(
                        f'{prefix}nkey: Not a valid public nkey for an account: "{val}"'
                    )
                acfg.nkey = val
            else:
                defaults = _permissions(val, prefix + key, chk)
        opts.users.extend(_with_defaults(users, defaults))
    if not chk.errors:
        check_links(opts.accounts, top, chk)


def _new_account(opts: ServerOptions, name: str) -> AccountConfig:
    if name == "$G":
        raise ConfigError(f'"{name}" is a Reserved Account')
    if name in opts.accounts:
        raise ConfigError(f"Duplicate Account Entry: {name}")
    acfg = opts.accounts[name] = AccountConfig(name)
    return acfg


def _account_jetstream(v: Any, path: str, chk: Checker) -> dict[str, Any] | None:
    """``parseJetStreamForAccount``: a bool, "enabled"/"disabled", or a map of limits with
    nats-server's types (sizes are integers, ``max_bytes_required`` a boolean)."""
    if isinstance(v, bool):
        return {} if v else None
    if isinstance(v, str):
        if v.lower() in ("enabled", "enable"):
            return {}
        if v.lower() in ("disabled", "disable"):
            return None
        raise ConfigError(f"{path}: Expected 'enabled' or 'disabled' for string value, got '{v}'")
    if not isinstance(v, dict):
        raise ConfigError(f"{path}: Expected map, bool or string to define JetStream, got {v!r}")
    limits: dict[str, Any] = {}
    for key, val in chk.supported(policy.ACCOUNT_JETSTREAM, v, path + "."):
        name = JS_ACCOUNT_LIMIT_KEYS[key]
        if name == "max_bytes_required":
            if not isinstance(val, bool):
                raise ConfigError(f'{path}: Expected a parseable bool for "{key}", got {val!r}')
        elif isinstance(val, bool) or not isinstance(val, int):
            raise ConfigError(f'{path}: Expected a parseable size for "{key}", got {val!r}')
        limits[name] = val
    return limits


# ---------------------------------------------------------------------- jetstream
def _jetstream(opts: ServerOptions, v: Any, chk: Checker, store_dir_set: bool) -> bool:
    """The top-level ``jetstream`` key; returns whether it set the store directory."""
    if isinstance(v, bool):
        opts.jetstream = v
        return False
    if isinstance(v, str):
        if v.lower() in ("enabled", "enable", "disabled", "disable"):
            opts.jetstream = v.lower() in ("enabled", "enable")
            return False
        raise ConfigError(
            f"jetstream: Expected 'enabled' or 'disabled' for string value, got '{v}'"
        )
    if not isinstance(v, dict):
        raise ConfigError("jetstream must be a map or a boolean")
    enabled = True
    js = opts.js
    for key, val in chk.supported(policy.JETSTREAM, v, "jetstream."):
        if key in ("store_dir", "storedir", "store"):
            if store_dir_set:
                raise ConfigError("Duplicate 'store_dir' configuration")
            js.store_dir = str(val)
            store_dir_set = True
        elif key in ("max_mem", "max_memory", "max_memory_store", "max_mem_store"):
            js.max_memory = _int(val, f"jetstream.{key}")
        elif key in ("max_file", "max_file_store", "max_store"):
            js.max_file = _int(val, f"jetstream.{key}")
        elif key == "domain":
            js.domain = str(val)
        elif key in ("sync_interval", "sync"):
            if str(val).lower() == "always":
                js.sync_always = True
            else:
                js.sync_interval = _dur(val, f"jetstream.{key}")
        elif key in ("enabled", "enable"):
            enabled = bool(val)
        elif key == "strict":
            # natsd always decodes API requests strictly, which is what `strict: true` asks.
            if val is not True:
                chk.refuse(v, key, "jetstream.strict", "natsd's JetStream API is always strict")
    opts.jetstream = enabled
    return store_dir_set
