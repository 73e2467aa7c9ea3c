"""natsd's command line: nats-server compatible flags (Go flag syntax) -> ServerOptions.

Argument parsing only; ``natsd.main`` runs the server. Go's flag package accepts ``-flag``,
``--flag``, ``-flag=value``, ``-flag value`` and, for booleans, ``-flag=false``; a value may
start with a dash (``--port -1``). argparse does not, so the flags are parsed here from a
table. ``build_options`` reads the configuration file first and puts the flags on top (flags
win, as in nats-server); the server calls it again on SIGHUP.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from natsd.config.apply import check_workers, load_config
from natsd.config.cluster import apply_cluster_flags, refuse_unwired, validate_cluster
from natsd.config.options import ServerOptions
from natsd.config.tls import apply_tls_flags
from natsd.core.clock import parse_duration
from natsd.security.auth import User
from natsd.version import SERVER_VERSION, __version__

__all__ = ["USAGE", "FlagError", "Parsed", "build_options", "parse_args"]


class FlagError(ValueError):
    pass


@dataclass
class Parsed:
    opts: ServerOptions
    config_file: str
    explicit: dict[str, object]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    show_version: bool = False
    show_help: bool = False
    test_config: bool = False
    signal: str = ""


# name -> (dest, kind); kind in "str", "int", "bool"
_FLAGS: dict[str, tuple[str, str]] = {}


def _flag(names: Sequence[str], dest: str, kind: str) -> None:
    for n in names:
        _FLAGS[n] = (dest, kind)


_flag(["a", "addr", "net", "host"], "host", "str")
_flag(["p", "port"], "port", "int")
_flag(["n", "name", "server_name"], "server_name", "str")
_flag(["js", "jetstream"], "jetstream", "bool")
_flag(["sd", "store_dir"], "store_dir", "str")
_flag(["c", "config"], "config", "str")
_flag(["m", "http_port"], "http_port", "int")
_flag(["http_host"], "http_host", "str")
_flag(["ms", "https_port"], "https_port", "int")
_flag(["user"], "user", "str")
_flag(["pass"], "pass", "str")
_flag(["auth"], "auth", "str")
_flag(["D", "debug"], "debug", "bool")
_flag(["V", "trace"], "trace", "bool")
_flag(["DV"], "debug_trace", "bool")
_flag(["VV", "DVV"], "debug_trace", "bool")
_flag(["l", "log"], "log_file", "str")
_flag(["P", "pid"], "pid_file", "str")
_flag(["max_payload"], "max_payload", "int")
_flag(["ping_interval"], "ping_interval", "str")
_flag(["max_pending"], "max_pending", "int")
_flag(["no_auth_user"], "no_auth_user", "str")
# Cluster (nats-server's names; --cluster_listen is --cluster's other spelling).
_flag(["routes"], "routes", "str")
_flag(["cluster", "cluster_listen"], "cluster", "str")
_flag(["cluster_name"], "cluster_name", "str")
_flag(["cluster_advertise"], "cluster_advertise", "str")
_flag(["no_advertise"], "no_advertise", "bool")
_flag(["connect_retries"], "connect_retries", "int")
# TLS (nats-server's; config/tls.py applies them over the file's tls {}).
_flag(["tls"], "tls", "bool")
_flag(["tlsverify"], "tlsverify", "bool")
_flag(["tlscert"], "tlscert", "str")
_flag(["tlskey"], "tlskey", "str")
_flag(["tlscacert"], "tlscacert", "str")
# Multi-core (natsd only): a supervisor and N server processes (natsd/workers.py).
_flag(["workers"], "workers", "int")
_flag(["reuse_port"], "reuse_port", "bool")
_flag(["v", "version"], "version", "bool")
_flag(["h", "help"], "help", "bool")
_flag(["t"], "test", "bool")
_flag(["sl", "signal"], "signal", "str")
# Accepted for script compatibility; they change nothing natsd does.
_flag(["T", "logtime", "s", "syslog"], "ignored_bool", "bool")

_TRUE = {"1", "t", "true", "yes", "on"}
_FALSE = {"0", "f", "false", "no", "off"}


def parse_args(argv: Sequence[str]) -> Parsed:
    values: dict[str, object] = {}
    i = 0
    args = list(argv)
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-") or a in ("-", "--"):
            raise FlagError(f"unexpected argument {a!r}")
        name = a.lstrip("-")
        val: str | None = None
        if "=" in name:
            name, val = name.split("=", 1)
        spec = _FLAGS.get(name)
        if spec is None:
            raise FlagError(f"flag provided but not defined: -{name}")
        dest, kind = spec
        if kind == "bool":
            if val is None or val.lower() in _TRUE:
                values[dest] = True
            elif val.lower() in _FALSE:
                values[dest] = False
            else:
                raise FlagError(f'invalid boolean value "{val}" for -{name}')
            continue
        if val is None:
            if i >= len(args):
                raise FlagError(f"flag needs an argument: -{name}")
            val = args[i]
            i += 1
        if kind == "int":
            try:
                values[dest] = _go_int(val)
            except ValueError:
                raise FlagError(f'invalid value "{val}" for flag -{name}: parse error') from None
        else:
            values[dest] = val
    return Parsed(
        opts=ServerOptions(),
        config_file=str(values.pop("config", "")),
        explicit=values,
        show_version=bool(values.pop("version", False)),
        show_help=bool(values.pop("help", False)),
        test_config=bool(values.pop("test", False)),
        signal=str(values.pop("signal", "")),
    )


def _go_int(val: str) -> int:
    """strconv.ParseInt(s, 0, 64): 0x/0o/0b prefixes and leading-zero octal."""
    sign = -1 if val.startswith("-") else 1
    body = val.lstrip("+-")
    if len(body) > 1 and body[0] == "0" and body[1].isdigit():
        return sign * int(body, 8)
    return sign * int(body, 0)


def build_options(parsed: Parsed) -> tuple[ServerOptions, list[str]]:
    """Config file first, then flags on top (flags win, as in nats-server), then the checks
    nats-server makes when it creates the server; a cluster that passes them is refused
    (``natsd.config.cluster``)."""
    warnings: list[str] = []
    opts = ServerOptions()
    if parsed.config_file:
        opts, warnings = load_config(parsed.config_file, opts)
    v = parsed.explicit
    setters: dict[str, Callable[[object], None]] = {
        "host": lambda x: setattr(opts, "host", str(x)),
        "port": lambda x: setattr(opts, "port", 0 if int(str(x)) < 0 else int(str(x))),
        "server_name": lambda x: setattr(opts, "server_name", str(x)),
        "jetstream": lambda x: setattr(opts, "jetstream", bool(x)),
        "store_dir": lambda x: setattr(opts.js, "store_dir", str(x)),
        "http_port": lambda x: setattr(opts, "http_port", int(str(x))),
        "http_host": lambda x: setattr(opts, "http_host", str(x)),
        "https_port": lambda x: setattr(opts, "https_port", int(str(x))),
        "debug": lambda x: setattr(opts, "debug", bool(x)),
        "trace": lambda x: setattr(opts, "trace", bool(x)),
        "log_file": lambda x: setattr(opts, "log_file", str(x)),
        "pid_file": lambda x: setattr(opts, "pid_file", str(x)),
        "max_payload": lambda x: setattr(opts, "max_payload", int(str(x))),
        "max_pending": lambda x: setattr(opts, "max_pending", int(str(x))),
        "no_auth_user": lambda x: setattr(opts, "no_auth_user", str(x)),
        "workers": lambda x: setattr(opts, "workers", check_workers(int(str(x)))),
        "reuse_port": lambda x: setattr(opts, "reuse_port", bool(x)),
    }
    for dest, val in v.items():
        if dest in setters:
            setters[dest](val)
        elif dest == "debug_trace":
            opts.debug = opts.trace = bool(val)
        elif dest == "ping_interval":
            opts.ping_interval = parse_duration(str(val))
    if "store_dir" in v and "jetstream" not in v and not parsed.config_file:
        # nats-server enables nothing from -sd alone; keep that.
        pass
    user, password, token = v.get("user"), v.get("pass"), v.get("auth")
    if user is not None:
        opts.users = [u for u in opts.users if u.username != user]
        opts.users.append(User(str(user), str(password or ""), "$G"))
    if token is not None:
        opts.token = str(token)
    apply_tls_flags(opts, v)
    apply_cluster_flags(opts, v)
    validate_cluster(opts)
    refuse_unwired(opts)
    return opts, warnings


USAGE = f"""Usage: natsd [options]

natsd {__version__} - a NATS server in Python (nats-server {SERVER_VERSION} protocol)

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222, -1 for random)
    -n, --name <server_name>         Server name (default: server id)
    -m, --http_port <port>           Use port for http monitoring (-1 for random)
    -ms,--https_port <port>          Use port for https monitoring (the tls {{}} certificates)
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to natsd process
                                     (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path
                                     to a PID file (e.g. /var/run/natsd.pid)
    -P, --pid <file>                 File to store PID
    --max_payload <bytes>            Maximum payload size
TLS Options:
    --tls                            Enable TLS, do not verify clients (default: false)
    --tlscert <file>                 Server certificate file
    --tlskey <file>                  Private key for server certificate
    --tlsverify                      Enable TLS, verify client certificates
    --tlscacert <file>               Client certificate CA for verification
Cluster Options:
    --routes <rurl-1, rurl-2>        Routes to solicit and connect
    --cluster <cluster-url>          Cluster URL for solicited routes
    --cluster_listen <cluster-url>   Same as --cluster
    --cluster_name <string>          Cluster name
    --no_advertise <bool>            Do not advertise known cluster information to clients
    --cluster_advertise <string>     Cluster URL to advertise to other servers
    --connect_retries <number>       For implicit routes, number of connect retries
Multi-core Options:
    --workers <n>                    Run n server processes sharing the client port,
                                     joined by routes on loopback, under a supervisor
                                     (default: 1, the plain server; config: workers: n)
    --reuse_port                     Share the client port with other processes
                                     (SO_REUSEPORT; --workers sets it for its workers)
JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory
Authorization Options:
    --user <user>                    User required for connections
    --pass <password>                Password required for connections
    --auth <token>                   Authorization token required for connections
    --no_auth_user <user>            User used for connections without credentials
Logging Options:
    -l, --log <file>                 File to redirect log output
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -DV                              Debug and trace
Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
"""
