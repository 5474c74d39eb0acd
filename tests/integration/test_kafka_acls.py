"""ACLs over Kafka's own protocol, answered as Kafka's authorizer answers them, against a
real ``franz serve`` (``AclAuthorizer``, ``super.users=User:admin``) with a
``SASL_PLAINTEXT`` listener; confluent-kafka (librdkafka) clients and its AdminClient,
kafka-python's admin where librdkafka hides the answer.

A user without WRITE gets TOPIC_AUTHORIZATION_FAILED on produce, without READ on the
group GROUP_AUTHORIZATION_FAILED on join and commit; Metadata lists only the topics the
user may DESCRIBE; CreateTopics and DeleteTopics need CREATE and DELETE;
CreateAcls/DescribeAcls/DeleteAcls work for the super user and are
CLUSTER_AUTHORIZATION_FAILED for others; the ACLs are the REST API's (v3 ``acls``), each
door sees what the other wrote; a change applies to open connections; denials are audit
lines exactly like HTTP's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.conftest import FranzServer
from tests.integration.test_kafka_sasl import (
    WAIT_S,
    KafkaBroker,
    rdkafka_conf,
    start_broker,
    stop_broker,
    unique,
)
from tests.integration.test_security import acl, revoke

MECHANISM = "SCRAM-SHA-256"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    b = start_broker(tmp_path_factory.mktemp("kafka-acls"),
                     lambda port: [f"kafka.listeners=SASL_PLAINTEXT://127.0.0.1:{port}"],
                     "SASL_PLAINTEXT")
    yield b
    stop_broker(b)


def new_user(broker: KafkaBroker, *acls: tuple[str, str, str]) -> tuple[str, dict[str, Any]]:
    """A user of its own with ALLOW ACLs ``(resource type, name, operation)``; its
    librdkafka settings."""
    name = unique("user")
    broker.add_user(name, f"{name}-Passw0rd")
    if acls:
        broker.grant(*(acl(t, n, f"User:{name}", op) for t, n, op in acls))
    return name, rdkafka_conf(broker, MECHANISM, name, f"{name}-Passw0rd")


def admin_client(conf: dict[str, Any]) -> AdminClient:
    return AdminClient({k: v for k, v in conf.items() if not k.startswith("reconnect")})


def super_conf(broker: KafkaBroker) -> dict[str, Any]:
    from tests.integration.test_kafka_sasl import ADMIN_PASSWORD

    return rdkafka_conf(broker, MECHANISM, "admin", ADMIN_PASSWORD)


def produce_one(conf: dict[str, Any], topic: str) -> Any:
    """The delivery report's error of one record (None: written)."""
    reports: list[Any] = []
    p = Producer({**conf, "message.timeout.ms": 10000})
    p.produce(topic, b"value", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(WAIT_S) == 0
    return reports[0]


def denial(broker: KafkaBroker, principal: str, operation: str,
           resource: str) -> list[dict[str, Any]]:
    return broker.wait_audit(lambda a: a["event"] == "authorization"
                             and a["principal"] == principal and a["operation"] == operation
                             and a["resource"] == resource and a["result"] == "denied")


# --- produce ------------------------------------------------------------------------------------


def test_produce_without_write_is_topic_authorization_failed(broker: KafkaBroker) -> None:
    topic = broker.create_topic(unique("t"))
    reader, conf = new_user(broker, ("TOPIC", topic, "READ"))  # READ implies DESCRIBE only
    err = produce_one(conf, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert broker.end_offset(topic) == 0
    lines = denial(broker, f"User:{reader}", "WRITE", f"TOPIC:{topic}")
    assert lines and lines[0]["host"] == "127.0.0.1", lines
    # no ACL at all: the same answer
    _, nobody = new_user(broker)
    err = produce_one(nobody, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # with WRITE: written
    _, writer = new_user(broker, ("TOPIC", topic, "WRITE"))
    assert produce_one(writer, topic) is None
    assert broker.end_offset(topic) == 1


def test_a_revoked_acl_applies_to_an_open_connection(broker: KafkaBroker) -> None:
    topic = broker.create_topic(unique("t"))
    name, conf = new_user(broker, ("TOPIC", topic, "WRITE"))
    reports: list[Any] = []
    p = Producer({**conf, "message.timeout.ms": 10000})
    p.produce(topic, b"before", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(WAIT_S) == 0 and reports == [None]
    revoke(broker.admin, broker.cluster_id, acl("TOPIC", topic, f"User:{name}", "WRITE"))
    p.produce(topic, b"after", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(WAIT_S) == 0
    assert reports[1] is not None
    assert reports[1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports
    assert broker.end_offset(topic) == 1


def test_a_super_user_needs_no_acl(broker: KafkaBroker) -> None:
    topic = broker.create_topic(unique("t"))
    assert produce_one(super_conf(broker), topic) is None


# --- groups -------------------------------------------------------------------------------------


def _consumer_error(conf: dict[str, Any], topic: str, group: str) -> KafkaError | None:
    """The first error a subscribing consumer in ``group`` polls (bounded)."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is not None:
                return m.error()
            assert m is None, "a record was read"
        return None
    finally:
        c.close()


def _members(broker: KafkaBroker, group: str) -> int | None:
    r = broker.admin.get(f"/v3/clusters/{broker.cluster_id}/consumer-groups/{group}/consumers")
    return None if r.status_code == 404 else len(r.json()["data"])


def test_joining_without_read_on_the_group_is_group_authorization_failed(
        broker: KafkaBroker) -> None:
    topic, group = broker.create_topic(unique("t")), unique("g")
    assert produce_one(super_conf(broker), topic) is None
    name, conf = new_user(broker, ("TOPIC", topic, "READ"), ("GROUP", group, "DESCRIBE"))
    err = _consumer_error(conf, topic, group)  # FindCoordinator passes, JoinGroup does not
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    assert not _members(broker, group)
    assert denial(broker, f"User:{name}", "READ", f"GROUP:{group}")
    # no ACL on the group at all: FindCoordinator already refuses
    _, conf = new_user(broker, ("TOPIC", topic, "READ"))
    err = _consumer_error(conf, topic, group)
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err


def _commit(conf: dict[str, Any], topic: str, group: str) -> KafkaException | None:
    """Commit offset 1 of ``topic``-0 for ``group`` without joining it (assign)."""
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        try:
            c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        except KafkaException as exc:
            return exc
        return None
    finally:
        c.close()


def _committed(broker: KafkaBroker, group: str) -> list[tuple[str, int]]:
    r = broker.admin.get(f"/v3/clusters/{broker.cluster_id}/consumer-groups/{group}/lags")
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    return [(x["topic_name"], x["current_offset"]) for x in r.json()["data"]]


def test_committing_without_read_on_the_group_is_group_authorization_failed(
        broker: KafkaBroker) -> None:
    topic, group = broker.create_topic(unique("t")), unique("g")
    assert produce_one(super_conf(broker), topic) is None
    _, conf = new_user(broker, ("TOPIC", topic, "READ"), ("GROUP", group, "DESCRIBE"))
    exc = _commit(conf, topic, group)
    assert exc is not None and exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, exc
    assert _committed(broker, group) == []
    # READ on the group but not on the topic: the partition is refused
    _, conf = new_user(broker, ("TOPIC", topic, "DESCRIBE"), ("GROUP", group, "READ"))
    exc = _commit(conf, topic, group)
    assert exc is not None, "committed without READ on the topic"
    assert _committed(broker, group) == []
    # both: committed
    _, conf = new_user(broker, ("TOPIC", topic, "READ"), ("GROUP", group, "READ"))
    assert _commit(conf, topic, group) is None
    assert _committed(broker, group) == [(topic, 1)]


# --- metadata and topic admin ------------------------------------------------------------------


def test_metadata_lists_only_the_topics_the_user_may_describe(broker: KafkaBroker) -> None:
    described, read, hidden, denied = (broker.create_topic(unique(p))
                                       for p in ("seen", "read", "hidden", "denied"))
    name, conf = new_user(broker, ("TOPIC", described, "DESCRIBE"), ("TOPIC", read, "READ"),
                          ("TOPIC", denied, "READ"))
    broker.grant(acl("TOPIC", denied, f"User:{name}", "DESCRIBE", permission="DENY"))
    admin = admin_client(conf)
    listed = set(admin.list_topics(timeout=WAIT_S).topics)
    assert listed == {described, read}, listed  # no internal topic either
    one = admin.list_topics(topic=hidden, timeout=WAIT_S).topics[hidden]
    assert one.error is not None and one.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    everything = set(admin_client(super_conf(broker)).list_topics(timeout=WAIT_S).topics)
    assert {described, read, hidden, denied, "__consumer_offsets"} <= everything


def test_create_and_delete_topics_need_create_and_delete(broker: KafkaBroker) -> None:
    prefix = unique("own")
    name, conf = new_user(broker)
    broker.grant(acl("TOPIC", prefix, f"User:{name}", "CREATE", pattern="PREFIXED"))
    admin = admin_client(conf)
    refused, allowed = unique("other"), f"{prefix}-mine"
    futures = admin.create_topics([NewTopic(refused, 1, 1), NewTopic(allowed, 1, 1)],
                                  request_timeout=WAIT_S)
    with pytest.raises(KafkaException) as failed:
        futures[refused].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    futures[allowed].result(timeout=WAIT_S)
    topics = broker.topics()
    assert allowed in topics and refused not in topics
    assert denial(broker, f"User:{name}", "CREATE", f"TOPIC:{refused}")
    # DELETE is another operation
    with pytest.raises(KafkaException) as failed:
        admin.delete_topics([allowed], request_timeout=WAIT_S)[allowed].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert allowed in broker.topics()


# --- ACL administration ------------------------------------------------------------------------


def _rest_acls(broker: KafkaBroker, principal: str) -> set[tuple[str, ...]]:
    r = broker.admin.get(f"/v3/clusters/{broker.cluster_id}/acls",
                         params={"principal": principal})
    assert r.status_code == 200, r.text
    return {(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"],
             a["host"], a["operation"], a["permission"]) for a in r.json()["data"]}


def _binding_key(b: AclBinding) -> tuple[str, ...]:
    return (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
            b.operation.name, b.permission_type.name)


def _filter(principal: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def test_a_super_user_manages_acls_over_the_kafka_door_and_rest_sees_them(
        broker: KafkaBroker) -> None:
    admin = admin_client(super_conf(broker))
    principal = f"User:{unique('grantee')}"
    topic, prefix = unique("t"), unique("g")
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, prefix, ResourcePatternType.PREFIXED, principal, "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                   principal, "10.0.0.7", AclOperation.DESCRIBE, AclPermissionType.DENY),
    ]
    for future in admin.create_acls(bindings, request_timeout=WAIT_S).values():
        assert future.result(timeout=WAIT_S) is None
    assert _rest_acls(broker, principal) == {
        ("TOPIC", topic, "LITERAL", principal, "*", "WRITE", "ALLOW"),
        ("GROUP", prefix, "PREFIXED", principal, "*", "READ", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "LITERAL", principal, "10.0.0.7", "DESCRIBE", "DENY")}
    described = admin.describe_acls(_filter(principal), request_timeout=WAIT_S).result()
    assert {_binding_key(b) for b in described} == {
        ("TOPIC", topic, "LITERAL", principal, "*", "WRITE", "ALLOW"),
        ("GROUP", prefix, "PREFIXED", principal, "*", "READ", "ALLOW"),
        ("BROKER", "kafka-cluster", "LITERAL", principal, "10.0.0.7", "DESCRIBE", "DENY")}
    # the pattern types Kafka filters with: MATCH finds the prefix that applies to a name
    match = AclBindingFilter(ResourceType.GROUP, f"{prefix}-consumers", ResourcePatternType.MATCH,
                             None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert [b.name for b in admin.describe_acls(match, request_timeout=WAIT_S).result()] == [
        prefix]
    # one made over REST is seen over Kafka
    broker.grant(acl("TOPIC", topic, principal, "READ"))
    described = admin.describe_acls(_filter(principal), request_timeout=WAIT_S).result()
    assert ("TOPIC", topic, "LITERAL", principal, "*", "READ", "ALLOW") in {
        _binding_key(b) for b in described}
    # deleted over Kafka: gone from REST
    topic_acls = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                  principal, None, AclOperation.ANY, AclPermissionType.ANY)
    removed = admin.delete_acls([topic_acls], request_timeout=WAIT_S)[topic_acls].result(
        timeout=WAIT_S)
    assert {(b.operation.name, b.permission_type.name) for b in removed} == {
        ("WRITE", "ALLOW"), ("READ", "ALLOW")}
    assert {a[0] for a in _rest_acls(broker, principal)} == {"GROUP", "CLUSTER"}
    # and deleted over REST: gone from Kafka
    revoke(broker.admin, broker.cluster_id, {"resource_type": "ANY", "pattern_type": "ANY",
                                             "operation": "ANY", "permission": "ANY",
                                             "principal": principal})
    assert admin.describe_acls(_filter(principal), request_timeout=WAIT_S).result() == []


def test_acl_changes_by_others_are_cluster_authorization_failed(broker: KafkaBroker) -> None:
    name, conf = new_user(broker, ("TOPIC", "*", "ALL"))  # everything on topics, nothing else
    admin = admin_client(conf)
    binding = AclBinding(ResourceType.TOPIC, "anything", ResourcePatternType.LITERAL,
                         f"User:{name}", "*", AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as failed:
        admin.create_acls([binding], request_timeout=WAIT_S)[binding].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    flt = _filter(f"User:{name}")
    with pytest.raises(KafkaException) as failed:
        admin.delete_acls([flt], request_timeout=WAIT_S)[flt].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert ("TOPIC", "*", "LITERAL", f"User:{name}", "*", "ALL", "ALLOW") in _rest_acls(
        broker, f"User:{name}")  # nothing deleted
    assert not [a for a in _rest_acls(broker, f"User:{name}") if a[1] == "anything"]
    assert denial(broker, f"User:{name}", "ALTER", "CLUSTER:kafka-cluster")
    # librdkafka drops DescribeAcls' error code (an empty list); kafka-python reads it
    assert admin.describe_acls(_filter(), request_timeout=WAIT_S).result() == []
    assert _kafka_python_describe_acls(broker, name) == "ClusterAuthorizationFailedError"
    assert denial(broker, f"User:{name}", "DESCRIBE", "CLUSTER:kafka-cluster")


def test_describe_on_the_cluster_lists_acls_but_changes_none(broker: KafkaBroker) -> None:
    name, conf = new_user(broker, ("CLUSTER", "kafka-cluster", "DESCRIBE"))
    admin = admin_client(conf)
    listed = admin.describe_acls(_filter(f"User:{name}"), request_timeout=WAIT_S).result()
    assert {_binding_key(b) for b in listed} == {
        ("BROKER", "kafka-cluster", "LITERAL", f"User:{name}", "*", "DESCRIBE", "ALLOW")}
    assert _kafka_python_describe_acls(broker, name) == "ok"
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL,
                         f"User:{name}", "*", AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as failed:
        admin.create_acls([binding], request_timeout=WAIT_S)[binding].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def _kafka_python_describe_acls(broker: KafkaBroker, name: str) -> str:
    """kafka-python's DescribeAcls as ``name``: "ok" or the error's class name."""
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as KpPatternType
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import KafkaError as KpError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol=broker.protocol,
                             sasl_mechanism=MECHANISM, sasl_plain_username=name,
                             sasl_plain_password=f"{name}-Passw0rd", request_timeout_ms=10000)
    try:
        admin.describe_acls(ACLFilter(
            principal=None, host="*", operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None, KpPatternType.ANY)))
        return "ok"
    except KpError as exc:
        return type(exc).__name__
    finally:
        admin.close()


# --- the audit log -----------------------------------------------------------------------------


def test_kafka_and_http_denials_are_the_same_audit_line(broker: KafkaBroker) -> None:
    topic = broker.create_topic(unique("t"))
    name, conf = new_user(broker, ("TOPIC", topic, "READ"))
    assert produce_one(conf, topic) is not None
    r = httpx.post(broker.server.url + f"/topics/{topic}", auth=(name, f"{name}-Passw0rd"),
                   json={"records": [{"value": 1}]},
                   headers={"Content-Type": "application/vnd.kafka.json.v2+json"}, timeout=10)
    assert r.status_code == 403, r.text
    deadline = time.monotonic() + WAIT_S
    while True:  # one line from each door
        lines = [a for a in broker.audit() if a["principal"] == f"User:{name}"]
        if len(lines) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert lines == [{"event": "authorization", "principal": f"User:{name}",
                          "host": "127.0.0.1", "operation": "WRITE",
                          "resource": f"TOPIC:{topic}", "result": "denied"}] * 2, lines



def test_a_broker_without_an_authorizer_answers_security_disabled(
        kafka_server: FranzServer) -> None:
    """conftest's PLAINTEXT broker: no ``authorizer.class.name``, so no ACLs to change
    (SECURITY_DISABLED, as Kafka and the REST API answer)."""
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as KpPatternType
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError

    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice",
                         "*", AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as failed:
        admin.create_acls([binding], request_timeout=WAIT_S)[binding].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.SECURITY_DISABLED
    flt = _filter()
    with pytest.raises(KafkaException) as failed:
        admin.delete_acls([flt], request_timeout=WAIT_S)[flt].result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.SECURITY_DISABLED
    kp = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10000)
    try:
        with pytest.raises(SecurityDisabledError):
            kp.describe_acls(ACLFilter(
                principal=None, host="*", operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                       KpPatternType.ANY)))
    finally:
        kp.close()


# --- the other checks Kafka's authorizer makes ----------------------------------------------------


def test_fetch_needs_read_on_the_topic(broker: KafkaBroker) -> None:
    topic, group = broker.create_topic(unique("t")), unique("g")
    assert produce_one(super_conf(broker), topic) is None
    _, conf = new_user(broker, ("TOPIC", topic, "DESCRIBE"), ("GROUP", group, "READ"))
    err = _consumer_error(conf, topic, group)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_offsets_and_watermarks_need_describe(broker: KafkaBroker) -> None:
    topic, group = broker.create_topic(unique("t")), unique("g")
    assert produce_one(super_conf(broker), topic) is None
    _, conf = new_user(broker, ("GROUP", group, "READ"))  # nothing on the topic
    c = Consumer({**conf, "group.id": group})
    try:
        with pytest.raises(KafkaException) as failed:
            c.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)
        # librdkafka: Metadata refused the topic, so it knows no partition of it
        assert failed.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                               KafkaError._UNKNOWN_PARTITION)
    finally:
        c.close()
    name, conf = new_user(broker, ("TOPIC", topic, "DESCRIBE"))  # nothing on the group
    c = Consumer({**conf, "group.id": group})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S) == (0, 1)
    finally:
        c.close()
    # the group's offsets: its coordinator is not even named (librdkafka keeps asking)
    from kafka import KafkaAdminClient
    from kafka.errors import GroupAuthorizationFailedError

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol=broker.protocol,
                          sasl_mechanism=MECHANISM, sasl_plain_username=name,
                          sasl_plain_password=f"{name}-Passw0rd", request_timeout_ms=10000)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            kp.list_group_offsets(group)
    finally:
        kp.close()
    assert denial(broker, f"User:{name}", "DESCRIBE", f"GROUP:{group}")


def test_an_idempotent_producer_needs_write_on_a_topic_or_idempotent_write(
        broker: KafkaBroker) -> None:
    topic = broker.create_topic(unique("t"))
    _, conf = new_user(broker, ("TOPIC", topic, "WRITE"))
    assert produce_one({**conf, "enable.idempotence": True}, topic) is None
    _, reader = new_user(broker, ("TOPIC", topic, "READ"))
    errors: list[KafkaError] = []
    p = Producer({**reader, "enable.idempotence": True, "error_cb": errors.append,
                  "message.timeout.ms": 60000})
    try:
        p.produce(topic, b"must not be written")
        deadline = time.monotonic() + WAIT_S
        while not errors and time.monotonic() < deadline:
            try:
                p.poll(0.1)
            except KafkaException as exc:  # fatal for an idempotent producer
                errors.append(exc.args[0])
        # InitProducerId: neither IDEMPOTENT_WRITE on the cluster nor WRITE on a topic
        assert errors and errors[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, errors
    finally:
        p.purge()
        p.flush(0)
    assert broker.end_offset(topic) == 1


def test_auto_creation_needs_create(broker: KafkaBroker) -> None:
    prefix = unique("auto")
    _, conf = new_user(broker, ("TOPIC", "*", "WRITE"))
    err = produce_one(conf, f"{prefix}-refused")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    name, conf = new_user(broker, ("TOPIC", "*", "WRITE"))
    broker.grant(acl("TOPIC", prefix, f"User:{name}", "CREATE", pattern="PREFIXED"))
    assert produce_one(conf, f"{prefix}-created") is None
    topics = broker.topics()
    assert f"{prefix}-created" in topics and f"{prefix}-refused" not in topics


def test_groups_are_listed_described_and_deleted_as_allowed(broker: KafkaBroker) -> None:
    topic, mine, other = broker.create_topic(unique("t")), unique("g"), unique("g")
    name, conf = new_user(broker, ("TOPIC", topic, "READ"), ("GROUP", mine, "READ"))
    assert _commit(conf, topic, mine) is None
    assert _commit(super_conf(broker), topic, other) is None
    admin = admin_client(conf)
    listed = {g.group_id for g in admin.list_consumer_groups(
        request_timeout=WAIT_S).result(timeout=WAIT_S).valid}
    assert mine in listed and other not in listed
    described = admin.describe_consumer_groups([other], request_timeout=WAIT_S)[other]
    with pytest.raises(KafkaException) as failed:
        described.result(timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as failed:
        admin.delete_consumer_groups([mine], request_timeout=WAIT_S)[mine].result(
            timeout=WAIT_S)
    assert failed.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _committed(broker, mine) == [(topic, 1)]
