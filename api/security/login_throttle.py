"""Failed HTTP Basic authentications slowed per principal and per client address
(docs/security.md, "Failed logins").

Each principal (the Basic user name or API key) and each client address (the host ACLs
see: ``api.forwarded`` resolves it behind a trusted proxy) counts its failures in a
window of ``authentication.failures.window.ms`` that opens at its first failure. The
failure that reaches ``authentication.failures.max`` (a principal) or
``authentication.failures.address.max`` (an address) locks that key for
``authentication.failures.lockout.ms``: until then every attempt naming the principal,
or coming from the address, is answered 429 with ``Retry-After`` before the password is
looked at (no KDF, no answer about the password), and counted as throttled, not as a
failure. When the lock ends the key starts afresh. A success clears its principal's
count (not its address's: one good account does not buy an address more guesses).

The address threshold is the higher one by default: clients behind one NAT share it,
and locking an address refuses every user there.

Memory: at most ``authentication.failures.tracked.max`` principals and as many
addresses, each an ordered dict, least recently failed first; past the cap the oldest
is forgotten. A name longer than ``MAX_KEY_CHARS`` is kept as its SHA-256. Time is the
broker's ``core.clock`` (monotonic).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from core.clock import SYSTEM_CLOCK, Clock

MAX_KEY_CHARS = 256
_TOKEN_KEY = os.urandom(32)

DEFAULTS: dict[str, int] = {
    "authentication.failures.max": 5,
    "authentication.failures.address.max": 20,
    "authentication.failures.window.ms": 60_000,
    "authentication.failures.lockout.ms": 60_000,
    "authentication.failures.tracked.max": 10_000,
}


@dataclass
class _Failures:
    __slots__ = ("count", "since", "locked_until")
    count: int
    since: float  # monotonic seconds: the window's start
    locked_until: float  # 0: not locked


class _Table:
    """One kind of key (principals or addresses): failures, capped, oldest first."""

    def __init__(self, limit: int, window_s: float, lockout_s: float, cap: int) -> None:
        self.limit = limit
        self.window_s = window_s
        self.lockout_s = lockout_s
        self.cap = cap
        self.entries: OrderedDict[str, _Failures] = OrderedDict()
        #: the secrets (keyed digests) being checked now, per key (the KDF runs off the
        #: loop): counted against the limit, so a burst of parallel guesses cannot all
        #: get past it, while parallel requests with one secret (a client's first
        #: connections) count once
        self.inflight: dict[str, dict[bytes, int]] = {}

    def locked_for(self, key: str, now: float, token: bytes = b"") -> float:
        """Seconds ``key`` must wait (0: it may be checked): its lock, or a second while
        the other secrets already being checked for it could reach the limit."""
        if self.limit <= 0:
            return 0.0
        entry = self.entries.get(key)
        count = 0
        if entry is not None:
            if entry.locked_until:
                if entry.locked_until > now:
                    return entry.locked_until - now
                del self.entries[key]  # the lock is over: start afresh
            elif now - entry.since < self.window_s:
                count = entry.count
        pending = self.inflight.get(key)
        others = 0 if pending is None else len(pending) - (token in pending)
        if count + others >= self.limit:
            return 1.0
        return 0.0

    def begin(self, key: str, token: bytes) -> None:
        pending = self.inflight.setdefault(key, {})
        pending[token] = pending.get(token, 0) + 1

    def end(self, key: str, token: bytes) -> None:
        pending = self.inflight.get(key)
        if pending is None:
            return
        left = pending.get(token, 0) - 1
        if left > 0:
            pending[token] = left
        else:
            pending.pop(token, None)
            if not pending:
                del self.inflight[key]

    def fail(self, key: str, now: float) -> bool:
        """Count a failure; True when it locked ``key``."""
        if self.limit <= 0:
            return False
        entry = self.entries.get(key)
        if entry is None or now - entry.since >= self.window_s:
            entry = _Failures(0, now, 0.0)
            self.entries[key] = entry
        self.entries.move_to_end(key)
        entry.count += 1
        while len(self.entries) > self.cap:
            self.entries.popitem(last=False)
        if entry.count >= self.limit:
            entry.locked_until = now + self.lockout_s
            return True
        return False

    def clear(self, key: str) -> None:
        self.entries.pop(key, None)


class LoginThrottle:
    """The broker's failed-login bookkeeping and its two counters (``/metrics``:
    ``franz_authentication_failures_total``, ``franz_authentication_throttled_total``)."""

    def __init__(self, *, max_failures: int = 5, max_address_failures: int = 20,
                 window_ms: int = 60_000, lockout_ms: int = 60_000, tracked_max: int = 10_000,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        window_s, lockout_s = max(1, window_ms) / 1000, max(1, lockout_ms) / 1000
        cap = max(1, tracked_max)
        self.principals = _Table(max_failures, window_s, lockout_s, cap)
        self.addresses = _Table(max_address_failures, window_s, lockout_s, cap)
        self.clock = clock
        self.failures = 0  # failed authentications
        self.throttled = 0  # attempts refused with 429

    @classmethod
    def from_config(cls, config: Any, clock: Clock = SYSTEM_CLOCK) -> LoginThrottle:
        """From the broker's properties (a stand-in config without them: the defaults)."""
        def value(name: str) -> int:
            try:
                return int(config[name])
            except (KeyError, TypeError, ValueError):
                return DEFAULTS[name]
        return cls(max_failures=value("authentication.failures.max"),
                   max_address_failures=value("authentication.failures.address.max"),
                   window_ms=value("authentication.failures.window.ms"),
                   lockout_ms=value("authentication.failures.lockout.ms"),
                   tracked_max=value("authentication.failures.tracked.max"), clock=clock)

    @staticmethod
    def principal_key(user: str) -> str:
        if len(user) <= MAX_KEY_CHARS:
            return user
        return "sha256:" + hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def token(user: str, secret: str) -> bytes:
        """What identifies one attempt's credentials while it is checked (never kept
        longer, never the secret itself)."""
        raw = f"{user}\x00{secret}".encode("utf-8", "surrogatepass")
        return hashlib.blake2b(raw, key=_TOKEN_KEY, digest_size=16).digest()

    def retry_after(self, user: str | None, host: str, secret: str | None = None) -> int:
        """Whole seconds to wait (at least 1) when ``user`` or ``host`` is locked, counted
        as a throttled attempt; 0 when the attempt may be checked."""
        if not (self.addresses.entries or self.principals.entries or self.addresses.inflight
                or self.principals.inflight):
            return 0  # the usual case: nothing failed lately, nothing being checked
        token = (self.token(user, secret) if user is not None and secret is not None
                 and (self.addresses.inflight or self.principals.inflight) else b"")
        now = self.clock.monotonic()
        wait = self.addresses.locked_for(host, now, token)
        if user is not None:
            wait = max(wait, self.principals.locked_for(self.principal_key(user), now, token))
        if wait <= 0:
            return 0
        self.throttled += 1
        return max(1, math.ceil(wait))

    def begin(self, user: str, host: str, token: bytes) -> None:
        """A password check of ``user`` from ``host`` starts; ``end`` when it is done."""
        self.addresses.begin(host, token)
        self.principals.begin(self.principal_key(user), token)

    def end(self, user: str, host: str, token: bytes) -> None:
        self.addresses.end(host, token)
        self.principals.end(self.principal_key(user), token)

    def failed(self, user: str | None, host: str) -> None:
        """A failed authentication of ``user`` (None: the credentials did not parse)
        from ``host``."""
        self.failures += 1
        now = self.clock.monotonic()
        self.addresses.fail(host, now)
        if user is not None:
            self.principals.fail(self.principal_key(user), now)

    def succeeded(self, user: str) -> None:
        if self.principals.entries:
            self.principals.clear(self.principal_key(user))
