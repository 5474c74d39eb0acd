"""v3 batch produce (``POST .../topics/{t}/records:batch``) against a real server, as a
client of Confluent REST Proxy uses it: 207 with ``successes`` and ``failures`` in
request order, a bad entry failing alone, and the whole-request refusals (422 / 42208)
for bad or duplicate ids, an empty batch and too many entries."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

JSON = "application/json"
ANSWER = TypeAdapter(m.ProduceBatchResponse)


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


@pytest.fixture
def base(client: httpx.Client, topic: str) -> str:
    base = f"/v3/clusters/{cluster_id(client)}/topics"
    created = client.post(base, json={"topic_name": topic, "partitions_count": 2})
    assert created.status_code == 201, created.text
    return f"{base}/{topic}"


@pytest.fixture
def url(base: str) -> str:
    return base + "/records:batch"


def answer_of(resp: httpx.Response) -> dict[str, list[dict[str, Any]]]:
    assert resp.status_code == 207, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body: dict[str, list[dict[str, Any]]] = resp.json()
    ANSWER.validate_python(body)
    return body


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


def read_back(client: httpx.Client, base: str, partition: int) -> list[dict[str, Any]]:
    r = client.get(f"{base}/partitions/{partition}/records", params={"offset": 0})
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def values(records: list[dict[str, Any]]) -> list[bytes]:
    return [base64.b64decode(r["value"]["data"]) for r in records]


def test_entries_are_written_with_offsets(client: httpx.Client, base: str, url: str,
                                          topic: str) -> None:
    body = {"entries": [
        {"id": "1", "partition_id": 1, "value": {"type": "STRING", "data": "first"}},
        {"id": "two", "partition_id": 1, "key": {"type": "BINARY", "data": "a2V5"},
         "value": {"type": "JSON", "data": {"n": 2}},
         "headers": [{"name": "h", "value": base64.b64encode(b"v").decode()}],
         "timestamp": "2024-05-01T12:00:00.123Z"},
        {"id": "x_3-", "partition_id": 0, "value": {"type": "STRING", "data": "third"}},
    ]}
    answer = answer_of(client.post(url, json=body))
    assert answer["failures"] == []
    ok = answer["successes"]
    assert [s["id"] for s in ok] == ["1", "two", "x_3-"]
    assert [(s["partition_id"], s["offset"]) for s in ok] == [(1, 0), (1, 1), (0, 0)]
    assert {s["topic_name"] for s in ok} == {topic}
    assert {s["cluster_id"] for s in ok} == {cluster_id(client)}
    assert ok[0]["value"] == {"type": "STRING", "size": 5} and "key" not in ok[0]
    assert ok[1]["key"] == {"type": "BINARY", "size": 3}
    assert ok[1]["timestamp"] == "2024-05-01T12:00:00.123Z"
    stored = read_back(client, base, 1)
    assert values(stored) == [b"first", b'{"n":2}']
    assert stored[1]["headers"] == [{"name": "h", "value": "dg=="}]


def test_a_bad_entry_fails_alone(client: httpx.Client, base: str, url: str) -> None:
    body = {"entries": [
        {"id": "good-1", "partition_id": 0, "value": {"type": "STRING", "data": "a"}},
        {"id": "bad-base64", "value": {"type": "BINARY", "data": "not base64!"}},
        {"id": "no-partition", "partition_id": 9, "value": {"type": "STRING", "data": "b"}},
        {"id": "unknown-field", "value": {"type": "STRING", "data": "c"}, "colour": "red"},
        {"id": "good-2", "partition_id": 0, "value": {"type": "STRING", "data": "d"}},
    ]}
    answer = answer_of(client.post(url, json=body))
    assert [(s["id"], s["offset"]) for s in answer["successes"]] == [("good-1", 0), ("good-2", 1)]
    failures = {f["id"]: f for f in answer["failures"]}
    assert list(failures) == ["bad-base64", "no-partition", "unknown-field"]
    assert failures["bad-base64"]["error_code"] == 400
    assert failures["no-partition"]["error_code"] == 40402
    assert "colour" in failures["unknown-field"]["message"]
    assert values(read_back(client, base, 0)) == [b"a", b"d"]


@pytest.mark.parametrize("ids", [["1", "1"], ["a", "b", "a"]])
def test_duplicate_ids_refuse_the_whole_batch(client: httpx.Client, base: str, url: str,
                                              ids: list[str]) -> None:
    body = {"entries": [{"id": i, "partition_id": 0, "value": {"type": "STRING", "data": i}}
                        for i in ids]}
    assert "not distinct" in error_of(client.post(url, json=body), 422, 42208)
    assert read_back(client, base, 0) == []  # nothing written


@pytest.mark.parametrize("bad_id", [None, 1, "", "x" * 81, "has space", "é"])
def test_a_bad_id_refuses_the_whole_batch(client: httpx.Client, url: str, bad_id: Any) -> None:
    entry: dict[str, Any] = {"value": {"type": "STRING", "data": "v"}}
    if bad_id is not None:
        entry["id"] = bad_id
    body = {"entries": [{"id": "ok", "value": {"type": "STRING", "data": "v"}}, entry]}
    error_of(client.post(url, json=body), 422, 42208)


def test_an_empty_batch_is_refused(client: httpx.Client, url: str) -> None:
    assert "empty" in error_of(client.post(url, json={"entries": []}), 422, 42208)


def test_too_many_entries_are_refused(client: httpx.Client, base: str, url: str) -> None:
    def batch(n: int) -> dict[str, Any]:
        return {"entries": [{"id": str(i), "partition_id": 0,
                             "value": {"type": "STRING", "data": str(i)}} for i in range(n)]}

    message = error_of(client.post(url, json=batch(11)), 422, 42208)
    assert "at most 10" in message and "api.v3.produce.batch.maximum.entries" in message
    assert read_back(client, base, 0) == []
    assert len(answer_of(client.post(url, json=batch(10)))["successes"]) == 10


@pytest.mark.parametrize(("body", "status", "code"), [
    (b'{"entries": [', 400, 400),  # malformed
    (b"[]", 400, 400),  # not an object
    (b'{"entries": {"id": "1"}}', 400, 400),  # entries not a list
    (b'{"entries": "1"}', 400, 400),
    (b'{"entries": [], "records": []}', 400, 400),  # unknown top-level field
    (b'{"entries": [{"id": "1", "value": ' + b"[" * 70 + b"]" * 70 + b"}]}", 400, 400),
    (b"", 422, 42206),  # empty body
])
def test_wrong_types_are_refused(client: httpx.Client, url: str, body: bytes, status: int,
                                 code: int) -> None:
    resp = client.post(url, content=body, headers={"Content-Type": JSON})
    error_of(resp, status, code)


def test_wrong_types_inside_an_entry_fail_that_entry(client: httpx.Client, url: str) -> None:
    body = {"entries": [
        {"id": "p", "partition_id": "0", "value": {"type": "STRING", "data": "v"}},
        {"id": "t", "value": {"type": 7, "data": "v"}},
        {"id": "s", "value": {"type": "STRING", "data": 5}},
        {"id": "h", "headers": {"name": "h"}, "value": {"type": "STRING", "data": "v"}},
        {"id": "ts", "timestamp": 12, "value": {"type": "STRING", "data": "v"}},
    ]}
    answer = answer_of(client.post(url, json=body))
    assert answer["successes"] == []
    assert [(f["id"], f["error_code"]) for f in answer["failures"]] == [
        ("p", 400), ("t", 400), ("s", 400), ("h", 400), ("ts", 400)]


def test_content_type_and_size_are_checked(client: httpx.Client, url: str) -> None:
    resp = client.post(url, content=b'{"entries": []}', headers={"Content-Type": "text/plain"})
    error_of(resp, 415, 415)


def test_unknown_topic_without_auto_creation_is_404(strict_url: str) -> None:
    with httpx.Client(base_url=strict_url, timeout=30.0) as strict:
        url = f"/v3/clusters/{cluster_id(strict)}/topics/no-such-topic/records:batch"
        body = {"entries": [{"id": "1", "value": {"type": "STRING", "data": "v"}}]}
        resp = strict.post(url, json=body)
        assert resp.status_code == 404, resp.text
        assert resp.json()["error_code"] in (404, 40401, 40403)


def test_the_route_and_its_bounds_are_in_the_openapi_document(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/v3/clusters/{cluster_id}/topics/{topic_name}/records:batch"]["post"]
    assert {"207", "400", "413", "415", "422"} <= op["responses"].keys()
    assert "max.request.size" in op["description"] and "64 levels" in op["description"]
    schemas = doc["components"]["schemas"]
    entries = schemas["ProduceBatchRequest"]["properties"]["entries"]
    assert entries["maxItems"] == 50 and entries["minItems"] == 1
    entry = schemas["ProduceBatchRequestEntry"]
    assert entry["properties"]["id"]["maxLength"] == 80 and "id" in entry["required"]
    assert {"successes", "failures"} <= schemas["ProduceBatchResponse"]["properties"].keys()
