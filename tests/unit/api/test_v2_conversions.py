"""Pure pieces of api/v2: embedded formats, produce answers, consumer settings, seeks."""

from __future__ import annotations

from typing import Any

import pytest

from api.content_types import EmbeddedFormat
from api.errors import ApiError
from api.v2.consumer_records import render_until_bad_json
from api.v2.consumers import create_kwargs
from api.v2.embedded import b64decode, b64encode, produce_records, render_records
from api.v2.offsets import commit_offsets, timestamp_ms
from api.v2.produce import parse_acks, produce_body
from core.broker.errors import UnknownPartitionError
from core.broker.types import RecordResult, TopicPartition
from core.storage.errors import KafkaStorageError, MessageTooLargeError
from core.storage.records import Record

B, J = EmbeddedFormat.BINARY, EmbeddedFormat.JSON
TP = TopicPartition("t", 0)


def test_base64_is_standard_and_padded() -> None:
    assert b64encode(b"\xfb\xff") == "+/8="
    assert b64encode(None) is None
    assert b64decode("+/8=", "x") == b"\xfb\xff"
    assert b64decode("", "x") == b""
    for bad in ("-_8=", "+/8", "+/8=\n", "a b=", "é"):
        with pytest.raises(ApiError) as info:
            b64decode(bad, "records[0].value")
        assert (info.value.status, info.value.code) == (400, 400)
        assert info.value.message.startswith("records[0].value=")
        assert info.value.message.endswith("is not a valid base64 string.")
    with pytest.raises(ApiError, match="is not a base64 string"):
        b64decode(5, "v")


def test_produce_records_binary() -> None:
    rows: list[dict[str, Any]] = [
        {
            "key": "aw==",
            "value": "dg==",
            "partition": 2,
            "timestamp": 7,
            "headers": [{"key": "h", "value": "eA=="}, {"key": "n", "value": None}],
        },
        {"value": None},
        {},
    ]
    a, b, c = produce_records(B, rows)
    assert (a.key, a.value, a.partition, a.timestamp) == (b"k", b"v", 2, 7)
    assert a.headers == [("h", b"x"), ("n", None)]
    assert (b.key, b.value, b.headers, b.partition) == (None, None, [], None)
    assert (c.key, c.value) == (None, None)


def test_produce_records_binary_names_the_bad_field() -> None:
    with pytest.raises(ApiError, match=r"records\[1\]\.key="):
        produce_records(B, [{"value": "dg=="}, {"key": "%%", "value": "dg=="}])
    with pytest.raises(ApiError, match=r"records\[0\]\.headers\[1\]\.value="):
        produce_records(B, [{"headers": [{"key": "a", "value": None}, {"key": "b", "value": "!"}]}])


def test_produce_records_json() -> None:
    [r] = produce_records(J, [{"key": "k", "value": {"a": [1, None, "é"]}}])
    assert r.key == b'"k"' and r.value == '{"a":[1,null,"é"]}'.encode()
    [n] = produce_records(J, [{"value": None}])
    assert n.value is None and n.key is None
    with pytest.raises(ApiError, match=r"records\[0\]\.value"):
        produce_records(J, [{"value": 2**70}])


def _rec(offset: int, value: bytes | None, key: bytes | None = None, ts_type: int = 0) -> Record:
    return Record(offset, 1000 + offset, key, value, [("h", b"1"), ("n", None)], ts_type)


def test_render_binary_and_json() -> None:
    [b] = render_records(B, [(TP, _rec(3, b"v", b"k", 1))])
    assert b == {
        "topic": "t",
        "key": "aw==",
        "value": "dg==",
        "partition": 0,
        "offset": 3,
        "timestamp": 1003,
        "timestamp_type": "LogAppendTime",
        "headers": [{"key": "h", "value": "MQ=="}, {"key": "n", "value": None}],
    }
    [j] = render_records(J, [(TP, _rec(4, b'{"a":1}', b"null"))])
    assert (j["key"], j["value"], j["timestamp_type"]) == (None, {"a": 1}, "CreateTime")


def test_render_until_bad_json_keeps_other_partitions() -> None:
    other = TopicPartition("t", 1)
    items = [
        (TP, _rec(0, b"1")),
        (other, _rec(0, b"2")),
        (TP, _rec(1, b"oops")),
        (other, _rec(1, b"3")),
        (TP, _rec(2, b"4")),
    ]
    rows, bad, first = render_until_bad_json(J, items)
    assert [(r["partition"], r["value"]) for r in rows] == [(0, 1), (1, 2), (1, 3)]
    assert bad == {TP: 1}
    assert first is not None and first.offset == 1
    rows, bad, first = render_until_bad_json(B, items)
    assert len(rows) == 5 and not bad and first is None


def test_produce_body() -> None:
    ok = RecordResult(0, 5, 1)
    too_big = RecordResult(None, None, None, MessageTooLargeError("too big"))
    flaky = RecordResult(None, None, None, KafkaStorageError())
    status, body = produce_body([ok, too_big, flaky], strict=False)
    assert status == 200
    assert body == {
        "offsets": [
            {"partition": 0, "offset": 5, "error_code": None, "error": None},
            {"partition": None, "offset": None, "error_code": 413, "error": "too big"},
            {
                "partition": None,
                "offset": None,
                "error_code": 50003,
                "error": "Retriable Kafka error.",
            },
        ],
        "key_schema_id": None,
        "value_schema_id": None,
    }
    status, body = produce_body([ok, too_big, flaky], strict=True)
    assert status == 413 and body["error_code"] == 413 and body["message"] == "too big"
    assert produce_body([ok], strict=True)[0] == 200
    status, body = produce_body(
        [RecordResult(None, None, None, UnknownPartitionError())], strict=True
    )
    assert (status, body["error_code"]) == (404, 40402)


def test_parse_acks() -> None:
    assert [parse_acks(x) for x in (None, "0", "1", "all", "ALL", "-1")] == [1, 0, 1, -1, -1, -1]
    with pytest.raises(ApiError):
        parse_acks("2")


def test_create_kwargs() -> None:
    assert create_kwargs({}) == {"name": None, "format": "binary"}
    for fmt in ("avro", "JsonSchema", "PROTOBUF"):
        assert create_kwargs({"format": fmt})["format"] == fmt.lower()
    kw = create_kwargs(
        {
            "id": "i",
            "name": "n",
            "format": "JSON",
            "auto.offset.reset": "Earliest",
            "auto.commit.enable": "False",
            "responseMinBytes": 5,
            "requestWaitMs": 10,
        }
    )
    assert kw == {
        "name": "i",
        "format": "json",
        "auto_offset_reset": "earliest",
        "auto_commit": False,
        "fetch_min_bytes": 5,
        "request_timeout_ms": 10,
    }
    assert create_kwargs({"fetch.min.bytes": 1, "responseMinBytes": 9})["fetch_min_bytes"] == 1


@pytest.mark.parametrize(
    ("req", "status", "code"),
    [
        ({"format": "xml"}, 422, 42204),
        ({"auto.offset.reset": "smallest"}, 422, 42204),
        ({"auto.commit.enable": "yes"}, 422, 42204),
        ({"fetch.min.bytes": 10_000_001}, 422, 40001),
        ({"consumer.request.timeout.ms": -5}, 422, 42204),
        ({"name": "a/b"}, 422, 42204),
        ({"name": " "}, 422, 42204),
    ],
)
def test_create_kwargs_rejects(req: dict[str, Any], status: int, code: int) -> None:
    with pytest.raises(ApiError) as info:
        create_kwargs(req)
    assert (info.value.status, info.value.code) == (status, code)


def test_timestamps_and_commit_offsets() -> None:
    assert timestamp_ms("2023-11-14T22:13:20Z", "t") == 1_700_000_000_000
    assert timestamp_ms("2023-11-14T22:13:20", "t") == 1_700_000_000_000  # naive is UTC
    assert timestamp_ms("2023-11-14T23:13:20.5+01:00", "t") == 1_700_000_000_500
    assert timestamp_ms(42, "t") == 42
    with pytest.raises(ApiError, match="ISO-8601"):
        timestamp_ms("soon", "timestamps[0].timestamp")
    rows = [
        {"topic": "t", "partition": 0, "offset": 20},
        {"topic": "t", "partition": 1, "offset": 0, "metadata": "m"},
    ]
    assert commit_offsets(rows) == {TP: (21, ""), TopicPartition("t", 1): (1, "m")}
