"""``tls {}`` blocks (nats-server's ``parseTLS`` and ``GenTLSConfig``) and the TLS flags.

Values are checked with nats-server's wording; the certificate files are loaded here, once,
so a bad file is a start-up (or ``-t``) error naming it, as in nats-server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from natsd.config import policy
from natsd.config.options import ServerOptions
from natsd.config.policy import Checker, ConfigError
from natsd.core.clock import parse_duration
from natsd.security.tls import (
    CIPHERS,
    FALLBACK_DELAY,
    INSECURE_CIPHERS,
    TLS13_CIPHERS,
    TlsError,
    TlsOptions,
    client_context,
    server_context,
)

__all__ = ["apply_tls_flags", "check_tls", "parse_tls"]

_PIN = re.compile(r"^[A-Fa-f0-9]{64}$")
_PIN_WHAT = "hex-encoded sha256 of DER encoded SubjectPublicKeyInfo"


def _bool(chk: Checker, m: Mapping[str, Any], raw: str, v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        chk.error(m, raw, f"error parsing tls config, expected '{what}' to be a boolean")
        return False
    return v


def parse_tls(
    v: Any, path: str, chk: Checker, client_port: bool, where: str = ""
) -> TlsOptions | None:
    """One ``tls {}`` map -> TlsOptions; errors go to ``chk`` (None when there were any).
    ``client_port``: the top-level block (nats-server's ``isClientCtx``), where
    ``verify_cert_and_check_known_urls`` is refused; a route's block is used both ways.
    ``where`` is the block's ``file:line: ``."""
    if not isinstance(v, dict):
        chk.errors.append(f"{path}: expected a map, got {v!r}")
        return None
    before = len(chk.errors)
    o: dict[str, Any] = {}
    ciphers: list[str] = []
    insecure_named: list[str] = []
    allow_insecure = False
    raw_of = {str(k).lower(): str(k) for k in v}
    for key, val in chk.supported(policy.TLS, v, path + "."):
        raw = raw_of[key]
        if key in ("cert_file", "key_file", "ca_file"):
            if not isinstance(val, str):
                chk.error(v, raw, f"error parsing tls config, expected '{key}' to be filename")
            else:
                o[key] = val
        elif key == "verify":
            o["verify"] = _bool(chk, v, raw, val, key) or o.get("verify", False)
        elif key == "insecure":
            o["insecure"] = _bool(chk, v, raw, val, key)
        elif key == "verify_and_map":
            if _bool(chk, v, raw, val, key):
                o["verify"] = o["map_users"] = True
        elif key == "verify_cert_and_check_known_urls":
            on = _bool(chk, v, raw, val, key)
            if on and client_port:
                chk.error(v, raw, "verify_cert_and_check_known_urls not supported in this context")
            elif on:
                o["verify"] = o["check_known_urls"] = True
        elif key == "allow_insecure_cipher_suites":
            allow_insecure = _bool(chk, v, raw, val, key)
        elif key == "cipher_suites":
            if not isinstance(val, list) or not val:
                chk.error(v, raw, "error parsing tls config, 'cipher_suites' cannot be empty")
                continue
            for name in val:
                name = str(name)
                if name in CIPHERS:
                    ciphers.append(CIPHERS[name])
                elif name in TLS13_CIPHERS:
                    ciphers.append("")  # not configurable in TLS 1.3 (Go ignores them too)
                elif name in INSECURE_CIPHERS:
                    openssl = INSECURE_CIPHERS[name]
                    if openssl is None:
                        chk.refuse(v, raw, f"{path}.cipher_suites", f"{name}: not in OpenSSL 3")
                    else:
                        ciphers.append(openssl)
                        insecure_named.append(name)
                else:
                    chk.error(v, raw, f"unrecognized cipher {name}")
        elif key == "timeout":
            if isinstance(val, bool) or not isinstance(val, int | float | str):
                chk.error(v, raw, "error parsing tls config, 'timeout' wrong type")
            elif isinstance(val, str):
                try:
                    o["timeout"] = parse_duration(val)
                except ValueError as e:
                    chk.error(v, raw, f"error parsing tls config, 'timeout' {e}")
            else:
                o["timeout"] = float(val)
        elif key == "pinned_certs":
            if not isinstance(val, list):
                chk.error(
                    v,
                    raw,
                    "error parsing tls config, expected 'pinned_certs' to be a list of "
                    + _PIN_WHAT,
                )
                continue
            pins = set()
            for entry in val:
                pin = str(entry).lower()
                if not _PIN.match(pin):
                    chk.error(
                        v,
                        raw,
                        f"error parsing tls config, 'pinned_certs' key {pin} does not look like"
                        f" {_PIN_WHAT}",
                    )
                pins.add(pin)
            o["pinned_certs"] = frozenset(pins)
        elif key in ("handshake_first", "first", "immediate"):
            _handshake_first(chk, v, raw, val, o)
        elif key == "min_version":
            if not isinstance(val, str):
                chk.error(v, raw, f"error parsing tls config: 'min_version' wrong type: {val}")
            elif val in ("1.0", "1.1"):
                chk.error(
                    v, raw, f"error parsing tls config: unsupported TLS version: TLS 1.{val[-1]}"
                )
            elif val not in ("1.2", "1.3"):
                chk.error(v, raw, f"error parsing tls config: unknown version: {val}")
            else:
                o["min_version"] = val
    if insecure_named and not allow_insecure:
        chk.errors.append(
            "insecure cipher suites configured without 'allow_insecure_cipher_suites' option"
            " set: " + ", ".join(insecure_named)
        )
    if ciphers:
        o["ciphers"] = tuple(ciphers)
    if len(chk.errors) > before:
        return None
    if o.get("timeout", 0) <= 0:
        o.pop("timeout", None)
    opts = TlsOptions(**o)
    try:
        # Load the files now: a bad one is a configuration error, as in nats-server.
        check_tls(opts, dialing=not client_port)
    except ConfigError as e:
        chk.errors.append(where + str(e))
        return None
    return opts


def _handshake_first(
    chk: Checker, m: Mapping[str, Any], raw: str, val: Any, o: dict[str, Any]
) -> None:
    if isinstance(val, bool):
        o["handshake_first"] = val
        return
    if not isinstance(val, str):
        chk.error(
            m, raw, f'field "{raw}" should be a boolean or a string, got {type(val).__name__}'
        )
        return
    low = val.lower()
    if low in ("true", "on"):
        o["handshake_first"] = True
    elif low in ("false", "off"):
        o["handshake_first"] = False
    elif low in ("auto", "auto_fallback"):
        o["handshake_first"] = True
        o["fallback_delay"] = FALLBACK_DELAY
    else:
        try:
            o["fallback_delay"] = parse_duration(val)
            o["handshake_first"] = True
        except ValueError:
            chk.error(m, raw, f'field "{raw}"\'s value "{val}" is invalid')


def apply_tls_flags(opts: ServerOptions, flags: Mapping[str, object]) -> None:
    """``--tls --tlscert --tlskey --tlscacert --tlsverify`` on top of the file's ``tls {}``
    (nats-server's ``overrideTLS``: any of them replaces the block with the flags' values)."""
    keys = ("tls", "tlscert", "tlskey", "tlscacert", "tlsverify")
    if not any(k in flags for k in keys):
        return
    if not (flags.get("tls") or flags.get("tlsverify")):
        given = [f"--{k}" for k in keys[1:4] if flags.get(k)]
        if given:
            # nats-server ignores them without --tls; natsd says so instead of listening
            # in plaintext with a certificate configured.
            raise ConfigError(f"{' '.join(given)} need --tls or --tlsverify")
        return
    cert = str(flags.get("tlscert") or "")
    key = str(flags.get("tlskey") or "")
    if not cert:
        raise ConfigError("TLS Server certificate must be present and valid")
    if not key:
        raise ConfigError("TLS Server private key must be present and valid")
    base = opts.tls or TlsOptions()
    tls = replace(
        base,
        cert_file=cert,
        key_file=key,
        ca_file=str(flags.get("tlscacert") or ""),
        verify=bool(flags.get("tlsverify")),
    )
    check_tls(tls, dialing=False)
    opts.tls = tls


def check_tls(opts: TlsOptions, dialing: bool) -> None:
    """Load the files of ``opts`` as the accepting end would, and as the dialing end too
    when ``dialing`` (a route's block); ConfigError naming the problem."""
    try:
        server_context(opts)
        if dialing:
            client_context(opts)
    except TlsError as e:
        raise ConfigError(str(e)) from None
