"""Hostile inputs against a real ``franz serve`` (issue 14, "holds under abuse"): every
one gets a clear 4xx with Confluent's ``error_code``, changes nothing, and never a 500
or a poisoned consumer group. The limits are listed in docs/limits.md."""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from conftest import FranzServer

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSONV2 = "application/vnd.kafka.json.v2+json"
JSON = "application/json"
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: consumer.request.timeout.max.ms of this module's broker
WAIT_CEILING_MS = 1500


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    srv = FranzServer(
        tmp_path_factory.mktemp("hostile") / "data",
        ["num.partitions=2", f"consumer.request.timeout.max.ms={WAIT_CEILING_MS}"],
    )
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def http(server: FranzServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60.0) as c:
        yield c


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    """A Confluent error answer with this status and code; its message."""
    assert resp.status_code == status, (resp.status_code, resp.text[:500])
    body = resp.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    return str(body["message"])


def cluster(http: httpx.Client) -> str:
    return "/v3/clusters/" + str(http.get("/v3/clusters").json()["data"][0]["cluster_id"])


def produce(http: httpx.Client, topic: str, values: list[str], partition: int = 0) -> list[int]:
    resp = http.post(f"/topics/{topic}/partitions/{partition}",
                     json={"records": [{"value": b64(v)} for v in values]},
                     headers={"Content-Type": BINARY})
    assert resp.status_code == 200, resp.text
    offsets = resp.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets), offsets
    return [o["offset"] for o in offsets]


def end_offset(http: httpx.Client, topic: str, partition: int = 0) -> int:
    resp = http.get(f"/topics/{topic}/partitions/{partition}/offsets")
    assert resp.status_code == 200, resp.text
    return int(resp.json()["end_offset"])


def create_consumer(http: httpx.Client, group: str, **config: Any) -> httpx.Response:
    return http.post(f"/consumers/{group}", json=config, headers={"Content-Type": V2})


def new_instance(http: httpx.Client, group: str, **config: Any) -> str:
    resp = create_consumer(http, group, **config)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["base_uri"])


def v3_reports(resp: httpx.Response) -> list[dict[str, Any]]:
    assert resp.status_code == 200, (resp.status_code, resp.text[:500])
    text = resp.text
    assert text.endswith("\r\n"), text[-200:]
    return [json.loads(line) for line in text[:-2].split("\r\n")]


def v3_post(http: httpx.Client, path: str, body: bytes | str | Iterator[bytes]) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    return http.post(path, content=content, headers={"Content-Type": JSON})


def group_exists(http: httpx.Client, group: str) -> bool:
    resp = http.get(f"{cluster(http)}/consumer-groups/{group}")
    assert resp.status_code in (200, 404), resp.text
    return resp.status_code == 200


def nest(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- 1. consumer group and instance names ------------------------------------------------------


def test_huge_instance_name_is_refused_and_the_group_keeps_working(http: httpx.Client) -> None:
    group = uid("g")
    msg = error_of(create_consumer(http, group, name="a" * 40_000), 422, 42204)
    assert "249" in msg and len(msg) < 500
    # the group is not poisoned: later joins work, the old name was never taken
    for name in ("ok", "b" * 249):
        new_instance(http, group, name=name)
    error_of(create_consumer(http, group, name="c" * 250), 422, 42204)
    listed = http.get(f"{cluster(http)}/consumer-groups/{group}/consumers").json()["data"]
    assert sorted(c["consumer_id"] for c in listed) == sorted(["ok", "b" * 249])
    base = new_instance(http, group, name="later")
    assert http.delete(base, headers={"Content-Type": V2}).status_code == 204
    edge = "G." + "x" * 247  # the longest group id, and every allowed character
    assert new_instance(http, edge, name="A-b_c.9").endswith(f"/{edge}/instances/A-b_c.9")
    assert group_exists(http, edge)


def test_subscribing_to_impossible_topics_is_400_and_the_group_keeps_working(
    http: httpx.Client,
) -> None:
    group, topic = uid("g"), uid("t")
    produce(http, topic, ["x"])
    base = new_instance(http, group, name="a", **{"auto.offset.reset": "earliest"})
    for topics in (["x" * 40_000], [topic, "<bad>"], [".."]):
        resp = http.post(base + "/subscription", json={"topics": topics},
                         headers={"Content-Type": V2})
        assert error_of(resp, 400, 40002).startswith("Topic name is invalid"), topics
    assert http.get(base + "/subscription").json() == {"topics": []}
    new_instance(http, group, name="b")  # later joins still work
    assert http.post(base + "/subscription", json={"topics": [topic]},
                     headers={"Content-Type": V2}).status_code == 204
    rows = []
    for _ in range(20):
        rows += http.get(base + "/records", params={"timeout": 500},
                         headers={"Accept": BINARY}).json()
        if rows:
            break
    assert rows and base64.b64decode(rows[0]["value"]) == b"x"


def test_bad_instance_names_are_422_42204_and_create_nothing(http: httpx.Client) -> None:
    group = uid("g")
    for name in ("..", ".", "a\x00b", "<script>", "a/b", "é", "a b", "-" * 250):
        for field in ("name", "id"):
            error_of(create_consumer(http, group, **{field: name}), 422, 42204)
    error_of(create_consumer(http, group, name=""), 422, 42204)
    assert not group_exists(http, group)


def test_bad_group_ids_are_400_40002_and_create_nothing(http: httpx.Client) -> None:
    bad = [("%3Cscript%3E", "<script>"), ("%2E%2E", ".."), ("a%00b", "a\x00b"),
           ("g" * 250, "g" * 250), ("a%20b", "a b"), ("%C3%A9", "é")]
    for path, _group in bad:
        msg = error_of(create_consumer(http, path, name="c"), 400, 40002)
        assert msg.startswith("Invalid group id")
    groups = [g["consumer_group_id"] for g in
              http.get(f"{cluster(http)}/consumer-groups").json()["data"]]
    assert not {group for _path, group in bad} & set(groups)


def test_v3_offset_reset_refuses_a_bad_new_group(http: httpx.Client) -> None:
    topic = uid("t")
    produce(http, topic, ["x"])
    body = {"data": [{"topic_name": topic, "partition_id": 0, "offset": 0}]}
    for group in ("g" * 40_000, "%3Cscript%3E", "%2E%2E"):
        resp = http.post(f"{cluster(http)}/consumer-groups/{group}/offsets:alter", json=body)
        error_of(resp, 400, 40002)
    good = uid("g")
    assert http.post(f"{cluster(http)}/consumer-groups/{good}/offsets:alter",
                     json=body).status_code == 204
    assert group_exists(http, good)


# --- 2. int64 and int32 ranges -----------------------------------------------------------------


def test_v2_produce_timestamp_past_int64_is_422(http: httpx.Client) -> None:
    topic = uid("t")
    produce(http, topic, ["seed"])
    for ctype, value in ((BINARY, b64("x")), (JSONV2, {"a": 1})):
        for stamp in (2**63, 2**64, 10**30):
            body = {"records": [{"value": value, "timestamp": stamp, "partition": 0}]}
            resp = http.post(f"/topics/{topic}", json=body, headers={"Content-Type": ctype})
            assert "records[0].timestamp" in error_of(resp, 422, 422)
    assert end_offset(http, topic) == 1
    # the largest int64 is fine, and reads back
    body = {"records": [{"value": b64("max"), "timestamp": INT64_MAX, "partition": 0}]}
    resp = http.post(f"/topics/{topic}", json=body, headers={"Content-Type": BINARY})
    assert resp.status_code == 200 and resp.json()["offsets"][0]["offset"] == 1, resp.text
    rows = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 1},
                    headers={"Accept": BINARY}).json()
    assert rows[0]["timestamp"] == INT64_MAX


def test_v2_produce_partition_past_int32_is_422(http: httpx.Client) -> None:
    topic = uid("t")
    produce(http, topic, ["seed"])
    body = {"records": [{"value": b64("x"), "partition": 2**31}]}
    resp = http.post(f"/topics/{topic}", json=body, headers={"Content-Type": BINARY})
    assert "records[0].partition" in error_of(resp, 422, 422)
    assert end_offset(http, topic, 0) + end_offset(http, topic, 1) == 1


def test_v2_commit_and_seek_offsets_near_int64(http: httpx.Client) -> None:
    topic, group = uid("t"), uid("g")
    produce(http, topic, ["a", "b"])
    base = new_instance(http, group, name="c", **{"auto.commit.enable": "false"})
    tps = {"partitions": [{"topic": topic, "partition": 0}]}
    assert http.post(base + "/assignments", json=tps,
                     headers={"Content-Type": V2}).status_code == 204
    ok = {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}
    assert http.post(base + "/offsets", json=ok, headers={"Content-Type": V2}).status_code == 200
    for offset in (2**63 - 1, 2**63, 2**64):
        bad = {"offsets": [{"topic": topic, "partition": 0, "offset": offset}]}
        assert "offset" in error_of(
            http.post(base + "/offsets", json=bad, headers={"Content-Type": V2}), 422, 422)
        error_of(http.post(base + "/positions", json=bad, headers={"Content-Type": V2}),
                 422, 422)
    bad_partition = {"offsets": [{"topic": topic, "partition": 2**31, "offset": 0}]}
    error_of(http.post(base + "/offsets", json=bad_partition, headers={"Content-Type": V2}),
             422, 422)
    for stamp, status in ((2**63, 422), (2**64, 422), ("1969-12-31T23:59:59Z", 400)):
        seek = {"offsets": [{"topic": topic, "partition": 0, "offset": 1}],
                "timestamps": [{"topic": topic, "partition": 0, "timestamp": stamp}]}
        error_of(http.post(base + "/positions", json=seek, headers={"Content-Type": V2}),
                 status, status)
    # nothing moved: the commit is still 0 (stored 1), and reading starts there
    got = http.request("GET", base + "/offsets", json=tps, headers={"Content-Type": V2})
    assert got.json()["offsets"][0]["offset"] == 1
    records = http.get(base + "/records", headers={"Accept": BINARY}).json()
    assert [base64.b64decode(r["value"]) for r in records] == [b"b"]
    # the largest accepted offset commits (stored + 1 = 2^63-1) and reads back
    top = {"offsets": [{"topic": topic, "partition": 0, "offset": 2**63 - 2}]}
    assert http.post(base + "/offsets", json=top, headers={"Content-Type": V2}).status_code == 200
    got = http.request("GET", base + "/offsets", json=tps, headers={"Content-Type": V2})
    assert got.json()["offsets"][0]["offset"] == INT64_MAX


def test_v3_offset_reset_near_int64(http: httpx.Client) -> None:
    topic, group = uid("t"), uid("g")
    produce(http, topic, ["x"])
    url = f"{cluster(http)}/consumer-groups/{group}/offsets:alter"
    for entry in ({"offset": 2**63}, {"offset": 2**63 - 1}, {"partition_id": 2**31}):
        row = {"topic_name": topic, "partition_id": 0, "offset": 0, **entry}
        error_of(http.post(url, json={"data": [row]}), 422, 42206)
    assert not group_exists(http, group)
    row = {"topic_name": topic, "partition_id": 0, "offset": 2**63 - 2}
    assert http.post(url, json={"data": [row]}).status_code == 204
    offsets = http.get(f"{cluster(http)}/consumer-groups/{group}/offsets").json()["data"]
    assert offsets[0]["current_offset"] == 2**63 - 2


def test_v3_produce_timestamp_and_partition_out_of_range(http: httpx.Client) -> None:
    topic = uid("t")
    path = f"{cluster(http)}/topics/{topic}/records"
    good = '{"partition_id":0,"value":{"type":"STRING","data":"ok"}}'
    bad_time = '{"partition_id":0,"value":{"type":"STRING","data":"x"},"timestamp":"%s"}'
    chunks = [good.encode(),
              (bad_time % "+10000-01-01T00:00:00Z").encode(),
              (bad_time % "1969-12-31T23:59:59Z").encode(),
              b'{"partition_id":%d,"value":{"type":"STRING","data":"y"}}' % 2**31,
              b'{"partition_id":%d,"value":{"type":"STRING","data":"y"}}' % 2**70,
              b'{"partition_id":0,"value":{"type":"JSON","data":%d}}' % 2**70]
    reports = v3_reports(v3_post(http, path, iter(chunks)))  # chunked: integers stay exact
    assert [r["error_code"] for r in reports] == [200, 400, 400, 400, 400, 400], reports
    assert "partition_id" in reports[3]["message"] and "out of range" in reports[3]["message"]
    assert "value.data" in reports[5]["message"]
    assert end_offset(http, topic, 0) == 1


def test_range_read_parameters_out_of_range(http: httpx.Client) -> None:
    topic = uid("t")
    produce(http, topic, ["x"])
    v3 = f"{cluster(http)}/topics/{topic}/partitions/0/records"
    for path in (f"/topics/{topic}/partitions/0/records", v3):
        for params in ({"offset": 2**63}, {"offset": 0, "count": 2**31},
                       {"offset": 0, "max_bytes": 2**31}, {"offset": 0, "timeout": 2**31},
                       {"offset": 0, "timeout": WAIT_CEILING_MS + 1}):
            msg = error_of(http.get(path, params=params), 400, 400)
            assert msg.startswith("Invalid query parameter"), msg
        assert http.get(path, params={"offset": 0, "timeout": WAIT_CEILING_MS}).status_code == 200


# --- 3. deep JSON ------------------------------------------------------------------------------


def test_deep_json_is_400_on_every_json_route(http: httpx.Client) -> None:
    topic, group = uid("t"), uid("g")
    produce(http, topic, ["x"])
    deep = nest(256)
    base = new_instance(http, group, name="c")
    c = cluster(http)
    cases = [
        ("POST", f"{c}/topics/{topic}/records", JSON, '{"value":{"type":"JSON","data":%s}}'),
        ("POST", f"{c}/topics", JSON, '{"topic_name":"x","configs":%s}'),
        ("POST", f"{c}/topics/{topic}/configs:alter", JSON, '{"data":%s}'),
        ("PUT", f"{c}/topics/{topic}/configs/retention.ms", JSON, '{"value":%s}'),
        ("POST", f"{c}/consumer-groups/{group}/offsets:alter", JSON, '{"data":%s}'),
        ("POST", f"{c}/reassignments", JSON, '{"version":1,"partitions":%s}'),
        ("POST", f"{c}/preferred-replica-election", JSON, '{"partitions":%s}'),
        ("POST", f"/topics/{topic}", JSONV2, '{"records":[{"value":%s}]}'),
        ("POST", f"/topics/{topic}", BINARY, '{"records":[{"value":%s}]}'),
        ("POST", f"/consumers/{uid('g')}", V2, '{"name":%s}'),
        ("POST", base + "/subscription", V2, '{"topics":%s}'),
        ("POST", base + "/assignments", V2, '{"partitions":%s}'),
        ("POST", base + "/positions", V2, '{"offsets":%s}'),
        ("POST", base + "/offsets", V2, '{"offsets":%s}'),
    ]
    for method, path, ctype, template in cases:
        resp = http.request(method, path, content=(template % deep).encode(),
                            headers={"Content-Type": ctype})
        msg = error_of(resp, 400, 400)
        assert "nested deeper than 64 levels" in msg, (path, msg)
    assert end_offset(http, topic) + end_offset(http, topic, 1) == 1


def test_json_depth_limit_is_64_levels(http: httpx.Client) -> None:
    topic = uid("t")
    path = f"{cluster(http)}/topics/{topic}/records"
    # the record object is level 1, value level 2, its data starts at level 3
    def record(data: str) -> str:
        return '{"partition_id":0,"value":{"type":"JSON","data":' + data + "}}"

    ok = v3_reports(v3_post(http, path, record(nest(62))))
    assert ok[0]["error_code"] == 200, ok
    error_of(v3_post(http, path, record(nest(63))), 400, 400)
    # brackets inside strings do not count
    text = json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": "[" * 500}})
    assert v3_reports(v3_post(http, path, text))[0]["error_code"] == 200
    # v2 json: records object 1, records array 2, record 3, the value from 4
    body = '{"records":[{"partition":0,"value":%s}]}'
    resp = http.post(f"/topics/{topic}", content=body % nest(61),
                     headers={"Content-Type": JSONV2})
    assert resp.status_code == 200, resp.text
    error_of(http.post(f"/topics/{topic}", content=body % nest(62),
                       headers={"Content-Type": JSONV2}), 400, 400)
    assert end_offset(http, topic) == 3


def _stream(server: FranzServer, path: str, pieces: list[bytes]) -> list[dict[str, Any]]:
    """POST ``pieces`` as a chunked body over a raw socket, sending each piece only once
    the reports of the records before it came back; the reports."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {JSON}\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())
        got = b""
        for i, piece in enumerate(pieces):
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            if i == 0:
                while b'"error_code":200' not in got:
                    part = sock.recv(65536)
                    assert part, got
                    got += part
        sock.sendall(b"0\r\n\r\n")
        while not got.endswith(b"0\r\n\r\n"):
            part = sock.recv(65536)
            assert part, got
            got += part
    finally:
        sock.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    text = b""
    while body:  # de-chunk
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        text, body = text + rest[:n], rest[n + 2:]
    return [json.loads(line) for line in text.decode().split("\r\n") if line]


def test_deep_json_in_a_stream_ends_it_after_the_good_records(server: FranzServer,
                                                              http: httpx.Client) -> None:
    topic = uid("t")
    path = f"{cluster(http)}/topics/{topic}/records"
    good = b'{"partition_id":0,"value":{"type":"STRING","data":"ok"}}'
    for depth in (100, 3000):
        deep = (b'{"partition_id":0,"value":{"type":"JSON","data":' + nest(depth).encode()
                + b"}}")
        reports = _stream(server, path, [good, deep[:150], deep[150:], good])
        assert [r["error_code"] for r in reports] == [200, 400], reports
        assert "nested deeper than 64 levels" in reports[1]["message"]
    assert end_offset(http, topic, 0) == 2
    # a whole body (Content-Length) holding deep JSON is refused whole: nothing written
    body = good + b'{"partition_id":0,"value":{"type":"JSON","data":' + nest(100).encode() + b"}}"
    error_of(v3_post(http, path, body), 400, 400)
    assert end_offset(http, topic, 0) == 2


# --- 4. v3 key.type / value.type ---------------------------------------------------------------


def test_v3_type_that_is_not_a_string_is_a_400_report(http: httpx.Client) -> None:
    topic = uid("t")
    path = f"{cluster(http)}/topics/{topic}/records"
    good = {"partition_id": 0, "value": {"type": "STRING", "data": "ok"}}
    kinds: list[Any] = [{}, [], {"a": 1}, ["BINARY"], 5, 1.5, True]
    for side in ("key", "value"):
        bad = [{"partition_id": 0, side: {"type": kind, "data": "x"}} for kind in kinds]
        reports = v3_reports(http.post(path, json=[good, *bad, good]))
        codes = [r["error_code"] for r in reports]
        assert codes == [200, *[400] * len(kinds), 200], reports
        for r in reports[1:-1]:
            assert r["message"].startswith(f"Bad Request: {side}.type="), r
            assert "is not one of BINARY, JSON, STRING" in r["message"], r
    assert end_offset(http, topic, 0) == 4


# --- 5. waits ----------------------------------------------------------------------------------


def test_consumer_request_timeout_out_of_range_is_422(http: httpx.Client) -> None:
    group = uid("g")
    for wait in (2**70, 2**31, -1):
        for field in ("consumer.request.timeout.ms", "requestWaitMs"):
            msg = error_of(create_consumer(http, group, name="c", **{field: wait}), 422, 42204)
            assert "consumer.request.timeout.ms" in msg and str(INT32_MAX) in msg, msg
    assert not group_exists(http, group)


def test_every_read_wait_is_capped_by_the_broker_ceiling(http: httpx.Client) -> None:
    topic, group = uid("t"), uid("g")
    produce(http, topic, ["seed"])
    base = new_instance(http, group, name="c", **{
        "consumer.request.timeout.ms": INT32_MAX, "auto.offset.reset": "latest"})
    tps = {"partitions": [{"topic": topic, "partition": 0}]}
    assert http.post(base + "/assignments", json=tps,
                     headers={"Content-Type": V2}).status_code == 204
    for params in ({}, {"timeout": INT32_MAX}):
        start = time.monotonic()
        resp = http.get(base + "/records", params=params, headers={"Accept": BINARY})
        elapsed = time.monotonic() - start
        assert resp.status_code == 200 and resp.json() == [], resp.text
        assert WAIT_CEILING_MS / 1000 - 0.3 < elapsed < WAIT_CEILING_MS / 1000 + 5, elapsed
    produce(http, topic, ["after"])
    # <= 0 means the default, as in Confluent (its clients send timeout=-1)
    resp = http.get(base + "/records", params={"timeout": -1, "max_bytes": -1},
                    headers={"Accept": BINARY})
    assert resp.status_code == 200 and len(resp.json()) == 1, resp.text
    for params in ({"timeout": -(2**31) - 1}, {"timeout": 2**31}, {"max_bytes": -(2**31) - 1},
                   {"max_bytes": 2**31}):
        msg = error_of(http.get(base + "/records", params=params, headers={"Accept": BINARY}),
                       400, 400)
        assert msg.startswith("Invalid query parameter"), msg


# --- 6. records per produce request ------------------------------------------------------------


def test_v2_produce_with_a_million_records_is_refused_at_once(http: httpx.Client) -> None:
    topic = uid("t")
    produce(http, topic, ["seed"])
    for ctype, row in ((BINARY, {"value": "AA=="}), (JSONV2, {"value": 1}),
                       (BINARY, {"value": "AA==", "partition": 0})):
        body = orjson.dumps({"records": [row] * 1_000_000})
        start = time.monotonic()
        resp = http.post(f"/topics/{topic}", content=body, headers={"Content-Type": ctype})
        elapsed = time.monotonic() - start
        assert "at most 100000 records" in error_of(resp, 422, 422)
        assert elapsed < 10, elapsed
    assert end_offset(http, topic) + end_offset(http, topic, 1) == 1


def test_v2_produce_limit_is_100000_records(http: httpx.Client) -> None:
    topic = uid("t")
    over = orjson.dumps({"records": [{"value": "AA==", "partition": 0}] * 100_001})
    msg = error_of(http.post(f"/topics/{topic}", content=over,
                             headers={"Content-Type": BINARY}), 422, 422)
    assert "at most 100000 records" in msg and "100001" in msg
    body = orjson.dumps({"records": [{"value": "AA=="}] * 100_000})
    resp = http.post(f"/topics/{topic}/partitions/0", content=body,
                     headers={"Content-Type": BINARY})
    assert resp.status_code == 200, resp.text[:300]
    offsets = resp.json()["offsets"]
    assert len(offsets) == 100_000 and offsets[-1]["offset"] == 99_999
    assert end_offset(http, topic, 0) == 100_000


def test_v3_produce_limit_is_100000_records(http: httpx.Client) -> None:
    topic = uid("t")
    path = f"{cluster(http)}/topics/{topic}/records"
    rec = {"partition_id": 0, "value": {"type": "STRING", "data": "x"}}
    for body in (orjson.dumps([rec] * 1_000_000), orjson.dumps([rec] * 100_001),
                 orjson.dumps(rec) * 100_001):
        msg = error_of(v3_post(http, path, body), 422, 42208)
        assert "at most 100000 records" in msg
    error_of(http.get(f"/topics/{topic}"), 404, 40401)  # not even auto-created
    reports = v3_reports(v3_post(http, path, orjson.dumps([rec] * 100_000)))
    assert len(reports) == 100_000 and {r["error_code"] for r in reports} == {200}
    assert end_offset(http, topic, 0) == 100_000


def test_v3_stream_ends_at_the_record_limit(server: FranzServer, http: httpx.Client) -> None:
    topic = uid("t")
    path = f"{cluster(http)}/topics/{topic}/records"
    one = orjson.dumps({"partition_id": 1, "value": {"type": "STRING", "data": "x"}})
    pieces = [one * 1000] * 100 + [one * 5, one]  # chunked: no Content-Length
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=120)
    try:
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {JSON}\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())

        def send() -> None:  # while the reports stream back
            for piece in pieces:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")

        writer = threading.Thread(target=send)
        writer.start()
        got = bytearray()
        while not got.endswith(b"\r\n0\r\n\r\n"):
            part = sock.recv(1 << 20)
            assert part, bytes(got[-300:])
            got += part
        writer.join()
    finally:
        sock.close()
    head, _, body = bytes(got).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    reports = [json.loads(line) for line in re.findall(rb"\{[^\r\n]*\}", body)]
    assert len(reports) == 100_001, len(reports)
    assert {r["error_code"] for r in reports[:100_000]} == {200}
    assert reports[-1]["error_code"] == 42208, reports[-1]
    assert end_offset(http, topic, 1) == 100_000


# --- 7. topic configs --------------------------------------------------------------------------


_BAD_CONFIGS = [
    ("segment.bytes", "13", "[14, 2147483647]"),
    ("segment.bytes", "2147483648", "[14, 2147483647]"),
    ("segment.index.bytes", "3", "[4, 2147483647]"),
    ("segment.ms", "0", "[1, 9223372036854775807]"),
    ("retention.ms", "-2", "[-1, 9223372036854775807]"),
    ("retention.ms", "9223372036854775808", "[-1, 9223372036854775807]"),
    ("min.insync.replicas", "0", "[1, 2147483647]"),
    ("max.message.bytes", "-1", "[0, 2147483647]"),
    ("min.cleanable.dirty.ratio", "1.5", "[0, 1]"),
    ("compression.gzip.level", "10", "[1, 9] or one of [-1]"),
    ("cleanup.policy", "delete,bogus", "compact, delete"),
    ("compression.type", "brotli", "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("message.timestamp.type", "Now", "CreateTime, LogAppendTime"),
    ("index.interval.bytes", "-1", "[0, 2147483647]"),
    ("delete.retention.ms", "-1", "[0, 9223372036854775807]"),
    ("flush.messages", "0", "[1, 9223372036854775807]"),
    ("max.compaction.lag.ms", "0", "[1, 9223372036854775807]"),
    ("local.retention.ms", "-3", "[-2, 9223372036854775807]"),
    ("min.cleanable.dirty.ratio", "-0.1", "[0, 1]"),
    ("min.cleanable.dirty.ratio", "NaN", "[0, 1]"),
    ("segment.jitter.ms", "-1", "[0, 9223372036854775807]"),
    ("compression.zstd.level", "23", "[-131072, 22]"),
    ("message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
    ("cleanup.policy", "Compact", "compact, delete"),
]


def test_invalid_topic_configs_are_400_40002_naming_the_range(http: httpx.Client) -> None:
    c = cluster(http)
    existing = uid("t")
    assert http.post(f"{c}/topics", json={"topic_name": existing}).status_code == 201
    before = http.get(f"{c}/topics/{existing}/configs").json()["data"]
    for name, value, allowed in _BAD_CONFIGS:
        topic = uid("t")
        body = {"topic_name": topic, "configs": [{"name": name, "value": value}]}
        msg = error_of(http.post(f"{c}/topics", json=body), 400, 40002)
        assert name in msg and allowed in msg, msg
        error_of(http.get(f"{c}/topics/{topic}"), 404, 40403)  # nothing created
        # an existing topic: PUT and a batch alter change nothing
        resp = http.put(f"{c}/topics/{existing}/configs/{name}", json={"value": value})
        msg = error_of(resp, 400, 40002)
        assert name in msg and allowed in msg, msg
        batch = {"data": [{"name": "retention.ms", "value": "12345"},
                          {"name": name, "value": value}]}
        resp = http.post(f"{c}/topics/{existing}/configs:alter", json=batch)
        assert name in error_of(resp, 400, 40002)
    assert http.get(f"{c}/topics/{existing}/configs").json()["data"] == before


def test_legal_but_extreme_configs_are_accepted_and_never_a_500(http: httpx.Client) -> None:
    c = cluster(http)
    zero = uid("t")  # max.message.bytes=0: Kafka accepts it; every batch is too large
    body = {"topic_name": zero, "configs": [{"name": "max.message.bytes", "value": "0"}]}
    assert http.post(f"{c}/topics", json=body).status_code == 201
    resp = http.post(f"/topics/{zero}/partitions/0", json={"records": [{"value": b64("v")}]},
                     headers={"Content-Type": BINARY})
    assert resp.status_code < 500, resp.text
    if resp.status_code == 200:
        assert all(o["error_code"] is not None for o in resp.json()["offsets"]), resp.text
    assert end_offset(http, zero) == 0
    fast = uid("t")  # segment.ms=1, retention.ms=0: a roll per batch, deleted soon after
    body = {"topic_name": fast, "configs": [{"name": "segment.ms", "value": "1"},
                                            {"name": "retention.ms", "value": "0"},
                                            {"name": "index.interval.bytes", "value": "0"}]}
    assert http.post(f"{c}/topics", json=body).status_code == 201
    for i in range(3):
        produce(http, fast, [f"v{i}"])
    assert end_offset(http, fast) == 3
    resp = http.get(f"/topics/{fast}/partitions/0/records", params={"offset": 0},
                    headers={"Accept": BINARY})
    assert resp.status_code in (200, 416), resp.text


def test_tiny_segments_stay_writable_readable_and_restartable(
    restartable_server: FranzServer,
) -> None:
    with httpx.Client(base_url=restartable_server.url, timeout=60.0) as http:
        c = cluster(http)
        configs = [{"name": "segment.bytes", "value": "14"},
                   {"name": "segment.index.bytes", "value": "4"},
                   {"name": "index.interval.bytes", "value": "0"}]
        body = {"topic_name": "tiny", "partitions_count": 1, "configs": configs}
        assert http.post(f"{c}/topics", json=body).status_code == 201
        for i in range(5):
            produce(http, "tiny", [f"v{i}-{j}" for j in range(3)])
        expected = [f"v{i}-{j}".encode() for i in range(5) for j in range(3)]

        def read_all(client: httpx.Client) -> list[bytes]:
            out: list[bytes] = []
            offset = 0
            while True:
                resp = client.get("/topics/tiny/partitions/0/records", params={"offset": offset},
                                  headers={"Accept": BINARY})
                assert resp.status_code == 200, resp.text
                if not resp.json():
                    return out
                out += [base64.b64decode(r["value"]) for r in resp.json()]
                offset = int(resp.headers["X-Franz-Next-Offset"])

        assert read_all(http) == expected
    segments = sorted(p.name for p in (restartable_server.data_dir / "tiny-0").glob("*.log"))
    assert len(segments) >= 5  # a segment per batch
    restartable_server.restart()
    with httpx.Client(base_url=restartable_server.url, timeout=60.0) as http:
        assert read_all(http) == expected
        assert produce(http, "tiny", ["after"]) == [15]
        assert read_all(http) == [*expected, b"after"]


# --- 8. topic names that collide ('.' and '_') ---------------------------------------------


def topic_names(http: httpx.Client) -> set[str]:
    return {t["topic_name"] for t in http.get(f"{cluster(http)}/topics").json()["data"]}


def test_a_topic_colliding_with_an_existing_one_is_400_40002_and_not_created(
    http: httpx.Client,
) -> None:
    c = cluster(http)
    base = uid("col")
    first = f"{base}.x"
    assert http.post(f"{c}/topics", json={"topic_name": first}).status_code == 201
    for name in (f"{base}_x",):
        resp = http.post(f"{c}/topics", json={"topic_name": name, "partitions_count": 1})
        assert error_of(resp, 400, 40002) == (
            f"Topic '{name}' collides with existing topics: {first}")
        resp = http.post(f"{c}/topics", json={"topic_name": name, "validate_only": True})
        assert "collides" in error_of(resp, 400, 40002)
        error_of(http.get(f"{c}/topics/{name}"), 404, 40403)
        # auto-creation on produce follows the same rule: refused, nothing written
        resp = http.post(f"/topics/{name}", json={"records": [{"value": b64("v")}]},
                         headers={"Content-Type": BINARY})
        assert "collides with existing topics" in error_of(resp, 400, 40002)
        assert name not in topic_names(http)
    # look-alikes that Kafka keeps apart are fine
    for name in (f"{base}-x", f"{base}x", f"{base}.x.y"):
        assert http.post(f"{c}/topics", json={"topic_name": name}).status_code == 201, name
    assert produce(http, first, ["still works"]) == [0]


def test_concurrent_creations_of_colliding_names_never_both_succeed(
    server: FranzServer,
) -> None:
    base = uid("race")
    pairs = [(f"{base}{i}.t", f"{base}{i}_t") for i in range(8)]
    results: dict[str, int] = {}

    def create(name: str) -> None:
        with httpx.Client(base_url=server.url, timeout=60.0) as h:
            c = cluster(h)
            results[name] = h.post(f"{c}/topics", json={"topic_name": name}).status_code

    threads = [threading.Thread(target=create, args=(n,)) for pair in pairs for n in pair]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with httpx.Client(base_url=server.url, timeout=60.0) as h:
        existing = topic_names(h)
    for a, b in pairs:
        assert sorted((results[a], results[b])) == [201, 400], (a, b, results)
        winner = a if results[a] == 201 else b
        assert winner in existing and ({a, b} - {winner}).isdisjoint(existing)


# --- 9. topic patterns of subscriptions ----------------------------------------------------


def subscribe_pattern(http: httpx.Client, base: str, pattern: str) -> httpx.Response:
    return http.post(base + "/subscription", json={"topic_pattern": pattern},
                     headers={"Content-Type": V2})


def test_a_catastrophic_pattern_never_blocks_the_broker(http: httpx.Client) -> None:
    # topics of a's that make (a+)+$ backtrack exponentially in a backtracking engine
    for n in (60, 120, 249):
        name = "a" * (n - 1) + "-"
        resp = http.post(f"{cluster(http)}/topics", json={"topic_name": name})
        assert resp.status_code in (201, 400), resp.text  # 400: exists from a rerun
    group = uid("g")
    base = new_instance(http, group, name="c")
    resp = subscribe_pattern(http, base, "(a+)+$")
    if resp.status_code == 204:  # RE2: matched in linear time, nothing matches
        assert http.get(base + "/subscription").json() == {"topics": []}
    else:  # Python's re: the pattern is refused, naming the problem
        assert "nested quantifiers" in error_of(resp, 400, 40002)
    assert subscribe_pattern(http, base, "(a|b)-[0-9]+").status_code == 204
    assert http.get("/topics").status_code == 200  # the broker answers


def test_patterns_no_linear_engine_runs_are_400_and_change_nothing(http: httpx.Client) -> None:
    topic = uid("pat")
    produce(http, topic, ["x"])
    group = uid("g")
    base = new_instance(http, group, name="c")
    assert subscribe_pattern(http, base, f"{topic[:4]}.*").status_code == 204
    before = http.get(base + "/subscription").json()
    assert topic in before["topics"]
    for pattern, why in ((r"(p)\1", "backreference"), ("(?=p).*", "lookahead"),
                         ("p*+", "possessive"), ("p" * 1025, "at most 1024"),
                         ("[p-", "unterminated")):
        msg = error_of(subscribe_pattern(http, base, pattern), 400, 40002)
        assert msg.startswith("Invalid topic pattern") and why in msg, msg
        assert len(msg) < 1500
    assert http.get(base + "/subscription").json() == before
    new_instance(http, group, name="d")  # the group still takes joins
    for pattern in (r"orders\..+", "topic-.*", "(a|b)-[0-9]+"):
        assert subscribe_pattern(http, base, pattern).status_code == 204, pattern


# --- nothing above left the broker unwell ------------------------------------------------------


def test_no_server_error_was_logged(server: FranzServer, http: httpx.Client) -> None:
    assert http.get("/").status_code == 200
    log = server.log_path.read_text(errors="replace")
    assert "unhandled error" not in log and "Traceback" not in log, log[-3000:]

