"""v2 produce: formats, response shape, franz extensions and every kind of bad input."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import V2Client

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


def _post(
    client: httpx.Client, path: str, body: Any, ctype: str | None = BINARY, **params: Any
) -> httpx.Response:
    content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
    headers = {} if ctype is None else {"Content-Type": ctype}
    return client.post(path, content=content, headers=headers, params=params)


def _read(
    client: httpx.Client, topic: str, partition: int, offset: int = 0, accept: str = BINARY
) -> list[dict[str, Any]]:
    resp = client.get(
        f"/topics/{topic}/partitions/{partition}/records",
        params={"offset": offset},
        headers={"Accept": accept},
    )
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def test_binary_produce_response_shape(v2: V2Client, client: httpx.Client, topic: str) -> None:
    body = {
        "records": [
            {"key": v2.b64("k"), "value": v2.b64("v1")},
            {"value": v2.b64(b"\x00\xff")},
            {"key": v2.b64("k"), "value": None},
        ]
    }
    resp = _post(client, f"/topics/{topic}", body)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == V2
    out = resp.json()
    assert set(out) == {"offsets", "key_schema_id", "value_schema_id"}
    assert out["key_schema_id"] is None and out["value_schema_id"] is None
    assert len(out["offsets"]) == 3
    for o in out["offsets"]:
        assert set(o) == {"partition", "offset", "error_code", "error"}
        assert o["error_code"] is None and o["error"] is None
        assert o["partition"] in (0, 1, 2) and o["offset"] >= 0
    assert out["offsets"][0]["partition"] == out["offsets"][2]["partition"]  # same key
    p, off = out["offsets"][1]["partition"], out["offsets"][1]["offset"]
    rec = next(r for r in _read(client, topic, p) if r["offset"] == off)
    assert v2.unb64(rec["value"]) == b"\x00\xff" and rec["key"] is None


def test_partition_endpoint_and_record_partition_wins(
    v2: V2Client, client: httpx.Client, topic: str
) -> None:
    body = {"records": [{"value": v2.b64("a")}, {"value": v2.b64("b"), "partition": 2}]}
    out = _post(client, f"/topics/{topic}/partitions/1", body).json()
    assert [o["partition"] for o in out["offsets"]] == [1, 2]
    assert [o["offset"] for o in out["offsets"]] == [0, 0]


@pytest.mark.parametrize("ctype", [JSON, "application/json", "application/json; charset=utf-8"])
def test_json_produce_round_trip(
    v2: V2Client, client: httpx.Client, topic: str, ctype: str
) -> None:
    values = [{"a": 1, "b": [True, None]}, "text", 3.5, [1, 2], None]
    body = {
        "records": [{"key": {"id": i}, "value": v, "partition": 0} for i, v in enumerate(values)]
    }
    out = _post(client, f"/topics/{topic}", body, ctype).json()
    assert [o["offset"] for o in out["offsets"]] == [0, 1, 2, 3, 4]
    got = _read(client, topic, 0, accept=JSON)
    assert [r["value"] for r in got] == values
    assert [r["key"] for r in got] == [{"id": i} for i in range(5)]
    raw = _read(client, topic, 0)  # the same bytes seen in binary: compact UTF-8 JSON
    assert v2.unb64(raw[0]["value"]) == b'{"a":1,"b":[true,null]}'


def test_headers_and_timestamp_extension(v2: V2Client, client: httpx.Client, topic: str) -> None:
    rec = {
        "value": v2.b64("v"),
        "partition": 0,
        "timestamp": 1_700_000_000_000,
        "headers": [
            {"key": "h1", "value": v2.b64("x")},
            {"key": "h1", "value": None},
            {"key": "h2", "value": v2.b64("")},
        ],
    }
    _post(client, f"/topics/{topic}", {"records": [rec]})
    got = _read(client, topic, 0)[0]
    assert got["timestamp"] == 1_700_000_000_000 and got["timestamp_type"] == "CreateTime"
    assert got["headers"] == [
        {"key": "h1", "value": v2.b64("x")},
        {"key": "h1", "value": None},
        {"key": "h2", "value": ""},
    ]


def test_default_timestamp_is_now(v2: V2Client, client: httpx.Client, topic: str) -> None:
    before = int(time.time() * 1000)
    v2.produce_values(topic, ["x"], partition=0)
    ts = _read(client, topic, 0)[0]["timestamp"]
    assert before - 5000 <= ts <= int(time.time() * 1000) + 5000


@pytest.mark.parametrize("acks", ["0", "1", "all", "-1"])
def test_acks_extension(v2: V2Client, client: httpx.Client, topic: str, acks: str) -> None:
    resp = _post(
        client, f"/topics/{topic}/partitions/0", {"records": [{"value": v2.b64("a")}]}, acks=acks
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["offsets"][0]["error_code"] is None


def test_bad_acks_is_400(v2: V2Client, client: httpx.Client, topic: str) -> None:
    resp = _post(client, f"/topics/{topic}", {"records": [{"value": v2.b64("a")}]}, acks="2")
    v2.error_of(resp, 400, 400)


def test_too_large_record_fails_alone(v2: V2Client, client: httpx.Client, topic: str) -> None:
    big = v2.b64(b"x" * 1_100_000)  # above the default max.message.bytes (1 MiB)
    body = {"records": [{"value": v2.b64("small")}, {"value": big}, {"value": v2.b64("ok")}]}
    out = _post(client, f"/topics/{topic}/partitions/0", body).json()
    first, bad, last = out["offsets"]
    assert first["error_code"] is None and last["error_code"] is None
    assert bad == {"partition": None, "offset": None, "error_code": 413, "error": bad["error"]}
    assert bad["error"]
    strict = _post(client, f"/topics/{topic}/partitions/0", body, strict="true")
    assert strict.status_code == 413
    sbody = strict.json()
    assert sbody["error_code"] == 413 and sbody["message"] and len(sbody["offsets"]) == 3


@pytest.mark.parametrize(
    "ctype",
    [
        None,
        "text/plain",
        V2,
        "application/octet-stream",
        "application/x-www-form-urlencoded",
        "application/vnd.kafka.binary.v1+json",
    ],
)
def test_wrong_content_type_is_415(
    v2: V2Client, client: httpx.Client, topic: str, ctype: str | None
) -> None:
    resp = _post(client, f"/topics/{topic}", {"records": [{"value": v2.b64("a")}]}, ctype)
    assert v2.error_of(resp, 415, 415) == "HTTP 415 Unsupported Media Type"


@pytest.mark.parametrize("fmt", ["avro", "jsonschema", "protobuf"])
def test_schema_formats_write_with_the_schema_registry(
    v2: V2Client, client: httpx.Client, topic: str, fmt: str
) -> None:
    """The schema formats are served (tests/integration/test_schema_produce.py): a
    schema id the registry lacks is 422 / 42207, a value without a schema 422 / 42202."""
    ctype = f"application/vnd.kafka.{fmt}.v2+json"
    resp = _post(client, f"/topics/{topic}",
                 {"value_schema_id": 2_000_000, "records": [{"value": {"a": 1}}]}, ctype)
    assert "schemaId = 2000000" in v2.error_of(resp, 422, 42207)
    resp = _post(client, f"/topics/{topic}", {"records": [{"value": {"a": 1}}]}, ctype)
    assert "does not include value schema" in v2.error_of(resp, 422, 42202)


@pytest.mark.parametrize(
    ("body", "status", "code", "text"),
    [
        (b'{"records": [', 400, 400, "Malformed JSON"),
        (b"not json at all", 400, 400, "Malformed JSON"),
        (b"", 422, 422, "empty"),
        (b'{"records": []}', 422, 422, "records may not be empty"),
        (b"{}", 422, 422, "records may not be null"),
        (b'{"records": [{"value": "YQ=="}], "extra": 1}', 400, 400, "extra"),
        (b'{"records": [{"value": "YQ==", "valu": "x"}]}', 400, 400, "records[0].valu"),
        (b'{"records": {"value": "YQ=="}}', 400, 400, "records"),
        (b'[{"value": "YQ=="}]', 400, 400, ""),
        (b'{"records": [{"value": "not base64!"}]}', 400, 400, "is not a valid base64 string"),
        (b'{"records": [{"value": "YQ"}]}', 400, 400, "is not a valid base64 string"),
        (b'{"records": [{"value": "YQ==", "key": "a-_b"}]}', 400, 400, "records[0].key"),
        (b'{"records": [{"value": 12}]}', 400, 400, "records[0].value"),
        (b'{"records": [{"value": "YQ==", "partition": "zero"}]}', 400, 400, "partition"),
        (b'{"records": [{"value": "YQ==", "timestamp": -5}]}', 422, 422, "timestamp"),
        (
            b'{"records": [{"value": "YQ==", "headers": [{"key": "h", "value": "%%"}]}]}',
            400,
            400,
            "headers[0].value",
        ),
    ],
)
def test_bad_binary_bodies(
    v2: V2Client, client: httpx.Client, topic: str, body: bytes, status: int, code: int, text: str
) -> None:
    msg = v2.error_of(_post(client, f"/topics/{topic}", body), status, code)
    assert text in msg
    v2.error_of(client.get(f"/topics/{topic}"), 404, 40401)  # nothing was written or created


def test_bad_json_format_body(v2: V2Client, client: httpx.Client, topic: str) -> None:
    resp = _post(client, f"/topics/{topic}", b'{"records": [{"value": 1, "oops": 2}]}', JSON)
    assert "records[0].oops" in v2.error_of(resp, 400, 400)


def test_unknown_partition(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    for path in (
        f"/topics/{topic}/partitions/3",
        f"/topics/{topic}/partitions/-1",
        f"/topics/{topic}/partitions/abc",
    ):
        v2.error_of(_post(client, path, {"records": [{"value": v2.b64("a")}]}), 404, 40402)
    for p in (5, -1):
        resp = _post(
            client, f"/topics/{topic}", {"records": [{"value": v2.b64("a"), "partition": p}]}
        )
        v2.error_of(resp, 404, 40402)
    assert client.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 1


def test_unknown_topic_fails_fast_without_auto_creation(strict_url: str) -> None:
    with httpx.Client(base_url=strict_url, timeout=30) as c:
        for path in ("/topics/missing", "/topics/missing/partitions/0"):
            start = time.monotonic()
            resp = _post(c, path, {"records": [{"value": "YQ=="}]})
            assert time.monotonic() - start < 2.0
            assert resp.status_code == 404 and resp.json()["error_code"] == 40401, resp.text


def test_auto_creation_makes_the_topic(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["a"])
    assert len(client.get(f"/topics/{topic}").json()["partitions"]) == 3
