"""Accounts' ``exports`` and ``imports``: read as nats-server's ``parseAccountExports`` /
``parseAccountImports`` read them, then checked across accounts as its ``parseAccounts``
checks them once every account is known (exports first, then imports against them), with
its words. The server wires what passes (router/imports.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from natsd.config import policy
from natsd.config.cluster import go_type
from natsd.config.options import AccountConfig, ExportConfig, ImportConfig
from natsd.config.policy import Checker
from natsd.core.clock import parse_duration
from natsd.core.goquote import go_quote
from natsd.core.subjects import is_valid_subject, subject_has_wildcard, subset_match

__all__ = ["check_links", "export_for", "parse_exports", "parse_imports"]

_RESPONSE_TYPES = {
    "single": "Singleton",
    "singleton": "Singleton",
    "stream": "Streamed",
    "chunk": "Chunked",
    "chunked": "Chunked",
}

# nats-server's MaxAccountCycleSearchDepth
_MAX_DEPTH = 1024


def parse_exports(v: Any, where: Mapping[str, Any], path: str, chk: Checker) -> list[ExportConfig]:
    if not isinstance(v, list):
        chk.error(where, "exports", f"Exports should be an array, got {go_type(v)}")
        return []
    out: list[ExportConfig] = []
    for i, item in enumerate(v):
        e = _export(item, where, f"{path}[{i}]", chk)
        if e is not None:
            out.append(e)
    return out


def _export(item: Any, where: Mapping[str, Any], path: str, chk: Checker) -> ExportConfig | None:
    if not isinstance(item, Mapping):
        chk.error(
            where,
            "exports",
            f"Export Items should be a map with type entry, got {go_type(item)}",
        )
        return None
    kind = subject = ""
    accounts: tuple[str, ...] | None = None
    rtype = ""
    thresh = 0.0
    for key, val in chk.supported(policy.EXPORT, item, path + "."):
        if key in ("stream", "service"):
            other = "service" if key == "stream" else "stream"
            if kind == other:
                chk.error(
                    item, key, f"Detected {key} {go_quote(str(val))} but already saw a {other}"
                )
                continue
            if not isinstance(val, str):
                chk.error(item, key, f"Expected {key} name to be string, got {go_type(val)}")
                continue
            kind, subject = key, val
        elif key in ("response", "response_type"):
            if rtype:
                chk.error(item, key, "Duplicate response type definition")
                continue
            if not isinstance(val, str):
                chk.error(item, key, f"Expected response type to be string, got {go_type(val)}")
                continue
            rt = _RESPONSE_TYPES.get(val.lower())
            if rt is None:
                chk.error(item, key, f"Unknown response type: {go_quote(val)}")
                continue
            rtype = rt
        elif key in ("threshold", "response_threshold", "response_max_time", "response_time"):
            if thresh:
                chk.error(item, key, "Duplicate response threshold detected")
                continue
            try:
                if not isinstance(val, str):
                    raise TypeError
                thresh = parse_duration(val)
            except (TypeError, ValueError):
                got = go_quote(val) if isinstance(val, str) else go_type(val)
                chk.error(
                    item,
                    key,
                    f"Expected response threshold to be a parseable time duration, got {got}",
                )
                continue
        elif key == "accounts":
            if not isinstance(val, list) or not all(isinstance(a, str) for a in val):
                chk.error(item, key, "Expected accounts to be an array of account names")
                continue
            accounts = tuple(val) if val else None
    if kind == "stream" and rtype:
        chk.error(item, "stream", "Detected response directive on non-service")
        return None
    if kind == "stream" and thresh:
        chk.error(item, "stream", "Detected response directive on non-service")
        return None
    if not kind:
        return None
    return ExportConfig(
        kind, subject, accounts, response_type=rtype or "Singleton", response_threshold=thresh
    )


def parse_imports(v: Any, where: Mapping[str, Any], path: str, chk: Checker) -> list[ImportConfig]:
    if not isinstance(v, list):
        chk.error(where, "imports", f"Imports should be an array, got {go_type(v)}")
        return []
    out: list[ImportConfig] = []
    # local subject -> the service imports on it (one per exporting account)
    services: dict[str, list[ImportConfig]] = {}
    for i, item in enumerate(v):
        im = _import(item, where, f"{path}[{i}]", chk)
        if im is None:
            continue
        if im.kind == "service":
            dup = next((d for d in services.get(im.to, ()) if d.account == im.account), None)
            if dup is not None:
                chk.error(
                    where,
                    "imports",
                    f"Duplicate service import subject {go_quote(im.to)}, previously used in"
                    f" import for account {go_quote(dup.account)}, subject"
                    f" {go_quote(dup.subject)}",
                )
                continue
            services.setdefault(im.to, []).append(im)
        out.append(im)
    return out


def _import(item: Any, where: Mapping[str, Any], path: str, chk: Checker) -> ImportConfig | None:
    if not isinstance(item, Mapping):
        chk.error(
            where,
            "imports",
            f"Import Items should be a map with type entry, got {go_type(item)}",
        )
        return None
    kind = account = subject = to = prefix = ""
    share = False
    for key, val in chk.supported(policy.IMPORT, item, path + "."):
        if key in ("stream", "service"):
            other = "service" if key == "stream" else "stream"
            if kind == other:
                chk.error(item, key, f"Detected {key} but already saw a {other}")
                continue
            if not isinstance(val, Mapping):
                what = "Stream" if key == "stream" else "Service"
                chk.error(item, key, f"{what} entry should be an account map, got {go_type(val)}")
                continue
            acc = subj = ""
            for k, x in chk.supported(policy.IMPORT_ACCOUNT, val, f"{path}.{key}."):
                if k == "account":
                    acc = str(x)
                else:
                    subj = str(x)
            if not acc or not subj:
                chk.error(item, key, "Expect an account name and a subject")
                continue
            kind, account, subject = key, acc, subj
        elif key == "prefix":
            prefix = str(val)
        elif key == "to":
            to = str(val)
        elif key == "share":
            if val is not True and val is not False:
                chk.error(item, key, f"Expected share to be a boolean, got {go_type(val)}")
                continue
            if val:
                # The requester's details (connection, user, server) go with each request
                # to an exporter it is shared with; natsd sends the account alone.
                chk.refuse(item, key, path + ".share", "requests carry the requesting account")
    if not kind:
        return None
    if kind == "stream" and prefix and to:
        chk.error(item, "to", "Stream import can not have a 'prefix' and a 'to' property")
        return None
    if kind == "service":
        return ImportConfig(kind, account, subject, to=to or subject, share=share)
    return ImportConfig(kind, account, subject, to=to, prefix=prefix)


# ---------------------------------------------------------------------- across accounts
def export_for(exports: list[ExportConfig], kind: str, subject: str) -> ExportConfig | None:
    """The export an import of ``subject`` uses (nats-server's ``getServiceExport`` and
    ``check{Stream,Service}ExportApproved``): the one of exactly that subject, else one the
    subject falls under."""
    mine = [e for e in exports if e.kind == kind]
    for e in mine:
        if e.subject == subject:
            return e
    for e in mine:
        if subset_match(subject.encode(), e.subject.encode()):
            return e
    return None


def _approved(exports: list[ExportConfig], kind: str, importer: str, subject: str) -> bool:
    """An export covers the import and is public or lists ``importer``."""
    if not is_valid_subject(subject.encode()):
        return False
    e = export_for(exports, kind, subject)
    return e is not None and (e.accounts is None or importer in e.accounts)


def check_links(accounts: dict[str, AccountConfig], where: Mapping[str, Any], chk: Checker) -> None:
    """Every import against the exports of the account it names, in nats-server's order
    and words (errors go to ``chk``, reported at the ``accounts`` key)."""

    def err(text: str) -> None:
        chk.error(where, "accounts", text)

    for acfg in accounts.values():
        for e in acfg.exports:
            what = "stream" if e.kind == "stream" else "service"
            for name in e.accounts or ():
                if name not in accounts:
                    err(f"{go_quote(name)} account not defined for {what} export")
    # The imports added so far, by account: nats-server adds them one by one, so a cycle is
    # reported by the import that closes it.
    added: dict[str, list[ImportConfig]] = {name: [] for name in accounts}
    for acfg in accounts.values():
        for im in acfg.imports:
            if im.kind != "stream" or not _check_stream_import(accounts, added, acfg, im, err):
                continue
            if any(
                x.kind == "stream" and (x.account, x.subject) == (im.account, im.subject)
                for x in added[acfg.name]
            ):
                err(
                    f"Error adding stream import {go_quote(im.subject)}:"
                    " stream import already exists"
                )
                continue
            added[acfg.name].append(im)
    for acfg in accounts.values():
        for im in acfg.imports:
            if im.kind == "service" and _check_service_import(accounts, added, acfg, im, err):
                added[acfg.name].append(im)


def _exporter(
    accounts: dict[str, AccountConfig], im: ImportConfig, err: Any
) -> AccountConfig | None:
    """The account an import names, or None (reported) when there is none."""
    if im.account not in accounts:
        err(f"{go_quote(im.account)} account not defined for {im.kind} import")
        return None
    return accounts[im.account]


def _check_stream_import(
    accounts: dict[str, AccountConfig],
    added: dict[str, list[ImportConfig]],
    acfg: AccountConfig,
    im: ImportConfig,
    err: Any,
) -> bool:
    exporter = _exporter(accounts, im, err)
    if exporter is None:
        return False
    head = f"Error adding stream import {go_quote(im.subject)}: "
    if not _approved(exporter.exports, "stream", acfg.name, im.subject):
        err(head + "stream import not authorized")
        return False
    if im.prefix and subject_has_wildcard(im.prefix.encode()):
        err(head + "stream import prefix can not contain wildcard tokens")
        return False
    to = im.local_subject
    if not is_valid_subject(to.encode()):
        err(head + "sublist: invalid subject")
        return False
    for s in (to, im.subject):
        if _stream_cycle(accounts, added, exporter, s, {acfg.name}):
            err(head + "import forms a cycle")
            return False
    return True


def _stream_cycle(
    accounts: dict[str, AccountConfig],
    added: dict[str, list[ImportConfig]],
    acc: AccountConfig,
    to: str,
    visited: set[str],
) -> bool:
    """nats-server's ``checkStreamImportsForCycles``."""
    if len(visited) >= _MAX_DEPTH:
        return True
    if not any(
        e.kind == "stream" and subset_match(to.encode(), e.subject.encode()) for e in acc.exports
    ):
        return False
    for im in added[acc.name]:
        if im.kind != "stream":
            continue
        ito = im.local_subject
        if not _collide(to, ito):
            continue
        if im.account in visited:
            return True
        nxt = accounts.get(im.account)
        if nxt is None:
            continue
        t = ito if subset_match(ito.encode(), to.encode()) else to
        if _stream_cycle(accounts, added, nxt, t, visited | {acc.name}):
            return True
    return False


def _check_service_import(
    accounts: dict[str, AccountConfig],
    added: dict[str, list[ImportConfig]],
    acfg: AccountConfig,
    im: ImportConfig,
    err: Any,
) -> bool:
    exporter = _exporter(accounts, im, err)
    if exporter is None:
        return False
    head = f"Error adding service import {go_quote(im.subject)}: "
    if not is_valid_subject(im.subject.encode()) or not is_valid_subject(im.to.encode()):
        err(head + "sublist: invalid subject")
        return False
    if not _approved(exporter.exports, "service", acfg.name, im.subject):
        err(head + "service import not authorized")
        return False
    if _service_cycle(accounts, added, exporter, im.subject, {acfg.name}):
        err(head + "import forms a cycle")
        return False
    return True


def _service_cycle(
    accounts: dict[str, AccountConfig],
    added: dict[str, list[ImportConfig]],
    acc: AccountConfig,
    frm: str,
    visited: set[str],
) -> bool:
    """nats-server's ``checkServiceImportsForCycles`` (``frm`` is the subject as the
    account ``acc`` sees it)."""
    if len(visited) >= _MAX_DEPTH:
        return True
    for im in added[acc.name]:
        if im.kind != "service" or not _collide(frm, im.to):
            continue
        if im.account in visited:
            return True
        nxt = accounts.get(im.account)
        if nxt is None:
            continue
        f = im.subject if subset_match(im.subject.encode(), frm.encode()) else frm
        if _service_cycle(accounts, added, nxt, f, visited | {acc.name}):
            return True
    return False


def _collide(a: str, b: str) -> bool:
    """nats-server's ``SubjectsCollide``: some subject matches both patterns."""
    ta = a.split(".")
    tb = b.split(".")
    for i in range(max(len(ta), len(tb))):
        x = ta[i] if i < len(ta) else None
        y = tb[i] if i < len(tb) else None
        if x == ">" or y == ">":
            return x is not None and y is not None
        if x is None or y is None:
            return False
        if x != y and x != "*" and y != "*":
            return False
    return True
