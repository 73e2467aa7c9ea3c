"""Identifiers: NUID-style unique ids and server ids shaped like nats-server's.

nats-server ids are 56 characters of base32 starting with 'N' (a server nkey's public key);
clients only display them, so random characters of the same alphabet are enough until nkeys
arrive.
"""

from __future__ import annotations

import secrets

__all__ = ["Nuid", "new_server_id"]

_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def new_server_id() -> str:
    return "N" + "".join(secrets.choice(_B32) for _ in range(55))


class Nuid:
    """22-character ids: a random 12-char prefix plus a sequential 10-char suffix (nats nuid)."""

    __slots__ = ("_inc", "_prefix", "_seq")
    _MAX_SEQ = 62**10

    def __init__(self) -> None:
        self._prefix = ""
        self._seq = 0
        self._inc = 0
        self._reset()

    def _reset(self) -> None:
        self._prefix = "".join(secrets.choice(_B62) for _ in range(12))
        self._seq = secrets.randbelow(62**9)
        self._inc = 33 + secrets.randbelow(333)

    def next(self) -> str:
        self._seq += self._inc
        if self._seq >= self._MAX_SEQ:
            self._reset()
        n = self._seq
        out = []
        for _ in range(10):
            n, r = divmod(n, 62)
            out.append(_B62[r])
        return self._prefix + "".join(reversed(out))
