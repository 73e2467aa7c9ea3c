"""Cluster configuration: ``cluster {}``, ``--cluster``/``--routes``, and the refusal.

Owns reading and checking what nats-server reads for routes, with nats-server's error wording
(``server/opts.go`` ``parseCluster``, ``parseURLs``, ``parseCompression``,
``overrideCluster``, ``ConfigureOptions``; ``server/server.go`` ``validateCluster``,
``validateAndNormalizeCompressionOption``; ``server/jetstream.go``
``validateJetStreamOptions``). Three phases, as in nats-server:

1. :func:`parse_cluster`: the config file's block (``nats-server -t`` reports these);
2. :func:`apply_cluster_flags`: the command-line overrides and their errors;
3. :func:`validate_cluster`: the checks nats-server makes when it creates the server.

Then :func:`refuse_unwired`: before routes were wired a cluster that passed every check was
refused; ``ROUTES_WIRED`` is now True and the refusal is kept only as that switch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from natsd.config import policy
from natsd.config.options import ClusterOptions, CompressionOptions, RouteURL, ServerOptions
from natsd.config.policy import Checker, ConfigError
from natsd.config.tls import parse_tls
from natsd.core.goquote import go_quote

__all__ = [
    "JETSTREAM_CLUSTER_ROUTES",
    "ROUTES_WIRED",
    "ClusterError",
    "GoURLError",
    "apply_cluster_flags",
    "go_duration",
    "parse_cluster",
    "parse_go_url",
    "refuse_unwired",
    "validate_cluster",
]

# Flipped by the slice that starts route listeners and dialers.
ROUTES_WIRED = True

# Routes carry core NATS only: a stream's consumer deliveries and direct-get batches do not
# cross them, and each server's JetStream would answer the API on its own. Until JetStream
# runs as a cluster service (a meta group, placement), the two together are refused, after
# nats-server's own checks, rather than run as a cluster whose JetStream half misbehaves.
# natsd bootstraps the meta group from the configured routes (design-clustering §4.4): every
# server of a JetStream cluster listens for routes and names the cluster's servers in them.
JETSTREAM_CLUSTER_ROUTES = (
    "natsd: a JetStream cluster needs a cluster port and `cluster.routes` listing the"
    " cluster's servers (the meta group is formed from them)"
)


class ClusterError(ConfigError):
    """A cluster check failed; the message is nats-server's."""


class GoURLError(ValueError):
    """Go's ``url.Parse`` error text (``parse "u": invalid port ":x" after host``)."""


# ---------------------------------------------------------------------- Go helpers
def go_type(v: Any) -> str:
    """Go's %T of a value nats-server's config parser would have produced."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "[]interface {}"
    if isinstance(v, dict):
        return "map[string]interface {}"
    return type(v).__name__


def _want(v: Any, kind: type, go: str) -> Any:
    """nats-server's type assertion ``mv.(int64)``: its panic text on a wrong type."""
    ok = isinstance(v, kind) and (kind is bool or not isinstance(v, bool))
    if not ok:
        raise ClusterError(f"interface conversion: interface {{}} is {go_type(v)}, not {go}")
    return v


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)([^\d.]*)")


def go_duration(s: str) -> float:
    """Go's ``time.ParseDuration`` in seconds, with its error text."""
    orig, total = s, 0.0
    sign = -1.0 if s[:1] == "-" else 1.0
    s = s[1:] if s[:1] in "+-" else s
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"time: invalid duration {go_quote(orig)}")
    while s:
        m = _DURATION_PART.match(s)
        if m is None:
            raise ValueError(f"time: invalid duration {go_quote(orig)}")
        num, unit = m.groups()
        if not unit:
            raise ValueError(f"time: missing unit in duration {go_quote(orig)}")
        if unit not in _UNITS:
            raise ValueError(f"time: unknown unit {go_quote(unit)} in duration {go_quote(orig)}")
        total += float(num) * _UNITS[unit]
        s = s[m.end() :]
    return sign * total


_HEX = "0123456789abcdefABCDEF"
# Characters Go's url package lets through unescaped in a host (shouldEscape, encodeHost).
_HOST_OK = set(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]<>\""
)
_USERINFO_OK = set(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:~!$&'()*+,;=%@"
)


def _unescape(s: str, host: bool = False) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "%":
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise GoURLError(f"invalid URL escape {go_quote(s[i : i + 3])}")
            out.append(chr(int(s[i + 1 : i + 3], 16)))
            i += 3
            continue
        if host and c < "\x80" and c not in _HOST_OK:
            raise GoURLError(f"invalid character {go_quote(c)} in host name")
        out.append(c)
        i += 1
    return "".join(out)


def _valid_port(p: str) -> bool:
    return p == "" or (p[0] == ":" and p[1:].isdigit()) or p == ":"


def parse_go_url(raw: str) -> RouteURL:
    """Go's ``url.Parse`` for the URLs routes use; raises :class:`GoURLError` with Go's
    message (``parse "raw": reason``). Go is lenient: ``host:4222`` parses (scheme "host")."""
    try:
        return _parse_url(raw)
    except GoURLError as e:
        raise GoURLError(f"parse {go_quote(raw)}: {e}") from None


def _parse_url(raw: str) -> RouteURL:
    if any(c < " " or c == "\x7f" for c in raw):
        raise GoURLError("net/url: invalid control character in URL")
    rest, _, frag = raw.partition("#")
    _unescape(frag)
    scheme = ""
    for i, c in enumerate(rest):
        if c.isascii() and c.isalpha():
            continue
        if c.isdigit() or c in "+-.":
            if i == 0:
                break
            continue
        if c == ":":
            if i == 0:
                raise GoURLError("missing protocol scheme")
            scheme, rest = rest[:i].lower(), rest[i + 1 :]
        break
    rest = rest.partition("?")[0]
    if not rest.startswith("/"):
        if scheme:
            return RouteURL(raw, scheme)  # opaque ("mailto:x"); nothing to dial
        if ":" in rest.partition("/")[0]:
            raise GoURLError("first path segment in URL cannot contain colon")
    host, port, user, password = "", None, None, None
    if rest.startswith("//") and (scheme or not rest.startswith("///")):
        authority, _, rest = rest[2:].partition("/")
        userinfo, at, hostport = authority.rpartition("@")
        if at:
            if any(c not in _USERINFO_OK for c in userinfo):
                raise GoURLError("net/url: invalid userinfo")
            u, colon, p = userinfo.partition(":")
            user = _unescape(u)
            password = _unescape(p) if colon else None
        if hostport.startswith("["):
            end = hostport.rfind("]")
            if end < 0:
                raise GoURLError("missing ']' in host")
            colon_port = hostport[end + 1 :]
            host = hostport[1:end]
        else:
            i = hostport.rfind(":")
            colon_port = hostport[i:] if i >= 0 else ""
            host = hostport[:i] if i >= 0 else hostport
        if not _valid_port(colon_port):
            raise GoURLError(f"invalid port {go_quote(colon_port)} after host")
        host = _unescape(host, host=True)
        port = int(colon_port[1:]) if colon_port[1:] else None
    _unescape(rest)
    return RouteURL(raw, scheme, host, port, user, password)


def _split_host_port(hp: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort`` with its error text."""

    def err(why: str) -> ClusterError:
        # Go's AddrError names the address only when there is one.
        return ClusterError(f"address {hp}: {why}" if hp else why)

    if hp.startswith("["):
        end = hp.find("]")
        if end < 0:
            raise err("missing ']' in address")
        if end + 1 == len(hp):
            raise err("missing port in address")
        if hp[end + 1] != ":":
            raise err(
                "missing port in address"
                if ":" not in hp[end + 1 :]
                else "too many colons in address"
            )
        host, port = hp[1:end], hp[end + 2 :]
    else:
        i = hp.rfind(":")
        if i < 0:
            raise err("missing port in address")
        host, port = hp[:i], hp[i + 1 :]
        if ":" in host:
            raise err("too many colons in address")
    if "[" in host or "]" in host or "[" in port or "]" in port:
        raise err(
            "unexpected '[' in address" if "[" in host + port else "unexpected ']' in address"
        )
    return host, port


# ---------------------------------------------------------------------- phase 1: the file
def parse_cluster(opts: ServerOptions, v: Any, chk: Checker, where: str) -> None:
    """``parseCluster``: read the block into ``opts.cluster``; every problem goes to
    ``chk`` with nats-server's text. ``where`` is the ``file:line: `` of the key."""
    c = opts.cluster = ClusterOptions(origin=where)
    if not isinstance(v, dict):
        chk.errors.append(f"{where}Expected map to define cluster, got {go_type(v)}")
        return
    for key, val in chk.supported(policy.CLUSTER, v, "cluster."):
        raw = next(k for k in v if str(k).lower() == key)
        try:
            _cluster_key(c, key, val, v, chk)
        except (ClusterError, ValueError) as e:
            chk.error(v, raw, str(e))


def _cluster_key(c: ClusterOptions, key: str, val: Any, m: Mapping[str, Any], chk: Checker) -> None:
    if key == "name":
        name = _want(val, str, "string")
        if " " in name:
            raise ClusterError("cluster name cannot contain spaces")
        c.name = name
    elif key == "listen":
        c.host, c.port = _listen(val)
    elif key == "port":
        c.port = _want(val, int, "int64")
    elif key in ("host", "net"):
        c.host = _want(val, str, "string")
    elif key in ("advertise", "cluster_advertise"):
        c.advertise = _want(val, str, "string")
    elif key == "no_advertise":
        c.no_advertise = _want(val, bool, "bool")
    elif key == "connect_retries":
        c.connect_retries = _want(val, int, "int64")
    elif key == "pool_size":
        c.pool_size = _want(val, int, "int64")
    elif key == "routes":
        c.routes = _routes(_want(val, list, "[]interface {}"), chk, m)
    elif key == "authorization":
        _authorization(c, val, chk)
    elif key == "compression":
        c.compression = _compression(val)
    elif key == "tls":
        raw = next(k for k in m if str(k).lower() == key)
        tls = parse_tls(val, "cluster.tls", chk, client_port=False, where=chk.where(m, raw))
        if tls is not None and tls.check_known_urls:
            chk.refuse(m, raw, "cluster.tls.verify_cert_and_check_known_urls")
        elif tls is not None and tls.handshake_first:
            # nats-server reads it and routes never use it: natsd says so.
            chk.refuse(m, raw, "cluster.tls.handshake_first", "routes do not use it")
        else:
            c.tls = tls


def _listen(v: Any) -> tuple[str, int]:
    """``parseListen``: a port, or "host:port"."""
    if isinstance(v, int) and not isinstance(v, bool):
        return "", v
    if not isinstance(v, str):
        raise ClusterError(f"expected port or host:port, got {go_type(v)}")
    try:
        host, port = _split_host_port(v)
    except ClusterError:
        raise ClusterError(f"could not parse address string {go_quote(v)}") from None
    if not re.fullmatch(r"[+-]?\d+", port):
        raise ClusterError(f"could not parse port {go_quote(port)}")
    return host, int(port)


def _routes(items: list[Any], chk: Checker, m: Mapping[str, Any]) -> list[RouteURL]:
    """``parseURLs``: each URL once (a repeat is a warning, as in nats-server)."""
    out: list[RouteURL] = []
    seen: set[str] = set()
    key = next(k for k in m if str(k).lower() == "routes")
    for item in items:
        s = _want(item, str, "string")
        if s in seen:
            chk.warnings.append(
                chk.where(m, key)
                + f"invalid use of field {go_quote(s)}: Duplicate route entry detected"
            )
            continue
        seen.add(s)
        try:
            out.append(parse_go_url(s.strip()))
        except GoURLError:
            chk.error(m, key, f"error parsing route url [{go_quote(s.strip())}]")
    return out


def _authorization(c: ClusterOptions, v: Any, chk: Checker) -> None:
    """``parseAuthorization`` with the cluster's restrictions (one user, no token)."""
    m = _want(v, dict, "map[string]interface {}")
    for key, val in chk.supported(policy.CLUSTER_AUTHORIZATION, m, "cluster.authorization."):
        if key in ("user", "username"):
            c.username = _want(val, str, "string")
        elif key in ("pass", "password"):
            c.password = _want(val, str, "string")
        elif key == "timeout":
            c.auth_timeout = _auth_timeout(val)
        elif key == "users":
            raise ClusterError("Cluster authorization does not allow multiple users")
        elif key == "token":
            raise ClusterError("Cluster authorization does not support tokens")


def _auth_timeout(v: Any) -> float:
    if isinstance(v, bool):
        raise ClusterError("error parsing authorization config, 'timeout' wrong type")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return go_duration(v)
        except ValueError as e:
            raise ClusterError(f"error parsing authorization config, 'timeout' {e}") from None
    raise ClusterError("error parsing authorization config, 'timeout' wrong type")


def _compression(v: Any) -> CompressionOptions:
    """``parseCompression`` (the mode is checked later, in :func:`validate_cluster`)."""
    if isinstance(v, bool):
        return CompressionOptions("s2_fast" if v else "off")
    if isinstance(v, str):
        return CompressionOptions(v)
    if not isinstance(v, dict):
        raise ClusterError(
            f'field "compression" should be a boolean or a structure, got {go_type(v)}'
        )
    out = CompressionOptions()
    for raw, val in v.items():
        key = str(raw).lower()
        if key == "mode":
            out.mode = _want(val, str, "string")
        elif key in ("rtt_thresholds", "thresholds", "rtts", "rtt"):
            for d in _want(val, list, "[]interface {}"):
                out.rtt_thresholds.append(go_duration(_want(d, str, "string")))
        elif raw not in getattr(v, "used", ()):
            raise ClusterError(f"unknown field {go_quote(str(raw))}")
    return out


# ---------------------------------------------------------------------- phase 2: flags
def apply_cluster_flags(opts: ServerOptions, flags: Mapping[str, object]) -> None:
    """The cluster flags on top of the file, then ``ConfigureOptions``' checks. ``flags``
    holds the flags given, by destination (``cluster``, ``routes``, ``cluster_name``...)."""
    c = opts.cluster
    if "cluster_name" in flags:
        c.name = str(flags["cluster_name"])
    if "cluster_advertise" in flags:
        c.advertise = str(flags["cluster_advertise"])
    if "no_advertise" in flags:
        c.no_advertise = bool(flags["no_advertise"])
    if "connect_retries" in flags:
        c.connect_retries = int(str(flags["connect_retries"]))
    listen = str(flags.get("cluster", ""))
    if "cluster" in flags:
        _override_cluster(c, listen)
        if listen:
            c.origin = c.origin or "--cluster"
    routes = str(flags.get("routes", ""))
    if "routes" in flags:
        c.routes = [_flag_route(r.strip()) for r in routes.split(",")] if routes else []
        if routes:
            c.origin = c.origin or "--routes"
    if routes and not listen and not c.host and c.port == 0:
        raise ClusterError("solicited routes require cluster capabilities, e.g. --cluster")


def _flag_route(s: str) -> RouteURL:
    # nats-server's RoutesFromStr drops the parse error (and later fails on a nil URL);
    # natsd reports it in the wording the config file gets.
    try:
        return parse_go_url(s)
    except GoURLError:
        raise ClusterError(f"error parsing route url [{go_quote(s)}]") from None


def _override_cluster(c: ClusterOptions, listen: str) -> None:
    """``overrideCluster``: ``--cluster nats://[user:pass@]host:port`` (``:-1`` random)."""
    if not listen:
        c.port = 0  # an empty --cluster turns the cluster off
        return
    random = listen.endswith(":-1")
    if random:
        listen = listen[:-3] + ":0"
    try:
        u = parse_go_url(listen)
    except GoURLError as e:
        raise ClusterError(str(e)) from None
    # Go's URL.Host: the authority without the user info (empty for an opaque URL).
    authority = listen.split("//", 1)[1].split("/", 1)[0] if "//" in listen else ""
    c.host, port = _split_host_port(authority.rpartition("@")[2])
    if random:
        port = "-1"
    # fmt.Sscan into an int; url.Parse already allowed only digits (or nothing) here.
    if not port:
        raise ClusterError("EOF")
    c.port = int(port)
    if u.user is not None:
        if u.password is None:
            raise ClusterError("expected cluster password to be set")
        c.username, c.password = u.user, u.password
    else:
        c.username = c.password = ""


# ---------------------------------------------------------------------- phase 3: validation
def validate_cluster(opts: ServerOptions) -> None:
    """The cluster parts of ``validateOptions`` (nats-server runs them when it creates the
    server, not under ``-t``; natsd runs them for both)."""
    c = opts.cluster
    if c.name and " " in c.name:
        raise ClusterError("cluster name cannot contain spaces")
    if c.compression.mode:
        _normalize_compression(c.compression)
    if opts.jetstream and c.port != 0:
        if not opts.server_name:
            raise ClusterError("jetstream cluster requires `server_name` to be set")
        if not c.name:
            raise ClusterError("jetstream cluster requires `cluster.name` to be set")
    if opts.jetstream and (c.port or c.routes) and not (c.port and c.routes):
        raise ClusterError(JETSTREAM_CLUSTER_ROUTES)
    # natsd runs one route connection per peer, uncompressed (it announces no pool and no
    # compression, so nats-server peers agree). Asked for more, it refuses rather than ignore.
    if c.pool_size > 1:
        raise ClusterError(
            f"natsd does not support route pooling yet: cluster pool_size {c.pool_size}"
            " (use 1 or -1)"
        )
    if c.compression.mode.startswith("s2_"):
        raise ClusterError(
            f"natsd does not support route compression yet: compression {c.compression.mode}"
            ' (use "off" or "accept")'
        )


_MODES = {
    "not supported": "not supported",
    "not_supported": "not supported",
    "disabled": "off",
    "off": "off",
    "false": "off",
    "accept": "accept",
    "auto": "s2_auto",
    "s2_auto": "s2_auto",
    "fast": "s2_fast",
    "s2_fast": "s2_fast",
    "better": "s2_better",
    "s2_better": "s2_better",
    "best": "s2_best",
    "s2_best": "s2_best",
}
_DEFAULT_RTTS = [0.010, 0.050, 0.100]


def _go_durations(ds: list[float]) -> str:
    return "[" + " ".join(_go_dur(d) for d in ds) + "]"


def _go_dur(d: float) -> str:
    if d == 0:
        return "0s"
    if abs(d) < 1:
        ms = d * 1000
        return f"{ms:g}ms" if abs(ms) >= 1 else f"{d * 1e6:g}µs"
    return f"{d:g}s"


def _normalize_compression(c: CompressionOptions) -> None:
    """``validateAndNormalizeCompressionOption`` for routes ("on" means s2_fast)."""
    mode = c.mode.lower()
    if mode in ("on", "enabled", "true"):
        mode = "s2_fast"
    if mode not in _MODES:
        raise ClusterError(f"unsupported compression mode {go_quote(c.mode)}")
    norm = _MODES[mode]
    if norm == "s2_auto":
        if not c.rtt_thresholds:
            c.rtt_thresholds = list(_DEFAULT_RTTS)
        else:
            rtts: list[float] = []
            for n in (max(0.0, d) for d in c.rtt_thresholds):
                if rtts and n != 0 and any(n < v for v in rtts):
                    raise ClusterError(
                        f"RTT threshold values {_go_durations(c.rtt_thresholds)}"
                        " should be in ascending order"
                    )
                rtts.append(n)
            while rtts and rtts[-1] == 0:
                rtts.pop()
            if len(rtts) > 4:
                raise ClusterError(
                    f"compression mode {go_quote(c.mode)} should have no more than 4 RTT"
                    f" thresholds: {_go_durations(c.rtt_thresholds)}"
                )
            if not rtts:
                raise ClusterError(
                    f"compression mode {go_quote(c.mode)} requires at least one RTT threshold"
                )
            c.rtt_thresholds = rtts
    c.mode = norm


# ---------------------------------------------------------------------- the refusal
def refuse_unwired(opts: ServerOptions) -> None:
    """A cluster that passed every check: natsd cannot run routes yet, so it refuses to
    start rather than run as an isolated node. The slice that wires routes flips
    ``ROUTES_WIRED``."""
    origin = opts.cluster.origin
    if ROUTES_WIRED or not origin:
        return
    if origin.startswith("--"):
        raise ClusterError(f"flag {origin} is not supported by natsd yet (cluster, routes)")
    raise ClusterError(f'{origin}config key "cluster" is not supported by natsd yet')
