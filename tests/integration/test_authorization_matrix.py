"""The authorization matrix: every operation of ``/openapi.json`` as six identities.

    anonymous        no credentials                          -> 401
    wrong-password   a real user, a wrong password           -> 401
    nobody           a user without any ACL                  -> 403, or a list without
                                                                anything of ours
    denied           the right ALLOWs and a DENY of ALL      -> as nobody (deny wins)
    granted          exactly the ALLOWs the operation needs  -> never 401/403
    admin            a super user                            -> never 401/403

The health probes (``/healthz``, ``/readyz``) are public: 200 for every identity. The
Schema Registry's reads, registrations, lookups and checks need any authenticated
principal; its deletes, levels and modes ALTER on the cluster (docs/schema-registry.md).

``REQUIRED`` below is this test's own statement of what Kafka would require for each
operation (not read from the code), so a route whose rule is wrong or missing shows up
as an unauthorized success or an authorized failure. Fixture names all start with
``mx`` (topics) or ``mxg`` (groups); grants are PREFIXED on those, so a grant is as
narrow in operations as the table says. An operation missing from the table fails the
test: a new route must be added here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.integration.conftest import JSON, V2, FranzServer
from tests.integration.test_security import SECURED, add_users

USERS = {"admin": "admin-pw", "nobody": "nobody-pw", "denied": "denied-pw",
         "granted": "granted-pw"}
TOPIC, GROUP = "mx", "mxg"
OPEN = "open"  # any authenticated principal (what Kafka's metadata shows every client)
PUBLIC = "public"  # anyone, without credentials: the health probes (docs/security.md)
LIST = "list"  # filtered: a principal without the ACL sees none of our fixtures

# What each operation needs: (resource type, operation) pairs, or OPEN, plus LIST when
# the answer is a list filtered to what the principal may see.
REQUIRED: dict[str, tuple[Any, ...]] = {
    "GET /": (OPEN,),
    "POST /": (OPEN,),
    "GET /brokers": (OPEN,),
    "GET /topics": (("TOPIC", "DESCRIBE"), LIST),
    "GET /topics/{topic}": (("TOPIC", "DESCRIBE"),),
    "GET /topics/{topic}/partitions": (("TOPIC", "DESCRIBE"),),
    "GET /topics/{topic}/partitions/{partition}": (("TOPIC", "DESCRIBE"),),
    "GET /topics/{topic}/partitions/{partition}/offsets": (("TOPIC", "DESCRIBE"),),
    "POST /topics/{topic}": (("TOPIC", "WRITE"),),
    "POST /topics/{topic}/partitions/{partition}": (("TOPIC", "WRITE"),),
    "GET /topics/{topic}/partitions/{partition}/records": (("TOPIC", "READ"),),
    "POST /consumers/{group}": (("GROUP", "READ"),),
    "DELETE /consumers/{group}/instances/{instance}": (("GROUP", "READ"),),
    "POST /consumers/{group}/instances/{instance}/subscription": (("GROUP", "READ"),
                                                                  ("TOPIC", "READ")),
    "GET /consumers/{group}/instances/{instance}/subscription": (("GROUP", "READ"),),
    "DELETE /consumers/{group}/instances/{instance}/subscription": (("GROUP", "READ"),),
    "POST /consumers/{group}/instances/{instance}/assignments": (("GROUP", "READ"),
                                                                 ("TOPIC", "READ")),
    "GET /consumers/{group}/instances/{instance}/assignments": (("GROUP", "READ"),),
    "POST /consumers/{group}/instances/{instance}/positions": (("GROUP", "READ"),),
    "POST /consumers/{group}/instances/{instance}/positions/beginning": (("GROUP", "READ"),),
    "POST /consumers/{group}/instances/{instance}/positions/end": (("GROUP", "READ"),),
    "POST /consumers/{group}/instances/{instance}/offsets": (("GROUP", "READ"),
                                                             ("TOPIC", "READ")),
    "GET /consumers/{group}/instances/{instance}/offsets": (("GROUP", "READ"),),
    "GET /consumers/{group}/instances/{instance}/records": (("GROUP", "READ"),
                                                            ("TOPIC", "READ")),
    "GET /healthz": (PUBLIC,),
    "GET /readyz": (PUBLIC,),
    "GET /v3/clusters": (OPEN,),
    "GET /v3/clusters/{cluster_id}": (OPEN,),
    "GET /v3/clusters/{cluster_id}/brokers": (OPEN,),
    "GET /v3/clusters/{cluster_id}/brokers/{broker_id}": (OPEN,),
    "GET /v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas": (
        ("TOPIC", "DESCRIBE"), LIST),
    "GET /v3/clusters/{cluster_id}/topics/-/partitions/-/reassignment": (("CLUSTER", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/-/reassignment": (
        ("CLUSTER", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/reassignment": (
        ("CLUSTER", "DESCRIBE"),),
    "POST /v3/clusters/{cluster_id}/reassignments": (("CLUSTER", "ALTER"),),
    "POST /v3/clusters/{cluster_id}/preferred-replica-election": (("CLUSTER", "ALTER"),),
    "GET /v3/clusters/{cluster_id}/acls": (("CLUSTER", "DESCRIBE"),),
    "POST /v3/clusters/{cluster_id}/acls": (("CLUSTER", "ALTER"),),
    "POST /v3/clusters/{cluster_id}/acls:batch": (("CLUSTER", "ALTER"),),
    "DELETE /v3/clusters/{cluster_id}/acls": (("CLUSTER", "ALTER"),),
    "GET /v3/clusters/{cluster_id}/users": (("CLUSTER", "DESCRIBE"),),
    "PUT /v3/clusters/{cluster_id}/users/{user_name}": (("CLUSTER", "ALTER"),),
    "DELETE /v3/clusters/{cluster_id}/users/{user_name}": (("CLUSTER", "ALTER"),),
    "POST /v3/clusters/{cluster_id}/api-keys": (("CLUSTER", "ALTER"),),
    "GET /v3/clusters/{cluster_id}/topics/-/configs": (("TOPIC", "DESCRIBE_CONFIGS"), LIST),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/configs": (("TOPIC", "DESCRIBE_CONFIGS"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}": (
        ("TOPIC", "DESCRIBE_CONFIGS"),),
    "PUT /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}": (
        ("TOPIC", "ALTER_CONFIGS"),),
    "DELETE /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}": (
        ("TOPIC", "ALTER_CONFIGS"),),
    "POST /v3/clusters/{cluster_id}/topics/{topic_name}/configs:alter": (
        ("TOPIC", "ALTER_CONFIGS"),),
    "GET /v3/clusters/{cluster_id}/brokers/{broker_id}/configs": (("CLUSTER", "DESCRIBE_CONFIGS"),),
    "GET /v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}": (
        ("CLUSTER", "DESCRIBE_CONFIGS"),),
    "GET /v3/clusters/{cluster_id}/broker-configs": (("CLUSTER", "DESCRIBE_CONFIGS"),),
    "GET /v3/clusters/{cluster_id}/broker-configs/{name}": (("CLUSTER", "DESCRIBE_CONFIGS"),),
    "GET /v3/clusters/{cluster_id}/topics": (("TOPIC", "DESCRIBE"), LIST),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}": (("TOPIC", "DESCRIBE"),),
    "POST /v3/clusters/{cluster_id}/topics": (("TOPIC", "CREATE"),),
    "PATCH /v3/clusters/{cluster_id}/topics/{topic_name}": (("TOPIC", "ALTER"),),
    "DELETE /v3/clusters/{cluster_id}/topics/{topic_name}": (("TOPIC", "DELETE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions": (("TOPIC", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}": (
        ("TOPIC", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/offset": (
        ("TOPIC", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas": (
        ("TOPIC", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas/"
    "{broker_id}": (("TOPIC", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups": (("GROUP", "DESCRIBE"), LIST),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}": (("GROUP", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers": (
        ("GROUP", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}": (
        ("GROUP", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/"
    "assignments": (("GROUP", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/"
    "assignments/{topic_name}/partitions/{partition_id}": (("GROUP", "DESCRIBE"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags": (
        ("GROUP", "DESCRIBE"), ("TOPIC", "DESCRIBE")),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/"
    "partitions/{partition_id}": (("GROUP", "DESCRIBE"), ("TOPIC", "DESCRIBE")),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary": (
        ("GROUP", "DESCRIBE"), ("TOPIC", "DESCRIBE")),
    "POST /v3/clusters/{cluster_id}/topics/{topic_name}/records": (("TOPIC", "WRITE"),),
    "POST /v3/clusters/{cluster_id}/topics/{topic_name}/records:batch": (("TOPIC", "WRITE"),),
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records": (
        ("TOPIC", "READ"),),
    "GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/offsets": (
        ("GROUP", "DESCRIBE"), ("TOPIC", "DESCRIBE")),
    "POST /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/offsets:alter": (
        ("GROUP", "READ"), ("TOPIC", "READ")),
    "DELETE /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}": (("GROUP", "DELETE"),),
    "GET /metrics": (("CLUSTER", "DESCRIBE"),),
    # the Schema Registry: reads and a serializer's calls open, changes ALTER the cluster
    "GET /schemas/types": (OPEN,),
    "GET /schemas": (OPEN,),
    "GET /schemas/ids/{id}": (OPEN,),
    "GET /schemas/ids/{id}/schema": (OPEN,),
    "GET /schemas/ids/{id}/subjects": (OPEN,),
    "GET /schemas/ids/{id}/versions": (OPEN,),
    "GET /subjects": (OPEN,),
    "GET /subjects/{subject}/versions": (OPEN,),
    "POST /subjects/{subject}/versions": (OPEN,),
    "GET /subjects/{subject}/versions/{version}": (OPEN,),
    "GET /subjects/{subject}/versions/{version}/schema": (OPEN,),
    "GET /subjects/{subject}/versions/{version}/referencedby": (OPEN,),
    "DELETE /subjects/{subject}/versions/{version}": (("CLUSTER", "ALTER"),),
    "POST /subjects/{subject}": (OPEN,),
    "DELETE /subjects/{subject}": (("CLUSTER", "ALTER"),),
    "GET /config": (OPEN,),
    "PUT /config": (("CLUSTER", "ALTER"),),
    "DELETE /config": (("CLUSTER", "ALTER"),),
    "GET /config/{subject}": (OPEN,),
    "PUT /config/{subject}": (("CLUSTER", "ALTER"),),
    "DELETE /config/{subject}": (("CLUSTER", "ALTER"),),
    "GET /mode": (OPEN,),
    "PUT /mode": (("CLUSTER", "ALTER"),),
    "DELETE /mode": (("CLUSTER", "ALTER"),),
    "GET /mode/{subject}": (OPEN,),
    "PUT /mode/{subject}": (("CLUSTER", "ALTER"),),
    "DELETE /mode/{subject}": (("CLUSTER", "ALTER"),),
    "POST /compatibility/subjects/{subject}/versions/{version}": (OPEN,),
    "POST /compatibility/subjects/{subject}/versions": (OPEN,),
}


@dataclass
class World:
    server: FranzServer
    admin: httpx.Client
    cluster_id: str
    schema_id: int = 0  # SUBJECT's version 1
    instances: dict[str, str] = field(default_factory=dict)  # identity -> its instance

    def acls(self, principal: str, needs: list[tuple[str, str]], permission: str) -> list[Any]:
        out = []
        for rtype, op in needs:
            name = {"TOPIC": TOPIC, "GROUP": GROUP, "CLUSTER": "kafka-cluster"}[rtype]
            pattern = "LITERAL" if rtype == "CLUSTER" else "PREFIXED"
            out.append({"resource_type": rtype, "resource_name": name, "pattern_type": pattern,
                        "principal": principal, "host": "*", "operation": op,
                        "permission": permission})
        return out

    def grant(self, acls: list[Any]) -> None:
        if acls:
            r = self.admin.post(f"/v3/clusters/{self.cluster_id}/acls:batch", json={"data": acls})
            assert r.status_code == 204, r.text

    def revoke_all(self) -> None:
        for who in ("User:granted", "User:denied"):
            r = self.admin.delete(f"/v3/clusters/{self.cluster_id}/acls", params={
                "resource_type": "ANY", "pattern_type": "ANY", "operation": "ANY",
                "permission": "ANY", "principal": who})
            assert r.status_code == 200, r.text


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


SUBJECT = f"{TOPIC}-value"  # the Schema Registry's fixture: version 1, its level and mode
SR = "application/vnd.schemaregistry.v1+json"
SCHEMA = {"schema": '{"type": "string"}'}


def _sr(client: httpx.Client, method: str, path: str, body: Any) -> Any:
    r = client.request(method, path, json=body, headers={"Content-Type": SR})
    assert r.status_code == 200, r.text
    return r.json()


def _subject(world: World, op: str) -> str:
    """The subject of a Schema Registry operation: a fresh one with what the operation
    removes (a version, a level, a mode), else SUBJECT."""
    method, template = op.split(" ", 1)
    if method != "DELETE" or "{subject}" not in template:
        return SUBJECT
    subject = unique(SUBJECT)
    if template.startswith("/subjects/"):
        _sr(world.admin, "POST", f"/subjects/{subject}/versions", SCHEMA)
    else:  # /config/{subject}, /mode/{subject}
        what = template.split("/")[1]
        _sr(world.admin, "PUT", f"/{what}/{subject}",
            {"config": {"compatibility": "BACKWARD"}, "mode": {"mode": "READWRITE"}}[what])
    return subject


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    # the wrong-password identity fails on every operation, all from 127.0.0.1: the login
    # throttle (tests/integration/test_login_throttle.py) would answer 429 to everyone
    server = FranzServer(tmp_path_factory.mktemp("matrix") / "data", [
        *SECURED, "authentication.failures.max=0", "authentication.failures.address.max=0"])
    add_users(server.data_dir, USERS)
    server.start()
    admin = httpx.Client(base_url=server.url, auth=("admin", USERS["admin"]), timeout=30.0)
    cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
    r = admin.post(f"/topics/{TOPIC}", json={"records": [{"value": i} for i in range(3)]},
                   headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text
    # a group with a commit and no members (describe, lags, offsets, offsets:alter)
    r = admin.post(f"/v3/clusters/{cluster_id}/consumer-groups/{GROUP}/offsets:alter",
                   json={"data": [{"topic_name": TOPIC, "partition_id": 0, "offset": 1}]})
    assert r.status_code == 204, r.text
    # a subject with a version, a subject-level compatibility and a subject-level mode
    schema_id = _sr(admin, "POST", f"/subjects/{SUBJECT}/versions", SCHEMA)["id"]
    _sr(admin, "PUT", f"/config/{SUBJECT}", {"compatibility": "BACKWARD"})
    _sr(admin, "PUT", f"/mode/{SUBJECT}", {"mode": "READWRITE"})
    yield World(server, admin, cluster_id, schema_id)
    admin.close()
    server.stop()


def _client(world: World, identity: str) -> httpx.Client:
    auth: Any = {"anonymous": None, "wrong-password": ("granted", "nope")}.get(
        identity, (identity, USERS.get(identity, "")))
    return httpx.Client(base_url=world.server.url, auth=auth, timeout=30.0)


def _instance(world: World, identity: str, group: str, *, assign: bool) -> str:
    """An instance of ``group`` created by ``identity`` when it can, else by granted
    (whose instance another principal may not use)."""
    creator = identity if identity in ("granted", "admin") else "granted"
    name = unique("inst")
    # what making it takes, granted LITERAL for the moment (the operation's own grants
    # are PREFIXED and stay)
    setup = [{"resource_type": rtype, "resource_name": rname, "pattern_type": "LITERAL",
              "principal": f"User:{creator}", "host": "*", "operation": "READ",
              "permission": "ALLOW"} for rtype, rname in (("GROUP", group), ("TOPIC", TOPIC))]
    world.grant(setup)
    with _client(world, creator) as c:
        r = c.post(f"/consumers/{group}", json={"name": name, "format": "json"},
                   headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        if assign:
            r = c.post(f"/consumers/{group}/instances/{name}/assignments",
                       json={"partitions": [{"topic": TOPIC, "partition": 0}]},
                       headers={"Content-Type": V2})
            assert r.status_code == 204, r.text
    for one in setup:
        r = world.admin.delete(f"/v3/clusters/{world.cluster_id}/acls", params=one)
        assert r.status_code == 200, r.text
    return name


Request = tuple[str, str, dict[str, Any]]


def _request(world: World, op: str, identity: str) -> Request:
    """A valid request for the operation: fresh resources where it destroys or creates."""
    method, template = op.split(" ", 1)
    topic, group = TOPIC, GROUP
    values: dict[str, Any] = {"cluster_id": world.cluster_id, "partition": 0, "partition_id": 0,
                              "broker_id": 0, "name": "retention.ms", "user_name": unique("u"),
                              "id": world.schema_id, "version": 1}
    if "{subject}" in template:
        values["subject"] = _subject(world, op)
    kwargs: dict[str, Any] = {}
    if "{instance}" in template or "{consumer_id}" in template:
        group = unique(GROUP)
        values["instance"] = values["consumer_id"] = _instance(
            world, identity, group, assign=not template.endswith("/subscription"))
    elif op == "POST /consumers/{group}":
        group = unique(GROUP)  # members would keep GROUP from being reset
    if "/broker" in template:
        values["name"] = "num.partitions"
    if method == "DELETE" and template.endswith("{topic_name}") or method == "PATCH":
        topic = unique(TOPIC)
        r = world.admin.post(f"/v3/clusters/{world.cluster_id}/topics",
                             json={"topic_name": topic, "partitions_count": 1})
        assert r.status_code == 201, r.text
    if method == "DELETE" and template.endswith("{consumer_group_id}"):
        group = unique(GROUP)
        r = world.admin.post(f"/v3/clusters/{world.cluster_id}/consumer-groups/{group}/"
                             "offsets:alter",
                             json={"data": [{"topic_name": TOPIC, "partition_id": 0,
                                             "offset": 0}]})
        assert r.status_code == 204, r.text
    if template.endswith("/users/{user_name}") and method == "DELETE":
        r = world.admin.put(f"/v3/clusters/{world.cluster_id}/users/{values['user_name']}",
                            json={"password": "pw"})
        assert r.status_code == 204, r.text
    values.update(topic=topic, topic_name=topic, group=group, consumer_group_id=group)
    path = template.format(**values)
    body = BODIES.get(op)
    if body is not None:
        kwargs.update(body(topic, group))
    if op == "DELETE /v3/clusters/{cluster_id}/acls":
        kwargs["params"] = {"resource_type": "TOPIC", "pattern_type": "LITERAL",
                            "operation": "READ", "permission": "ALLOW",
                            "resource_name": unique("none")}
    return method, path, kwargs


def _json(content_type: str, body: Any) -> Callable[[str, str], dict[str, Any]]:
    return lambda topic, group: {"json": body(topic, group) if callable(body) else body,
                                 "headers": {"Content-Type": content_type}}


_TPS = {"partitions": [{"topic": TOPIC, "partition": 0}]}
_V3 = "application/json"
BODIES: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "POST /": _json(V2, {}),
    "POST /topics/{topic}": _json(JSON, {"records": [{"value": 1}]}),
    "POST /topics/{topic}/partitions/{partition}": _json(JSON, {"records": [{"value": 1}]}),
    "POST /consumers/{group}": _json(V2, lambda t, g: {"name": unique("c")}),
    "POST /consumers/{group}/instances/{instance}/subscription": _json(V2, {"topics": [TOPIC]}),
    "POST /consumers/{group}/instances/{instance}/assignments": _json(V2, _TPS),
    "POST /consumers/{group}/instances/{instance}/positions": _json(
        V2, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}),
    "POST /consumers/{group}/instances/{instance}/positions/beginning": _json(V2, _TPS),
    "POST /consumers/{group}/instances/{instance}/positions/end": _json(V2, _TPS),
    "POST /consumers/{group}/instances/{instance}/offsets": _json(
        V2, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}),
    "GET /consumers/{group}/instances/{instance}/offsets": _json(V2, _TPS),
    "GET /consumers/{group}/instances/{instance}/records": lambda t, g: {
        "headers": {"Accept": JSON}, "params": {"timeout": 1}},
    "GET /topics/{topic}/partitions/{partition}/records": lambda t, g: {
        "params": {"offset": 0}},
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records":
        lambda t, g: {"params": {"offset": 0}},
    "POST /v3/clusters/{cluster_id}/reassignments": _json(
        _V3, {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [0]}]}),
    "POST /v3/clusters/{cluster_id}/preferred-replica-election": _json(
        _V3, {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0}]}),
    "POST /v3/clusters/{cluster_id}/acls": _json(_V3, lambda t, g: {
        "resource_type": "TOPIC", "resource_name": unique("acl"), "pattern_type": "LITERAL",
        "principal": "User:x", "host": "*", "operation": "READ", "permission": "ALLOW"}),
    "POST /v3/clusters/{cluster_id}/acls:batch": _json(_V3, lambda t, g: {"data": [{
        "resource_type": "TOPIC", "resource_name": unique("acl"), "pattern_type": "LITERAL",
        "principal": "User:x", "host": "*", "operation": "READ", "permission": "ALLOW"}]}),
    "PUT /v3/clusters/{cluster_id}/users/{user_name}": _json(_V3, {"password": "pw"}),
    "PUT /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}": _json(
        _V3, {"value": "604800000"}),
    "POST /v3/clusters/{cluster_id}/topics/{topic_name}/configs:alter": _json(
        _V3, {"data": [{"name": "retention.ms", "value": "604800000"}]}),
    "POST /v3/clusters/{cluster_id}/topics": _json(
        _V3, lambda t, g: {"topic_name": unique(TOPIC), "partitions_count": 1}),
    "PATCH /v3/clusters/{cluster_id}/topics/{topic_name}": _json(_V3, {"partitions_count": 2}),
    "POST /v3/clusters/{cluster_id}/topics/{topic_name}/records": _json(
        _V3, {"value": {"type": "JSON", "data": 1}}),
    "POST /v3/clusters/{cluster_id}/topics/{topic_name}/records:batch": _json(
        _V3, {"entries": [{"id": "1", "value": {"type": "JSON", "data": 1}}]}),
    "POST /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/offsets:alter": _json(
        _V3, {"data": [{"topic_name": TOPIC, "partition_id": 0, "offset": 1}]}),
    "POST /subjects/{subject}/versions": _json(SR, SCHEMA),
    "POST /subjects/{subject}": _json(SR, SCHEMA),
    "POST /compatibility/subjects/{subject}/versions/{version}": _json(SR, SCHEMA),
    "POST /compatibility/subjects/{subject}/versions": _json(SR, SCHEMA),
    "PUT /config": _json(SR, {"compatibility": "BACKWARD"}),
    "PUT /config/{subject}": _json(SR, {"compatibility": "BACKWARD"}),
    "PUT /mode": _json(SR, {"mode": "READWRITE"}),
    "PUT /mode/{subject}": _json(SR, {"mode": "READWRITE"}),
}

#: Valid requests whose right answer is not a 2xx.
EXPECTED_STATUS = {
    # no reassignment is in progress for the partition
    "GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/reassignment":
        404,
    # no dynamic cluster-wide broker config is set
    "GET /v3/clusters/{cluster_id}/broker-configs/{name}": 404,
}

IDENTITIES = ("anonymous", "wrong-password", "nobody", "denied", "granted", "admin")


def _operations(world: World) -> list[str]:
    doc = world.admin.get("/openapi.json").json()
    return [f"{m.upper()} {p}" for p, ops in doc["paths"].items() for m in ops
            if m in ("get", "post", "put", "patch", "delete")]


def _leaks(body: str) -> bool:
    """Whether a list answer shows any of our fixtures (``mx`` topics, ``mxg`` groups)."""
    return f'"{TOPIC}' in body or f"/{TOPIC}" in body


def test_every_operation_as_every_identity(world: World) -> None:
    operations = _operations(world)
    missing = [op for op in operations if op not in REQUIRED]
    assert not missing, f"operations without an entry in REQUIRED: {missing}"
    unauthorized_successes: list[str] = []
    authorized_failures: list[str] = []
    for op in operations:
        required = REQUIRED[op]
        needs = [r for r in required if isinstance(r, tuple)]
        is_open, is_list = OPEN in required, LIST in required
        world.grant(world.acls("User:granted", needs, "ALLOW")
                    + world.acls("User:denied", needs, "ALLOW")
                    + world.acls("User:denied", [(t, "ALL") for t, _ in needs], "DENY"))
        try:
            for identity in IDENTITIES:
                method, path, kwargs = _request(world, op, identity)
                with _client(world, identity) as c:
                    r = c.request(method, path, **kwargs)
                seen = f"{op} as {identity}: {r.status_code} {r.text[:160]}"
                if PUBLIC in required:
                    if r.status_code >= 300:
                        authorized_failures.append(seen)
                elif identity in ("anonymous", "wrong-password"):
                    if r.status_code != 401:
                        unauthorized_successes.append(seen)
                elif identity in ("granted", "admin") or is_open:
                    if r.status_code in (401, 403):
                        authorized_failures.append(seen)
                elif r.status_code < 300 and not (is_list and not _leaks(r.text)):
                    unauthorized_successes.append(seen)
                elif r.status_code >= 300 and r.status_code != 403:
                    unauthorized_successes.append(seen)  # it got past the check
        finally:
            world.revoke_all()
    assert not unauthorized_successes, "\n".join(unauthorized_successes)
    assert not authorized_failures, "\n".join(authorized_failures)


def test_the_granted_identity_succeeds_everywhere(world: World) -> None:
    """The requests above are valid: with its grants, granted gets a 2xx for each (so the
    matrix's 'never 401/403' is not met by requests failing for another reason)."""
    failures = []
    for op in _operations(world):
        needs = [r for r in REQUIRED[op] if isinstance(r, tuple)]
        world.grant(world.acls("User:granted", needs, "ALLOW"))
        try:
            method, path, kwargs = _request(world, op, "granted")
            with _client(world, "granted") as c:
                r = c.request(method, path, **kwargs)
            if r.status_code >= 300 and r.status_code != EXPECTED_STATUS.get(op):
                failures.append(f"{op}: {r.status_code} {r.text[:200]}")
        finally:
            world.revoke_all()
    assert not failures, "\n".join(failures)
