"""The decision: may this principal, from this host, do this operation on this resource?

``AclAuthorizer`` decides as Kafka's ``kafka.security.authorizer.AclAuthorizer``:

1. a super user may do everything;
2. the ACLs that apply are those whose pattern matches the resource (its LITERAL
   name, the LITERAL ``*``, every PREFIXED pattern the name starts with) and whose
   principal (or ``User:*``) and host (or ``*``) match the request;
3. a resource no ACL names at all (for any principal) is allowed only with
   ``allow.everyone.if.no.acl.found``;
4. a DENY of the operation (or of ALL) wins over any ALLOW;
5. else an ALLOW of the operation, of ALL, or of an operation implying it (READ,
   WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).

Internal topics (``core.broker.types.INTERNAL_TOPICS``: ``__consumer_offsets``,
``__franz_idempotency``, ``__transaction_state``, ``_schemas``) hold every group's
offsets and every producer's Idempotency-Keys, so READ and WRITE on them follow one rule
of their own (close to Kafka's for its internal topics): they are allowed exactly to a
principal allowed CLUSTER_ACTION on the cluster (the brokers, an operator's tool). No
topic ACL grants them, not a LITERAL one naming the topic, nor ``*``, nor a PREFIXED
``__``; a topic ACL that DENYs the operation still wins. Every other operation on them
(DESCRIBE: listing and describing topics and partitions) is decided as for any topic.

The ACLs are held in memory, indexed by resource type and pattern; the store's change
notifications replace one pattern's ACLs (``replace``) or all of them (``load``).
Decisions are cached until the next change, so a request costs one dict lookup.
``NoAuthorizer`` allows everything (no ``authorizer.class.name``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from core.broker.security.acl import (
    CLUSTER_NAME,
    IMPLIED_BY,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.principal import WILDCARD_PRINCIPAL, Principal
from core.broker.types import is_internal_topic

AUTHORIZER_NAMES = frozenset({"AclAuthorizer", "kafka.security.authorizer.AclAuthorizer",
                              "kafka.security.auth.SimpleAclAuthorizer"})
MAX_CACHED_DECISIONS = 100_000
_WILDCARD_PRINCIPAL = str(WILDCARD_PRINCIPAL)
#: Operations on an internal topic that need CLUSTER_ACTION on the cluster instead of
#: any topic ACL (the records: every group's offsets, every Idempotency-Key).
INTERNAL_TOPIC_OPERATIONS = frozenset({Operation.READ, Operation.WRITE})

Decision = tuple[str, str, Operation, ResourceType, str]


class Authorizer(Protocol):
    enabled: bool

    def authorize(self, principal: Principal, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool: ...


class NoAuthorizer:
    """No ``authorizer.class.name``: every operation is allowed."""

    enabled = False

    def authorize(self, principal: Principal, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        return True


class AclAuthorizer:
    enabled = True

    def __init__(self, *, super_users: Iterable[Principal] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        # pattern -> its entries; literal and prefixed indexes for lookup by resource
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._decisions: dict[Decision, bool] = {}

    # --- the ACLs --------------------------------------------------------------------

    def load(self, bindings: Iterable[AclBinding]) -> None:
        """Replace every ACL with ``bindings``."""
        grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            grouped.setdefault(b.pattern, set()).add(b.entry)
        self._acls = {}
        self._literal = {}
        self._prefixed = {}
        for pattern, entries in grouped.items():
            self._set(pattern, frozenset(entries))
        self._decisions = {}

    def replace(self, pattern: ResourcePattern, bindings: Iterable[AclBinding]) -> None:
        """Replace the ACLs of one pattern (none: it has no ACLs any more)."""
        self._set(pattern, frozenset(b.entry for b in bindings if b.pattern == pattern))
        self._decisions = {}

    def _set(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        if pattern.pattern_type is PatternType.PREFIXED:
            index = self._prefixed.setdefault(pattern.resource_type, {})
            key: str = pattern.name
            if entries:
                index[key] = entries
            else:
                index.pop(key, None)
        elif entries:
            self._literal[(pattern.resource_type, pattern.name)] = entries
        else:
            self._literal.pop((pattern.resource_type, pattern.name), None)
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs (matching ``flt``), sorted."""
        out = [AclBinding(p, e) for p, entries in self._acls.items() for e in entries]
        if flt is not None:
            out = [b for b in out if flt.matches(b)]
        return sorted(out)

    # --- the decision ----------------------------------------------------------------

    def authorize(self, principal: Principal, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (str(principal), host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, key[0], host, operation, resource_type, name)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        found: list[AccessControlEntry] = []
        for literal in ((resource_type, name), (resource_type, WILDCARD)):
            found.extend(self._literal.get(literal, ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for end in range(1, len(name) + 1):
                found.extend(prefixed.get(name[:end], ()))
        return found

    def _decide(self, principal: Principal, who: str, host: str, operation: Operation,
                resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        if (resource_type is ResourceType.TOPIC and operation in INTERNAL_TOPIC_OPERATIONS
                and is_internal_topic(name)):
            return (not self._denies(self._mine(self._matching(resource_type, name), who, host),
                                     operation)
                    and self._decide(principal, who, host, Operation.CLUSTER_ACTION,
                                     ResourceType.CLUSTER, CLUSTER_NAME))
        acls = self._matching(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        mine = self._mine(acls, who, host)
        if self._denies(mine, operation):
            return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(a.permission is Permission.ALLOW
                   and (a.operation is Operation.ALL or a.operation in allowing)
                   for a in mine)

    @staticmethod
    def _mine(acls: list[AccessControlEntry], who: str, host: str) -> list[AccessControlEntry]:
        return [a for a in acls if a.principal in (who, _WILDCARD_PRINCIPAL)
                and a.host in (host, WILDCARD)]

    @staticmethod
    def _denies(mine: list[AccessControlEntry], operation: Operation) -> bool:
        return any(a.permission is Permission.DENY and a.operation in (operation, Operation.ALL)
                   for a in mine)

    def authorized_operations(self, principal: Principal, host: str,
                              resource_type: ResourceType, name: str,
                              candidates: Iterable[Operation]) -> list[Operation]:
        """Which of ``candidates`` the principal may do (v3 ``authorized_operations``)."""
        return [op for op in candidates
                if self.authorize(principal, host, op, resource_type, name)]
