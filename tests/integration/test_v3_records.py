"""franz's v3 range read ``GET .../topics/{t}/partitions/{p}/records``: shapes, formats,
paging, long poll and errors, against a real server."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

JSON = "application/json"


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    TypeAdapter(m.KafkaRecordList).validate_python(body)
    return body


@pytest.fixture
def base(client: httpx.Client, franz_url: str, topic: str) -> str:
    """The v3 URL of ``topic``, created with 2 partitions."""
    cluster = f"{franz_url}/v3/clusters/{cluster_id(client)}"
    assert (
        client.post(
            f"{cluster}/topics", json={"topic_name": topic, "partitions_count": 2}
        ).status_code
        == 201
    )
    return f"{cluster}/topics/{topic}"


def produce(client: httpx.Client, base: str, records: list[Any]) -> list[Any]:
    resp = client.post(f"{base}/records", json=records)
    reports = [r for r in resp.text.split("\r\n") if r]
    assert all('"error_code":200' in r for r in reports), resp.text
    return reports


def test_read_shape_and_binary_default(client: httpx.Client, base: str, topic: str) -> None:
    produce(
        client,
        base,
        [
            {
                "partition_id": 1,
                "key": {"type": "BINARY", "data": b64(b"\x01\x02")},
                "value": {"type": "STRING", "data": "hello"},
                "headers": [{"name": "a", "value": b64("1")}],
                "timestamp": "2024-02-03T04:05:06.007Z",
            },
            {"partition_id": 1},
        ],
    )
    url = f"{base}/partitions/1/records"
    body = ok(client.get(url, params={"offset": 0}))
    assert body == {
        "kind": "KafkaRecordList",
        "metadata": {"self": f"{url}?offset=0", "next": f"{url}?offset=2"},
        "cluster_id": cluster_id(client),
        "topic_name": topic,
        "partition_id": 1,
        "next_offset": 2,
        "high_watermark": 2,
        "log_start_offset": 0,
        "data": [
            {
                "partition_id": 1,
                "offset": 0,
                "timestamp": "2024-02-03T04:05:06.007Z",
                "timestamp_type": "CreateTime",
                "headers": [{"name": "a", "value": b64("1")}],
                "key": {"type": "BINARY", "data": b64(b"\x01\x02")},
                "value": {"type": "BINARY", "data": b64("hello")},
            },
            {
                "partition_id": 1,
                "offset": 1,
                "timestamp": body["data"][1]["timestamp"],
                "timestamp_type": "CreateTime",
                "headers": [],
                "key": None,
                "value": None,
            },
        ],
    }
    # no offset: from the log start
    assert ok(client.get(url))["data"] == body["data"]


def test_typed_formats_fall_back_to_binary(client: httpx.Client, base: str) -> None:
    produce(
        client,
        base,
        [
            {
                "partition_id": 0,
                "key": {"type": "STRING", "data": "k"},
                "value": {"type": "JSON", "data": [1, {"a": None}]},
            },
            {
                "partition_id": 0,
                "key": {"type": "BINARY", "data": b64(b"\xff")},
                "value": {"type": "STRING", "data": "not json"},
            },
        ],
    )
    url = f"{base}/partitions/0/records"
    data = ok(client.get(url, params={"key_format": "STRING", "value_format": "json"}))["data"]
    assert [(r["key"], r["value"]) for r in data] == [
        ({"type": "STRING", "data": "k"}, {"type": "JSON", "data": [1, {"a": None}]}),
        ({"type": "BINARY", "data": b64(b"\xff")}, {"type": "BINARY", "data": b64("not json")}),
    ]
    data = ok(client.get(url, params={"key_format": "JSON", "value_format": "STRING"}))["data"]
    assert data[0]["key"] == {"type": "BINARY", "data": b64("k")}  # "k" is not JSON
    assert data[0]["value"] == {"type": "STRING", "data": '[1,{"a":null}]'}


def test_paging_with_count_and_max_bytes(client: httpx.Client, base: str) -> None:
    produce(
        client, base, [{"partition_id": 0, "value": {"type": "STRING", "data": "x" * 100}}] * 10
    )
    url = f"{base}/partitions/0/records"
    page = ok(client.get(url, params={"offset": 0, "count": 4}))
    assert [r["offset"] for r in page["data"]] == [0, 1, 2, 3]
    assert page["next_offset"] == 4 and page["metadata"]["next"] == f"{url}?offset=4"
    page = ok(client.get(url, params={"offset": 4, "max_bytes": 1}))  # at least one record
    assert [r["offset"] for r in page["data"]] == [4]
    page = ok(client.get(url, params={"offset": 5}))
    assert [r["offset"] for r in page["data"]] == [5, 6, 7, 8, 9]
    tail = ok(client.get(url, params={"offset": 10}))
    assert tail["data"] == [] and tail["next_offset"] == 10 and tail["high_watermark"] == 10


def test_long_poll_waits_then_answers_early(
    client: httpx.Client, base: str, franz_url: str
) -> None:
    url = f"{base}/partitions/0/records"
    start = time.monotonic()
    assert ok(client.get(url, params={"offset": 0, "timeout": 300}))["data"] == []
    assert time.monotonic() - start >= 0.25

    def later() -> None:
        time.sleep(0.3)
        with httpx.Client() as c:
            c.post(
                f"{base}/records",
                json={"partition_id": 0, "value": {"type": "STRING", "data": "late"}},
            )

    thread = threading.Thread(target=later)
    thread.start()
    start = time.monotonic()
    body = ok(client.get(url, params={"offset": 0, "timeout": 10000, "value_format": "STRING"}))
    elapsed = time.monotonic() - start
    thread.join()
    assert [r["value"]["data"] for r in body["data"]] == ["late"]
    assert elapsed < 5


def test_log_append_time_topic(client: httpx.Client, franz_url: str, topic: str) -> None:
    cluster = f"{franz_url}/v3/clusters/{cluster_id(client)}"
    configs = [{"name": "message.timestamp.type", "value": "LogAppendTime"}]
    client.post(
        f"{cluster}/topics", json={"topic_name": topic, "partitions_count": 1, "configs": configs}
    )
    resp = client.post(
        f"{cluster}/topics/{topic}/records", json={"timestamp": "2001-01-01T00:00:00Z"}
    )
    report = resp.json()
    assert not report["timestamp"].startswith("2001")  # the broker's append time
    (record,) = ok(client.get(f"{cluster}/topics/{topic}/partitions/0/records"))["data"]
    assert record["timestamp_type"] == "LogAppendTime"
    assert record["timestamp"] == report["timestamp"]


def test_read_errors(client: httpx.Client, base: str, franz_url: str) -> None:
    produce(client, base, [{"partition_id": 0}])
    url = f"{base}/partitions/0/records"
    msg = error_of(client.get(url, params={"offset": 5}), 416, 41601)
    assert "out of range" in msg
    for params in (
        {"offset": -1},
        {"offset": "x"},
        {"timeout": 300001},
        {"timeout": -1},
        {"max_bytes": 0},
        {"count": 0},
    ):
        assert error_of(client.get(url, params=params), 400, 400).startswith(
            "Invalid query parameter"
        ), params
    msg = error_of(client.get(url, params={"key_format": "AVRO"}), 400, 400)
    assert msg == "Invalid query parameter key_format: 'AVRO' is not one of BINARY, JSON, STRING"
    error_of(client.get(url, params={"value_format": "text"}), 400, 400)
    cluster = base.rsplit("/topics/", 1)[0]
    no_topic = "This server does not host this topic-partition."
    assert (
        error_of(client.get(f"{cluster}/topics/nope-x/partitions/0/records"), 404, 40403)
        == no_topic
    )
    assert error_of(client.get(f"{base}/partitions/2/records"), 404, 40403) == no_topic
    assert error_of(
        client.get(f"{franz_url}/v3/clusters/nope/topics/t/partitions/0/records"), 404, 404
    )
