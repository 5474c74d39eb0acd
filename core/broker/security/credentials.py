"""Stored credentials: scrypt hashes of passwords (and API-key secrets), and the cache
that keeps the key derivation off the hot path.

A user's credential is stored as Kafka stores a SCRAM credential, one text value:

    scrypt:n=16384,r=8,p=1,salt=<base64>,hash=<base64>

scrypt (RFC 7914, through the standard library's OpenSSL binding) is memory-hard: with
these parameters a guess costs 16 MiB and tens of milliseconds, so a stolen store is
slow to attack. The same cost would make every request slow, so ``VerifiedCache``
remembers, per user, a keyed digest of the secret that last verified: a later request
with the same secret costs one HMAC. An entry lives ``ttl_s`` at most and goes at once
when the user changes (``forget``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections import OrderedDict
from dataclasses import dataclass

SCHEME = "scrypt"
DEFAULT_N = 1 << 14
DEFAULT_R = 8
DEFAULT_P = 1
SALT_BYTES = 16
HASH_BYTES = 32
MAX_SECRET_BYTES = 1024
MAX_USER_CHARS = 255
#: Characters a user name may hold: those of Kafka principal names people use, and
#: nothing that breaks a Basic header (``:``) or a znode path (``/``).
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@+=")
_MAXMEM = 64 * 1024 * 1024


def check_user_name(name: str) -> str:
    """``name`` when it can be a user name, else ValueError naming why."""
    if not name:
        raise ValueError("user name must not be empty")
    if len(name) > MAX_USER_CHARS:
        raise ValueError(f"user name longer than {MAX_USER_CHARS} characters")
    bad = set(name) - _NAME_CHARS
    if bad:
        raise ValueError(f"user name {name!r} holds characters outside letters, digits "
                         f"and ._-@+= ({''.join(sorted(bad))!r})")
    return name


def check_secret(secret: str) -> bytes:
    data = secret.encode("utf-8")
    if not data:
        raise ValueError("password must not be empty")
    if len(data) > MAX_SECRET_BYTES:
        raise ValueError(f"password longer than {MAX_SECRET_BYTES} bytes")
    return data


@dataclass(frozen=True, slots=True)
class StoredCredential:
    n: int
    r: int
    p: int
    salt: bytes
    hash: bytes

    @classmethod
    def create(cls, secret: str, *, n: int = DEFAULT_N, r: int = DEFAULT_R,
               p: int = DEFAULT_P) -> StoredCredential:
        salt = os.urandom(SALT_BYTES)
        return cls(n, r, p, salt, _derive(check_secret(secret), salt, n, r, p))

    def verify(self, secret: str) -> bool:
        try:
            data = check_secret(secret)
        except ValueError:
            return False
        return hmac.compare_digest(_derive(data, self.salt, self.n, self.r, self.p), self.hash)

    def encode(self) -> str:
        b64 = base64.b64encode
        return (f"{SCHEME}:n={self.n},r={self.r},p={self.p},"
                f"salt={b64(self.salt).decode()},hash={b64(self.hash).decode()}")

    @classmethod
    def decode(cls, text: str) -> StoredCredential:
        scheme, sep, rest = text.partition(":")
        if scheme != SCHEME or not sep:
            raise ValueError(f"not a {SCHEME} credential")
        fields = dict(item.split("=", 1) for item in rest.split(",") if "=" in item)
        try:
            n, r, p = int(fields["n"]), int(fields["r"]), int(fields["p"])
            salt = base64.b64decode(fields["salt"], validate=True)
            digest = base64.b64decode(fields["hash"], validate=True)
        except (KeyError, ValueError) as exc:
            raise ValueError(f"malformed {SCHEME} credential: {exc}") from None
        if n < 2 or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16 or not digest:
            raise ValueError(f"malformed {SCHEME} credential: bad parameters")
        return cls(n, r, p, salt, digest)


def _derive(secret: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=HASH_BYTES)


def new_api_key() -> tuple[str, str]:
    """A fresh API key (a user name) and its secret, as Confluent Cloud hands them out."""
    return "ak-" + secrets.token_hex(8), secrets.token_urlsafe(32)


class VerifiedCache:
    """Per user, a keyed digest of the secret that last verified, for ``ttl_s``."""

    def __init__(self, *, ttl_s: float, max_entries: int = 10_000) -> None:
        self._key = os.urandom(32)  # per process: the digests mean nothing elsewhere
        self._ttl_s = ttl_s
        self._max = max_entries
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()

    def _digest(self, user: str, secret: str) -> bytes:
        return hmac.new(self._key, f"{user}\0{secret}".encode("utf-8", "surrogatepass"),
                        hashlib.sha256).digest()

    def hit(self, user: str, secret: str, now: float) -> bool:
        entry = self._entries.get(user)
        if entry is None:
            return False
        digest, expires = entry
        if now >= expires:
            del self._entries[user]
            return False
        return hmac.compare_digest(digest, self._digest(user, secret))

    def remember(self, user: str, secret: str, now: float) -> None:
        self._entries[user] = (self._digest(user, secret), now + self._ttl_s)
        self._entries.move_to_end(user)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, user: str | None = None) -> None:
        """One user's entry, or every entry."""
        if user is None:
            self._entries.clear()
        else:
            self._entries.pop(user, None)
