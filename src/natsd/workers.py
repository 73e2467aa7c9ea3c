"""``natsd --workers N``: one supervisor process and N server processes on one machine.

CPython runs one thread of Python at a time, so one natsd uses one core. The workers are
ordinary natsd servers (``python -m natsd`` with the supervisor's own command line, so the
same configuration file and flags, and the compiled or pure build the environment picks),
with these flags put last, where they win (natsd flags, like Go's, keep the last value):

* ``--reuse_port --port P``: every worker listens on the one client port (SO_REUSEPORT); the
  kernel spreads new connections over them, so clients see one URL;
* ``--name <name>-w<i>``: ``<name>`` is ``server_name``, or ``<hostname>-<port>`` (stable
  across restarts, so a restarted worker comes back under the same name);
* ``--cluster``/``--routes``/``--cluster_name``: the workers join each other by routes on
  loopback. Worker i listens on ``cluster.port + i - 1`` when a cluster port is configured
  (w1 on the configured port, so other machines' routes to it still reach this one),
  otherwise on a free loopback port picked once at start; every worker gets the whole list
  (itself included: the mesh drops the route to itself) plus the configured routes; the
  cluster name is the configured one or ``<name>-workers``;
* ``-m http_port + i`` when monitoring is on (the supervisor serves ``/healthz`` on
  ``http_port``, see ``Supervisor.healthz``), ``-sd <store_dir>/w<i>`` with JetStream;
* ``--workers 1`` (a worker never supervises) and ``--pid=`` (the supervisor owns the pid
  file).

With exactly 2 workers and no configured routes the supervisor also gives each worker
``NATSD_HANDOFF_DIR``, a temporary directory (removed when the supervisor exits) where each
listens on a Unix socket: a connection that publishes only to the other worker is passed
there (``cluster/handoff.py``).

Workers are numbered from 1, so ``http_port`` itself stays the supervisor's.

Before starting anything the supervisor builds every worker's options from that command line
exactly as the worker will, so a configuration the workers would refuse (JetStream with a
cluster, today) is reported once and nothing starts. A worker that still exits with
``EXIT_CONFIG`` (it is told it is one by ``WORKER_ENV``; a plain natsd exits 1 as
nats-server) is not restarted: the supervisor stops the others and exits 1; nor is a worker
whose first start fails (an exit code before it ever served). Any other exit (a kill -9, a
crash of a worker that served) is restarted after a back-off that doubles per quick failure
up to ``BACKOFF_MAX``. SIGTERM and SIGINT stop every worker (SIGKILL after ``STOP_GRACE``), SIGHUP
(reload) and SIGUSR1 (reopen the log) are forwarded, SIGUSR2 (lame duck) is forwarded and the
supervisor exits once the workers have. On Linux a worker also gets SIGTERM if the supervisor
dies (PR_SET_PDEATHSIG), so a kill -9 of the supervisor leaves no orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from natsd.cluster.handoff import HANDOFF_ENV
from natsd.config.flags import build_options, parse_args
from natsd.config.options import ServerOptions

__all__ = [
    "EXIT_CONFIG",
    "SIGNAL_NAMES",
    "WORKER_ENV",
    "WorkerPlan",
    "WorkerSpec",
    "check_plan",
    "plan_workers",
    "supervise",
]

log = logging.getLogger("natsd")

# nats-server's names of the signals it traps, as its log lines quote them (main and the
# supervisor log "Trapped ... signal" alike).
SIGNAL_NAMES: dict[int, str] = {
    signal.SIGINT: '"interrupt"',
    signal.SIGTERM: '"terminated"',
    signal.SIGHUP: '"hangup"',
    signal.SIGUSR1: '"user defined signal 1"',
    signal.SIGUSR2: '"user defined signal 2"',
}

# Set in a worker's environment (to its name): its configuration errors exit EXIT_CONFIG.
WORKER_ENV = "NATSD_WORKER"
EXIT_CONFIG = 78  # sysexits.h EX_CONFIG
BACKOFF_MIN = 0.25
BACKOFF_MAX = 10.0
# A worker that ran this long before dying is restarted after BACKOFF_MIN again.
BACKOFF_RESET = 10.0
STOP_GRACE = 15.0
_HEALTH_TIMEOUT = 2.0


@dataclass
class WorkerSpec:
    index: int  # 1..N
    name: str
    args: list[str]  # natsd's arguments (after ``python -m natsd``)
    cluster_port: int
    monitor_port: int = 0  # 0: no monitoring
    # Where the supervisor sees the worker's route listener, which opens after the client
    # listener: accepting there means the worker serves clients.
    probe_host: str = "127.0.0.1"


@dataclass
class WorkerPlan:
    port: int
    name: str
    cluster_name: str
    workers: list[WorkerSpec] = field(default_factory=list)
    http_host: str = ""
    http_port: int = 0  # the supervisor's /healthz; 0: none
    # Connections may move between the workers (cluster/handoff.py): two workers and no
    # route to another server.
    handoff: bool = False


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the kernel's pick; another process could take it first,
    which makes that worker fail to start and be restarted on the same port)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _loopback(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def plan_workers(
    argv: Sequence[str], opts: ServerOptions, pick_port: Callable[[str], int] = free_port
) -> WorkerPlan:
    """The command line of each of the ``opts.workers`` workers (see the module docstring).
    Raises ValueError for what a set of workers cannot do."""
    n = opts.workers
    c = opts.cluster
    if c.advertise:
        # One address for N listeners: peers would reach one worker only.
        raise ValueError("cluster advertise cannot be used with --workers")
    port = opts.port if opts.port > 0 else pick_port(_loopback(opts.host))
    name = opts.server_name or f"{socket.gethostname().split('.')[0]}-{port}"
    cluster_name = c.name or f"{name}-workers"
    chost = c.host or "127.0.0.1"
    cports = [c.port + i if c.port > 0 else pick_port(_loopback(chost)) for i in range(n)]
    cred = f"{quote(c.username, safe='')}:{quote(c.password, safe='')}@" if c.username else ""
    routes = [f"nats-route://{cred}{_loopback(chost)}:{p}" for p in cports]
    routes += [r.raw for r in c.routes]
    plan = WorkerPlan(port, name, cluster_name, handoff=n == 2 and not c.routes)
    if opts.http_port:
        plan.http_host = opts.http_host
        plan.http_port = opts.http_port if opts.http_port > 0 else pick_port(opts.http_host)
    store = opts.js.store_dir or (os.path.abspath("data") if opts.jetstream else "")
    for i, cport in enumerate(cports, start=1):
        wname = f"{name}-w{i}"
        extra = [
            "--workers", "1", "--reuse_port", "--pid=",
            "--port", str(port), "--name", wname,
            "--cluster", f"nats://{cred}{chost}:{cport}",
            "--cluster_name", cluster_name, "--routes", ",".join(routes),
        ]  # fmt: skip
        mport = 0
        if plan.http_port:
            mport = plan.http_port + i if opts.http_port > 0 else pick_port(opts.http_host)
            extra += ["-m", str(mport)]
        if store:
            extra += ["-sd", os.path.join(store, f"w{i}")]
        plan.workers.append(WorkerSpec(i, wname, [*argv, *extra], cport, mport, _loopback(chost)))
    return plan


def check_plan(plan: WorkerPlan) -> None:
    """Build every worker's options as the worker will; raises its error (ValueError)."""
    for w in plan.workers:
        try:
            build_options(parse_args(w.args))
        except ValueError as e:
            raise ValueError(f"worker {w.name} cannot start: {e}") from None


def _pdeathsig() -> Callable[[], None] | None:
    """What the child runs between fork and exec: PR_SET_PDEATHSIG, so a worker gets SIGTERM
    when the supervisor dies. Resolved here, in the parent: the child only makes the call."""
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    term = int(signal.SIGTERM)
    return lambda: prctl(1, term)  # 1 = PR_SET_PDEATHSIG


_DIE_WITH_PARENT = _pdeathsig()


class Worker:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.started = 0.0
        self.restarts = 0
        self.backoff = BACKOFF_MIN
        self.ready = False

    @property
    def pid(self) -> int | None:
        p = self.proc
        return p.pid if p is not None and p.returncode is None else None

    async def spawn(self, handoff_dir: str = "") -> None:
        env = dict(os.environ)
        env[WORKER_ENV] = self.spec.name
        env.pop(HANDOFF_ENV, None)
        if handoff_dir:
            env[HANDOFF_ENV] = handoff_dir
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "natsd", *self.spec.args,
            env=env, stdin=asyncio.subprocess.DEVNULL,
            preexec_fn=_DIE_WITH_PARENT,
        )  # fmt: skip
        self.started = time.monotonic()
        log.info("Worker %s started (pid %d)", self.spec.name, self.proc.pid)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)


class Supervisor:
    def __init__(
        self,
        plan: WorkerPlan,
        reload_check: Callable[[], ServerOptions] | None = None,
        lame_duck_duration: float = 120.0,
    ) -> None:
        self.plan = plan
        self.workers = [Worker(s) for s in plan.workers]
        self.reload_check = reload_check
        self.lame_duck_duration = lame_duck_duration
        self.stopping = False
        # The signal the workers get when the supervisor stops (SIGINT stops a worker in
        # lame duck mode too, SIGTERM does not); None after SIGUSR2: they stop on their own.
        self.stop_signal: int | None = signal.SIGTERM
        self.exit_code = 0
        self._announced = False
        self._done = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: Any = None
        self._session: Any = None
        self.handoff_dir = ""

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            loop.add_signal_handler(sig, self._on_signal, sig)
        log.info(
            "Starting %d natsd workers on port %d (cluster %s)",
            len(self.workers), self.plan.port, self.plan.cluster_name,
        )  # fmt: skip
        if self.plan.handoff:
            self.handoff_dir = tempfile.mkdtemp(prefix="natsd-handoff-")
        try:
            if self.plan.http_port:
                await self._start_monitor()
            for w in self.workers:
                self._spawn_task(self._keep(w))
            await self._done.wait()
        finally:
            await self._stop_all()
            if self.handoff_dir:
                shutil.rmtree(self.handoff_dir, ignore_errors=True)
            if self._session is not None:
                await self._session.close()
            if self._runner is not None:
                await self._runner.cleanup()
        return self.exit_code

    def _spawn_task(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keep(self, w: Worker) -> None:
        """Run ``w`` until the supervisor stops; restart it when it dies."""
        while not self.stopping:
            try:
                await w.spawn(self.handoff_dir)
            except OSError as e:
                self._fail(1, f"cannot start worker {w.spec.name}: {e}")
                return
            assert w.proc is not None
            w.ready = False
            self._spawn_task(self._until_ready(w, w.proc))
            rc = await w.proc.wait()
            if self.stopping:
                break
            if rc == EXIT_CONFIG:
                # Restarting cannot help: exit with the error, as a plain natsd does (1).
                self._fail(1, f"Worker {w.spec.name} refused its configuration; stopping")
                return
            if rc > 0 and not w.restarts and not w.ready:
                # Its first start failed on its own (the client port taken by a process
                # without SO_REUSEPORT, a store it cannot open): the set-up is wrong, and
                # restarting would only repeat it. A kill -9 (rc < 0) is restarted.
                self._fail(1, f"Worker {w.spec.name} failed to start ({_exit_text(rc)}); stopping")
                return
            ran = time.monotonic() - w.started
            if ran >= BACKOFF_RESET:
                w.backoff = BACKOFF_MIN
            log.error(
                "Worker %s (pid %d) exited with %s; restarting in %.2fs",
                w.spec.name, w.proc.pid, _exit_text(rc), w.backoff,
            )  # fmt: skip
            await asyncio.sleep(w.backoff)
            w.backoff = min(w.backoff * 2, BACKOFF_MAX)
            w.restarts += 1
        if all(x.pid is None for x in self.workers):
            self._done.set()

    async def _until_ready(self, w: Worker, proc: asyncio.subprocess.Process) -> None:
        """Log when ``proc`` serves clients, and once when every worker first does (what a
        script waits for, like a plain server's "Server is ready")."""
        while proc.returncode is None and not self.stopping:
            try:
                _, writer = await asyncio.open_connection(w.spec.probe_host, w.spec.cluster_port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            w.ready = True
            log.info("Worker %s is ready", w.spec.name)
            if not self._announced and all(x.ready for x in self.workers):
                self._announced = True
                log.info("All %d workers are ready", len(self.workers))
            return

    def _fail(self, code: int, msg: str) -> None:
        log.error("%s", msg)
        self.exit_code = code
        self.stopping = True
        self._done.set()

    def _on_signal(self, sig: int) -> None:
        if sig in (signal.SIGINT, signal.SIGTERM):
            log.info("Trapped %s signal; stopping the workers", SIGNAL_NAMES.get(sig, sig))
            self.stopping = True
            self.stop_signal = sig
            self._done.set()
        elif sig == signal.SIGHUP:
            self._reload()
        elif sig == signal.SIGUSR2:
            # Lame duck: the workers drain their clients and exit; nothing is restarted.
            log.info("Entering lame duck mode in every worker")
            self.stopping = True
            self.stop_signal = None
            for w in self.workers:
                w.signal(sig)
        else:
            for w in self.workers:
                w.signal(sig)

    def _reload(self) -> None:
        """SIGHUP: the workers reload (each plans its own reload and logs the outcome), unless
        the new configuration changes what only a restart of the supervisor can change."""
        if self.reload_check is not None:
            try:
                new = self.reload_check()
            except (ValueError, OSError) as e:
                log.error("Failed to reload server configuration: %s", e)
                return
            if new.workers != len(self.workers):
                log.error(
                    "Failed to reload server configuration: config reload not supported for"
                    " Workers: old=%d, new=%d",
                    len(self.workers), new.workers,
                )  # fmt: skip
                return
        for w in self.workers:
            w.signal(signal.SIGHUP)

    async def _stop_all(self) -> None:
        self.stopping = True
        grace = STOP_GRACE
        if self.stop_signal is None:
            grace += self.lame_duck_duration
        else:
            for w in self.workers:
                w.signal(self.stop_signal)
        procs = [w.proc for w in self.workers if w.proc is not None]
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), grace)
        except TimeoutError:
            for w in self.workers:
                if w.pid is not None:
                    log.error("Worker %s did not stop; killing it", w.spec.name)
                w.signal(signal.SIGKILL)
            await asyncio.gather(*(p.wait() for p in procs))
        for t in list(self._tasks):
            t.cancel()

    # ------------------------------------------------------------------ monitoring
    async def _start_monitor(self) -> None:
        from aiohttp import ClientSession, ClientTimeout, web

        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.plan.http_host or None, self.plan.http_port)
        await site.start()
        self._runner = runner
        self._session = ClientSession(timeout=ClientTimeout(total=_HEALTH_TIMEOUT))
        log.info("Starting http monitor on %s:%d", self.plan.http_host, self.plan.http_port)

    async def worker_health(self) -> list[dict[str, Any]]:
        """Each worker: name, pid (null while down), restarts, and its own /healthz status."""
        return list(await asyncio.gather(*(self._one_health(w) for w in self.workers)))

    async def _one_health(self, w: Worker) -> dict[str, Any]:
        host = _loopback(self.plan.http_host)
        url = f"http://{host}:{w.spec.monitor_port}/healthz"
        out: dict[str, Any] = {
            "name": w.spec.name, "pid": w.pid, "restarts": w.restarts,
            "monitor_url": f"http://{host}:{w.spec.monitor_port}",
        }  # fmt: skip
        if w.pid is None:
            out.update(status="unavailable", error="worker not running")
            return out
        try:
            async with self._session.get(url) as r:
                body = await r.json(content_type=None)
            out["status"] = str(body.get("status", "unavailable"))
            if "error" in body:
                out["error"] = body["error"]
        except Exception as e:  # down, starting, or not answering: all unhealthy
            out.update(status="unavailable", error=f"{type(e).__name__}: {e}".rstrip(": "))
        return out

    async def _healthz(self, request: Any) -> Any:
        from aiohttp import web

        workers = await self.worker_health()
        bad = [w for w in workers if w["status"] != "ok"]
        if not bad:
            return web.json_response({"status": "ok", "workers": workers})
        error = "; ".join(f"{w['name']}: {w.get('error', w['status'])}" for w in bad)
        return web.json_response(
            {"status": "unavailable", "error": error, "workers": workers}, status=503
        )


def _exit_text(rc: int) -> str:
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-rc).name}"
    return f"code {rc}"


def supervise(
    argv: Sequence[str],
    opts: ServerOptions,
    reload_check: Callable[[], ServerOptions] | None = None,
) -> int:
    """Plan, check and run the workers until a signal stops them; the process exit code.
    ``reload_check`` reads the configuration again on SIGHUP (None: no configuration file)."""
    try:
        plan = plan_workers(argv, opts)
        check_plan(plan)
    except (ValueError, OSError) as e:
        log.error("--workers %d: %s", opts.workers, e)
        return 1
    if opts.pid_file:
        with open(opts.pid_file, "w") as f:
            f.write(str(os.getpid()))

    async def main() -> int:
        sup = Supervisor(plan, reload_check, opts.lame_duck_duration or 120.0)
        return await sup.run()

    return asyncio.run(main())
