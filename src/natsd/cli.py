"""Command line: nats-server compatible flags (Go flag syntax) and config files.

Argument and config parsing only; ``server.Server`` does the work. Go's flag package
accepts ``-flag``, ``--flag``, ``-flag=value``, ``-flag value`` and, for booleans,
``-flag=false``; a value may start with a dash (``--port -1``). argparse does not, so the
flags are parsed here from a table.

Signals are nats-server's (server/signal.go): SIGINT and SIGTERM shut down (SIGTERM is
ignored during lame duck mode), SIGHUP reloads the configuration file (flags still win),
SIGUSR1 reopens the log file, SIGUSR2 enters lame duck mode. ``--signal <cmd>[=<pid>]``
sends one of them to a running natsd, as ``nats-server --signal`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    -sl,--signal <signal>[=<pid>]    Send signal to natsd process
                                     (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path
                                     to a PID file (e.g. /var/run/natsd.pid)
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
    if parsed.signal:
        try:
            send_signal(parsed.signal)
        except SignalError as e:
            print(f"natsd: {e}", file=sys.stderr)
            return 1
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
    return run(opts, parsed if parsed.config_file else None)


def run(opts: ServerOptions, parsed_config: Parsed | None = None) -> int:
    """Serve until a signal stops the server; ``parsed_config`` (the command line, when it
    names a configuration file) is read again on SIGHUP."""
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
        except (OSError, ValueError) as e:
            log.error("%s", e)
            return 1
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        def on_signal(sig: int) -> None:
            log.info("Trapped %s signal", _SIGNAL_NAMES.get(sig, str(sig)))
            if sig == signal.SIGHUP:
                try:
                    server.reload_config()
                except Exception as e:  # any failure keeps the old configuration
                    log.error("Failed to reload server configuration: %s", e)
            elif sig == signal.SIGUSR1:
                server.reopen_log_file()
            elif sig == signal.SIGUSR2:
                tasks.add(loop.create_task(server.lame_duck()))
            elif sig == signal.SIGINT or not server.ldm:
                tasks.add(loop.create_task(server.shutdown()))

        if parsed_config is not None:
            cmdline = parsed_config
            server.options_loader = lambda: build_options(cmdline)
        # Before start: a signal sent once "Server is ready" is logged must find its handler.
        for sig in _TRAPPED:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal, sig)
        try:
            await server.start()
            tune_gc()
        except (OSError, ValueError) as e:
            log.error("%s", e)
            return 1
        await server.wait_stopped()
        # Let the shutdown task finish closing connections before the loop ends.
        await asyncio.sleep(0.05)
        return 0

    result = runner(serve())
    return int(result) if isinstance(result, int) else 0


_TRAPPED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
# Go's names for the signals, which nats-server logs ("Trapped \"hangup\" signal").
_SIGNAL_NAMES: dict[int, str] = {
    signal.SIGINT: '"interrupt"',
    signal.SIGTERM: '"terminated"',
    signal.SIGHUP: '"hangup"',
    signal.SIGUSR1: '"user defined signal 1"',
    signal.SIGUSR2: '"user defined signal 2"',
}

# nats-server CommandToSignal.
_COMMANDS = {
    "stop": signal.SIGKILL,
    "quit": signal.SIGINT,
    "reopen": signal.SIGUSR1,
    "reload": signal.SIGHUP,
    "ldm": signal.SIGUSR2,
    "term": signal.SIGTERM,
}


class SignalError(Exception):
    pass


def send_signal(spec: str) -> None:
    """``--signal <command>[=<pid or pid file>]`` (nats-server processSignal/ProcessSignal).

    Without a pid the one running natsd is found (an error if there are none or several);
    a pid ending in ``*`` signals every natsd whose pid starts with it.
    """
    command, sep, target = spec.partition("=")
    if sep and "=" in target:
        # Go prints the extra parts as %v of a []string: "[2 3]".
        raise SignalError(f"invalid signal parameters: [{' '.join(target.split('=')[1:])}]")
    if sep:
        with contextlib.suppress(OSError):
            target = Path(target).read_text()
    target = target.strip()
    is_glob = target.endswith("*")
    prefix = target.rstrip("*")
    pids: list[int] = []
    if prefix:
        try:
            pids = [int(prefix)]
        except ValueError:
            raise SignalError(f"invalid pid: {prefix}") from None
    if not prefix or is_glob:
        pids = _natsd_pids()
        if is_glob:
            pids = [p for p in pids if str(p).startswith(prefix)]
    if len(pids) > 1 and not is_glob:
        raise SignalError("multiple natsd processes running:" + "".join(f"\n{p}" for p in pids))
    if not pids:
        raise SignalError("no natsd processes running")
    signum = _COMMANDS.get(command)
    if signum is None:
        raise SignalError(f'unknown signal "{command}"')
    errors = ""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError as e:
            errors += f'\nsignal "{command}" {pid}: {e.strerror}'
    if errors:
        raise SignalError(errors)


def _natsd_pids() -> list[int]:
    """Running natsd processes other than this one, from /proc (``natsd ...``,
    ``python -m natsd ...`` or ``python .../natsd ...``)."""
    me = os.getpid()
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        raise SignalError("unable to resolve pid, try providing one") from None
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if _is_natsd(argv):
            out.append(int(entry))
    return sorted(out)


def _is_natsd(argv: list[bytes]) -> bool:
    if not argv or not argv[0]:
        return False
    if os.path.basename(argv[0]) == b"natsd":
        return True
    if not os.path.basename(argv[0]).startswith(b"python"):
        return False
    args = argv[1:]
    if len(args) >= 2 and args[0] == b"-m" and args[1] == b"natsd":
        return True
    return bool(args) and os.path.basename(args[0]) == b"natsd"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
