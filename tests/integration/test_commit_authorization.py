"""Moving a consumer group's offsets needs READ on the group and on each topic, at the
time of the commit, whichever way the offsets move (docs/security.md).

One real secured ``franz serve`` (Basic users, ``AclAuthorizer``, super user ``admin``).
Every test gives alice READ on a group and its topics, lets her commit, then revokes an
ACL and tries to move the committed offset back through a seek: a commit without a body
(the instance's positions), an auto-commit on a rebalance, an auto-commit on leaving.
The committed offsets are read back as the super user, through the v3 group offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.conftest import JSON, V2, FranzServer
from tests.integration.test_security import (
    SECURED,
    acl,
    add_users,
    grant,
    make_topic,
    produce,
    revoke,
    unique,
)

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
RECORDS = 5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    s = FranzServer(tmp_path_factory.mktemp("commit-acls") / "data", SECURED)
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


@pytest.fixture
def alice(server: FranzServer) -> Iterator[httpx.Client]:
    with user(server, "alice") as c:
        yield c


def post(c: httpx.Client, path: str, body: Any = None) -> httpx.Response:
    if body is None:
        return c.post(path, headers={"Content-Type": V2})
    return c.post(path, json=body, headers={"Content-Type": V2})


def topics_with_records(admin: httpx.Client, *names: str) -> None:
    for name in names:
        make_topic(admin, name)  # one record
        for i in range(RECORDS - 1):
            assert produce(admin, name, i).status_code == 200


def committed(admin: httpx.Client, cluster_id: str, group: str) -> dict[str, int | None]:
    r = admin.get(f"/v3/clusters/{cluster_id}/consumer-groups/{group}/offsets")
    assert r.status_code == 200, r.text
    return {row["topic_name"]: row["current_offset"] for row in r.json()["data"]}


def consumer(c: httpx.Client, group: str, name: str, topics: list[str], *,
             auto_commit: bool) -> str:
    """A consumer instance of ``c`` in ``group``, assigned partition 0 of ``topics``."""
    r = post(c, f"/consumers/{group}", {"name": name, "format": "json",
                                        "auto.offset.reset": "earliest",
                                        "auto.commit.enable": str(auto_commit).lower()})
    assert r.status_code == 200, r.text
    base = f"/consumers/{group}/instances/{name}"
    r = post(c, base + "/assignments",
             {"partitions": [{"topic": t, "partition": 0} for t in topics]})
    assert r.status_code == 204, r.text
    return base


def read_all(c: httpx.Client, base: str, expected: int) -> None:
    got: list[Any] = []
    for _ in range(40):
        r = c.get(base + "/records", headers={"Accept": JSON}, params={"timeout": 500})
        assert r.status_code == 200, r.text
        got += r.json()
        if len(got) >= expected:
            break
    assert len(got) == expected


def seek_back(c: httpx.Client, base: str, topics: list[str], offset: int = 1) -> None:
    r = post(c, base + "/positions",
             {"offsets": [{"topic": t, "partition": 0, "offset": offset} for t in topics]})
    assert r.status_code == 204, r.text  # a seek needs READ on the group only


def assert_denied(r: httpx.Response, *, code: int = 40301, naming: str) -> None:
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["error_code"] == code, body
    assert naming in body["message"], body


def test_a_commit_without_a_body_after_a_seek_needs_read_on_every_topic(
        admin: httpx.Client, alice: httpx.Client, cluster_id: str) -> None:
    group, kept, revoked = unique("g"), unique("kept"), unique("revoked")
    topics_with_records(admin, kept, revoked)
    grant(admin, cluster_id, acl("GROUP", group, "User:alice", "READ"),
          acl("TOPIC", kept, "User:alice", "READ"), acl("TOPIC", revoked, "User:alice", "READ"))
    base = consumer(alice, group, "c", [kept, revoked], auto_commit=False)
    r = post(alice, base + "/offsets", {"offsets": [
        {"topic": t, "partition": 0, "offset": 3} for t in (kept, revoked)]})
    assert r.status_code == 200, r.text
    assert committed(admin, cluster_id, group) == {kept: 4, revoked: 4}

    revoke(admin, cluster_id, acl("TOPIC", revoked, "User:alice", "READ"))
    seek_back(alice, base, [kept, revoked])
    # the positions name a topic alice may no longer READ: refused, nothing committed
    # (not even the partition of the topic she still may read)
    assert_denied(post(alice, base + "/offsets"), naming=revoked)
    # every other way is refused as well: a body, the v3 admin reset (CLI --reset-offsets)
    assert_denied(post(alice, base + "/offsets", {"offsets": [
        {"topic": revoked, "partition": 0, "offset": 0}]}), naming=revoked)
    r = alice.post(f"/v3/clusters/{cluster_id}/consumer-groups/{group}/offsets:alter",
                   json={"data": [{"topic_name": revoked, "partition_id": 0, "offset": 1}]})
    assert_denied(r, naming=revoked)
    assert committed(admin, cluster_id, group) == {kept: 4, revoked: 4}

    # checked at the time of the commit: READ given back, the same commit goes through
    grant(admin, cluster_id, acl("TOPIC", revoked, "User:alice", "READ"))
    assert post(alice, base + "/offsets").status_code == 200
    assert committed(admin, cluster_id, group) == {kept: 1, revoked: 1}
    assert alice.delete(base).status_code == 204


def test_auto_commit_on_leaving_skips_a_topic_the_owner_may_no_longer_read(
        admin: httpx.Client, alice: httpx.Client, cluster_id: str) -> None:
    group, kept, revoked = unique("g"), unique("kept"), unique("revoked")
    topics_with_records(admin, kept, revoked)
    grant(admin, cluster_id, acl("GROUP", group, "User:alice", "READ"),
          acl("TOPIC", kept, "User:alice", "READ"), acl("TOPIC", revoked, "User:alice", "READ"))
    base = consumer(alice, group, "c", [kept, revoked], auto_commit=True)
    read_all(alice, base, 2 * RECORDS)
    r = alice.get(base + "/records", headers={"Accept": JSON})  # auto-commits the reads
    assert r.status_code == 200 and r.json() == [], r.text
    assert committed(admin, cluster_id, group) == {kept: RECORDS, revoked: RECORDS}

    revoke(admin, cluster_id, acl("TOPIC", revoked, "User:alice", "READ"))
    seek_back(alice, base, [kept, revoked])
    # leaving auto-commits the positions: only those alice may still READ, and the
    # leave itself succeeds
    assert alice.delete(base).status_code == 204
    assert committed(admin, cluster_id, group) == {kept: 1, revoked: RECORDS}


def test_auto_commit_on_a_rebalance_needs_read_on_the_topic_and_the_group(
        server: FranzServer, admin: httpx.Client, alice: httpx.Client,
        cluster_id: str) -> None:
    group, topic = unique("g"), unique("t")
    topics_with_records(admin, topic)
    grant(admin, cluster_id, acl("GROUP", group, "User:alice", "READ"),
          acl("TOPIC", topic, "User:alice", "READ"), acl("GROUP", group, "User:bob", "READ"))
    base = consumer(alice, group, "c", [topic], auto_commit=True)
    read_all(alice, base, RECORDS)
    assert alice.get(base + "/records", headers={"Accept": JSON}).status_code == 200
    assert committed(admin, cluster_id, group) == {topic: RECORDS}

    # READ on the topic revoked, then another member joins: the rebalance auto-commits
    # alice's instance, but not a partition she may no longer read
    revoke(admin, cluster_id, acl("TOPIC", topic, "User:alice", "READ"))
    seek_back(alice, base, [topic])
    with user(server, "bob") as bob:
        r = post(bob, f"/consumers/{group}", {"name": "b1"})
        assert r.status_code == 200, r.text  # the join is not refused for alice's sake
        assert committed(admin, cluster_id, group) == {topic: RECORDS}

        # READ on the topic back, READ on the group gone: nothing is committed either
        grant(admin, cluster_id, acl("TOPIC", topic, "User:alice", "READ"))
        seek_back(alice, base, [topic], offset=2)
        revoke(admin, cluster_id, acl("GROUP", group, "User:alice", "READ"))
        r = post(bob, f"/consumers/{group}", {"name": "b2"})
        assert r.status_code == 200, r.text
        assert committed(admin, cluster_id, group) == {topic: RECORDS}

        # both back: the next rebalance commits her position
        grant(admin, cluster_id, acl("GROUP", group, "User:alice", "READ"))
        assert bob.delete(f"/consumers/{group}/instances/b1").status_code == 204
        assert committed(admin, cluster_id, group) == {topic: 2}
        assert bob.delete(f"/consumers/{group}/instances/b2").status_code == 204
    assert alice.delete(base).status_code == 204
