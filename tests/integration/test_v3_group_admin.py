"""franz's v3 group admin routes (api/v3/group_admin.py) against a real server: a
group's offsets, offset reset (``offsets:alter``) and group deletion."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3.group_admin import KafkaConsumerGroupOffsetList

if TYPE_CHECKING:
    from conftest import V2Client

JSON = "application/json"


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


@pytest.fixture
def base(client: httpx.Client, franz_url: str) -> str:
    cluster = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    return f"{franz_url}/v3/clusters/{cluster}"


@pytest.fixture
def committed_group(v2: V2Client, client: httpx.Client, base: str, topic: str,
                    group: str) -> str:
    """``group`` without members, committed at 1 of 3 records on partition 0 of
    ``topic`` (2 partitions; partition 1 holds 2 records and no commit)."""
    resp = client.post(f"{base}/topics", json={"topic_name": topic, "partitions_count": 2})
    assert resp.status_code == 201, resp.text
    v2.produce_values(topic, ["a", "b", "c"], partition=0)
    v2.produce_values(topic, ["d", "e"], partition=1)
    v2.create_consumer(group, name="c1", **{"auto.commit.enable": "false"})
    inst = f"/consumers/{group}/instances/c1"
    v2.post(inst + "/offsets", {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]},
            status=200)
    assert client.delete(inst).status_code == 204
    return group


@pytest.fixture
def active_member(v2: V2Client, client: httpx.Client, committed_group: str,
                  topic: str) -> Iterator[str]:
    """A member ``c2`` of ``committed_group``, subscribed to ``topic``."""
    v2.create_consumer(committed_group, name="c2", **{"auto.commit.enable": "false"})
    inst = f"/consumers/{committed_group}/instances/c2"
    v2.post(inst + "/subscription", {"topics": [topic]})
    v2.records(inst, timeout=200)
    yield "c2"
    client.delete(inst)


def offsets(client: httpx.Client, base: str, group: str) -> list[dict[str, Any]]:
    resp = client.get(f"{base}/consumer-groups/{group}/offsets")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    TypeAdapter(KafkaConsumerGroupOffsetList).validate_python(body)
    assert body["kind"] == "KafkaConsumerGroupOffsetList"
    assert body["metadata"]["self"] == f"{base}/consumer-groups/{group}/offsets"
    return list(body["data"])


def test_offsets_of_a_group_without_members(client: httpx.Client, base: str,
                                            committed_group: str, topic: str) -> None:
    rows = offsets(client, base, committed_group)
    assert [(r["topic_name"], r["partition_id"]) for r in rows] == [(topic, 0)]
    row = rows[0]
    assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (1, 3, 2)
    assert (row["consumer_id"], row["host"], row["client_id"]) == ("", "", "")


def test_offsets_show_assigned_partitions_without_commits(
    client: httpx.Client, base: str, committed_group: str, active_member: str, topic: str
) -> None:
    rows = {r["partition_id"]: r for r in offsets(client, base, committed_group)}
    assert set(rows) == {0, 1}
    assert rows[0]["consumer_id"] == active_member and rows[0]["client_id"] == active_member
    assert (rows[1]["current_offset"], rows[1]["log_end_offset"], rows[1]["lag"]) == (None, 2, None)


def test_offsets_of_unknown_group(client: httpx.Client, base: str, group: str) -> None:
    resp = client.get(f"{base}/consumer-groups/{group}/offsets")
    error_of(resp, 404, 404)


def test_alter_offsets(client: httpx.Client, base: str, committed_group: str, topic: str) -> None:
    url = f"{base}/consumer-groups/{committed_group}/offsets:alter"
    body = {"data": [{"topic_name": topic, "partition_id": 0, "offset": 3},
                     {"topic_name": topic, "partition_id": 1, "offset": 0}]}
    resp = client.post(url, json={**body, "validate_only": True})
    assert resp.status_code == 204, resp.text
    assert [r["current_offset"] for r in offsets(client, base, committed_group)] == [1]
    resp = client.post(url, json=body)
    assert resp.status_code == 204, resp.text
    rows = offsets(client, base, committed_group)
    got = [(r["partition_id"], r["current_offset"], r["lag"]) for r in rows]
    assert got == [(0, 3, 0), (1, 0, 2)]


def test_alter_offsets_creates_a_new_group(client: httpx.Client, base: str, topic: str,
                                           group: str) -> None:
    assert client.post(f"{base}/topics", json={"topic_name": topic}).status_code == 201
    resp = client.post(f"{base}/consumer-groups/{group}/offsets:alter",
                       json={"data": [{"topic_name": topic, "partition_id": 0, "offset": 0}]})
    assert resp.status_code == 204, resp.text
    assert [r["current_offset"] for r in offsets(client, base, group)] == [0]


def test_alter_offsets_refused_while_the_group_has_members(
    client: httpx.Client, base: str, committed_group: str, active_member: str, topic: str
) -> None:
    url = f"{base}/consumer-groups/{committed_group}/offsets:alter"
    body = {"data": [{"topic_name": topic, "partition_id": 0, "offset": 0}]}
    for validate_only in (True, False):
        msg = error_of(client.post(url, json={**body, "validate_only": validate_only}), 400, 40002)
        assert msg.startswith(f"Assignments can only be reset if the group '{committed_group}'")


def test_alter_offsets_bad_requests(client: httpx.Client, base: str, committed_group: str,
                                    topic: str) -> None:
    url = f"{base}/consumer-groups/{committed_group}/offsets:alter"

    def entry(**kw: Any) -> dict[str, Any]:
        return {"data": [{"topic_name": topic, "partition_id": 0, "offset": 0, **kw}]}

    error_of(client.post(url, json=entry(topic_name="no-such-topic")), 404, 40403)
    error_of(client.post(url, json=entry(partition_id=9)), 404, 40403)
    error_of(client.post(url, json=entry(offset=-1)), 422, 42206)
    error_of(client.post(url, json=entry(extra=1)), 400, 400)
    error_of(client.post(url, json={"data": []}), 422, 42206)
    error_of(client.post(url, content=b"{", headers={"Content-Type": JSON}), 400, 400)
    error_of(client.post(url, content=b"x", headers={"Content-Type": "text/plain"}), 415, 415)
    assert [r["current_offset"] for r in offsets(client, base, committed_group)] == [1]


def test_delete_group(client: httpx.Client, base: str, committed_group: str) -> None:
    url = f"{base}/consumer-groups/{committed_group}"
    assert client.delete(url).status_code == 204
    error_of(client.get(url), 404, 404)
    error_of(client.delete(url), 404, 404)


def test_delete_group_with_members_is_refused(client: httpx.Client, base: str,
                                              committed_group: str, active_member: str) -> None:
    url = f"{base}/consumer-groups/{committed_group}"
    error_of(client.delete(url), 400, 40002)
    assert client.get(url).status_code == 200


def test_unknown_cluster(client: httpx.Client, franz_url: str, group: str) -> None:
    error_of(client.delete(f"{franz_url}/v3/clusters/nope/consumer-groups/{group}"), 404, 404)


def test_openapi_documents_group_admin(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    group = "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}"
    assert {"get", "delete"} <= set(paths[group])
    assert "get" in paths[group + "/offsets"]
    alter = paths[group + "/offsets:alter"]["post"]
    schema = alter["requestBody"]["content"][JSON]["schema"]
    assert schema["required"] == ["data"] and "$defs" not in str(schema)
