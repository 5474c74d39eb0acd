"""franz's stateless range read ``GET /topics/{t}/partitions/{p}/records``."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import V2Client

BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


def _get(
    client: httpx.Client,
    topic: str,
    partition: int | str = 0,
    accept: str | None = None,
    **params: Any,
) -> httpx.Response:
    headers = {} if accept is None else {"Accept": accept}
    return client.get(
        f"/topics/{topic}/partitions/{partition}/records", params=params, headers=headers
    )


def test_range_read_shape_and_headers(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce(
        topic, [{"key": v2.b64(f"k{i}"), "value": v2.b64(f"v{i}")} for i in range(5)], partition=0
    )
    resp = _get(client, topic, offset=1)
    assert resp.status_code == 200 and resp.headers["content-type"] == BINARY
    rows = resp.json()
    assert [r["offset"] for r in rows] == [1, 2, 3, 4]
    assert set(rows[0]) == {
        "topic",
        "key",
        "value",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "headers",
    }
    assert (rows[0]["topic"], rows[0]["partition"]) == (topic, 0)
    assert v2.unb64(rows[0]["key"]) == b"k1" and v2.unb64(rows[0]["value"]) == b"v1"
    assert resp.headers["X-Franz-Next-Offset"] == "5"
    assert resp.headers["X-Franz-High-Watermark"] == "5"
    assert resp.headers["X-Franz-Log-Start-Offset"] == "0"


def test_count_and_tiny_max_bytes(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["x" * 500 for _ in range(6)], partition=1)
    resp = _get(client, topic, 1, offset=0, count=2)
    assert [r["offset"] for r in resp.json()] == [0, 1]
    assert resp.headers["X-Franz-Next-Offset"] == "2"
    resp = _get(client, topic, 1, offset=3, max_bytes=1)
    rows = resp.json()
    assert rows and rows[0]["offset"] == 3  # one record even when it is larger than max_bytes
    assert resp.headers["X-Franz-Next-Offset"] == str(rows[-1]["offset"] + 1)


def test_a_few_records_of_a_large_batch_read_as_the_whole_batch_renders_them(
        v2: V2Client, client: httpx.Client, topic: str) -> None:
    """A count-limited read renders only the records it answers (the batch is not
    rendered whole yet); reads of the whole batch afterwards, and again, agree."""
    v2.produce(topic, [{"key": v2.b64(f"k{i}") if i % 3 else None, "value": v2.b64(f"v{i}")}
                       for i in range(200)], partition=2)
    few = {off: _get(client, topic, 2, offset=off, count=n).json()
           for off, n in ((0, 1), (118, 3), (199, 1), (150, 50))}
    whole = _get(client, topic, 2, offset=0).json()
    assert [r["offset"] for r in whole] == list(range(200))
    for off, rows in few.items():
        assert rows == whole[off:off + len(rows)] and rows[0]["offset"] == off
    assert v2.unb64(few[118][0]["key"]) == b"k118" and few[0][0]["key"] is None
    assert _get(client, topic, 2, offset=118, count=3).json() == whole[118:121]


def test_at_the_end_is_empty_and_beyond_is_416(
    v2: V2Client, client: httpx.Client, topic: str
) -> None:
    v2.produce_values(topic, ["a", "b"], partition=0)
    resp = _get(client, topic, offset=2)
    assert resp.status_code == 200 and resp.json() == []
    assert resp.headers["X-Franz-Next-Offset"] == "2"
    v2.error_of(_get(client, topic, offset=3), 416, 41601)


def test_json_accept(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce(topic, [{"value": {"a": 1}}, {"value": "s"}], fmt="json", partition=0)
    for accept in (JSON, "application/json"):
        resp = _get(client, topic, accept=accept, offset=0)
        assert resp.status_code == 200 and resp.headers["content-type"] == accept
        assert [r["value"] for r in resp.json()] == [{"a": 1}, "s"]
    v2.error_of(
        _get(client, topic, accept="application/vnd.kafka.xml.v2+json", offset=0), 406, 40601
    )
    # avro is served (test_schema_consume.py); JSON bytes are not in its wire format
    v2.error_of(
        _get(client, topic, accept="application/vnd.kafka.avro.v2+json", offset=0), 408, 40801
    )
    v2.error_of(_get(client, topic, accept="text/csv", offset=0), 406, 406)


def test_json_accept_stops_at_non_json(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce(topic, [{"value": 1}], fmt="json", partition=0)
    v2.produce_values(topic, ["{broken"], partition=0)
    resp = _get(client, topic, accept=JSON, offset=0)
    assert [r["value"] for r in resp.json()] == [1]
    assert resp.headers["X-Franz-Next-Offset"] == "1"
    v2.error_of(_get(client, topic, accept=JSON, offset=1), 408, 40801)


def test_long_poll(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=2)

    def later() -> None:
        time.sleep(0.5)
        v2.produce_values(topic, ["b"], partition=2)

    t = threading.Thread(target=later)
    start = time.monotonic()
    t.start()
    with httpx.Client(base_url=str(client.base_url), timeout=60) as other:
        resp = _get(other, topic, 2, offset=1, timeout=15000)
    t.join()
    elapsed = time.monotonic() - start
    assert [v2.unb64(r["value"]) for r in resp.json()] == [b"b"]
    assert 0.4 < elapsed < 5.0


@pytest.mark.parametrize(
    ("params", "partition"),
    [
        ({}, 0),
        ({"offset": -1}, 0),
        ({"offset": "x"}, 0),
        ({"offset": 0, "max_bytes": 0}, 0),
        ({"offset": 0, "timeout": -1}, 0),
        ({"offset": 0, "count": 0}, 0),
        ({"offset": 0, "timeout": 10_000_000}, 0),
    ],
)
def test_bad_parameters_are_400(
    v2: V2Client, client: httpx.Client, topic: str, params: dict[str, Any], partition: int
) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    v2.error_of(_get(client, topic, partition, **params), 400, 400)


def test_unknown_topic_and_partition(v2: V2Client, client: httpx.Client, topic: str) -> None:
    start = time.monotonic()
    v2.error_of(_get(client, "no-such-topic", offset=0, timeout=10000), 404, 40401)
    assert time.monotonic() - start < 2.0
    v2.produce_values(topic, ["a"], partition=0)
    for p in (3, -1, "x"):
        v2.error_of(_get(client, topic, p, offset=0), 404, 40402)
