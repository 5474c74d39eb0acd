"""Kafka's ACL model: who (principal, host) may or may not do what (operation) to which
resources (a resource type and a name pattern).

    AclBinding = ResourcePattern(resource_type, name, pattern_type)
               + AccessControlEntry(principal, host, operation, permission)

A LITERAL pattern names one resource, or every resource of its type when the name is
``*``; a PREFIXED pattern names every resource whose name starts with it. ``User:*`` and
host ``*`` match any principal and any host. ``AclBindingFilter`` selects bindings for
search and delete, with ANY (and, for the pattern type, MATCH: every pattern that
applies to the named resource) as Kafka's ``AclBindingFilter`` does.

Names are Kafka's (``READ``, ``TOPIC``...; ``from_name`` also takes the ZooKeeper
spellings ``Read``, ``Topic``, ``ClusterAction``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core.broker.security.principal import Principal

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
MAX_RESOURCE_NAME_CHARS = 1024
MAX_HOST_CHARS = 255


class _Named(enum.Enum):
    def __lt__(self, other: object) -> bool:  # bindings sort by their names
        if type(other) is not type(self):
            return NotImplemented
        return self.name < other.name  # type: ignore[attr-defined, no-any-return]

    @classmethod
    def from_name(cls, text: str) -> _Named:
        """``READ``, ``Read``, ``read``, ``CLUSTER_ACTION`` or ``ClusterAction``."""
        key = text.strip().replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        allowed = ", ".join(m.name for m in cls)
        raise ValueError(f"unknown {cls.__name__} {text!r} (one of {allowed})")

    @property
    def camel(self) -> str:
        """The ZooKeeper spelling: ``ClusterAction``, ``Topic``, ``Allow``."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class ResourceType(_Named):
    ANY = "ANY"  # filters only
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class PatternType(_Named):
    ANY = "ANY"  # filters only
    MATCH = "MATCH"  # filters only
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(_Named):
    ANY = "ANY"  # filters only
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"


class Permission(_Named):
    ANY = "ANY"  # filters only
    DENY = "DENY"
    ALLOW = "ALLOW"


#: What an ALLOW of an operation also allows (Kafka's AclAuthorizer): being allowed to
#: read, write, delete or alter a resource implies being allowed to describe it.
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS,
                                           Operation.ALTER_CONFIGS}),
}

#: The operations that make sense per resource type (Kafka's ``AclEntry.supportedOperations``).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE,
                                   Operation.DESCRIBE, Operation.DELETE, Operation.ALTER,
                                   Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE}),
    ResourceType.CLUSTER: frozenset({Operation.CREATE, Operation.CLUSTER_ACTION,
                                     Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                                     Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                                     Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
}


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self) -> None:
        if self.resource_type is ResourceType.ANY:
            raise ValueError("resource_type cannot be ANY")
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH):
            raise ValueError(f"pattern_type cannot be {self.pattern_type.name}")
        if not self.name:
            raise ValueError("resource_name must not be empty")
        if len(self.name) > MAX_RESOURCE_NAME_CHARS:
            raise ValueError(f"resource_name longer than {MAX_RESOURCE_NAME_CHARS} characters")
        if self.resource_type is ResourceType.CLUSTER and (
                self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL):
            raise ValueError(f"a CLUSTER resource is the LITERAL name {CLUSTER_NAME!r}")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern applies to the resource ``(resource_type, name)``."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == WILDCARD or self.name == name


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str  # "User:alice", "User:*"
    host: str  # an address or "*"
    operation: Operation
    permission: Permission

    def __post_init__(self) -> None:
        Principal.parse(self.principal)
        if not self.host or len(self.host) > MAX_HOST_CHARS:
            raise ValueError("host must be an address or '*'")
        if self.operation is Operation.ANY:
            raise ValueError("operation cannot be ANY")
        if self.permission is Permission.ANY:
            raise ValueError("permission cannot be ANY")


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __post_init__(self) -> None:
        op = self.entry.operation
        if op is not Operation.ALL and op not in SUPPORTED_OPERATIONS[self.pattern.resource_type]:
            raise ValueError(f"operation {op.name} does not apply to resource type "
                             f"{self.pattern.resource_type.name}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None in a string field, ANY in an enum field: anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        p, e = binding.pattern, binding.entry
        if self.resource_type is not ResourceType.ANY and p.resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            # every pattern that applies to the named resource (or any, without a name)
            if self.name is not None and not p.matches(p.resource_type, self.name):
                return False
        else:
            if self.pattern_type is not PatternType.ANY and p.pattern_type is not self.pattern_type:
                return False
            if self.name is not None and p.name != self.name:
                return False
        if self.principal is not None and e.principal != self.principal:
            return False
        if self.host is not None and e.host != self.host:
            return False
        if self.operation is not Operation.ANY and e.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or e.permission is self.permission
