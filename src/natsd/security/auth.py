"""Client authentication: users with plain or bcrypt passwords, tokens, nkeys (a signed
nonce), users named by their TLS certificate (``verify_and_map``), no_auth_user.

Pure logic. bcrypt is deliberately slow (tens of ms per check) and runs on the event loop
like nats-server runs it on the client's goroutine; verified (hash, password) pairs are
cached so reconnect storms by good clients cost one bcrypt each, not one per connect.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import bcrypt

from natsd.security import nkeys
from natsd.security.permissions import Permissions

__all__ = ["AuthResult", "Authenticator", "User", "verify_password"]

_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2x$", "$2y$")
_CACHE_MAX = 4096
_verified: dict[tuple[str, bytes], bool] = {}


def verify_password(stored: str, given: str) -> bool:
    """Compare a configured password (plain or bcrypt hash) with what a client sent."""
    if stored.startswith(_BCRYPT_PREFIXES):
        key = (stored, hashlib.sha256(given.encode()).digest())
        hit = _verified.get(key)
        if hit is not None:
            return hit
        try:
            ok = bcrypt.checkpw(given.encode(), stored.encode())
        except ValueError:
            ok = False
        if len(_verified) >= _CACHE_MAX:
            _verified.clear()
        _verified[key] = ok
        return ok
    return hmac.compare_digest(stored.encode(), given.encode())


@dataclass
class User:
    username: str
    password: str
    account: str
    permissions: Permissions | None = None
    # A public user nkey ("U..."): the user signs the server's nonce, no name or password.
    nkey: str = ""


@dataclass(frozen=True)
class AuthResult:
    username: str
    account: str
    permissions: Permissions | None


class Authenticator:
    def __init__(
        self,
        users: list[User] | None = None,
        token: str | None = None,
        no_auth_user: str | None = None,
        token_account: str = "$G",
    ) -> None:
        self.users = {u.username: u for u in users or [] if not u.nkey}
        self.nkeys = {u.nkey: u for u in users or [] if u.nkey}
        self.token = token
        self.token_account = token_account
        self.no_auth_user = no_auth_user
        if (
            no_auth_user is not None
            and no_auth_user not in self.users
            and no_auth_user not in self.nkeys
        ):
            raise ValueError(f'no_auth_user: "{no_auth_user}" not present as user or nkey')

    @property
    def required(self) -> bool:
        return bool(self.users) or bool(self.nkeys) or self.token is not None

    @property
    def nonce_required(self) -> bool:
        """INFO carries a nonce to sign (nats-server's nonceRequired)."""
        return bool(self.nkeys)

    def check(
        self,
        opts: dict[str, object],
        nonce: bytes = b"",
        cert_names: list[str] | None = None,
    ) -> AuthResult | None:
        """``opts`` is the CONNECT; ``nonce`` what INFO challenged with; ``cert_names`` the
        names of the client's certificate when the port maps certificates to users
        (``verify_and_map``; None when it does not)."""
        user = opts.get("user")
        password = opts.get("pass")
        token = opts.get("auth_token")
        nkey = opts.get("nkey")
        if self.token is not None:
            if isinstance(token, str) and verify_password(self.token, token):
                return AuthResult("", self.token_account, None)
            if not self.users and not self.nkeys:
                return None
        if self.nkeys:
            no_creds = not user and not password and not token and not nkey
            if no_creds and self.no_auth_user in self.nkeys:
                nu = self.nkeys[self.no_auth_user]
                return AuthResult(nu.nkey, nu.account, nu.permissions)
            if isinstance(nkey, str) and nkey:
                ku = self.nkeys.get(nkey)
                sig = opts.get("sig")
                if ku is None or not isinstance(sig, str) or not sig:
                    return None
                if not nkeys.verify(nkey, nonce, sig):
                    return None
                return AuthResult(ku.nkey, ku.account, ku.permissions)
        if cert_names is not None and self.users:
            mu = _mapped_user(self.users, cert_names)
            return AuthResult(mu.username, mu.account, mu.permissions) if mu else None
        if isinstance(user, str) and user:
            u = self.users.get(user)
            if u is None or not isinstance(password, str):
                return None
            if not verify_password(u.password, password):
                return None
            return AuthResult(u.username, u.account, u.permissions)
        if self.no_auth_user is not None and not token:
            u = self.users[self.no_auth_user]
            return AuthResult(u.username, u.account, u.permissions)
        return None


def _mapped_user(users: dict[str, User], names: list[str]) -> User | None:
    """``verify_and_map``: the user named by the certificate's e-mail addresses, DNS names,
    URIs, or its subject (a DN, matched with its attributes in any order, as nats-server's
    ``RDNsMatch``). The subject comes last in ``names``."""
    for n in names:
        u = users.get(n)
        if u is not None:
            return u
    if not names:
        return None
    want = _dn(names[-1])
    if not want:
        return None
    for name, u in users.items():
        if _dn(name) == want:
            return u
    return None


_DN_ALIASES = {"EMAIL": "EMAILADDRESS", "E": "EMAILADDRESS", "1.2.840.113549.1.9.1": "EMAILADDRESS"}


def _dn(text: str) -> frozenset[tuple[str, str]]:
    """An RFC 4514 DN as a set of (TYPE, value): order-free, types upper case."""
    out: set[tuple[str, str]] = set()
    part: list[str] = []
    esc = False
    parts: list[str] = []
    for ch in text:
        if esc:
            part.append(ch)
            esc = False
        elif ch == "\\":
            part.append(ch)
            esc = True
        elif ch in ",+":
            parts.append("".join(part))
            part = []
        else:
            part.append(ch)
    parts.append("".join(part))
    for p in parts:
        typ, eq, value = p.partition("=")
        if not eq:
            return frozenset()
        t = typ.strip().upper()
        out.add((_DN_ALIASES.get(t, t), value.strip()))
    return frozenset(out)
