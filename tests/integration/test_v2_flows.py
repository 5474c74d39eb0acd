"""Whole v2 flows as users run them, against real servers over HTTP.

- Confluent's quickstart, request by request as curl sends it (binary and json).
- Broadcast (two groups each get every record) and unicast (two instances of one group
  split the partitions and together read every record once).
- Instance expiry and the rebalance that follows; a new instance resuming from commits;
  a restart (orderly and SIGKILL) with data and committed offsets intact.
- Bad input a user is likely to send, with exact status and ``error_code``, and the
  check that a rejected request wrote nothing (partition end offsets unchanged).
  Classes already pinned down by test_v2_produce / test_v2_consumers / test_v2_range_read
  are only repeated here where the point is new (an existing topic stays unchanged, a
  bad record at the end of a good batch, limits set by server overrides).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import FranzServer

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
FORM = "application/x-www-form-urlencoded"  # what curl sends for --data without -H
CURL_UA = "curl/8.5.0"

# Mirrors conftest.INSTANCE_TIMEOUT_MS / MESSAGE_MAX_BYTES / MAX_REQUEST_SIZE (the
# servers are configured there; conftest is not imported at run time).
INSTANCE_TIMEOUT_MS = 2000
MESSAGE_MAX_BYTES = 2048
MAX_REQUEST_SIZE = 65536


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --- curl ---------------------------------------------------------------------------------


class Curl:
    """Sends what ``curl -X METHOD [-H ...] [--data DATA] URL`` sends: ``Accept: */*``
    and curl's User-Agent, no Accept-Encoding, and for ``--data`` without a
    ``-H "Content-Type: ..."`` curl's own ``application/x-www-form-urlencoded``."""

    def __init__(self) -> None:
        self.http = httpx.Client(timeout=30.0)
        del self.http.headers["accept-encoding"]
        self.http.headers["user-agent"] = CURL_UA

    def __call__(
        self, method: str, url: str, *headers: str, data: str | None = None
    ) -> httpx.Response:
        sent: dict[str, str] = {}
        if data is not None:
            sent["Content-Type"] = FORM
        for h in headers:
            name, _, value = h.partition(":")
            sent[name.strip()] = value.strip()
        content = None if data is None else data.encode()
        return self.http.request(method, url, content=content, headers=sent)


@pytest.fixture
def curl() -> Iterator[Curl]:
    c = Curl()
    yield c
    c.http.close()


# --- small helpers ------------------------------------------------------------------------


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == V2, resp.headers
    body = resp.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return str(body["message"])


def produce(
    http: httpx.Client,
    topic: str,
    records: list[dict[str, Any]],
    *,
    ctype: str = BINARY,
    **params: Any,
) -> list[dict[str, Any]]:
    resp = http.post(
        f"/topics/{topic}",
        json={"records": records},
        headers={"Content-Type": ctype},
        params=params,
    )
    assert resp.status_code == 200, resp.text
    offsets: list[dict[str, Any]] = resp.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets), offsets
    return offsets


def end_offsets(http: httpx.Client, topic: str, partitions: int = 3) -> list[int]:
    out = []
    for p in range(partitions):
        resp = http.get(f"/topics/{topic}/partitions/{p}/offsets")
        assert resp.status_code == 200, resp.text
        out.append(resp.json()["end_offset"])
    return out


def range_read(http: httpx.Client, topic: str, partition: int, offset: int = 0) -> list[Any]:
    """Every record of the partition from ``offset`` to the high watermark (binary)."""
    out: list[dict[str, Any]] = []
    while True:
        resp = http.get(
            f"/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_bytes": 256 * 1024},
            headers={"Accept": BINARY},
        )
        assert resp.status_code == 200, resp.text
        out += resp.json()
        offset = int(resp.headers["X-Franz-Next-Offset"])
        if offset >= int(resp.headers["X-Franz-High-Watermark"]):
            return out


def create(http: httpx.Client, group: str, name: str | None = None, **config: Any) -> str:
    config.setdefault("auto.offset.reset", "earliest")
    if name is not None:
        config["name"] = name
    resp = http.post(f"/consumers/{group}", json=config, headers={"Content-Type": V2})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["base_uri"])


def ok(resp: httpx.Response, status: int = 204) -> httpx.Response:
    assert resp.status_code == status, (resp.status_code, resp.text)
    return resp


def subscribe(http: httpx.Client, base: str, *topics: str) -> None:
    ok(http.post(base + "/subscription", json={"topics": list(topics)}))


def poll(
    http: httpx.Client, base: str, *, accept: str = BINARY, timeout: int = 1000
) -> list[dict[str, Any]]:
    resp = http.get(base + "/records", headers={"Accept": accept}, params={"timeout": timeout})
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def read_all(
    http: httpx.Client, base: str, count: int, *, accept: str = BINARY, deadline_s: float = 15.0
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    end = time.monotonic() + deadline_s
    while len(out) < count and time.monotonic() < end:
        out += poll(http, base, accept=accept)
    return out


def assignment(http: httpx.Client, base: str) -> set[int]:
    parts = ok(http.get(base + "/assignments"), 200).json()["partitions"]
    return {p["partition"] for p in parts}


def committed(http: httpx.Client, base: str, topic: str, *partitions: int) -> dict[int, int]:
    body = {"partitions": [{"topic": topic, "partition": p} for p in partitions]}
    resp = ok(http.request("GET", base + "/offsets", json=body), 200)
    return {o["partition"]: o["offset"] for o in resp.json()["offsets"]}


def commit(http: httpx.Client, base: str, topic: str, last: dict[int, int]) -> None:
    body = {"offsets": [{"topic": topic, "partition": p, "offset": o} for p, o in last.items()]}
    assert ok(http.post(base + "/offsets", json=body), 200).json() == []


def keyed(rows: list[dict[str, Any]]) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of binary records, sorted."""
    return sorted((r["partition"], r["offset"], unb64(r["value"])) for r in rows)


def spread(prefix: str, n: int, partitions: int = 3) -> list[dict[str, Any]]:
    """``n`` binary records ``prefix-i``, record i on partition i % partitions."""
    return [{"value": b64(f"{prefix}-{i}"), "partition": i % partitions} for i in range(n)]


def acked(
    records: list[dict[str, Any]], offsets: list[dict[str, Any]]
) -> list[tuple[int, int, bytes | None]]:
    return sorted(
        (o["partition"], o["offset"], unb64(r["value"]))
        for r, o in zip(records, offsets, strict=True)
    )


# --- 1. Confluent's quickstart, as curl sends it ------------------------------------------

QUICKSTART = {
    "binary": {
        "first": '{"records":[{"value":"S2Fma2E="}]}',  # "Kafka", verbatim from Confluent
        "first_value": "S2Fma2E=",
        "batch": [
            {"key": b64("k1"), "value": b64("v1"), "partition": 0},
            {"value": b64(b"\x00\xffraw"), "partition": 1},
            {"key": b64("k2"), "value": None, "partition": 2},
            {"key": b64("k3"), "value": b64("v3"), "partition": 2},
        ],
    },
    "json": {
        "first": '{"records":[{"value":{"foo":"bar"}}]}',  # verbatim from Confluent
        "first_value": {"foo": "bar"},
        "batch": [
            {"key": "user-1", "value": {"clicks": 3, "tags": ["a", "b"]}, "partition": 0},
            {"value": [1, 2.5, None, True], "partition": 1},
            {"key": {"id": 7}, "value": "text", "partition": 2},
            {"value": 42, "partition": 2},
        ],
    },
}


@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_confluent_quickstart_with_curl(
    curl: Curl, franz_url: str, topic: str, group: str, fmt: str
) -> None:
    vnd = f"application/vnd.kafka.{fmt}.v2+json"
    spec = QUICKSTART[fmt]
    url = franz_url

    # Produce: Confluent's own first request, then a batch over all three partitions.
    resp = curl(
        "POST",
        f"{url}/topics/{topic}",
        f"Content-Type: {vnd}",
        f"Accept: {V2}",
        data=str(spec["first"]),
    )
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == V2
    first = resp.json()
    assert first["key_schema_id"] is None and first["value_schema_id"] is None
    [off] = first["offsets"]
    assert off["offset"] == 0 and off["error_code"] is None and off["error"] is None
    batch: list[dict[str, Any]] = spec["batch"]  # type: ignore[assignment]
    resp = curl(
        "POST",
        f"{url}/topics/{topic}",
        f"Content-Type: {vnd}",
        f"Accept: {V2}",
        data=json.dumps({"records": batch}),
    )
    assert resp.status_code == 200, resp.text
    offsets = [(o["partition"], o["offset"]) for o in resp.json()["offsets"]]
    p0 = off["partition"]
    assert offsets == [
        (0, int(p0 == 0)),
        (1, int(p0 == 1)),
        (2, int(p0 == 2)),
        (2, int(p0 == 2) + 1),
    ]
    expected = {(off["partition"], 0): (None, spec["first_value"])}
    expected |= {
        (p, o): (r.get("key"), r["value"]) for r, (p, o) in zip(batch, offsets, strict=True)
    }

    # Create a consumer instance in the group, reading from the beginning.
    resp = curl(
        "POST",
        f"{url}/consumers/{group}",
        f"Content-Type: {V2}",
        data=f'{{"name": "my_consumer_instance", "format": "{fmt}", "auto.offset.reset": "earliest"}}',
    )
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == V2
    base = f"{url}/consumers/{group}/instances/my_consumer_instance"
    assert resp.json() == {"instance_id": "my_consumer_instance", "base_uri": base}

    # Subscribe: 204, no body.
    resp = curl(
        "POST", f"{base}/subscription", f"Content-Type: {V2}", data=f'{{"topics":["{topic}"]}}'
    )
    assert resp.status_code == 204 and resp.content == b""

    # Read: the first read after subscribe already has data.
    resp = curl("GET", f"{base}/records", f"Accept: {vnd}")
    assert resp.status_code == 200 and resp.headers["content-type"] == vnd
    got = resp.json()
    assert got, "the first read after subscribe came back empty although data exists"
    deadline = time.monotonic() + 15
    while len(got) < len(expected) and time.monotonic() < deadline:
        resp = curl("GET", f"{base}/records?timeout=1000", f"Accept: {vnd}")
        assert resp.status_code == 200, resp.text
        got += resp.json()
    for r in got:
        assert r["topic"] == topic and r["timestamp_type"] == "CreateTime"
        assert r["headers"] == [] and isinstance(r["timestamp"], int)
    seen = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in got}
    assert len(seen) == len(got), "a record came twice"
    assert seen == expected
    resp = curl("GET", f"{base}/records?timeout=200", f"Accept: {vnd}")
    assert resp.status_code == 200 and resp.json() == []  # nothing more, no redelivery

    # Commit the last offset read of each partition.
    last: dict[int, int] = {}
    for p, o in seen:
        last[p] = max(o, last.get(p, -1))
    body = {"offsets": [{"topic": topic, "partition": p, "offset": o} for p, o in last.items()]}
    resp = curl("POST", f"{base}/offsets", f"Content-Type: {V2}", data=json.dumps(body))
    assert resp.status_code == 200 and resp.json() == []

    # Committed offsets: GET with a body; the next offset to read (last + 1).
    parts = {"partitions": [{"topic": topic, "partition": p} for p in (0, 1, 2)]}
    resp = curl("GET", f"{base}/offsets", f"Content-Type: {V2}", data=json.dumps(parts))
    assert resp.status_code == 200 and resp.headers["content-type"] == V2
    assert resp.json() == {
        "offsets": [
            {"topic": topic, "partition": p, "offset": last[p] + 1, "metadata": ""}
            for p in (0, 1, 2)
        ]
    }

    # Delete: 204, and the instance is gone.
    resp = curl("DELETE", base, f"Content-Type: {V2}")
    assert resp.status_code == 204 and resp.content == b""
    error_of(curl("GET", f"{base}/records", f"Accept: {vnd}"), 404, 40403)
    error_of(curl("DELETE", base, f"Content-Type: {V2}"), 404, 40403)


# --- 2. broadcast -------------------------------------------------------------------------


def test_broadcast_every_group_gets_every_record(
    client: httpx.Client, topic: str, group: str
) -> None:
    before = spread("before", 12)
    expected = acked(before, produce(client, topic, before))
    bases = [create(client, f"{group}-a"), create(client, f"{group}-b")]
    for base in bases:
        subscribe(client, base, topic)
    after = spread("after", 9)
    expected = sorted(expected + acked(after, produce(client, topic, after)))
    for base in bases:
        got = read_all(client, base, len(expected))
        assert keyed(got) == expected
        assert poll(client, base, timeout=200) == []


# --- 3. unicast ---------------------------------------------------------------------------


def test_unicast_instances_of_one_group_split_the_partitions(
    client: httpx.Client, topic: str, group: str
) -> None:
    produce(client, topic, spread("seed", 3))  # the topic exists with its 3 partitions
    a, b = create(client, group, "a"), create(client, group, "b")
    subscribe(client, a, topic)
    subscribe(client, b, topic)
    parts_a, parts_b = assignment(client, a), assignment(client, b)
    assert parts_a and parts_b, (parts_a, parts_b)
    assert parts_a.isdisjoint(parts_b) and parts_a | parts_b == {0, 1, 2}

    records = spread("r", 30)
    expected = sorted(
        [(p, 0, f"seed-{p}".encode()) for p in range(3)]
        + acked(records, produce(client, topic, records))
    )
    got: dict[str, list[dict[str, Any]]] = {a: [], b: []}
    deadline = time.monotonic() + 15
    while sum(map(len, got.values())) < len(expected) and time.monotonic() < deadline:
        for base in (a, b):
            got[base] += poll(client, base, timeout=300)
    assert {r["partition"] for r in got[a]} <= parts_a
    assert {r["partition"] for r in got[b]} <= parts_b
    assert keyed(got[a] + got[b]) == expected  # each record exactly once
    assert poll(client, a, timeout=200) == [] and poll(client, b, timeout=200) == []


# --- 4. expiry and the rebalance after it -------------------------------------------------


def test_expired_instance_is_404_and_its_partitions_move(expiry_server: FranzServer) -> None:
    topic, group = uid("exp"), uid("g")
    with httpx.Client(base_url=expiry_server.url, timeout=30) as http:
        first = spread("first", 9)
        first_acked = acked(first, produce(http, topic, first))
        config = {"auto.commit.enable": "false"}
        a, b = create(http, group, "a", **config), create(http, group, "b", **config)
        subscribe(http, a, topic)
        subscribe(http, b, topic)
        parts_a, parts_b = assignment(http, a), assignment(http, b)
        assert parts_a.isdisjoint(parts_b) and parts_a | parts_b == {0, 1, 2}

        got_a = read_all(http, a, 3 * len(parts_a))
        got_b = read_all(http, b, 3 * len(parts_b))
        assert keyed(got_a + got_b) == first_acked
        # a processed only the first record of each of its partitions; b everything.
        commit(http, a, topic, {p: 0 for p in parts_a})
        ok(http.post(b + "/offsets"), 200)  # empty body: commit b's positions

        second = spread("second", 9)
        second_acked = acked(second, produce(http, topic, second))

        # a goes silent; b keeps reading (each call is a heartbeat) until it owns all.
        start = time.monotonic()
        got: list[dict[str, Any]] = []
        while time.monotonic() - start < INSTANCE_TIMEOUT_MS / 1000 + 8:
            got += poll(http, b, timeout=300)
            if assignment(http, b) == {0, 1, 2} and len(got) >= 9 + 2 * len(parts_a):
                break
        elapsed = time.monotonic() - start
        assert assignment(http, b) == {0, 1, 2}, "b never got the expired instance's partitions"
        assert elapsed >= INSTANCE_TIMEOUT_MS / 1000 * 0.9, elapsed  # not before the timeout

        # b read a's partitions from a's committed offsets (1: offsets 1, 2 come again),
        # and its own from its own commit; nothing else twice, nothing skipped.
        redelivered = [(p, o, v) for p, o, v in first_acked if p in parts_a and o >= 1]
        assert keyed(got) == sorted(redelivered + second_acked)
        assert poll(http, b, timeout=200) == []

        for resp in (
            http.get(a + "/records", headers={"Accept": BINARY}),
            http.get(a + "/subscription"),
            http.post(a + "/offsets"),
            http.delete(a),
        ):
            error_of(resp, 404, 40403)
        assert create(http, group, "a").endswith("/instances/a")  # the name is free again


# --- 5. a new instance resumes where the group committed ---------------------------------


def test_new_instance_resumes_at_committed_offsets(
    client: httpx.Client, topic: str, group: str
) -> None:
    records = [{"key": f"k{i}", "value": {"n": i}, "partition": i % 3} for i in range(15)]
    offsets = produce(client, topic, records, ctype=JSON)
    old = create(client, group, "old", format="json", **{"auto.commit.enable": "false"})
    subscribe(client, old, topic)
    assert len(read_all(client, old, 15, accept=JSON)) == 15
    # last processed: partition 0 -> 1, partition 1 -> 3, partition 2 -> 4 (its last)
    commit(client, old, topic, {0: 1, 1: 3, 2: 4})
    assert committed(client, old, topic, 0, 1, 2) == {0: 2, 1: 4, 2: 5}
    ok(client.delete(old))
    more = [{"value": {"n": 100 + i}, "partition": i % 3} for i in range(3)]
    offsets += produce(client, topic, more, ctype=JSON)

    # "latest" would start at the end: committed offsets win over auto.offset.reset.
    new = create(client, group, "new", format="json", **{"auto.offset.reset": "latest"})
    subscribe(client, new, topic)
    got = read_all(client, new, 6, accept=JSON)
    after = {0: 2, 1: 4, 2: 5}
    expected = sorted(
        (o["partition"], o["offset"], r["value"]["n"])
        for r, o in zip(records + more, offsets, strict=True)
        if o["offset"] >= after[o["partition"]]
    )
    assert sorted((r["partition"], r["offset"], r["value"]["n"]) for r in got) == expected
    assert poll(client, new, accept=JSON, timeout=200) == []


def test_auto_commit_on_delete_lets_the_next_instance_resume(
    client: httpx.Client, topic: str, group: str
) -> None:
    first = spread("first", 6)
    produce(client, topic, first)
    old = create(client, group, "old")  # auto.commit.enable defaults to true
    subscribe(client, old, topic)
    assert len(read_all(client, old, 6)) == 6
    ok(client.delete(old))  # leaving the group commits what it read
    second = spread("second", 6)
    expected = acked(second, produce(client, topic, second))
    new = create(client, group, "new")
    subscribe(client, new, topic)
    assert committed(client, new, topic, 0, 1, 2) == {0: 2, 1: 2, 2: 2}
    assert keyed(read_all(client, new, 6)) == expected
    assert poll(client, new, timeout=200) == []


# --- 6. restart ---------------------------------------------------------------------------


def test_data_and_commits_survive_restart_and_sigkill(restartable_server: FranzServer) -> None:
    """restartable_server has 2 partitions; an orderly restart, then a SIGKILL."""
    server = restartable_server
    topic, g1, g2 = "survive", "survive-g1", "survive-g2"
    records = [
        {
            "key": b64(f"k{i}"),
            "value": b64(f"v{i}"),
            "partition": i % 2,
            "timestamp": 1_700_000_000_000 + i,
            "headers": [{"key": "n", "value": b64(str(i))}, {"key": "nil", "value": None}],
        }
        for i in range(10)
    ]
    json_records = [{"value": {"j": i}, "partition": 1} for i in range(3)]
    with httpx.Client(base_url=server.url, timeout=30) as http:
        produce(http, topic, records, acks="all")
        produce(http, topic, json_records, ctype=JSON, acks="all")
        ends = end_offsets(http, topic, 2)
        assert ends == [5, 8]
        stored = [range_read(http, topic, p) for p in (0, 1)]
        c1 = create(http, g1, "c1", **{"auto.commit.enable": "false"})
        subscribe(http, c1, topic)
        assert len(read_all(http, c1, 13)) == 13
        commit(http, c1, topic, {0: 2, 1: 6})
        c2 = create(http, g2, "c2", **{"auto.commit.enable": "false"})
        ok(http.post(c2 + "/assignments", json={"partitions": [{"topic": topic, "partition": 1}]}))
        commit(http, c2, topic, {1: 0})

    def check(http: httpx.Client, ends: list[int]) -> None:
        assert end_offsets(http, topic, 2) == ends
        assert range_read(http, topic, 0) == stored[0]
        assert range_read(http, topic, 1)[: len(stored[1])] == stored[1]
        assert committed(http, c1, topic, 0, 1) == {0: 3, 1: 7}
        assert committed(http, c2, topic, 0, 1) == {1: 1}

    server.restart()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        check(http, ends)
        # appends continue after the old end: nothing overwritten, no offset reused
        offs = produce(http, topic, [{"value": b64("after"), "partition": 1}], acks="all")
        assert offs[0]["offset"] == 8

    server.kill()  # SIGKILL: acknowledged records and commits must still be there
    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        check(http, [5, 9])
        # a new instance of g1 (after c1 leaves) resumes at the commits: 0:3.., 1:7..
        ok(http.delete(c1))
        fresh = create(http, g1, "fresh")
        subscribe(http, fresh, topic)
        got = read_all(http, fresh, 2 + 2)
        assert sorted((r["partition"], r["offset"]) for r in got) == [
            (0, 3),
            (0, 4),
            (1, 7),
            (1, 8),
        ]
        assert poll(http, fresh, timeout=200) == []


# --- 7. bad input: exact answers, nothing written -----------------------------------------

_GOOD = '{"value": "YQ==", "partition": 0}'

BAD_PRODUCE = [
    # (id, Content-Type, body, status, error_code, text in message)
    ("malformed-json", BINARY, '{"records": [' + _GOOD, 400, 400, "Malformed JSON"),
    ("curl-without-content-type", FORM, '{"records": [' + _GOOD + "]}", 415, 415, "415"),
    ("no-content-type", None, '{"records": [' + _GOOD + "]}", 415, 415, "415"),
    ("text-plain", "text/plain", '{"records": [' + _GOOD + "]}", 415, 415, "415"),
    ("empty-records", BINARY, '{"records": []}', 422, 422, "records may not be empty"),
    ("empty-body", BINARY, "", 422, 422, "empty"),
    (
        "bad-base64-after-good-records",
        BINARY,
        '{"records": [' + _GOOD + ", " + _GOOD + ', {"value": "not base64!"}]}',
        400,
        400,
        "records[2].value",
    ),
    (
        "unknown-field-after-good-records",
        BINARY,
        '{"records": [' + _GOOD + ', {"value": "YQ==", "partiton": 1}]}',
        400,
        400,
        "records[1].partiton",
    ),
    (
        "json-unknown-field-after-good-records",
        JSON,
        '{"records": [{"value": {"a": 1}}, {"value": 2, "vaule": 3}]}',
        400,
        400,
        "records[1].vaule",
    ),
    (
        "negative-timestamp-after-good-records",
        BINARY,
        '{"records": [' + _GOOD + ', {"value": "YQ==", "timestamp": -1}]}',
        422,
        422,
        "timestamp",
    ),
    (
        "negative-partition-after-good-records",
        BINARY,
        '{"records": [' + _GOOD + ', {"value": "YQ==", "partition": -1}]}',
        404,
        40402,
        "",
    ),
    (
        "partition-out-of-range-after-good-records",
        JSON,
        '{"records": [{"value": 1, "partition": 0}, {"value": 2, "partition": 3}]}',
        404,
        40402,
        "",
    ),
    (
        "schema-format-without-a-value-schema",
        "application/vnd.kafka.avro.v2+json",
        '{"records": [{"value": 1}]}',
        422,
        42202,
        "does not include value schema",
    ),
]


@pytest.mark.parametrize(
    ("ctype", "body", "status", "code", "text"),
    [case[1:] for case in BAD_PRODUCE],
    ids=[case[0] for case in BAD_PRODUCE],
)
def test_rejected_produce_writes_nothing(
    client: httpx.Client,
    topic: str,
    ctype: str | None,
    body: str,
    status: int,
    code: int,
    text: str,
) -> None:
    produce(client, topic, spread("seed", 3))
    before = end_offsets(client, topic)
    headers = {} if ctype is None else {"Content-Type": ctype}
    resp = client.post(f"/topics/{topic}", content=body.encode(), headers=headers)
    assert text in error_of(resp, status, code)
    assert end_offsets(client, topic) == before
    assert keyed([r for p in range(3) for r in range_read(client, topic, p)]) == [
        (p, 0, f"seed-{p}".encode()) for p in range(3)
    ]


def test_record_over_max_message_bytes_fails_alone(limits_server: FranzServer) -> None:
    topic = uid("big")
    big = b64(b"x" * (MESSAGE_MAX_BYTES + 100))
    with httpx.Client(base_url=limits_server.url, timeout=30) as http:
        produce(http, topic, spread("seed", 3))
        before = end_offsets(http, topic)
        body = {
            "records": [
                {"value": b64("small-1"), "partition": 0},
                {"value": big, "partition": 0},
                {"value": b64("small-2"), "partition": 0},
            ]
        }
        resp = http.post(f"/topics/{topic}", json=body, headers={"Content-Type": BINARY})
        assert resp.status_code == 200, resp.text
        first, bad, last = resp.json()["offsets"]
        assert (first["partition"], first["offset"], first["error_code"]) == (0, 1, None)
        assert (last["partition"], last["offset"], last["error_code"]) == (0, 2, None)
        assert bad["partition"] is None and bad["offset"] is None
        assert bad["error_code"] == 413 and "max.message.bytes" in bad["error"]
        assert end_offsets(http, topic) == [before[0] + 2, *before[1:]]
        values = [unb64(r["value"]) for r in range_read(http, topic, 0)]
        assert values == [b"seed-0", b"small-1", b"small-2"]

        # nothing but oversized records: nothing written, in every format and mode
        before = end_offsets(http, topic)
        only_big = {"records": [{"value": big}, {"value": big, "partition": 2}]}
        resp = http.post(f"/topics/{topic}", json=only_big, headers={"Content-Type": BINARY})
        assert [o["error_code"] for o in resp.json()["offsets"]] == [413, 413]
        json_big = {"records": [{"value": "y" * (MESSAGE_MAX_BYTES + 100)}]}
        resp = http.post(f"/topics/{topic}", json=json_big, headers={"Content-Type": JSON})
        assert resp.status_code == 200 and resp.json()["offsets"][0]["error_code"] == 413
        strict = http.post(
            f"/topics/{topic}/partitions/1",
            json=only_big,
            headers={"Content-Type": BINARY},
            params={"strict": "true"},
        )
        assert strict.status_code == 413 and strict.json()["error_code"] == 413
        assert end_offsets(http, topic) == before


def test_body_over_max_request_size_is_413(limits_server: FranzServer) -> None:
    topic = uid("req")
    record = {"value": b64(b"z" * 1000)}  # ~1.3 kB of JSON each, under max.message.bytes
    fits = {"records": [record] * 40}
    too_big = {"records": [record] * 60}
    assert len(json.dumps(fits)) < MAX_REQUEST_SIZE < len(json.dumps(too_big))
    with httpx.Client(base_url=limits_server.url, timeout=30) as http:
        produce(http, topic, fits["records"])
        before = end_offsets(http, topic)
        assert sum(before) == 40
        resp = http.post(f"/topics/{topic}", json=too_big, headers={"Content-Type": BINARY})
        assert "max.request.size" in error_of(resp, 413, 413)

        def chunked() -> Iterator[bytes]:  # no Content-Length: the server must count
            raw = json.dumps(too_big).encode()
            for i in range(0, len(raw), 8192):
                yield raw[i : i + 8192]

        resp = http.post(f"/topics/{topic}", content=chunked(), headers={"Content-Type": BINARY})
        assert "max.request.size" in error_of(resp, 413, 413)
        resp = http.post(
            f"/topics/{topic}/partitions/0", json=too_big, headers={"Content-Type": BINARY}
        )
        error_of(resp, 413, 413)
        assert end_offsets(http, topic) == before


def test_curl_without_content_type_on_consumer_endpoints(
    curl: Curl, client: httpx.Client, franz_url: str, topic: str, group: str
) -> None:
    """``curl --data '...'`` without ``-H "Content-Type: ..."`` sends a form type: 415
    everywhere, and nothing changes."""
    produce(client, topic, spread("seed", 3))
    error_of(curl("POST", f"{franz_url}/consumers/{group}", data='{"name": "x"}'), 415, 415)
    error_of(client.get(f"/consumers/{group}/instances/x/subscription"), 404, 40403)

    base = create(client, group, "c", **{"auto.commit.enable": "false"})
    commit(client, base, topic, {0: 0})
    tp = f'{{"topic": "{topic}", "partition": 0}}'
    calls = [
        ("POST", "/subscription", f'{{"topics": ["{topic}"]}}'),
        ("POST", "/assignments", f'{{"partitions": [{tp}]}}'),
        (
            "POST",
            "/positions",
            f'{{"offsets": [{{"topic": "{topic}", "partition": 0, "offset": 1}}]}}',
        ),
        ("POST", "/positions/beginning", f'{{"partitions": [{tp}]}}'),
        ("POST", "/positions/end", f'{{"partitions": [{tp}]}}'),
        (
            "POST",
            "/offsets",
            f'{{"offsets": [{{"topic": "{topic}", "partition": 0, "offset": 2}}]}}',
        ),
        ("GET", "/offsets", f'{{"partitions": [{tp}]}}'),
    ]
    for method, path, data in calls:
        error_of(curl(method, base + path, data=data), 415, 415)
    assert ok(client.get(base + "/subscription"), 200).json() == {"topics": []}
    assert assignment(client, base) == set()
    assert committed(client, base, topic, 0) == {0: 1}


def test_unknown_partitions_in_commit_and_assign_change_nothing(
    client: httpx.Client, topic: str, group: str
) -> None:
    produce(client, topic, spread("seed", 6))
    base = create(client, group, "c", **{"auto.commit.enable": "false"})
    ok(client.post(base + "/assignments", json={"partitions": [{"topic": topic, "partition": 0}]}))
    commit(client, base, topic, {0: 0})
    unknown = [
        [{"topic": topic, "partition": 3}],
        [{"topic": topic, "partition": -1}],
        [{"topic": uid("no-such-topic"), "partition": 0}],
        [{"topic": topic, "partition": 1}, {"topic": topic, "partition": 99}],  # one bad
    ]
    for tps in unknown:
        commits = {"offsets": [{**tp, "offset": 1} for tp in tps]}
        error_of(client.post(base + "/offsets", json=commits), 404, 40403)
        error_of(client.post(base + "/assignments", json={"partitions": tps}), 404, 40403)
        # seeking a partition that is not assigned is an illegal state
        error_of(client.post(base + "/positions", json=commits), 409, 40903)
    assert committed(client, base, topic, 0, 1, 2) == {0: 1}
    assert assignment(client, base) == {0}
    # committed offsets of partitions without a commit (or that do not exist) are omitted
    body = {"partitions": [{"topic": topic, "partition": 7}]}
    assert ok(client.request("GET", base + "/offsets", json=body), 200).json() == {"offsets": []}


@pytest.mark.parametrize(
    ("reset", "expected"),
    [("earliest", [0, 1]), ("latest", []), ("none", None)],
)
def test_offsets_past_the_end_fall_back_to_auto_offset_reset(
    client: httpx.Client, topic: str, group: str, reset: str, expected: list[int] | None
) -> None:
    """As in Kafka: a position (seek or commit) past the end is not an error until it is
    read; then auto.offset.reset decides (``none``: 409 / 40903)."""
    produce(client, topic, [{"value": b64(f"v{i}"), "partition": 0} for i in range(2)])
    tp0 = {"partitions": [{"topic": topic, "partition": 0}]}

    def read(base: str) -> None:
        if expected is None:
            error_of(client.get(base + "/records", headers={"Accept": BINARY}), 409, 40903)
        else:
            assert [r["offset"] for r in poll(client, base, timeout=300)] == expected

    config = {"auto.offset.reset": reset, "auto.commit.enable": "false"}
    base = create(client, group, "c", **config)
    ok(client.post(base + "/assignments", json=tp0))
    seek = {"offsets": [{"topic": topic, "partition": 0, "offset": 1000}]}
    ok(client.post(base + "/positions", json=seek))
    read(base)

    commit(client, base, topic, {0: 1000})  # accepted: commits are not checked against the log
    assert committed(client, base, topic, 0) == {0: 1001}
    ok(client.delete(base))
    again = create(client, group, "again", **config)
    ok(client.post(again + "/assignments", json=tp0))
    read(again)


def test_produce_to_the_internal_offsets_topic_is_rejected(client: httpx.Client) -> None:
    topic = "__consumer_offsets"
    before = [client.get(f"/topics/{topic}/partitions/{p}/offsets").json() for p in (0, 1)]
    # a key no group record uses (version 0x7f7f): harmless to the coordinator if written
    records = [{"key": b64(b"\x7f\x7fprobe"), "value": b64("x"), "partition": p} for p in (0, 1)]
    resp = client.post(
        f"/topics/{topic}", json={"records": records}, headers={"Content-Type": BINARY}
    )
    after = [client.get(f"/topics/{topic}/partitions/{p}/offsets").json() for p in (0, 1)]
    assert after == before, "records were appended to __consumer_offsets"
    if resp.status_code == 200:
        assert [o["error_code"] for o in resp.json()["offsets"]] == [40002, 40002]
    else:
        error_of(resp, 400, 40002)
