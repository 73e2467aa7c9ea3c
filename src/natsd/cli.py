"""Command line: nats-server compatible flags (Go flag syntax) and config files.

Argument and config parsing only; ``server.Server`` does the work. Go's flag package
accepts ``-flag``, ``--flag``, ``-flag=value``, ``-flag value`` and, for booleans,
``-flag=false``; a value may start with a dash (``--port -1``). argparse does not, so the
flags are parsed here from a table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from natsd.options import ServerOptions
from natsd.version import SERVER_VERSION, __version__

__all__ = ["FlagError", "main", "parse_args"]

log = logging.getLogger("natsd")


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
_flag(["v", "version"], "version", "bool")
_flag(["h", "help"], "help", "bool")
_flag(["t"], "test", "bool")
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
    )


def _go_int(val: str) -> int:
    """strconv.ParseInt(s, 0, 64): 0x/0o/0b prefixes and leading-zero octal."""
    sign = -1 if val.startswith("-") else 1
    body = val.lstrip("+-")
    if len(body) > 1 and body[0] == "0" and body[1].isdigit():
        return sign * int(body, 8)
    return sign * int(body, 0)


def build_options(parsed: Parsed) -> tuple[ServerOptions, list[str]]:
    """Config file first, then flags on top (flags win, as in nats-server)."""
    from natsd.config import load_config
    from natsd.security.auth import User

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
        "debug": lambda x: setattr(opts, "debug", bool(x)),
        "trace": lambda x: setattr(opts, "trace", bool(x)),
        "log_file": lambda x: setattr(opts, "log_file", str(x)),
        "pid_file": lambda x: setattr(opts, "pid_file", str(x)),
        "max_payload": lambda x: setattr(opts, "max_payload", int(str(x))),
        "max_pending": lambda x: setattr(opts, "max_pending", int(str(x))),
        "no_auth_user": lambda x: setattr(opts, "no_auth_user", str(x)),
    }
    for dest, val in v.items():
        if dest in setters:
            setters[dest](val)
        elif dest == "debug_trace":
            opts.debug = opts.trace = bool(val)
        elif dest == "ping_interval":
            from natsd.core.clock import parse_duration

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
    return opts, warnings


_USAGE = f"""Usage: natsd [options]

natsd {__version__} - a NATS server in Python (nats-server {SERVER_VERSION} protocol)

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222, -1 for random)
    -n, --name <server_name>         Server name (default: server id)
    -m, --http_port <port>           Use port for http monitoring (-1 for random)
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -P, --pid <file>                 File to store PID
    --max_payload <bytes>            Maximum payload size
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


def main(argv: Sequence[str] | None = None) -> int:
    from natsd.logs import setup_logging

    try:
        parsed = parse_args(sys.argv[1:] if argv is None else argv)
    except FlagError as e:
        print(f"natsd: {e}\n", file=sys.stderr)
        print(_USAGE, file=sys.stderr)
        return 1
    if parsed.show_help:
        print(_USAGE)
        return 0
    if parsed.show_version:
        print(f"natsd: v{__version__} (nats-server v{SERVER_VERSION} compatible)")
        return 0
    try:
        opts, warnings = build_options(parsed)
    except (ValueError, OSError) as e:
        print(f"natsd: {e}", file=sys.stderr)
        return 1
    if parsed.test_config:
        for w in warnings:
            print(f"natsd: warning: {w}", file=sys.stderr)
        print(f"natsd: configuration file {parsed.config_file} test is successful")
        return 0
    setup_logging(opts.debug, opts.trace, opts.log_file)
    for w in warnings:
        log.warning("%s", w)
    return run(opts)


def run(opts: ServerOptions) -> int:
    from natsd.server import Server, tune_allocator, tune_gc

    tune_allocator()
    try:
        import uvloop

        runner: Callable[..., object] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        runner = asyncio.run

    async def serve() -> int:
        try:
            server = Server(opts)
            await server.start()
            tune_gc()
        except (OSError, ValueError) as e:
            log.error("%s", e)
            return 1
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        def stop(sig: int) -> None:
            log.info("Trapped %r signal", signal.Signals(sig).name)
            if opts.lame_duck_duration > 0 and sig == signal.SIGUSR2:
                tasks.add(loop.create_task(server.lame_duck(opts.lame_duck_duration)))
            else:
                tasks.add(loop.create_task(server.shutdown()))

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop, sig)
        await server.wait_stopped()
        # Let the shutdown task finish closing connections before the loop ends.
        await asyncio.sleep(0.05)
        return 0

    result = runner(serve())
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
