"""AclAuthorizer decides as Kafka's AclAuthorizer; the ACL model refuses what Kafka refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.authorizer import AclAuthorizer
from core.broker.security.principal import Principal

ALICE, BOB = Principal.user("alice"), Principal.user("bob")
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def b(name: str, principal: str, op: Operation, *, rtype: ResourceType = T,
      pattern: PatternType = PatternType.LITERAL, permission: Permission = Permission.ALLOW,
      host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern),
                      AccessControlEntry(principal, host, op, permission))


def authorizer(*bindings: AclBinding, **kwargs: object) -> AclAuthorizer:
    a = AclAuthorizer(**kwargs)  # type: ignore[arg-type]
    a.load(bindings)
    return a


def test_no_acl_means_denied_unless_allow_everyone() -> None:
    assert not authorizer().authorize(ALICE, "h", Operation.READ, T, "t")
    assert authorizer(allow_if_no_acl=True).authorize(ALICE, "h", Operation.READ, T, "t")
    # a resource with ACLs (for someone else) is not "no ACL found"
    a = authorizer(b("t", "User:bob", Operation.READ), allow_if_no_acl=True)
    assert not a.authorize(ALICE, "h", Operation.READ, T, "t")


def test_literal_prefixed_and_wildcards() -> None:
    a = authorizer(b("orders", "User:alice", Operation.WRITE),
                   b("log-", "User:alice", Operation.READ, pattern=PatternType.PREFIXED),
                   b("*", "User:*", Operation.DESCRIBE))
    assert a.authorize(ALICE, "h", Operation.WRITE, T, "orders")
    assert not a.authorize(ALICE, "h", Operation.WRITE, T, "orders2")
    assert a.authorize(ALICE, "h", Operation.READ, T, "log-a")
    assert not a.authorize(ALICE, "h", Operation.READ, T, "lo")
    assert a.authorize(BOB, "h", Operation.DESCRIBE, T, "anything")
    assert not a.authorize(BOB, "h", Operation.DESCRIBE, G, "anything")  # other type


def test_deny_wins_and_all_covers_every_operation() -> None:
    a = authorizer(b("t", "User:alice", Operation.ALL),
                   b("t", "User:*", Operation.WRITE, permission=Permission.DENY))
    assert a.authorize(ALICE, "h", Operation.READ, T, "t")
    assert not a.authorize(ALICE, "h", Operation.WRITE, T, "t")
    a = authorizer(b("t", "User:alice", Operation.READ),
                   b("t", "User:alice", Operation.ALL, permission=Permission.DENY))
    assert not a.authorize(ALICE, "h", Operation.READ, T, "t")


def test_implied_operations() -> None:
    for op in (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER):
        assert authorizer(b("t", "User:alice", op)).authorize(
            ALICE, "h", Operation.DESCRIBE, T, "t")
    assert not authorizer(b("t", "User:alice", Operation.CREATE)).authorize(
        ALICE, "h", Operation.DESCRIBE, T, "t")
    assert authorizer(b("t", "User:alice", Operation.ALTER_CONFIGS)).authorize(
        ALICE, "h", Operation.DESCRIBE_CONFIGS, T, "t")
    # a DENY of READ does not deny DESCRIBE (Kafka denies the operation itself only)
    a = authorizer(b("t", "User:alice", Operation.DESCRIBE),
                   b("t", "User:alice", Operation.READ, permission=Permission.DENY))
    assert a.authorize(ALICE, "h", Operation.DESCRIBE, T, "t")


def test_hosts_and_super_users() -> None:
    a = authorizer(b("t", "User:alice", Operation.READ, host="10.0.0.1"),
                   super_users=[BOB])
    assert a.authorize(ALICE, "10.0.0.1", Operation.READ, T, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Operation.READ, T, "t")
    assert a.authorize(BOB, "anywhere", Operation.ALTER, C, "kafka-cluster")


def test_replace_drops_cached_decisions() -> None:
    grant = b("t", "User:alice", Operation.READ)
    a = authorizer()
    assert not a.authorize(ALICE, "h", Operation.READ, T, "t")
    a.replace(grant.pattern, [grant])
    assert a.authorize(ALICE, "h", Operation.READ, T, "t")
    a.replace(grant.pattern, [])
    assert not a.authorize(ALICE, "h", Operation.READ, T, "t")
    assert a.bindings() == []


@pytest.mark.parametrize("make,message", [
    (lambda: ResourcePattern(ResourceType.ANY, "t", PatternType.LITERAL), "ANY"),
    (lambda: ResourcePattern(T, "t", PatternType.MATCH), "MATCH"),
    (lambda: ResourcePattern(C, "other", PatternType.LITERAL), "kafka-cluster"),
    (lambda: ResourcePattern(T, "", PatternType.LITERAL), "empty"),
    (lambda: AccessControlEntry("alice", "*", Operation.READ, Permission.ALLOW), "Type:name"),
    (lambda: AccessControlEntry("User:a", "*", Operation.ANY, Permission.ALLOW), "ANY"),
    (lambda: b("g", "User:a", Operation.WRITE, rtype=G), "does not apply"),
])
def test_the_model_refuses_what_kafka_refuses(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_filters() -> None:
    lit = b("orders", "User:alice", Operation.READ)
    pre = b("ord", "User:bob", Operation.WRITE, pattern=PatternType.PREFIXED)
    wild = b("*", "User:bob", Operation.DESCRIBE)
    both = [lit, pre, wild]
    assert [x for x in both if AclBindingFilter(principal="User:bob").matches(x)] == [pre, wild]
    match = AclBindingFilter(T, "orders", PatternType.MATCH)
    assert [x for x in both if match.matches(x)] == both
    assert [x for x in both if AclBindingFilter(T, "orders").matches(x)] == [lit]
    assert [x for x in both if AclBindingFilter(
        pattern_type=PatternType.PREFIXED).matches(x)] == [pre]


names = st.text(alphabet="ab-", min_size=1, max_size=6)


@given(st.lists(st.tuples(names, st.booleans(), st.sampled_from(["User:alice", "User:*"]),
                          st.sampled_from([Operation.READ, Operation.ALL]),
                          st.sampled_from(list(Permission)[1:])), max_size=6), names)
def test_decisions_follow_the_rules(acls: list[tuple[str, bool, str, Operation, Permission]],
                                    resource: str) -> None:
    """The cached, indexed authorizer agrees with the rules written out plainly."""
    bindings = [b(n, p, op, pattern=PatternType.PREFIXED if pre else PatternType.LITERAL,
                  permission=perm) for n, pre, p, op, perm in acls]
    a = authorizer(*bindings)
    applying = [x for x in bindings if x.pattern.matches(T, resource)]
    mine = [x for x in applying if x.entry.principal in ("User:alice", "User:*")]
    expected = bool(applying) and not any(
        x.entry.permission is Permission.DENY for x in mine) and any(
        x.entry.permission is Permission.ALLOW for x in mine)
    assert a.authorize(ALICE, "h", Operation.READ, T, resource) is expected
    assert a.authorize(ALICE, "h", Operation.READ, T, resource) is expected  # cached
