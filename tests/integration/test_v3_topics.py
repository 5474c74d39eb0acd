"""v3 topics, partitions, replicas, partition offsets and reassignments, against a real
server: exact shapes on success, exact status and error_code on bad input."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

if TYPE_CHECKING:
    from conftest import V2Client

JSON = "application/json"
NO_TOPIC = "This server does not host this topic-partition."


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


def ok(resp: httpx.Response, model: Any, status: int = 200) -> Any:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    TypeAdapter(model).validate_python(body)
    return body


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


@pytest.fixture
def base(client: httpx.Client, franz_url: str) -> str:
    return f"{franz_url}/v3/clusters/{cluster_id(client)}"


def create(client: httpx.Client, base: str, body: Any) -> httpx.Response:
    return client.post(f"{base}/topics", json=body)


def topic_shape(base: str, cid: str, name: str, *, partitions: int, internal: bool = False) -> Any:
    url = f"{base}/topics/{name}"
    return {
        "kind": "KafkaTopic",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/topic={name}"},
        "cluster_id": cid,
        "topic_name": name,
        "is_internal": internal,
        "replication_factor": 1,
        "partitions_count": partitions,
        "partitions": {"related": f"{url}/partitions"},
        "configs": {"related": f"{url}/configs"},
        "partition_reassignments": {"related": f"{url}/partitions/-/reassignment"},
        "authorized_operations": [],
    }


# --- create, get, list ------------------------------------------------------------------------


def test_create_topic(client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    resp = create(
        client,
        base,
        {
            "topic_name": topic,
            "partitions_count": 2,
            "replication_factor": 1,
            "configs": [
                {"name": "cleanup.policy", "value": "compact"},
                {"name": "retention.ms", "value": None},  # null: the default, ignored
            ],
        },
    )
    body = ok(resp, m.KafkaTopic, 201)
    assert body == topic_shape(base, cid, topic, partitions=2)
    assert resp.headers["location"] == f"{base}/topics/{topic}"
    assert ok(client.get(f"{base}/topics/{topic}"), m.KafkaTopic) == body
    overrides = client.get(f"/topics/{topic}").json()["configs"]  # the v2 view agrees
    assert overrides == {"cleanup.policy": "compact"}


def test_create_with_defaults_and_number_values(
    client: httpx.Client, base: str, topic: str
) -> None:
    body = ok(
        create(
            client,
            base,
            {"topic_name": topic, "configs": [{"name": "retention.ms", "value": 5000}]},
        ),
        m.KafkaTopic,
        201,
    )
    assert body["partitions_count"] == 3  # num.partitions=3 on this broker
    cfg = client.get(f"{base}/topics/{topic}/configs/retention.ms").json()
    assert cfg["value"] == "5000" and cfg["source"] == "DYNAMIC_TOPIC_CONFIG"


def test_create_minus_one_means_broker_default(client: httpx.Client, base: str, topic: str) -> None:
    body = {"topic_name": topic, "partitions_count": -1, "replication_factor": -1}
    assert ok(create(client, base, body), m.KafkaTopic, 201)["partitions_count"] == 3


def test_validate_only_creates_nothing(client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    resp = create(client, base, {"topic_name": topic, "partitions_count": 4, "validate_only": True})
    assert ok(resp, m.KafkaTopic, 200) == topic_shape(base, cid, topic, partitions=4)
    assert error_of(client.get(f"{base}/topics/{topic}"), 404, 40403) == NO_TOPIC
    # still validated: a bad config is refused
    bad = {
        "topic_name": topic,
        "validate_only": True,
        "configs": [{"name": "retention.ms", "value": "x"}],
    }
    assert "retention.ms" in error_of(create(client, base, bad), 400, 40002)


def test_list_topics_sorted_with_internal(client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    create(client, base, {"topic_name": topic, "partitions_count": 1})
    body = ok(client.get(f"{base}/topics"), m.KafkaTopicList)
    assert body["metadata"] == {"self": f"{base}/topics", "next": None}
    names = [t["topic_name"] for t in body["data"]]
    assert names == sorted(names) and topic in names
    internal = next(t for t in body["data"] if t["topic_name"] == "__consumer_offsets")
    assert internal["is_internal"] is True and internal["partitions_count"] == 50
    mine = next(t for t in body["data"] if t["topic_name"] == topic)
    assert mine == topic_shape(base, cid, topic, partitions=1)


def test_create_existing_topic(client: httpx.Client, base: str, topic: str) -> None:
    assert create(client, base, {"topic_name": topic}).status_code == 201
    msg = error_of(create(client, base, {"topic_name": topic}), 400, 40002)
    assert msg == f"Topic '{topic}' already exists."


@pytest.mark.parametrize(
    ("configs", "key"),
    [
        ([{"name": "retention.ms", "value": "soon"}], "retention.ms"),
        ([{"name": "cleanup.policy", "value": "shred"}], "cleanup.policy"),
        ([{"name": "max.message.bytes", "value": "-5"}], "max.message.bytes"),
        ([{"name": "no.such.config", "value": "1"}], "no.such.config"),
    ],
)
def test_create_with_invalid_config(
    client: httpx.Client, base: str, topic: str, configs: Any, key: str
) -> None:
    msg = error_of(create(client, base, {"topic_name": topic, "configs": configs}), 400, 40002)
    assert key in msg
    error_of(client.get(f"{base}/topics/{topic}"), 404, 40403)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"topic_name": "bad name!"}, 422, 42206),
        ({"topic_name": ""}, 422, 42206),
        ({"topic_name": "x" * 250}, 422, 42206),
        ({"partitions_count": 1}, 422, 42206),
        ({"topic_name": "ok-name", "partitions_count": 0}, 400, 40002),
        ({"topic_name": "ok-name", "replication_factor": 3}, 400, 40002),
        ({"topic_name": "ok-name", "replication_factor": 0}, 400, 40002),
        ({"topic_name": "ok-name", "replicas_assignments": {"0": [0]}}, 400, 40002),
        ({"topic_name": "ok-name", "partitions_count": "three"}, 400, 400),
        ({"topic_name": "ok-name", "surprise": 1}, 400, 400),
        ({"topic_name": 5}, 400, 400),
        ({"topic_name": "__consumer_offsets"}, 400, 40002),
    ],
)
def test_create_bad_requests(
    client: httpx.Client, base: str, body: Any, status: int, code: int
) -> None:
    error_of(create(client, base, body), status, code)


def test_create_messages(client: httpx.Client, base: str) -> None:
    assert error_of(create(client, base, {"topic_name": "a b"}), 422, 42206) == (
        "Payload error. Invalid topic name."
    )
    assert error_of(create(client, base, {"partitions_count": 1}), 422, 42206) == (
        "Payload error. topic_name may not be null"
    )
    assert "Unrecognized field: surprise" in error_of(
        create(client, base, {"topic_name": "t", "surprise": 1}), 400, 400
    )
    assert "larger than available brokers: 1" in error_of(
        create(client, base, {"topic_name": "t", "replication_factor": 2}), 400, 40002
    )


def test_create_body_problems(client: httpx.Client, base: str) -> None:
    url = f"{base}/topics"
    msg = error_of(client.post(url, content=b"", headers={"Content-Type": JSON}), 422, 42206)
    assert msg == "Payload error. Request body is empty. Data is required."
    assert error_of(client.post(url, content=b"{oops", headers={"Content-Type": JSON}), 400, 400)
    assert error_of(client.post(url, content=b"[1]", headers={"Content-Type": JSON}), 400, 400)
    for ctype in (
        "text/plain",
        "application/vnd.kafka.v2+json",
        "application/x-www-form-urlencoded",
    ):
        resp = client.post(url, content=b'{"topic_name":"t"}', headers={"Content-Type": ctype})
        assert error_of(resp, 415, 415) == "HTTP 415 Unsupported Media Type"
    resp = client.post(url, content=b'{"topic_name":"t"}')  # no Content-Type at all
    error_of(resp, 415, 415)
    resp = client.post(
        url,
        content=b'{"topic_name":"charset-ok"}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert resp.status_code == 201, resp.text
    client.delete(f"{base}/topics/charset-ok")


def test_unknown_topic_is_40403(client: httpx.Client, base: str) -> None:
    for path in (
        "/topics/nope-x",
        "/topics/nope-x/partitions",
        "/topics/nope-x/partitions/0",
        "/topics/nope-x/partitions/0/offset",
        "/topics/nope-x/partitions/0/replicas",
        "/topics/nope-x/partitions/0/replicas/0",
        "/topics/nope-x/partitions/-/reassignment",
        "/topics/nope-x/partitions/0/reassignment",
        "/topics/nope-x/configs",
        "/topics/nope-x/configs/retention.ms",
    ):
        assert error_of(client.get(base + path), 404, 40403) == NO_TOPIC, path
    assert error_of(client.delete(f"{base}/topics/nope-x"), 404, 40403) == NO_TOPIC
    resp = client.patch(f"{base}/topics/nope-x", json={"partitions_count": 5})
    assert error_of(resp, 404, 40403) == NO_TOPIC


# --- partitions count, delete -----------------------------------------------------------------


def test_increase_partitions(client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    create(client, base, {"topic_name": topic, "partitions_count": 2})
    body = ok(client.patch(f"{base}/topics/{topic}", json={"partitions_count": 5}), m.KafkaTopic)
    assert body == topic_shape(base, cid, topic, partitions=5)
    parts = client.get(f"{base}/topics/{topic}/partitions").json()["data"]
    assert [p["partition_id"] for p in parts] == [0, 1, 2, 3, 4]


def test_partition_decrease_or_same_is_refused(client: httpx.Client, base: str, topic: str) -> None:
    create(client, base, {"topic_name": topic, "partitions_count": 3})
    msg = error_of(client.patch(f"{base}/topics/{topic}", json={"partitions_count": 2}), 400, 40002)
    assert msg == (
        "Topic currently has 3 partitions, which is higher than the requested 2: "
        "the partition count can only be increased"
    )
    msg = error_of(client.patch(f"{base}/topics/{topic}", json={"partitions_count": 3}), 400, 40002)
    assert msg == "Topic already has 3 partitions."
    assert client.get(f"{base}/topics/{topic}").json()["partitions_count"] == 3


def test_patch_body_problems(client: httpx.Client, base: str, topic: str) -> None:
    create(client, base, {"topic_name": topic, "partitions_count": 1})
    url = f"{base}/topics/{topic}"
    error_of(client.patch(url, json={}), 422, 42206)
    error_of(client.patch(url, json={"partitions_count": "many"}), 400, 400)
    error_of(client.patch(url, json={"partitions_count": 2, "x": 1}), 400, 400)
    error_of(client.patch(url, content=b"", headers={"Content-Type": JSON}), 422, 42206)
    error_of(client.patch(url, content=b"{", headers={"Content-Type": JSON}), 400, 400)
    error_of(
        client.patch(
            url, content=b'{"partitions_count": 2}', headers={"Content-Type": "text/plain"}
        ),
        415,
        415,
    )


def test_delete_topic(client: httpx.Client, base: str, topic: str) -> None:
    create(client, base, {"topic_name": topic})
    resp = client.delete(f"{base}/topics/{topic}")
    assert resp.status_code == 204 and resp.content == b""
    assert error_of(client.get(f"{base}/topics/{topic}"), 404, 40403) == NO_TOPIC
    assert topic not in [t["topic_name"] for t in client.get(f"{base}/topics").json()["data"]]


# --- partitions, replicas, offsets, reassignments -----------------------------------------------


def test_partitions_and_replicas(client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    create(client, base, {"topic_name": topic, "partitions_count": 2})
    listing = ok(client.get(f"{base}/topics/{topic}/partitions"), m.KafkaPartitionList)
    assert listing["metadata"] == {"self": f"{base}/topics/{topic}/partitions", "next": None}
    url = f"{base}/topics/{topic}/partitions/1"
    p1 = {
        "kind": "KafkaPartition",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/topic={topic}/partition=1"},
        "cluster_id": cid,
        "topic_name": topic,
        "partition_id": 1,
        "leader": {"related": f"{url}/replicas/0"},
        "replicas": {"related": f"{url}/replicas"},
        "reassignment": {"related": f"{url}/reassignment"},
    }
    assert listing["data"][1] == p1
    assert ok(client.get(url), m.KafkaPartition) == p1
    replicas = ok(client.get(f"{url}/replicas"), m.KafkaReplicaList)
    replica = {
        "kind": "KafkaReplica",
        "metadata": {
            "self": f"{url}/replicas/0",
            "resource_name": f"crn:///kafka={cid}/topic={topic}/partition=1/replica=0",
        },
        "cluster_id": cid,
        "topic_name": topic,
        "partition_id": 1,
        "broker_id": 0,
        "is_leader": True,
        "is_in_sync": True,
        "broker": {"related": f"{base}/brokers/0"},
    }
    assert replicas == {
        "kind": "KafkaReplicaList",
        "metadata": {"self": f"{url}/replicas", "next": None},
        "data": [replica],
    }
    assert ok(client.get(f"{url}/replicas/0"), m.KafkaReplica) == replica
    error_of(client.get(f"{url}/replicas/3"), 404, 404)


@pytest.mark.parametrize("partition", ["2", "99", "-1", "abc"])
def test_unknown_partition_is_40403(
    client: httpx.Client, base: str, topic: str, partition: str
) -> None:
    create(client, base, {"topic_name": topic, "partitions_count": 2})
    for tail in ("", "/offset", "/replicas", "/reassignment", "/records?offset=0"):
        resp = client.get(f"{base}/topics/{topic}/partitions/{partition}{tail}")
        assert error_of(resp, 404, 40403) == NO_TOPIC, tail


def test_partition_offsets(v2: V2Client, client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    create(client, base, {"topic_name": topic, "partitions_count": 2})
    v2.produce_values(topic, ["a", "b", "c"], partition=1)
    url = f"{base}/topics/{topic}/partitions/1/offset"
    body = ok(client.get(url), m.KafkaPartitionWithOffsets)
    assert body == {
        "kind": "KafkaPartitionWithOffsets",
        "metadata": {
            "self": url,
            "resource_name": (
                f"crn:///kafka={cid}/topic={topic}/partition=1/offset_type=earliest_and_latest"
            ),
        },
        "cluster_id": cid,
        "topic_name": topic,
        "partition_id": 1,
        "earliest_offset": 0,
        "latest_offset": 3,
    }
    assert client.get(url, params={"offset_type": "earliest_and_latest"}).json() == body
    msg = error_of(client.get(url, params={"offset_type": "latest"}), 400, 400)
    assert msg == "offset_type:latest is invalid"


def test_reassignments_are_always_empty(client: httpx.Client, base: str, topic: str) -> None:
    create(client, base, {"topic_name": topic, "partitions_count": 1})
    all_url = f"{base}/topics/-/partitions/-/reassignment"
    assert ok(client.get(all_url), m.KafkaReassignmentList) == {
        "kind": "KafkaReassignmentList",
        "metadata": {"self": all_url, "next": None},
        "data": [],
    }
    topic_url = f"{base}/topics/{topic}/partitions/-/reassignment"
    assert ok(client.get(topic_url), m.KafkaReassignmentList)["data"] == []
    msg = error_of(client.get(f"{base}/topics/{topic}/partitions/0/reassignment"), 404, 404)
    assert msg == f"No reassignment in progress for {topic}-0."


def test_reassignment_and_preferred_election_requests(
    client: httpx.Client, base: str, topic: str
) -> None:
    create(client, base, {"topic_name": topic, "partitions_count": 2})
    # one broker: the only valid target is the replica set it has; a broker that is not
    # alive is refused naming it, and nothing starts moving
    bad = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [7]}]}
    r = client.post(f"{base}/reassignments", json=bad)
    assert r.status_code == 400, r.text
    assert "7" in r.json()["message"]
    assert client.get(f"{base}/topics/-/partitions/-/reassignment").json()["data"] == []
    unknown = {"version": 1, "partitions": [{"topic": "nope-x", "partition": 0, "replicas": [0]}]}
    assert client.post(f"{base}/reassignments", json=unknown).status_code == 404
    assert client.post(f"{base}/reassignments", content=b"{no", headers={
        "Content-Type": "application/json"}).status_code == 400

    r = client.post(f"{base}/preferred-replica-election",
                    json={"version": 1, "partitions": [{"topic": topic, "partition": 1}]})
    assert r.status_code == 202, r.text
    assert r.json()["partitions"] == [{"topic": topic, "partition": 1}]
    # the leader is already the preferred one: it stays where it is
    p1 = client.get(f"{base}/topics/{topic}/partitions/1").json()
    assert p1["leader"]["related"].endswith("/replicas/0")
