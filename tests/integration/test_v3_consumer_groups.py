"""v3 consumer groups, consumers, assignments, lags and lag summary, against a real
server; groups are made with v2 consumer instances (franz's group members)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

if TYPE_CHECKING:
    from conftest import V2Client

JSON = "application/json"


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


def ok(resp: httpx.Response, model: Any) -> Any:
    assert resp.status_code == 200, (resp.status_code, resp.text)
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


@pytest.fixture
def stable_group(v2: V2Client, client: httpx.Client, base: str, topic: str, group: str) -> str:
    """``group`` with one member ``c1`` subscribed to ``topic`` (3 partitions) and
    commits: partition 0 at 1 of 4 records, partition 1 at 2 of 2, partition 2 none
    (auto-commit off, so reads and leaving commit nothing more)."""
    assert (
        client.post(f"{base}/topics", json={"topic_name": topic, "partitions_count": 3}).status_code
        == 201
    )
    v2.produce_values(topic, ["a", "b", "c", "d"], partition=0)
    v2.produce_values(topic, ["e", "f"], partition=1)
    settings = {"auto.offset.reset": "earliest", "auto.commit.enable": "false"}
    v2.create_consumer(group, name="c1", format="binary", **settings)
    inst = f"/consumers/{group}/instances/c1"
    v2.post(inst + "/subscription", {"topics": [topic]})
    assert len(v2.read_until(inst, 6)) == 6
    offsets = [
        {"topic": topic, "partition": 0, "offset": 0},
        {"topic": topic, "partition": 1, "offset": 1},
    ]
    v2.post(inst + "/offsets", {"offsets": offsets}, status=200)  # stores offset + 1
    return group


def test_list_and_get_group(client: httpx.Client, base: str, stable_group: str) -> None:
    cid = cluster_id(client)
    g = stable_group
    url = f"{base}/consumer-groups/{g}"
    expected = {
        "kind": "KafkaConsumerGroup",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/consumer-group={g}"},
        "cluster_id": cid,
        "consumer_group_id": g,
        "is_simple": False,
        "partition_assignor": "range",
        "state": "STABLE",
        "type": "CLASSIC",
        "is_mixed_consumer_group": False,
        "coordinator": {"related": f"{base}/brokers/0"},
        "consumers": {"related": f"{url}/consumers"},
        "lag_summary": {"related": f"{url}/lag-summary"},
    }
    assert ok(client.get(url), m.KafkaConsumerGroup) == expected
    listing = ok(client.get(f"{base}/consumer-groups"), m.KafkaConsumerGroupList)
    assert listing["metadata"] == {"self": f"{base}/consumer-groups", "next": None}
    ids = [x["consumer_group_id"] for x in listing["data"]]
    assert ids == sorted(ids)
    assert next(x for x in listing["data"] if x["consumer_group_id"] == g) == expected


def test_consumers_and_assignments(
    client: httpx.Client, base: str, stable_group: str, topic: str
) -> None:
    cid = cluster_id(client)
    g = stable_group
    curl = f"{base}/consumer-groups/{g}/consumers/c1"
    consumer = {
        "kind": "KafkaConsumer",
        "metadata": {
            "self": curl,
            "resource_name": f"crn:///kafka={cid}/consumer-group={g}/consumer=c1",
        },
        "cluster_id": cid,
        "consumer_group_id": g,
        "consumer_id": "c1",
        "instance_id": None,
        "client_id": "c1",
        "assignments": {"related": f"{curl}/assignments"},
    }
    listing = ok(client.get(f"{base}/consumer-groups/{g}/consumers"), m.KafkaConsumerList)
    assert listing == {
        "kind": "KafkaConsumerList",
        "metadata": {"self": f"{base}/consumer-groups/{g}/consumers", "next": None},
        "data": [consumer],
    }
    assert ok(client.get(curl), m.KafkaConsumer) == consumer
    assignments = ok(client.get(f"{curl}/assignments"), m.KafkaConsumerAssignmentList)
    assert assignments["metadata"] == {"self": f"{curl}/assignments", "next": None}
    assert [(a["topic_name"], a["partition_id"]) for a in assignments["data"]] == [
        (topic, 0),
        (topic, 1),
        (topic, 2),
    ]
    aurl = f"{curl}/assignments/{topic}/partitions/2"
    one = {
        "kind": "KafkaConsumerAssignment",
        "metadata": {
            "self": aurl,
            "resource_name": (
                f"crn:///kafka={cid}/consumer-group={g}/consumer=c1/assignment={topic}/partition=2"
            ),
        },
        "cluster_id": cid,
        "consumer_group_id": g,
        "consumer_id": "c1",
        "topic_name": topic,
        "partition_id": 2,
        "partition": {"related": f"{base}/topics/{topic}/partitions/2"},
        "lag": {"related": f"{base}/consumer-groups/{g}/lags/{topic}/partitions/2"},
    }
    assert assignments["data"][2] == one
    assert ok(client.get(aurl), m.KafkaConsumerAssignment) == one


def test_lags(client: httpx.Client, base: str, stable_group: str, topic: str) -> None:
    cid = cluster_id(client)
    g = stable_group
    body = ok(client.get(f"{base}/consumer-groups/{g}/lags"), m.KafkaConsumerLagList)
    assert body["metadata"] == {"self": f"{base}/consumer-groups/{g}/lags", "next": None}
    lurl = f"{base}/consumer-groups/{g}/lags/{topic}/partitions/0"
    lag0 = {
        "kind": "KafkaConsumerLag",
        "metadata": {
            "self": lurl,
            "resource_name": f"crn:///kafka={cid}/consumer-group={g}/lag={topic}/partition=0",
        },
        "cluster_id": cid,
        "consumer_group_id": g,
        "topic_name": topic,
        "partition_id": 0,
        "current_offset": 1,
        "log_end_offset": 4,
        "lag": 3,
        "consumer_id": "c1",
        "instance_id": None,
        "client_id": "c1",
    }
    # one lag per committed partition, largest lag first (partition 2 has no commit)
    assert [(x["partition_id"], x["lag"]) for x in body["data"]] == [(0, 3), (1, 0)]
    assert body["data"][0] == lag0
    assert ok(client.get(lurl), m.KafkaConsumerLag) == lag0
    msg = error_of(client.get(f"{base}/consumer-groups/{g}/lags/{topic}/partitions/2"), 404, 404)
    assert msg == f"Consumer group {g} has no lag for {topic}-2."


def test_lag_summary(client: httpx.Client, base: str, stable_group: str, topic: str) -> None:
    cid = cluster_id(client)
    g = stable_group
    url = f"{base}/consumer-groups/{g}/lag-summary"
    assert ok(client.get(url), m.KafkaConsumerGroupLagSummary) == {
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": {
            "self": url,
            "resource_name": f"crn:///kafka={cid}/consumer-group={g}/lag-summary",
        },
        "cluster_id": cid,
        "consumer_group_id": g,
        "max_lag_consumer_id": "c1",
        "max_lag_instance_id": None,
        "max_lag_client_id": "c1",
        "max_lag_topic_name": topic,
        "max_lag_partition_id": 0,
        "max_lag": 3,
        "total_lag": 3,
        "max_lag_consumer": {"related": f"{base}/consumer-groups/{g}/consumers/c1"},
        "max_lag_partition": {"related": f"{base}/topics/{topic}/partitions/0"},
    }


def test_lags_follow_new_records_and_commits(
    v2: V2Client, client: httpx.Client, base: str, stable_group: str, topic: str
) -> None:
    g = stable_group
    v2.produce_values(topic, ["x", "y", "z", "w", "v"], partition=1)
    lags = client.get(f"{base}/consumer-groups/{g}/lags").json()["data"]
    assert [(x["partition_id"], x["lag"]) for x in lags] == [(1, 5), (0, 3)]
    summary = client.get(f"{base}/consumer-groups/{g}/lag-summary").json()
    assert (summary["max_lag_partition_id"], summary["max_lag"], summary["total_lag"]) == (1, 5, 8)
    v2.post(
        f"/consumers/{g}/instances/c1/offsets",
        {"offsets": [{"topic": topic, "partition": 1, "offset": 6}]},
        status=200,
    )
    summary = client.get(f"{base}/consumer-groups/{g}/lag-summary").json()
    assert (summary["max_lag_partition_id"], summary["max_lag"], summary["total_lag"]) == (0, 3, 3)


def test_empty_group_keeps_lags_without_consumers(
    v2: V2Client, client: httpx.Client, base: str, stable_group: str, topic: str
) -> None:
    g = stable_group
    assert (
        client.delete(f"/consumers/{g}/instances/c1", headers={"Content-Type": v2.V2}).status_code
        == 204
    )
    body = client.get(f"{base}/consumer-groups/{g}").json()
    assert body["state"] == "EMPTY" and body["partition_assignor"] == ""
    assert client.get(f"{base}/consumer-groups/{g}/consumers").json()["data"] == []
    lag = client.get(f"{base}/consumer-groups/{g}/lags/{topic}/partitions/0").json()
    assert (lag["consumer_id"], lag["client_id"], lag["lag"]) == ("", "", 3)
    summary = client.get(f"{base}/consumer-groups/{g}/lag-summary").json()
    assert summary["max_lag_consumer_id"] == ""


def test_group_without_commits_has_no_lags(
    v2: V2Client, client: httpx.Client, base: str, group: str
) -> None:
    v2.create_consumer(group, name="solo", format="binary")
    assert client.get(f"{base}/consumer-groups/{group}").json()["state"] == "STABLE"
    for path in ("/lags", "/lag-summary", "/lags/t/partitions/0"):
        msg = error_of(client.get(f"{base}/consumer-groups/{group}{path}"), 404, 404)
        assert msg == "Consumer group offsets could not be found."
    assignments = client.get(f"{base}/consumer-groups/{group}/consumers/solo/assignments").json()
    assert assignments["data"] == []


def test_unknown_group_consumer_assignment(
    client: httpx.Client, base: str, stable_group: str, topic: str
) -> None:
    g = stable_group
    for path in (
        "",
        "/consumers",
        "/consumers/c1",
        "/consumers/c1/assignments",
        "/lags",
        "/lag-summary",
    ):
        msg = error_of(client.get(f"{base}/consumer-groups/no-such-group{path}"), 404, 404)
        assert msg == "Consumer group 'no-such-group' not found.", path
    msg = error_of(client.get(f"{base}/consumer-groups/{g}/consumers/zz"), 404, 404)
    assert msg == f"Consumer zz cannot be found in consumer group {g}."
    error_of(client.get(f"{base}/consumer-groups/{g}/consumers/zz/assignments"), 404, 404)
    msg = error_of(
        client.get(f"{base}/consumer-groups/{g}/consumers/c1/assignments/{topic}/partitions/9"),
        404,
        404,
    )
    assert msg == f"Partition {topic}-9 is not assigned to consumer c1."
    error_of(
        client.get(f"{base}/consumer-groups/{g}/consumers/c1/assignments/other/partitions/0"),
        404,
        404,
    )
    error_of(client.get(f"{base}/consumer-groups/{g}/lags/{topic}/partitions/x"), 404, 40403)
