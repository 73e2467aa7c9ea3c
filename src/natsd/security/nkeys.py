"""NKey authentication: the nonce a server challenges with, and the check of a client's
signature of it (nats-server's ``nkey.go``, and the nkey branch of
``processClientOrLeafAuthentication``).

A public nkey is base32 of a prefix byte, the 32-byte Ed25519 key and a CRC16; the nats-io
``nkeys`` package gives the prefixes and the checksum, PyNaCl (which ``nkeys`` is built on)
verifies the Ed25519 signature.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Final

import nacl.exceptions
import nacl.signing
import nkeys

__all__ = [
    "NONCE_RAW_LEN",
    "is_valid_public_account_key",
    "is_valid_public_user_key",
    "new_nonce",
    "public_key_bytes",
    "verify",
]

# nats-server's nonceRawLen: 11 random bytes, 15 characters of raw URL-safe base64.
NONCE_RAW_LEN: Final = 11
_PREFIX_USER: Final = int(nkeys.PREFIX_BYTE_USER)
_PREFIX_ACCOUNT: Final = int(nkeys.PREFIX_BYTE_ACCOUNT)


def new_nonce() -> str:
    return base64.urlsafe_b64encode(os.urandom(NONCE_RAW_LEN)).decode().rstrip("=")


def public_key_bytes(key: str, prefix: int = _PREFIX_USER) -> bytes | None:
    """The raw Ed25519 key of a public nkey with ``prefix`` ('U' users by default); None if
    it is not one (bad base32, prefix or checksum)."""
    if not key or len(key) != 56:
        return None
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != prefix:
        return None
    if bytes(nkeys.crc16_checksum(raw[:33])) != raw[33:]:
        return None
    return raw[1:33]


def is_valid_public_user_key(key: str) -> bool:
    return public_key_bytes(key) is not None


def is_valid_public_account_key(key: str) -> bool:
    return public_key_bytes(key, _PREFIX_ACCOUNT) is not None


_RAW_URL = re.compile(r"^[A-Za-z0-9_-]*$")
_STD = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def _decode_sig(sig: str) -> bytes | None:
    """Go's ``base64.RawURLEncoding``, else ``StdEncoding`` (nats-server tries both, in that
    order, each strictly: no padding in the first, padding required in the second)."""
    try:
        if _RAW_URL.match(sig) and len(sig) % 4 != 1:
            return base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
        if _STD.match(sig) and len(sig) % 4 == 0:
            return base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return None
    return None


def verify(public_key: str, nonce: bytes, sig: str) -> bool:
    """Whether ``sig`` (base64) is ``public_key``'s signature of ``nonce``."""
    raw = public_key_bytes(public_key)
    signature = _decode_sig(sig)
    if raw is None or signature is None or len(signature) != 64:
        return False
    try:
        nacl.signing.VerifyKey(raw).verify(nonce, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, TypeError):
        return False
    return True
