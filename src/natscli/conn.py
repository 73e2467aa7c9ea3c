"""Connection options (flags, environment, contexts) and the JetStream API requester.

Precedence, as in the Go CLI: a flag, then the environment (``NATS_URL``, ``NATS_USER``,
``NATS_PASSWORD``, ``NATS_CREDS``, ``NATS_NKEY``, ``NATS_TOKEN``, ``NATS_CERT``,
``NATS_KEY``, ``NATS_CA``, ``NATS_CONTEXT``), then the selected
context (``--context NAME`` or ``~/.config/nats/context.txt``, read from
``~/.config/nats/context/NAME.json``), then ``nats://127.0.0.1:4222``.

JetStream API calls go straight to ``$JS.API.*`` with the API's own JSON, so what ``--json``
prints carries the server's field names unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from nats.errors import NoRespondersError, NoServersError
from nats.errors import TimeoutError as NatsTimeout

from .output import CliError

__all__ = [
    "ApiError",
    "ConnOptions",
    "JsApi",
    "Session",
    "add_conn_flags",
    "connect",
    "options_from_args",
    "tls_context",
]

DEFAULT_URL = "nats://127.0.0.1:4222"


@dataclass
class ConnOptions:
    servers: list[str]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: str | None = None
    nkey: str | None = None  # a file holding an nkey seed
    # TLS: the CA to trust, a client certificate and its key, and TLS before INFO
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_first: bool = False
    timeout: float = 5.0
    js_domain: str | None = None
    js_api_prefix: str | None = None
    name: str = "NATS CLI (natsd)"
    trace: bool = False

    @property
    def api_prefix(self) -> str:
        if self.js_api_prefix:
            return self.js_api_prefix.rstrip(".")
        if self.js_domain:
            return f"$JS.{self.js_domain}.API"
        return "$JS.API"


def add_conn_flags(p: argparse.ArgumentParser) -> None:
    """The global connection flags; accepted before or after the sub-command."""
    g = p.add_argument_group("connection")
    sup = argparse.SUPPRESS
    g.add_argument("-s", "--server", default=sup, help="NATS server urls (comma separated)")
    g.add_argument("--user", default=sup, help="Username or token")
    g.add_argument("--password", default=sup, help="Password")
    g.add_argument("--token", default=sup, help="Authentication token")
    g.add_argument("--creds", default=sup, help="User credentials file")
    g.add_argument("--nkey", default=sup, help="User NKEY seed file")
    g.add_argument("--tlscert", default=sup, help="TLS client certificate file")
    g.add_argument("--tlskey", default=sup, help="TLS client private key file")
    g.add_argument("--tlsca", default=sup, help="TLS certificate authority chain file")
    g.add_argument(
        "--tlsfirst", action="store_true", default=sup, help="Perform the TLS handshake first"
    )
    g.add_argument("--context", default=sup, help="Configuration context to use")
    g.add_argument("--timeout", default=sup, help="Time to wait on responses (default 5s)")
    g.add_argument("--js-domain", default=sup, help="JetStream domain to access")
    g.add_argument("--js-api-prefix", default=sup, help="Subject prefix for the JetStream API")
    g.add_argument("--connection-name", default=sup, help="Nickname for this connection")
    g.add_argument("--trace", action="store_true", default=sup, help="Trace API interactions")
    g.add_argument("--no-context", action="store_true", default=sup, help="Ignore contexts")


def _config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nats"


def _load_context(name: str | None, explicit: bool) -> dict[str, Any]:
    cdir = _config_dir()
    if not name:
        sel = cdir / "context.txt"
        if not sel.is_file():
            return {}
        name = sel.read_text().strip()
        if not name:
            return {}
    path = cdir / "context" / f"{name}.json"
    if not path.is_file():
        if explicit:
            raise CliError(f"unknown context {name!r} (no {path})")
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CliError(f"could not load context {name!r}: {e}") from e
    return data if isinstance(data, dict) else {}


def options_from_args(ns: argparse.Namespace) -> ConnOptions:
    from .output import parse_duration

    env = os.environ
    ctx: dict[str, Any] = {}
    if not getattr(ns, "no_context", False):
        cname = getattr(ns, "context", None) or env.get("NATS_CONTEXT")
        ctx = _load_context(cname, explicit=bool(cname))

    def pick(attr: str, env_name: str, ctx_key: str) -> str | None:
        v = getattr(ns, attr, None)
        if v:
            return str(v)
        if env.get(env_name):
            return env[env_name]
        cv = ctx.get(ctx_key)
        return str(cv) if cv else None

    url = pick("server", "NATS_URL", "url") or DEFAULT_URL
    servers = [_normalise_url(u) for u in url.split(",") if u.strip()]
    timeout_s = getattr(ns, "timeout", None) or env.get("NATS_TIMEOUT") or "5s"
    timeout = parse_duration(timeout_s) / 1e9
    if timeout <= 0:
        raise CliError("--timeout must be positive")
    return ConnOptions(
        servers=servers,
        user=pick("user", "NATS_USER", "user"),
        password=pick("password", "NATS_PASSWORD", "password"),
        token=pick("token", "NATS_TOKEN", "token"),
        creds=pick("creds", "NATS_CREDS", "creds"),
        nkey=pick("nkey", "NATS_NKEY", "nkey"),
        tls_cert=pick("tlscert", "NATS_CERT", "cert"),
        tls_key=pick("tlskey", "NATS_KEY", "key"),
        tls_ca=pick("tlsca", "NATS_CA", "ca"),
        tls_first=bool(getattr(ns, "tlsfirst", False) or ctx.get("tls_first")),
        timeout=timeout,
        js_domain=pick("js_domain", "NATS_JS_DOMAIN", "jetstream_domain"),
        js_api_prefix=pick("js_api_prefix", "NATS_JS_API_PREFIX", "jetstream_api_prefix"),
        name=getattr(ns, "connection_name", None) or "NATS CLI (natsd)",
        trace=bool(getattr(ns, "trace", False)),
    )


def _normalise_url(u: str) -> str:
    u = u.strip()
    if "://" not in u:
        u = "nats://" + u
    return u


async def connect(opts: ConnOptions) -> Client:
    """Connect without reconnecting (each server tried twice); failures become a
    ``CliError`` that names the cause."""
    errors: list[Exception] = []

    async def on_error(e: Exception) -> None:
        errors.append(e)

    kwargs: dict[str, Any] = {
        "servers": opts.servers,
        "name": opts.name,
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,
        "reconnect_time_wait": 0.1,
        "connect_timeout": max(1, round(opts.timeout)),
        "error_cb": on_error,
    }
    user = opts.user
    if user and not opts.password and not opts.token:
        # As the Go CLI: a --user without a password is a token.
        kwargs["token"] = user
    elif user:
        kwargs["user"] = user
        kwargs["password"] = opts.password or ""
    if opts.token:
        kwargs["token"] = opts.token
    if opts.creds:
        if not Path(opts.creds).is_file():
            raise CliError(f"credentials file {opts.creds} does not exist")
        kwargs["user_credentials"] = opts.creds
    if opts.nkey:
        if not Path(opts.nkey).is_file():
            raise CliError(f"nkey file {opts.nkey} does not exist")
        kwargs["nkeys_seed"] = opts.nkey
    ctx = tls_context(opts)
    if ctx is not None:
        kwargs["tls"] = ctx
        kwargs["tls_handshake_first"] = opts.tls_first
    where = ", ".join(opts.servers)

    def cause(e: Exception) -> str:
        last = errors[-1] if errors else e
        return str(last) or type(last).__name__

    try:
        return await asyncio.wait_for(nats.connect(**kwargs), opts.timeout * 2 + 1)
    except ModuleNotFoundError as e:
        raise CliError(f"--creds needs the {e.name!r} package (pip install nkeys)") from e
    except (TimeoutError, NoServersError, OSError) as e:
        raise CliError(f"could not connect to {where}: {cause(e)}") from e
    except Exception as e:
        raise CliError(f"could not connect to {where}: {cause(e)}") from e


def tls_context(opts: ConnOptions) -> ssl.SSLContext | None:
    """The client's TLS context when any TLS option is given (or a tls:// URL); a missing
    or unreadable file is a CliError naming it."""
    wants = opts.tls_ca or opts.tls_cert or opts.tls_key or opts.tls_first
    if not wants and not any(s.startswith("tls://") for s in opts.servers):
        return None
    if bool(opts.tls_cert) != bool(opts.tls_key):
        raise CliError("--tlscert and --tlskey must be given together")
    for what, f in (("CA", opts.tls_ca), ("certificate", opts.tls_cert), ("key", opts.tls_key)):
        if f and not Path(f).is_file():
            raise CliError(f"TLS {what} file {f} does not exist")
    try:
        ctx = ssl.create_default_context(cafile=opts.tls_ca or None)
        if opts.tls_cert and opts.tls_key:
            ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    except (OSError, ssl.SSLError) as e:
        raise CliError(f"could not load the TLS files: {e}") from e
    return ctx


class ApiError(CliError):
    """An error answer from the JetStream API."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(f"{description} ({err_code})" if err_code else description)


class JsApi:
    """Requests to ``$JS.API.<suffix>`` with JSON in and out."""

    def __init__(self, nc: Client, opts: ConnOptions) -> None:
        self.nc = nc
        self.opts = opts
        self.prefix = opts.api_prefix

    def subject(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}"

    async def request(
        self, suffix: str, payload: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        subj = self.subject(suffix)
        body = json.dumps(payload).encode() if payload is not None else b""
        if self.opts.trace:
            from .output import info

            info(f">>> {subj}: {body.decode()}")
        try:
            msg = await self.nc.request(subj, body, timeout=timeout or self.opts.timeout)
        except NoRespondersError as e:
            raise CliError("JetStream not enabled (no responders for the JetStream API)") from e
        except NatsTimeout as e:
            raise CliError(f"JetStream API request {subj} timed out") from e
        if self.opts.trace:
            from .output import info

            info(f"<<< {msg.data.decode(errors='replace')}")
        try:
            resp = json.loads(msg.data)
        except ValueError as e:
            raise CliError(f"invalid JetStream API response: {msg.data[:200]!r}") from e
        if not isinstance(resp, dict):
            raise CliError(f"invalid JetStream API response: {msg.data[:200]!r}")
        err = resp.get("error")
        if isinstance(err, dict):
            raise ApiError(
                int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description"))
            )
        return resp

    async def paged(
        self, suffix: str, key: str, payload: dict[str, Any] | None = None
    ) -> list[Any]:
        """All pages of a NAMES/LIST request (``offset``/``total``)."""
        out: list[Any] = []
        while True:
            req = dict(payload or {})
            req["offset"] = len(out)
            resp = await self.request(suffix, req)
            page = resp.get(key) or []
            out.extend(page)
            total = int(resp.get("total", 0))
            if not page or len(out) >= total:
                return out

    async def stream_names(self, subject: str | None = None) -> list[str]:
        payload = {"subject": subject} if subject else None
        names = await self.paged("STREAM.NAMES", "streams", payload)
        return sorted(str(n) for n in names)


class Session:
    """One command's connection, opened on first use and closed by ``main``."""

    def __init__(self, opts: ConnOptions) -> None:
        self.opts = opts
        self._nc: Client | None = None
        self._api: JsApi | None = None

    async def nc(self) -> Client:
        if self._nc is None:
            self._nc = await connect(self.opts)
        return self._nc

    async def api(self) -> JsApi:
        if self._api is None:
            self._api = JsApi(await self.nc(), self.opts)
        return self._api

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            try:
                await asyncio.wait_for(self._nc.drain(), timeout=self.opts.timeout)
            except Exception:
                await self._nc.close()
