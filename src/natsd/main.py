"""The ``natsd`` command: parse the command line, then serve until a signal stops the server.

With ``server.py`` this is the composition root: the flags and the configuration file become
``ServerOptions`` in ``natsd.config``; this module turns them into a running ``Server`` on
uvloop and wires the process signals to it.

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
from pathlib import Path

from natsd.config.flags import USAGE, FlagError, Parsed, build_options, parse_args
from natsd.config.options import ServerOptions
from natsd.core.build import BUILD
from natsd.logs import setup_logging
from natsd.version import SERVER_VERSION, __version__
from natsd.workers import (
    EXIT_CONFIG,
    SIGNAL_NAMES,
    WORKER_ENV,
    check_plan,
    plan_workers,
    supervise,
)

__all__ = ["SignalError", "main", "run", "send_signal"]

log = logging.getLogger("natsd")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        parsed = parse_args(args)
    except FlagError as e:
        print(f"natsd: {e}\n", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return _config_error()
    if parsed.show_help:
        print(USAGE)
        return 0
    if parsed.show_version:
        print(f"natsd: v{__version__} (nats-server v{SERVER_VERSION} compatible, {BUILD})")
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
        return _config_error()
    if parsed.test_config:
        if opts.workers > 1:
            try:
                check_plan(plan_workers(args, opts))
            except (ValueError, OSError) as e:
                print(f"natsd: {e}", file=sys.stderr)
                return 1
        for w in warnings:
            print(f"natsd: warning: {w}", file=sys.stderr)
        print(f"natsd: configuration file {parsed.config_file} test is successful")
        return 0
    setup_logging(opts.debug, opts.trace, opts.log_file)
    for w in warnings:
        log.warning("%s", w)
    if opts.workers > 1:
        reload_check = None
        if parsed.config_file:
            reload_check = lambda: build_options(parsed)[0]  # noqa: E731
        return supervise(args, opts, reload_check)
    return run(opts, parsed if parsed.config_file else None)


def _config_error() -> int:
    """The exit code of a configuration nats-server refuses too: 1, as nats-server; a worker
    of ``--workers`` exits ``EXIT_CONFIG`` so that its supervisor does not restart it."""
    return EXIT_CONFIG if os.environ.get(WORKER_ENV) else 1


def run(opts: ServerOptions, parsed_config: Parsed | None = None) -> int:
    """Serve until a signal stops the server; ``parsed_config`` (the command line, when it
    names a configuration file) is read again on SIGHUP."""
    # Imported here, not at the top: ``natsd -h``, ``-v``, ``-t`` and ``--signal`` never
    # start a server and should not pay ~100 ms for loading it (asyncio, aiohttp, the stores).
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
        except ValueError as e:
            log.error("%s", e)
            return _config_error()
        except OSError as e:
            log.error("%s", e)
            return 1
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        def on_signal(sig: int) -> None:
            log.info("Trapped %s signal", SIGNAL_NAMES.get(sig, str(sig)))
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
        # Let the shutdown task finish before the loop ends: it hands Raft leaderships over
        # and passes on the publishes that met them (up to a second or two), then closes
        # the connections. Ending the loop at once cut that short: a SIGTERM'd stream
        # leader left its clients to wait out their timeouts.
        pending = [t for t in tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_GRACE)
        await asyncio.sleep(0.05)
        return 0

    result = runner(serve())
    return int(result) if isinstance(result, int) else 0


# How long the process waits for its shutdown (leadership handover included) to finish.
SHUTDOWN_GRACE = 5.0

_TRAPPED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
# Go's names for the signals, which nats-server logs ("Trapped \"hangup\" signal").

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
