"""The server side of a SASL authentication, one object per connection, for Kafka's
SaslHandshake / SaslAuthenticate: ``Security.sasl_server(mechanism)`` makes it.

    server = security.sasl_server("SCRAM-SHA-256", host=peer)  # UnsupportedSaslMechanismError
    while not server.complete:
        answer = await server.step(client_bytes)               # SaslAuthenticationFailedError
        ...send answer...
    server.principal                                           # User:<name>

Mechanisms (``SASL_MECHANISMS``):

- ``PLAIN``: one step; the password is checked as HTTP Basic checks it
  (``Security.authenticate_basic``: the user's scrypt credential, the verified-credential
  cache, at most ``KDF_CONCURRENCY`` key derivations at once, an unknown user costing
  what a wrong password costs). Its answer is empty, as Kafka's.
- ``SCRAM-SHA-256``, ``SCRAM-SHA-512``: two steps (``core.broker.security.scram``),
  against the user's stored SCRAM credential of that mechanism (``SecurityStore.get_scram``);
  a user without one goes through a fake exchange that fails like a wrong password.

``step`` raises ``SaslAuthenticationFailedError`` (error_code 58) for every failure and
ends the exchange; a later ``step`` fails too. A store that cannot be read raises its own
error (``MetadataStoreError``), which is no authentication failure. Failures are audited
(``"event":"authentication","result":"failure"``, with the mechanism); PLAIN's wrong
passwords by ``authenticate_basic`` itself.

``claim(token)`` tells, without changing anything, whom the next token names (and for
PLAIN its password), so that the caller can ask the failed-login throttle before the
password is checked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from core.broker.security.audit import audit
from core.broker.security.plain import parse_plain
from core.broker.security.principal import Principal
from core.broker.security.sasl_errors import (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from core.broker.security.scram import (
    DEFAULT_ITERATIONS,
    INVALID_CREDENTIALS,
    ScramCredential,
    ScramMechanism,
    ScramServerExchange,
    parse_client_first,
)
from core.broker.security.scram import MECHANISMS as SCRAM_MECHANISMS

PLAIN = "PLAIN"
#: Every mechanism franz's SASL listeners can enable, in Kafka's names.
SASL_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)

#: (user, password) -> the principal, or None for an unknown user or a wrong password.
PlainAuthenticator = Callable[[str, str], Awaitable[Principal | None]]
#: (user, mechanism) -> the user's credential of that SCRAM mechanism, or None.
ScramLookup = Callable[[str, str], Awaitable[ScramCredential | None]]


@dataclass(frozen=True, slots=True)
class SaslClaim:
    """Whom a token names (None: nobody, or it is malformed), not verified; ``secret``
    only for PLAIN (for the throttle's identity of an attempt, never to be kept)."""

    user: str | None
    secret: str | None = None

    def __repr__(self) -> str:
        return f"SaslClaim(user={self.user!r})"


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool:
        """The client is authenticated (as ``principal``)."""

    @property
    def principal(self) -> Principal | None:
        """``User:<name>`` once complete, else None."""

    @property
    def user(self) -> str | None:
        """The user the client named so far (not verified until ``complete``)."""

    def claim(self, token: bytes) -> SaslClaim:
        """Whom ``token``, as the next step's input, names; never raises."""

    async def step(self, token: bytes) -> bytes:
        """The answer to send for the client's ``token`` (possibly empty: PLAIN's);
        SaslAuthenticationFailedError when authentication fails."""


def sasl_server(mechanism: str, *, authenticate_plain: PlainAuthenticator,
                lookup_scram: ScramLookup, fake_key: bytes, host: str = "",
                enabled: Collection[str] | None = None,
                fake_iterations: int = DEFAULT_ITERATIONS) -> SaslServer:
    """A server for ``mechanism`` (Kafka's names, case-sensitive);
    UnsupportedSaslMechanismError when franz has no such mechanism or ``enabled`` (the
    listener's ``sasl.enabled.mechanisms``) does not name it."""
    if mechanism not in SASL_MECHANISMS or (enabled is not None and mechanism not in enabled):
        raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism[:64]}")
    if mechanism == PLAIN:
        return PlainSaslServer(authenticate_plain, host=host)
    return ScramSaslServer(SCRAM_MECHANISMS[mechanism], lookup_scram, fake_key=fake_key,
                           host=host, fake_iterations=fake_iterations)


def _audit_failure(mechanism: str, user: str | None, host: str, reason: str) -> None:
    audit("authentication", principal=f"User:{(user or '')[:255]}", host=host,
          result="failure", mechanism=mechanism, reason=reason)


class PlainSaslServer:
    mechanism = PLAIN

    def __init__(self, authenticate: PlainAuthenticator, *, host: str = "") -> None:
        self._authenticate = authenticate
        self._host = host
        self._started = False
        self._user: str | None = None
        self._principal: Principal | None = None

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> Principal | None:
        return self._principal

    @property
    def user(self) -> str | None:
        return self._user

    def claim(self, token: bytes) -> SaslClaim:
        if self._started:
            return SaslClaim(self._user)
        try:
            credentials = parse_plain(token)
        except SaslAuthenticationFailedError:
            return SaslClaim(None)
        return SaslClaim(credentials.user, credentials.password)

    async def step(self, token: bytes) -> bytes:
        if self._started:
            raise SaslAuthenticationFailedError("Authentication failed: the PLAIN exchange "
                                                "is over")
        self._started = True
        try:
            credentials = parse_plain(token)
        except SaslAuthenticationFailedError as exc:
            _audit_failure(PLAIN, None, self._host, exc.message)
            raise
        self._user = credentials.user
        principal = await self._authenticate(credentials.user, credentials.password)
        if principal is None:  # audited by the authenticator
            raise SaslAuthenticationFailedError(INVALID_CREDENTIALS.format(PLAIN))
        self._principal = principal
        return b""


class ScramSaslServer:
    def __init__(self, mechanism: ScramMechanism, lookup: ScramLookup, *, fake_key: bytes,
                 host: str = "", fake_iterations: int = DEFAULT_ITERATIONS) -> None:
        self.mechanism = mechanism.name
        self._lookup = lookup
        self._host = host
        self._exchange = ScramServerExchange(mechanism, fake_key=fake_key,
                                             fake_iterations=fake_iterations)
        self._steps = 0
        self._principal: Principal | None = None

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> Principal | None:
        return self._principal

    @property
    def user(self) -> str | None:
        return self._exchange.user

    def claim(self, token: bytes) -> SaslClaim:
        if self._steps:
            return SaslClaim(self._exchange.user)
        try:
            return SaslClaim(parse_client_first(token).user)
        except SaslAuthenticationFailedError:
            return SaslClaim(None)

    async def step(self, token: bytes) -> bytes:
        self._steps += 1
        exchange = self._exchange
        try:
            if self._steps == 1:
                user = exchange.receive_client_first(token)
                return exchange.server_first(await self._lookup(user, self.mechanism))
            answer = exchange.receive_client_final(token)  # out of order: it raises
        except SaslAuthenticationFailedError as exc:
            _audit_failure(self.mechanism, exchange.user, self._host, exc.message)
            raise
        name = exchange.user
        assert name is not None and exchange.complete, "a client-final message was accepted"
        self._principal = Principal.user(name)
        return answer
