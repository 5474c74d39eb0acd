"""v3 produce (``POST .../topics/{t}/records``): one record, records back to back, arrays,
chunked and truly streaming bodies; per-record reports and whole-request errors."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

JSON = "application/json"
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
REPORTS = TypeAdapter(list[m.ProduceReport])


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


def reports_of(resp: httpx.Response) -> list[dict[str, Any]]:
    """The answer's reports: HTTP 200, each line a report ending in CRLF."""
    assert resp.status_code == 200, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    text = resp.text
    assert text.endswith("\r\n"), text
    out = [json.loads(line) for line in text[:-2].split("\r\n")]
    REPORTS.validate_python(out)
    return out


@pytest.fixture
def url(client: httpx.Client, topic: str) -> str:
    """The records URL of ``topic`` (created with 2 partitions)."""
    base = f"/v3/clusters/{cluster_id(client)}"
    assert (
        client.post(f"{base}/topics", json={"topic_name": topic, "partitions_count": 2}).status_code
        == 201
    )
    return f"{base}/topics/{topic}/records"


def post(client: httpx.Client, url: str, body: bytes | str | Iterator[bytes]) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    return client.post(url, content=content, headers={"Content-Type": JSON})


def read(client: httpx.Client, topic: str, partition: int, **params: Any) -> list[dict[str, Any]]:
    path = f"/v3/clusters/{cluster_id(client)}/topics/{topic}/partitions/{partition}/records"
    resp = client.get(path, params={"offset": 0, **params})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


# --- success -------------------------------------------------------------------------------------


def test_one_record_full_report(client: httpx.Client, url: str, topic: str) -> None:
    record = {
        "partition_id": 1,
        "headers": [{"name": "trace", "value": b64("123")}, {"name": "trace", "value": None}],
        "key": {"type": "STRING", "data": "user-1"},
        "value": {"type": "JSON", "data": {"clicks": 3, "tags": ["a"]}},
        "timestamp": "2024-05-01T12:00:00.123Z",
    }
    resp = client.post(url, json=record)
    assert resp.text.count("\r\n") == 1
    assert reports_of(resp) == [
        {
            "error_code": 200,
            "cluster_id": cluster_id(client),
            "topic_name": topic,
            "partition_id": 1,
            "offset": 0,
            "timestamp": "2024-05-01T12:00:00.123Z",
            "key": {"type": "STRING", "size": 6},
            "value": {"type": "JSON", "size": len(b'{"clicks":3,"tags":["a"]}')},
        }
    ]
    (stored,) = read(client, topic, 1, key_format="STRING", value_format="JSON")
    assert stored == {
        "partition_id": 1,
        "offset": 0,
        "timestamp": "2024-05-01T12:00:00.123Z",
        "timestamp_type": "CreateTime",
        "headers": [{"name": "trace", "value": b64("123")}, {"name": "trace", "value": None}],
        "key": {"type": "STRING", "data": "user-1"},
        "value": {"type": "JSON", "data": {"clicks": 3, "tags": ["a"]}},
    }
    # the v2 view of the same bytes
    v2 = client.get(f"/topics/{topic}/partitions/1/records", params={"offset": 0}).json()
    assert base64.b64decode(v2[0]["value"]) == b'{"clicks":3,"tags":["a"]}'
    assert v2[0]["timestamp"] == 1714564800123


def test_binary_and_null_data(client: httpx.Client, url: str, topic: str) -> None:
    resp = client.post(
        url,
        json={
            "partition_id": 0,
            "key": {"type": "BINARY", "data": b64(b"\x00\xffkey")},
            "value": {"type": "BINARY", "data": None},
        },
    )
    (report,) = reports_of(resp)
    assert report["key"] == {"type": "BINARY", "size": 5}
    assert report["value"] == {"type": "BINARY", "size": 0}
    (stored,) = read(client, topic, 0)
    assert stored["key"] == {"type": "BINARY", "data": b64(b"\x00\xffkey")}
    assert stored["value"] is None


def test_no_key_no_value_and_default_timestamp(client: httpx.Client, url: str, topic: str) -> None:
    before = time.time()
    (report,) = reports_of(client.post(url, json={"partition_id": 0}))
    assert set(report) == {
        "error_code",
        "cluster_id",
        "topic_name",
        "partition_id",
        "offset",
        "timestamp",
    }
    assert ISO_MS.match(report["timestamp"])
    (stored,) = read(client, topic, 0)
    assert stored["key"] is None and stored["value"] is None and stored["headers"] == []
    stamp = (
        time.mktime(time.strptime(stored["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    )
    assert abs(stamp - before) < 60


def test_naive_and_offset_timestamps(client: httpx.Client, url: str, topic: str) -> None:
    body = (
        '{"partition_id":0,"timestamp":"2024-01-02T03:04:05"}'
        '{"partition_id":0,"timestamp":"2024-01-02T05:04:05.5+02:00"}'
    )
    reports = reports_of(post(client, url, body))
    assert [r["timestamp"] for r in reports] == [
        "2024-01-02T03:04:05.000Z",
        "2024-01-02T03:04:05.500Z",
    ]


def test_concatenated_records(client: httpx.Client, url: str, topic: str) -> None:
    one = '{"partition_id":0,"value":{"type":"STRING","data":"%d"}}'
    body = one % 0 + one % 1 + "\n" + one % 2 + " \r\n\t" + one % 3
    reports = reports_of(post(client, url, body))
    assert [(r["error_code"], r["partition_id"], r["offset"]) for r in reports] == [
        (200, 0, i) for i in range(4)
    ]
    assert [r["value"]["data"] for r in read(client, topic, 0, value_format="STRING")] == [
        "0",
        "1",
        "2",
        "3",
    ]


def test_json_array_of_records(client: httpx.Client, url: str, topic: str) -> None:
    body = [{"partition_id": 1, "value": {"type": "STRING", "data": s}} for s in ("a", "b", "c")]
    reports = reports_of(client.post(url, json=body))
    assert [r["offset"] for r in reports] == [0, 1, 2]


def test_many_records_keep_order_across_partitions(
    client: httpx.Client, url: str, topic: str
) -> None:
    body = "".join(
        f'{{"key":{{"type":"STRING","data":"k{i}"}},"value":{{"type":"STRING","data":"v{i}"}}}}'
        for i in range(300)
    )
    reports = reports_of(post(client, url, body))
    assert len(reports) == 300 and all(r["error_code"] == 200 for r in reports)
    # keyed records land by key hash; offsets per partition are consecutive in request order
    for p in (0, 1):
        mine = [r["offset"] for r in reports if r["partition_id"] == p]
        assert mine == list(range(len(mine)))
    stored = {
        r["key"]["data"]: r["value"]["data"]
        for p in (0, 1)
        for r in read(client, topic, p, key_format="STRING", value_format="STRING")
    }
    assert stored == {f"k{i}": f"v{i}" for i in range(300)}


def test_chunked_body_split_anywhere(client: httpx.Client, url: str, topic: str) -> None:
    body = "".join(
        f'{{"partition_id":1,"value":{{"type":"STRING","data":"é{i}"}}}}' for i in range(20)
    ).encode()
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]  # splits values and UTF-8 sequences
    reports = reports_of(post(client, url, iter(pieces)))
    assert [r["offset"] for r in reports] == list(range(20))
    assert read(client, topic, 1, value_format="STRING")[19]["value"]["data"] == "é19"


def test_reports_stream_before_the_body_ends(
    client: httpx.Client, url: str, franz_server: Any
) -> None:
    """A long-lived chunked request: each record's report arrives while the client
    still holds the connection open and has not finished the body."""
    sock = socket.create_connection(("127.0.0.1", franz_server.port), timeout=10)
    try:
        head = (
            f"POST {url} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode())

        def chunk(data: bytes) -> None:
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

        def receive_until(marker: bytes) -> bytes:
            got = b""
            while marker not in got:
                part = sock.recv(65536)
                assert part, got
                got += part
            return got

        chunk(b'{"partition_id":0,"value":{"type":"STRING","data":"first"}}')
        first = receive_until(b'"offset":0')
        assert first.startswith(b"HTTP/1.1 200 OK")
        chunk(b'{"partition_id":0,"value":{"type":"STR')  # half a record: nothing yet
        chunk(b'ING","data":"second"}}')
        receive_until(b'"offset":1')
        sock.sendall(b"0\r\n\r\n")
        receive_until(b"0\r\n\r\n")  # the response ends with the body
    finally:
        sock.close()


def test_auto_created_topic(client: httpx.Client, topic: str) -> None:
    url = f"/v3/clusters/{cluster_id(client)}/topics/{topic}/records"
    body = (
        '{"partition_id":2,"value":{"type":"STRING","data":"a"}}'
        '{"partition_id":5,"value":{"type":"STRING","data":"b"}}'
    )
    reports = reports_of(post(client, url, body))  # num.partitions=3: partition 5 is missing
    assert (reports[0]["error_code"], reports[0]["partition_id"]) == (200, 2)
    assert reports[1] == {
        "error_code": 40402,
        "message": f"Partition 5 of topic '{topic}' not found.",
    }
    assert (
        client.get(f"/v3/clusters/{cluster_id(client)}/topics/{topic}").json()["partitions_count"]
        == 3
    )


# --- per-record failures ------------------------------------------------------------------

BAD_RECORDS = [
    (
        {"value": {"type": "BINARY", "data": 1}},
        400,
        "Bad Request: value.data=1 is not a base64 string.",
    ),
    (
        {"value": {"type": "BINARY", "data": "***"}},
        400,
        'Bad Request: value.data="***" is not a valid base64 string.',
    ),
    ({"key": {"type": "STRING", "data": 5}}, 400, "Bad Request: key.data=5 is not a string."),
    (
        {"value": {"type": "TEXT", "data": "x"}},
        400,
        'Bad Request: value.type="TEXT" is not one of BINARY, JSON, STRING, AVRO, JSONSCHEMA, '
        "PROTOBUF.",
    ),
    # the schema types and no type: tests/integration/test_schema_produce.py
    (
        {"value": {"data": "x"}},
        42207,
        "Error serializing message. Error when fetching latest schema version. subject = "
        "{topic}-value: Subject '{topic}-value' not found.",
    ),
    (
        {"value": {"type": "AVRO", "data": {}}},
        400,
        "Bad Request: value: type AVRO needs schema, the schema text (without a type, "
        "schema_id, schema_version or the subject's latest version is used).",
    ),
    (
        {"value": {"type": "AVRO", "schema": "{bad", "data": {}}},
        42205,
        "Invalid schema: the value schema: Invalid AVRO schema: not JSON: unexpected "
        "character, expected a string key: line 1 column 2 (char 1)",
    ),
    (
        {"value": {"type": "JSON", "data": 1, "schema_id": 3}},
        400,
        "Bad Request: value: schema_id cannot be used with type JSON.",
    ),
    (
        {"value": {"type": "JSON", "data": 1, "extra": 3}},
        400,
        "Bad Request: Unrecognized field: value.extra",
    ),
    ({"value": "plain"}, 400, 'Bad Request: value="plain" is not an object with type and data.'),
    ({"partition_id": -1}, 40402, "Partition -1 of topic '{topic}' not found."),
    ({"partition_id": 2}, 40402, "Partition 2 of topic '{topic}' not found."),
    ({"partition_id": "0"}, 400, 'Bad Request: partition_id="0" is not an integer.'),
    ({"partition_id": True}, 400, "Bad Request: partition_id=true is not an integer."),
    (
        {"headers": [{"name": "h", "value": 7}]},
        400,
        "Bad Request: headers[0].value=7 is not a base64 string.",
    ),
    (
        {"headers": [{"name": 1, "value": None}]},
        400,
        "Bad Request: headers[0].name=1 is not a string.",
    ),
    ({"headers": {"h": "x"}}, 400, 'Bad Request: headers={"h":"x"} is not a list.'),
    (
        {"headers": [{"key": "h", "value": None}]},
        400,
        "Bad Request: Unrecognized field: headers[0].key",
    ),
    (
        {"timestamp": "yesterday"},
        400,
        'Bad Request: timestamp="yesterday" is not an ISO-8601 date-time.',
    ),
    (
        {"timestamp": 1700000000000},
        400,
        "Bad Request: timestamp=1700000000000 is not an ISO-8601 string.",
    ),
    (
        {"timestamp": "1960-01-01T00:00:00Z"},
        400,
        'Bad Request: timestamp="1960-01-01T00:00:00Z" is before 1970.',
    ),
    ({"offset": 3}, 400, "Bad Request: Unrecognized field: offset"),
    (17, 400, "Bad Request: record=17 is not a JSON object."),
]


@pytest.mark.parametrize(("record", "code", "message"), BAD_RECORDS)
def test_bad_record_fails_alone(
    client: httpx.Client, url: str, topic: str, record: Any, code: int, message: str
) -> None:
    good = {"partition_id": 0, "value": {"type": "STRING", "data": "ok"}}
    reports = reports_of(client.post(url, json=[good, record, good]))
    assert reports[1] == {"error_code": code, "message": message.replace("{topic}", topic)}
    assert [(r["error_code"], r["offset"]) for r in (reports[0], reports[2])] == [
        (200, 0),
        (200, 1),
    ]
    assert len(read(client, topic, 0)) == 2


def test_record_over_max_message_bytes(limits_server: Any) -> None:
    with httpx.Client(base_url=limits_server.url) as c:
        url = f"/v3/clusters/{cluster_id(c)}/topics/v3-limits/records"
        big = {"partition_id": 0, "value": {"type": "STRING", "data": "x" * 3000}}
        small = {"partition_id": 0, "value": {"type": "STRING", "data": "fine"}}
        reports = reports_of(c.post(url, json=[small, big, small]))
        assert [r["error_code"] for r in reports] == [200, 413, 200]
        assert "max.message.bytes=2048" in reports[1]["message"]
        # one pending record above max.request.size (64 KiB) fails the request up front
        chunks = iter([b'{"value":', b'{"type":"STRING","data":"' + b"y" * 70000, b'"}}'])
        msg = error_of(c.post(url, content=chunks, headers={"Content-Type": JSON}), 413, 413)
        assert msg == "A record of more than 65536 bytes (max.request.size)"


def test_malformed_json_after_records_ends_the_stream(
    client: httpx.Client, url: str, topic: str
) -> None:
    good = '{"partition_id":0,"value":{"type":"STRING","data":"ok"}}'
    reports = reports_of(post(client, url, good + good + '{"partition_id":0,' + good))
    assert [r["error_code"] for r in reports] == [200, 200, 400]
    assert reports[2]["message"].startswith("Malformed JSON: ")
    assert len(read(client, topic, 0)) == 2


# --- whole-request failures ---------------------------------------------------------------


def test_whole_request_errors(client: httpx.Client, url: str, topic: str) -> None:
    empty = "Payload error. Request body is empty. Data is required."
    assert error_of(post(client, url, ""), 422, 42206) == empty
    assert error_of(post(client, url, " \n\t "), 422, 42206) == empty
    assert error_of(post(client, url, "{oops"), 400, 400).startswith("Malformed JSON: ")
    assert error_of(post(client, url, '{"a":1'), 400, 400).startswith("Malformed JSON: ")
    assert error_of(post(client, url, b"\xff\xfe{}"), 400, 400).startswith("Malformed JSON: ")
    body = b'{"value":{"type":"STRING","data":"x"}}'
    for ctype in ("text/plain", "application/vnd.kafka.json.v2+json", "application/octet-stream"):
        resp = client.post(url, content=body, headers={"Content-Type": ctype})
        assert error_of(resp, 415, 415) == "HTTP 415 Unsupported Media Type"
    error_of(client.post(url, content=body), 415, 415)
    assert read(client, topic, 0) == [] and read(client, topic, 1) == []


def test_unknown_topic_without_auto_creation(strict_url: str) -> None:
    with httpx.Client(base_url=strict_url) as c:
        url = f"/v3/clusters/{cluster_id(c)}/topics/never-made/records"
        msg = error_of(c.post(url, json={"value": {"type": "STRING", "data": "x"}}), 404, 40403)
        assert msg == "This server does not host this topic-partition."
        assert error_of(c.get(f"/v3/clusters/{cluster_id(c)}/topics/never-made"), 404, 40403)
