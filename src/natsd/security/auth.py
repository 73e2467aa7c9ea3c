"""Client authentication: users with plain or bcrypt passwords, tokens, no_auth_user.

Pure logic. bcrypt is deliberately slow (tens of ms per check) and runs on the event loop
like nats-server runs it on the client's goroutine; verified (hash, password) pairs are
cached so reconnect storms by good clients cost one bcrypt each, not one per connect.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import bcrypt

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
        self.users = {u.username: u for u in users or []}
        self.token = token
        self.token_account = token_account
        self.no_auth_user = no_auth_user
        if no_auth_user is not None and no_auth_user not in self.users:
            raise ValueError(f'no_auth_user: "{no_auth_user}" not present as user or nkey')

    @property
    def required(self) -> bool:
        return bool(self.users) or self.token is not None

    def check(self, opts: dict[str, object]) -> AuthResult | None:
        user = opts.get("user")
        password = opts.get("pass")
        token = opts.get("auth_token")
        if self.token is not None:
            if isinstance(token, str) and verify_password(self.token, token):
                return AuthResult("", self.token_account, None)
            if not self.users:
                return None
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
