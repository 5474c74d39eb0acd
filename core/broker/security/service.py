"""``Security``: one broker's authentication and authorization, kept in step with the store.

It answers the three questions a request raises: who is this (``authenticate_basic``,
``certificate_principal``, and for Kafka's SASL listeners ``sasl_server``: PLAIN checks
the password Basic checks, SCRAM the user's SCRAM credentials), may they do this
(``authorize``, ``require``), and it carries out the changes of users and ACLs
(``put_user``, ``create_acls``, ...), writing them to the ``SecurityStore`` and applying
them here at once. Changes made elsewhere (another broker, an offline ``franz users`` /
``franz acls``) arrive as store notifications and are applied by one background task:
the ACLs a notification names are re-read, a changed user's verified-credential cache
entry is dropped.

Cost on the request path: a cached credential is one HMAC, a decision one dict lookup
(``AclAuthorizer``). A credential not yet verified runs scrypt off the event loop, at
most ``KDF_CONCURRENCY`` at once, so a flood of bad passwords costs bounded CPU and
memory; an unknown user costs the same as a wrong password (no timing hint).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from core.broker.admin.broker_config import BrokerConfig
from core.broker.errors import (
    AuthorizationError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownUserError,
)
from core.broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    Operation,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.audit import audit
from core.broker.security.authorizer import AUTHORIZER_NAMES, AclAuthorizer, NoAuthorizer
from core.broker.security.credentials import StoredCredential, VerifiedCache, check_user_name
from core.broker.security.principal import ANONYMOUS, Principal, parse_super_users
from core.broker.security.principal_mapping import PrincipalMapper
from core.broker.security.sasl import SaslServer, sasl_server
from core.broker.security.scram import ScramCredential, scram_credentials
from core.broker.security.store import SecurityChange, SecurityStore
from core.clock import Clock
from core.storage.blocking import run_blocking
from core.storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

KDF_CONCURRENCY = 2
AUTHENTICATION_METHODS = ("NONE", "BASIC")
_DENIED: dict[ResourceType, type[AuthorizationError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
}
# Verified against when the user does not exist, so that costs what a wrong password does.
_DECOY = StoredCredential.create("franz-decoy-password")


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    authentication: str = "NONE"
    authorizer: bool = False
    super_users: frozenset[Principal] = frozenset()
    allow_if_no_acl: bool = False
    cache_ttl_s: float = 300.0
    mapping_rules: str = "DEFAULT"

    @classmethod
    def from_config(cls, config: BrokerConfig) -> SecuritySettings:
        method = str(config["authentication.method"]).strip().upper()
        if method not in AUTHENTICATION_METHODS:
            raise InvalidConfigError(f"authentication.method must be NONE or BASIC, "
                                     f"got {config['authentication.method']!r}")
        authorizer = str(config["authorizer.class.name"]).strip()
        if authorizer and authorizer not in AUTHORIZER_NAMES:
            raise InvalidConfigError(f"authorizer.class.name {authorizer!r} is not supported "
                                     f"(AclAuthorizer or kafka.security.authorizer.AclAuthorizer)")
        try:
            supers = parse_super_users(str(config["super.users"]))
        except ValueError as exc:
            raise InvalidConfigError(f"super.users: {exc}") from None
        ttl_ms = int(config["authentication.cache.ttl.ms"])
        if ttl_ms < 0:
            raise InvalidConfigError("authentication.cache.ttl.ms must be >= 0")
        return cls(method, bool(authorizer), supers, bool(config["allow.everyone.if.no.acl.found"]),
                   ttl_ms / 1000, str(config["ssl.principal.mapping.rules"]))


def resource_text(resource_type: ResourceType, name: str) -> str:
    return f"{resource_type.name}:{name}"


class Security:
    def __init__(self, settings: SecuritySettings, store: SecurityStore, *, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self._clock = clock
        try:
            self.mapper = PrincipalMapper.from_rules(settings.mapping_rules)
        except ValueError as exc:
            raise InvalidConfigError(f"ssl.principal.mapping.rules: {exc}") from None
        self.authorizer: AclAuthorizer | NoAuthorizer = (
            AclAuthorizer(super_users=settings.super_users,
                          allow_if_no_acl=settings.allow_if_no_acl)
            if settings.authorizer else NoAuthorizer())
        self.basic = settings.authentication == "BASIC"
        self._verified = VerifiedCache(ttl_s=settings.cache_ttl_s)
        self._kdf = asyncio.Semaphore(KDF_CONCURRENCY)
        # keys the salts of SCRAM's fake exchanges (users without a credential): one
        # name gets one salt from this broker process, as a real user does
        self._scram_fake_key = os.urandom(32)
        self._dirty: set[ResourcePattern] = set()
        self._all_dirty = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        """Whether requests are checked at all (authorization on)."""
        return self.authorizer.enabled

    async def start(self) -> None:
        await self.store.start()
        self.store.watch(self._on_change)
        if isinstance(self.authorizer, AclAuthorizer):
            self.authorizer.load(await self.store.all_acls())
        self._task = asyncio.get_running_loop().create_task(self._apply_changes())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.store.close()

    # --- who ---------------------------------------------------------------------------

    def certificate_principal(self, subject: str) -> Principal | None:
        """The principal a verified client certificate's subject maps to (None: no rule
        maps it, the request is refused)."""
        name = self.mapper.name_of(subject)
        return Principal.user(name) if name else None

    def cached_basic(self, user: str, secret: str) -> Principal | None:
        """The user when this secret verified recently (no KDF): the fast path."""
        if self._verified.hit(user, secret, self._clock.monotonic()):
            return Principal.user(user)
        return None

    async def authenticate_basic(self, user: str, secret: str, *, host: str = "",
                                 mechanism: str | None = None) -> Principal | None:
        """The user when ``secret`` is its password (or an API key's secret), else None
        and an audit line; ``mechanism``: the SASL mechanism that carried the secret
        (Kafka's PLAIN), named in that line as SCRAM's failures name theirs."""
        found = self.cached_basic(user, secret)
        if found is not None:
            return found
        credential = None
        try:
            check_user_name(user)
            credential = await self.store.get_user(user)
        except ValueError:
            pass
        async with self._kdf:
            ok = await run_blocking((credential or _DECOY).verify, secret)
        if ok and credential is not None:
            self._verified.remember(user, secret, self._clock.monotonic())
            return Principal.user(user)
        details = {"mechanism": mechanism} if mechanism else {}
        audit("authentication", principal=f"User:{user[:255]}", host=host, result="failure",
              reason="unknown user or wrong password", **details)
        return None

    def sasl_server(self, mechanism: str, *, host: str = "",
                    enabled: Collection[str] | None = None) -> SaslServer:
        """One connection's SASL server for ``mechanism`` (``PLAIN``, ``SCRAM-SHA-256``,
        ``SCRAM-SHA-512``; ``enabled``: the listener's ``sasl.enabled.mechanisms``);
        UnsupportedSaslMechanismError (33) otherwise. Its ``step`` raises
        SaslAuthenticationFailedError (58). See ``core.broker.security.sasl``."""
        async def plain(user: str, secret: str) -> Principal | None:
            return await self.authenticate_basic(user, secret, host=host, mechanism="PLAIN")

        return sasl_server(mechanism, authenticate_plain=plain, lookup_scram=self._scram_of,
                           fake_key=self._scram_fake_key, host=host, enabled=enabled)

    async def _scram_of(self, user: str, mechanism: str) -> ScramCredential | None:
        try:
            check_user_name(user)
        except ValueError:
            return None  # no such user can exist: the fake exchange, as for an unknown one
        return await self.store.get_scram(user, mechanism)

    # --- may they ------------------------------------------------------------------------

    def authorize(self, principal: Principal, host: str, operation: Operation,
                  resource_type: ResourceType, name: str, *, audit_denial: bool = True) -> bool:
        allowed = self.authorizer.authorize(principal, host, operation, resource_type, name)
        if not allowed and audit_denial:
            audit("authorization", principal=str(principal), host=host,
                  operation=operation.name, resource=resource_text(resource_type, name),
                  result="denied")
        return allowed

    def require(self, principal: Principal, host: str, operation: Operation,
                resource_type: ResourceType, name: str = CLUSTER_NAME) -> None:
        """AuthorizationError (403) unless allowed."""
        if not self.authorize(principal, host, operation, resource_type, name):
            raise _denied(operation, resource_type, name)

    def visible(self, principal: Principal, host: str, operation: Operation,
                resource_type: ResourceType, names: Iterable[str]) -> list[str]:
        """The names the principal may ``operation`` (lists leave out the others, as
        Kafka's metadata does; not audited: nothing was refused)."""
        if not self.authorizer.enabled:
            return list(names)
        return [n for n in names
                if self.authorizer.authorize(principal, host, operation, resource_type, n)]

    # --- ACLs ----------------------------------------------------------------------------

    def _acl_authorizer(self) -> AclAuthorizer:
        """The authorizer; SecurityDisabledError (400 / 40002, as Confluent answers)
        without one."""
        if not isinstance(self.authorizer, AclAuthorizer):
            raise SecurityDisabledError("Security features are disabled: no authorizer is "
                                        "configured on the broker (authorizer.class.name).")
        return self.authorizer

    def check_acls_enabled(self) -> None:
        self._acl_authorizer()

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self._acl_authorizer().bindings(flt)

    async def create_acls(self, actor: Principal, bindings: list[AclBinding], *,
                          host: str = "") -> None:
        authorizer = self._acl_authorizer()
        await self.store.add_acls(bindings)
        for pattern in {b.pattern for b in bindings}:
            authorizer.replace(pattern, await self.store.acls_of(pattern))
        for b in bindings:
            audit("admin", principal=str(actor), host=host, operation="CREATE_ACL",
                  resource=_acl_text(b), result="ok")

    async def delete_acls(self, actor: Principal, flt: AclBindingFilter, *,
                          host: str = "") -> list[AclBinding]:
        authorizer = self._acl_authorizer()
        doomed = [b for b in await self.store.all_acls() if flt.matches(b)]
        removed = await self.store.remove_acls(doomed) if doomed else []
        for pattern in {b.pattern for b in removed}:
            authorizer.replace(pattern, await self.store.acls_of(pattern))
        for b in removed:
            audit("admin", principal=str(actor), host=host, operation="DELETE_ACL",
                  resource=_acl_text(b), result="ok")
        return sorted(removed)

    # --- users ---------------------------------------------------------------------------

    async def list_users(self) -> list[str]:
        return sorted(await self.store.list_users())

    async def put_user(self, actor: Principal, name: str, secret: str, *, host: str = "") -> None:
        """Store the user's scrypt credential and its SCRAM-SHA-256 and SCRAM-SHA-512
        credentials, all from ``secret``."""
        check_user_name(name)
        credential, scram = await run_blocking(user_credentials, secret)
        await self.store.put_user(name, credential, scram)
        self._verified.forget(name)
        audit("admin", principal=str(actor), host=host, operation="PUT_USER",
              resource=f"USER:{name}", result="ok")

    async def delete_user(self, actor: Principal, name: str, *, host: str = "") -> None:
        if not await self.store.delete_user(name):
            raise UnknownUserError(f"User {name!r} does not exist.")
        self._verified.forget(name)
        audit("admin", principal=str(actor), host=host, operation="DELETE_USER",
              resource=f"USER:{name}", result="ok")

    # --- changes made elsewhere ----------------------------------------------------------

    def _on_change(self, change: SecurityChange) -> None:
        if change.user is not None:
            self._verified.forget(change.user)
        elif change.pattern is not None:
            self._dirty.add(change.pattern)
        else:
            self._verified.forget()
            self._all_dirty = True
        self._wake.set()

    async def _apply_changes(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not isinstance(self.authorizer, AclAuthorizer):
                self._dirty.clear()
                continue
            try:
                if self._all_dirty:
                    self._all_dirty = False
                    self._dirty.clear()
                    self.authorizer.load(await self.store.all_acls())
                while self._dirty:
                    pattern = self._dirty.pop()
                    self.authorizer.replace(pattern, await self.store.acls_of(pattern))
            except Exception:  # noqa: BLE001 - the store is down: retry everything soon
                log.warning("could not re-read ACLs; retrying", exc_info=True)
                self._all_dirty = True
                await asyncio.sleep(1.0)
                self._wake.set()


def user_credentials(secret: str) -> tuple[StoredCredential, dict[str, ScramCredential]]:
    """Blocking (scrypt and PBKDF2): every credential a user's password gives, the scrypt
    one (HTTP Basic, SASL PLAIN) and one per SCRAM mechanism (Kafka's default 4096
    iterations)."""
    return StoredCredential.create(secret), scram_credentials(secret)


def _denied(operation: Operation, resource_type: ResourceType, name: str) -> AuthorizationError:
    cls = _DENIED.get(resource_type, AuthorizationError)
    if resource_type is ResourceType.CLUSTER:
        return cls(f"Not authorized to {operation.name} the cluster.")
    kind = resource_type.name.lower().replace("_", " ")
    return cls(f"Not authorized to {operation.name} {kind} {name!r}.")


def _acl_text(b: AclBinding) -> str:
    p, e = b.pattern, b.entry
    return (f"{p.resource_type.name}:{p.pattern_type.name}:{p.name} {e.permission.name} "
            f"{e.principal} {e.operation.name} from {e.host}")


__all__ = ["ANONYMOUS", "Security", "SecuritySettings", "resource_text"]
