"""Internal topics (``__consumer_offsets``, ``__franz_idempotency``, ``_schemas``) hold
every group's offsets and every producer's Idempotency-Keys: their records are read (and
written) only with CLUSTER_ACTION on the cluster, never through a topic ACL, however
wide (``*``, PREFIXED ``_``/``__``) or narrow (LITERAL); describing them stays DESCRIBE
(docs/security.md).

One real secured ``franz serve`` (Basic users, ``AclAuthorizer``, super user ``admin``)
with one partition per internal topic, so every group's offsets are in partition 0; and
the plain session broker of ``conftest`` for security off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.conftest import BINARY, JSON, V2, FranzServer
from tests.integration.test_security import (
    SECURED,
    acl,
    add_users,
    grant,
    make_topic,
    produce,
    unique,
)

PASSWORDS = {"admin": "admin-pw", "wild": "wild-pw", "prefixed": "prefixed-pw",
             "literal": "literal-pw", "operator": "operator-pw"}
OFFSETS, IDEMPOTENCY, SCHEMAS = "__consumer_offsets", "__franz_idempotency", "_schemas"
INTERNAL = (OFFSETS, IDEMPOTENCY, SCHEMAS)
GROUP = "internal-acl-group"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    s = FranzServer(tmp_path_factory.mktemp("internal-acls") / "data",
                    [*SECURED, "offsets.topic.num.partitions=1",
                     "idempotency.topic.num.partitions=1"])
    add_users(s.data_dir, PASSWORDS)
    s.start()
    yield s
    s.stop()


def user(server: FranzServer, name: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, auth=(name, PASSWORDS[name]), timeout=30.0)


@pytest.fixture(scope="module")
def admin(server: FranzServer) -> Iterator[httpx.Client]:
    with user(server, "admin") as c:
        yield c


@pytest.fixture(scope="module")
def cluster_id(admin: httpx.Client) -> str:
    return str(admin.get("/v3/clusters").json()["data"][0]["cluster_id"])


@pytest.fixture(scope="module")
def ordinary(admin: httpx.Client, cluster_id: str) -> str:
    """A topic with a record, a committed offset of GROUP on it (a record in
    ``__consumer_offsets``) and a produce with an Idempotency-Key (one in
    ``__franz_idempotency``); and the ACLs: ``wild`` READ/WRITE on every topic (``*``),
    ``prefixed`` READ/WRITE on PREFIXED ``_``, ``literal`` READ/WRITE on each internal
    topic by name, all READ on GROUP; ``operator`` CLUSTER_ACTION on the cluster."""
    topic = unique("ordinary")
    make_topic(admin, topic)
    r = admin.post(f"/topics/{topic}", json={"records": [{"value": 2}]},
                   headers={"Content-Type": JSON, "Idempotency-Key": unique("key")})
    assert r.status_code == 200, r.text
    r = admin.post(f"/v3/clusters/{cluster_id}/consumer-groups/{GROUP}/offsets:alter",
                   json={"data": [{"topic_name": topic, "partition_id": 0, "offset": 1}]})
    assert r.status_code == 204, r.text
    acls = [acl("GROUP", GROUP, f"User:{u}", "READ") for u in ("wild", "prefixed", "literal")]
    for op in ("READ", "WRITE"):
        acls += [acl("TOPIC", "*", "User:wild", op),
                 acl("TOPIC", "_", "User:prefixed", op, pattern="PREFIXED"),
                 *(acl("TOPIC", t, "User:literal", op) for t in INTERNAL)]
    acls.append(acl("CLUSTER", "kafka-cluster", "User:operator", "CLUSTER_ACTION"))
    grant(admin, cluster_id, *acls)
    return topic


def range_read(c: httpx.Client, topic: str) -> httpx.Response:
    return c.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0},
                 headers={"Accept": BINARY})


def v3_read(c: httpx.Client, cluster_id: str, topic: str) -> httpx.Response:
    return c.get(f"/v3/clusters/{cluster_id}/topics/{topic}/partitions/0/records",
                 params={"offset": 0})


def assert_denied(r: httpx.Response, topic: str) -> None:
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["error_code"] == 40301, body
    assert topic in body["message"], body


def post(c: httpx.Client, path: str, body: Any) -> httpx.Response:
    return c.post(path, json=body, headers={"Content-Type": V2})


@pytest.mark.parametrize("who", ["wild", "prefixed", "literal"])
def test_no_topic_acl_reads_an_internal_topic(server: FranzServer, cluster_id: str,
                                             ordinary: str, who: str) -> None:
    with user(server, who) as c:
        if who == "wild":
            assert range_read(c, ordinary).status_code == 200  # "*" reads other topics
        for topic in INTERNAL:
            assert_denied(range_read(c, topic), topic)
            assert_denied(v3_read(c, cluster_id, topic), topic)
        # nor through a consumer instance: assigned, subscribed (a pattern never
        # matches internal topics), committed to
        r = post(c, f"/consumers/{GROUP}", {"name": who, "auto.offset.reset": "earliest"})
        assert r.status_code == 200, r.text
        base = f"/consumers/{GROUP}/instances/{who}"
        assert_denied(post(c, base + "/assignments",
                           {"partitions": [{"topic": OFFSETS, "partition": 0}]}), OFFSETS)
        assert_denied(post(c, base + "/subscription", {"topics": [IDEMPOTENCY]}), IDEMPOTENCY)
        assert_denied(post(c, base + "/offsets", {"offsets": [
            {"topic": SCHEMAS, "partition": 0, "offset": 0}]}), SCHEMAS)
        assert c.get(base + "/assignments").json() == {"partitions": []}  # nothing changed
        assert c.delete(base).status_code == 204


@pytest.mark.parametrize("who", ["wild", "prefixed"])
def test_wide_topic_acls_still_describe_internal_topics_but_not_write_them(
        server: FranzServer, ordinary: str, who: str) -> None:
    with user(server, who) as c:
        listed = c.get("/topics").json()
        for topic in INTERNAL:
            assert topic in listed  # READ implies DESCRIBE: metadata, as Kafka shows it
            assert c.get(f"/topics/{topic}").status_code == 200
            assert_denied(produce(c, topic), topic)
        if who == "wild":
            assert produce(c, ordinary).status_code == 200  # "*" writes other topics


def test_only_cluster_action_super_users_and_an_open_broker_read_internal_topics(
        server: FranzServer, admin: httpx.Client, cluster_id: str, ordinary: str,
        franz_url: str) -> None:
    with user(server, "operator") as operator:
        r = range_read(operator, OFFSETS)
        assert r.status_code == 200, r.text
        assert r.json(), "the group's commit is a record of __consumer_offsets"
        assert v3_read(operator, cluster_id, OFFSETS).status_code == 200
        assert range_read(operator, IDEMPOTENCY).status_code == 200
        assert_denied(range_read(operator, ordinary), ordinary)  # not a topic ACL
        # a topic DENY still wins over CLUSTER_ACTION
        grant(admin, cluster_id, acl("TOPIC", IDEMPOTENCY, "User:operator", "READ",
                                     permission="DENY"))
        assert_denied(range_read(operator, IDEMPOTENCY), IDEMPOTENCY)
        assert range_read(operator, OFFSETS).status_code == 200
    for topic in (OFFSETS, IDEMPOTENCY, SCHEMAS):
        assert range_read(admin, topic).status_code == 200  # a super user
    # security off (no authorizer, anonymous): every topic reads, as before
    with httpx.Client(base_url=franz_url, timeout=30.0) as anonymous:
        assert range_read(anonymous, OFFSETS).status_code == 200
