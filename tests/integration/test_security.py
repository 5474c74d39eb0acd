"""Authentication and authorization against a real secured server.

One ``franz serve`` with ``authentication.method=BASIC``, ``AclAuthorizer`` and
``super.users=User:admin``; its users are written to the data dir's SQL catalog before
it starts (as ``franz users add --data-dir`` does), later ones through the admin route.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.broker.security.credentials import StoredCredential
from core.broker.security.sql_store import SqlSecurityStore
from tests.integration.conftest import JSON, V2, FranzServer

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
SECURED = ["num.partitions=1", "authentication.method=BASIC",
           "authorizer.class.name=AclAuthorizer", "super.users=User:admin"]


def add_users(data_dir: Path, users: dict[str, str]) -> None:
    async def run() -> None:
        store = SqlSecurityStore(f"sqlite:///{data_dir / 'metadata.db'}")
        await store.start()
        try:
            for name, password in users.items():
                await store.put_user(name, StoredCredential.create(password))
        finally:
            await store.close()
    data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(run())


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    server = FranzServer(tmp_path_factory.mktemp("secured") / "data", SECURED)
    add_users(server.data_dir, PASSWORDS)
    server.start()
    yield server
    server.stop()


def as_user(server: FranzServer, name: str | None, password: str | None = None) -> httpx.Client:
    auth = None if name is None else (name, password or PASSWORDS[name])
    return httpx.Client(base_url=server.url, auth=auth, timeout=30.0)


@pytest.fixture(scope="module")
def admin(secured: FranzServer) -> Iterator[httpx.Client]:
    with as_user(secured, "admin") as c:
        yield c


@pytest.fixture(scope="module")
def cluster_id(admin: httpx.Client) -> str:
    return str(admin.get("/v3/clusters").json()["data"][0]["cluster_id"])


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acl(resource_type: str, name: str, principal: str, operation: str, *,
        pattern: str = "LITERAL", permission: str = "ALLOW", host: str = "*") -> dict[str, str]:
    return {"resource_type": resource_type, "resource_name": name, "pattern_type": pattern,
            "principal": principal, "host": host, "operation": operation,
            "permission": permission}


def grant(admin: httpx.Client, cluster_id: str, *acls: dict[str, str]) -> None:
    r = admin.post(f"/v3/clusters/{cluster_id}/acls:batch", json={"data": list(acls)})
    assert r.status_code == 204, r.text


def revoke(admin: httpx.Client, cluster_id: str, a: dict[str, str]) -> list[Any]:
    r = admin.delete(f"/v3/clusters/{cluster_id}/acls", params=a)
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def produce(c: httpx.Client, topic: str, value: Any = 1) -> httpx.Response:
    return c.post(f"/topics/{topic}", json={"records": [{"value": value}]},
                  headers={"Content-Type": JSON})


def make_topic(admin: httpx.Client, topic: str) -> None:
    assert produce(admin, topic).status_code == 200


# --- authentication -------------------------------------------------------------------


@pytest.mark.parametrize("path,media", [("/topics", V2), ("/v3/clusters", "application/json")])
def test_missing_credentials_are_401_with_a_basic_challenge(
        secured: FranzServer, path: str, media: str) -> None:
    with as_user(secured, None) as anonymous:
        r = anonymous.get(path)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == 'Basic realm="franz"'
    assert r.headers["content-type"] == media
    assert r.json()["error_code"] == 40101


@pytest.mark.parametrize("header", [
    "Basic " + "bm90LWJhc2U2NA==*",  # not base64
    "Basic YWxpY2U=",  # no colon
    "Bearer abc",  # another scheme
    "Basic " + "A" * 5000,  # too long
])
def test_malformed_credentials_are_401(secured: FranzServer, header: str) -> None:
    r = httpx.get(secured.url + "/topics", headers={"Authorization": header})
    assert r.status_code == 401 and r.json()["error_code"] == 40101


def test_wrong_password_and_unknown_user_are_401_and_nothing_is_written(
        secured: FranzServer, admin: httpx.Client) -> None:
    topic = unique("wrong")
    for name, password in (("alice", "not-her-password"), ("mallory", "whatever")):
        with as_user(secured, name, password) as c:
            r = produce(c, topic)
        assert r.status_code == 401, r.text
    assert topic not in admin.get("/topics").json()


def test_the_audit_log_names_failures_without_secrets(secured: FranzServer) -> None:
    with as_user(secured, "alice", "audit-me-secret") as c:
        assert c.get("/topics").status_code == 401
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        log = secured.log_path.read_text(errors="replace")
        if '"event":"authentication"' in log:
            break
        time.sleep(0.1)
    assert '"event":"authentication","principal":"User:alice"' in log
    assert "audit-me-secret" not in log


# --- authorization ----------------------------------------------------------------------


def test_a_user_without_acls_sees_nothing_and_may_do_nothing(
        secured: FranzServer, admin: httpx.Client) -> None:
    topic = unique("hidden")
    make_topic(admin, topic)
    with as_user(secured, "bob") as bob:
        assert topic not in bob.get("/topics").json()
        for r in (produce(bob, topic), bob.get(f"/topics/{topic}"),
                  bob.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0})):
            assert r.status_code == 403, r.text
            assert r.json()["error_code"] == 40301
        # an unknown topic answers as a known one: no existence leak
        assert bob.get(f"/topics/{unique('nothing')}").status_code == 403


def test_literal_prefixed_and_wildcard_acls(secured: FranzServer, admin: httpx.Client,
                                            cluster_id: str) -> None:
    prefix = unique("pfx")
    literal, under, other = unique("lit"), f"{prefix}-a", unique("other")
    for t in (literal, under, other):
        make_topic(admin, t)
    grant(admin, cluster_id,
          acl("TOPIC", literal, "User:alice", "WRITE"),
          acl("TOPIC", prefix, "User:alice", "WRITE", pattern="PREFIXED"))
    with as_user(secured, "alice") as alice:
        assert produce(alice, literal).status_code == 200
        assert produce(alice, under).status_code == 200
        assert produce(alice, other).status_code == 403
        # WRITE implies DESCRIBE: the topics show, the other does not
        listed = alice.get("/topics").json()
        assert literal in listed and under in listed and other not in listed
        grant(admin, cluster_id, acl("TOPIC", "*", "User:*", "DESCRIBE"))
        assert other in alice.get("/topics").json()  # the wildcard, at once
        assert produce(alice, other).status_code == 403  # DESCRIBE is not WRITE
    revoke(admin, cluster_id, acl("TOPIC", "*", "User:*", "DESCRIBE"))


def test_deny_wins_over_allow_and_super_users_pass(secured: FranzServer, admin: httpx.Client,
                                                    cluster_id: str) -> None:
    topic = unique("denied")
    make_topic(admin, topic)
    grant(admin, cluster_id, acl("TOPIC", topic, "User:alice", "ALL"),
          acl("TOPIC", topic, "User:alice", "WRITE", permission="DENY"))
    with as_user(secured, "alice") as alice:
        assert produce(alice, topic).status_code == 403
        assert alice.get(f"/topics/{topic}").status_code == 200  # ALL still allows DESCRIBE
    grant(admin, cluster_id, acl("TOPIC", topic, "User:admin", "ALL", permission="DENY"))
    assert produce(admin, topic).status_code == 200  # a super user ignores ACLs


def test_producing_to_an_unknown_topic_needs_create(secured: FranzServer, admin: httpx.Client,
                                                    cluster_id: str) -> None:
    prefix = unique("auto")
    grant(admin, cluster_id, acl("TOPIC", prefix, "User:alice", "WRITE", pattern="PREFIXED"))
    with as_user(secured, "alice") as alice:
        r = produce(alice, prefix + "-1")
        assert r.status_code == 404, r.text  # may write, may not create: not auto-created
        grant(admin, cluster_id, acl("TOPIC", prefix, "User:alice", "CREATE",
                                     pattern="PREFIXED"))
        assert produce(alice, prefix + "-1").status_code == 200
    assert prefix + "-1" in admin.get("/topics").json()


def test_a_consumer_instance_belongs_to_its_creator(secured: FranzServer, admin: httpx.Client,
                                                    cluster_id: str) -> None:
    topic, group = unique("owned"), unique("grp")
    make_topic(admin, topic)
    for user in ("alice", "bob"):
        grant(admin, cluster_id, acl("GROUP", group, f"User:{user}", "READ"),
              acl("TOPIC", topic, f"User:{user}", "READ"))
    with as_user(secured, "alice") as alice, as_user(secured, "bob") as bob:
        r = alice.post(f"/consumers/{group}", json={"name": "c1", "format": "json",
                                                    "auto.offset.reset": "earliest"},
                       headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        base = f"/consumers/{group}/instances/c1"
        assert alice.post(base + "/subscription", json={"topics": [topic]},
                          headers={"Content-Type": V2}).status_code == 204
        for r in (bob.get(base + "/records", headers={"Accept": JSON}),
                  bob.get(base + "/subscription"),
                  bob.post(base + "/offsets", headers={"Content-Type": V2}),
                  bob.delete(base)):
            assert r.status_code == 403, r.text
        deadline = time.monotonic() + 20
        got: list[Any] = []
        while not got and time.monotonic() < deadline:
            r = alice.get(base + "/records", headers={"Accept": JSON})
            assert r.status_code == 200, r.text
            got = r.json()
        assert [x["value"] for x in got] == [1]
        # READ on the topic taken away: the next read is refused
        revoke(admin, cluster_id, acl("TOPIC", topic, "User:alice", "READ"))
        r = alice.get(base + "/records", headers={"Accept": JSON})
        assert r.status_code == 403 and topic in r.json()["message"]
        assert alice.delete(base).status_code == 204


def test_subscribing_needs_read_on_each_topic(secured: FranzServer, admin: httpx.Client,
                                              cluster_id: str) -> None:
    group, allowed, forbidden = unique("grp"), unique("ok"), unique("no")
    grant(admin, cluster_id, acl("GROUP", group, "User:alice", "READ"),
          acl("TOPIC", allowed, "User:alice", "READ"))
    with as_user(secured, "alice") as alice:
        r = alice.post(f"/consumers/{group}", json={"name": "c"}, headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        base = f"/consumers/{group}/instances/c"
        r = alice.post(base + "/subscription", json={"topics": [allowed, forbidden]},
                       headers={"Content-Type": V2})
        assert r.status_code == 403 and forbidden in r.json()["message"]
        assert alice.get(base + "/subscription").json() == {"topics": []}  # nothing changed
        alice.delete(base)


def test_api_keys_are_users(secured: FranzServer, admin: httpx.Client, cluster_id: str) -> None:
    r = admin.post(f"/v3/clusters/{cluster_id}/api-keys")
    assert r.status_code == 201, r.text
    key, secret = r.json()["key"], r.json()["secret"]
    topic = unique("keyed")
    make_topic(admin, topic)
    grant(admin, cluster_id, acl("TOPIC", topic, f"User:{key}", "WRITE"))
    with httpx.Client(base_url=secured.url, auth=(key, secret)) as c:
        assert produce(c, topic).status_code == 200
    assert admin.delete(f"/v3/clusters/{cluster_id}/users/{key}").status_code == 204
    with httpx.Client(base_url=secured.url, auth=(key, secret)) as c:
        assert produce(c, topic).status_code == 401  # deleted: its cached check is gone too


def test_users_managed_online_by_super_users_only(secured: FranzServer, admin: httpx.Client,
                                                  cluster_id: str) -> None:
    name = unique("carol")
    with as_user(secured, "alice") as alice:
        r = alice.put(f"/v3/clusters/{cluster_id}/users/{name}", json={"password": "pw"})
        assert r.status_code == 403
    r = admin.put(f"/v3/clusters/{cluster_id}/users/{name}", json={"password": "carol-pw"})
    assert r.status_code == 204, r.text
    names = [u["user_name"] for u in admin.get(f"/v3/clusters/{cluster_id}/users").json()["data"]]
    assert name in names and "admin" in names
    with httpx.Client(base_url=secured.url, auth=(name, "carol-pw")) as carol:
        assert carol.get("/topics").status_code == 200
    r = admin.put(f"/v3/clusters/{cluster_id}/users/bad%2Fname", json={"password": "x"})
    assert r.status_code in (400, 404)
    assert admin.delete(f"/v3/clusters/{cluster_id}/users/{unique('none')}").status_code == 404


def test_a_user_added_offline_while_serving_can_log_in(secured: FranzServer) -> None:
    name = unique("late")
    add_users(secured.data_dir, {name: "late-pw"})
    with httpx.Client(base_url=secured.url, auth=(name, "late-pw")) as c:
        assert c.get("/topics").status_code == 200


@pytest.mark.parametrize("body,message", [
    (acl("ANY", "t", "User:a", "READ"), "resource_type cannot be ANY"),
    (acl("TOPIC", "t", "User:a", "ANY"), "operation cannot be ANY"),
    (acl("TOPIC", "t", "alice", "READ"), "Type:name"),
    (acl("CLUSTER", "other", "User:a", "ALTER"), "kafka-cluster"),
    (acl("GROUP", "g", "User:a", "WRITE"), "does not apply"),
    (acl("TOPIC", "t", "User:a", "FLY"), "unknown Operation"),
])
def test_bad_acls_are_400_naming_the_problem(admin: httpx.Client, cluster_id: str,
                                             body: dict[str, str], message: str) -> None:
    before = admin.get(f"/v3/clusters/{cluster_id}/acls").json()["data"]
    r = admin.post(f"/v3/clusters/{cluster_id}/acls", json=body)
    assert r.status_code == 400 and message in r.json()["message"], r.text
    assert admin.get(f"/v3/clusters/{cluster_id}/acls").json()["data"] == before


def test_acl_search_create_delete_round_trip(admin: httpx.Client, cluster_id: str) -> None:
    topic = unique("rt")
    a = acl("TOPIC", topic, "User:alice", "READ")
    r = admin.post(f"/v3/clusters/{cluster_id}/acls", json=a)
    assert r.status_code == 201 and r.headers["location"].endswith(
        f"acls?resource_type=TOPIC&resource_name={topic}&pattern_type=LITERAL"
        "&principal=User%3Aalice&host=%2A&operation=READ&permission=ALLOW")
    found = admin.get(f"/v3/clusters/{cluster_id}/acls",
                      params={"resource_name": topic}).json()["data"]
    assert [(x["resource_name"], x["operation"], x["kind"]) for x in found] == [
        (topic, "READ", "KafkaAcl")]
    match = admin.get(f"/v3/clusters/{cluster_id}/acls",
                      params={"resource_type": "TOPIC", "resource_name": topic,
                              "pattern_type": "MATCH"}).json()["data"]
    assert any(x["resource_name"] == topic for x in match)
    r = admin.delete(f"/v3/clusters/{cluster_id}/acls", params={"resource_type": "TOPIC"})
    assert r.status_code == 400 and "pattern_type is required" in r.json()["message"]
    assert revoke(admin, cluster_id, a)[0]["resource_name"] == topic
    assert admin.get(f"/v3/clusters/{cluster_id}/acls",
                     params={"resource_name": topic}).json()["data"] == []


def test_internal_routes_need_cluster_action(secured: FranzServer, admin: httpx.Client,
                                             cluster_id: str) -> None:
    with as_user(secured, "alice") as alice:
        r = alice.get("/internal/v1/fetch", params={"topic": "__consumer_offsets",
                                                    "partition": 0, "offset": 0})
        assert r.status_code == 403
        assert alice.post("/internal/v1/controlled_shutdown",
                          params={"broker_id": 0}).status_code == 403
    assert admin.get("/internal/v1/replicas").status_code == 200


def test_admin_changes_are_audited(secured: FranzServer, admin: httpx.Client,
                                   cluster_id: str) -> None:
    topic = unique("audited")
    r = admin.post(f"/v3/clusters/{cluster_id}/topics", json={"topic_name": topic})
    assert r.status_code == 201, r.text
    assert admin.delete(f"/v3/clusters/{cluster_id}/topics/{topic}").status_code == 204
    wanted = [f'"operation":"POST /v3/clusters/{{cluster_id}}/topics","resource":'
              f'"/v3/clusters/{cluster_id}/topics","result":"201"',
              f'"operation":"DELETE /v3/clusters/{{cluster_id}}/topics/{{topic_name}}",'
              f'"resource":"/v3/clusters/{cluster_id}/topics/{topic}","result":"204"']
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        log = secured.log_path.read_text(errors="replace")
        if all(w in log for w in wanted):
            break
        time.sleep(0.1)
    for w in wanted:
        assert w in log
    assert '"event":"admin","principal":"User:admin"' in log


def test_authorized_operations_of_a_topic(secured: FranzServer, admin: httpx.Client,
                                          cluster_id: str) -> None:
    topic = unique("ops")
    make_topic(admin, topic)
    grant(admin, cluster_id, acl("TOPIC", topic, "User:alice", "READ"),
          acl("TOPIC", topic, "User:alice", "DESCRIBE_CONFIGS"))
    with as_user(secured, "alice") as alice:
        one = alice.get(f"/v3/clusters/{cluster_id}/topics/{topic}",
                        params={"include_authorized_operations": "true"}).json()
        assert one["authorized_operations"] == ["DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
        plain = alice.get(f"/v3/clusters/{cluster_id}/topics/{topic}").json()
        assert plain["authorized_operations"] == []
        listed = alice.get(f"/v3/clusters/{cluster_id}/topics",
                           params={"includeAuthorizedOperations": "true"}).json()["data"]
        assert [t["authorized_operations"] for t in listed if t["topic_name"] == topic] == [
            ["DESCRIBE", "DESCRIBE_CONFIGS", "READ"]]
