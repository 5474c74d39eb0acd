"""Reads of really compacted logs, over real brokers: every path that decodes stored
record batches gets the batches compaction leaves behind, those with offset gaps (records
taken out) and the empty ones kept for a producer id (docs/storage.md, "Compaction").

A batch whose record count does not match its offset range used to fail every read of it
(``CachedBatch`` read its size estimate before setting it: a 500, and a compacted
``__consumer_offsets`` that could not be loaded after a restart). Each test builds its
compacted log through the API with small segments and a cleaner that runs every 100 ms,
waits for the cleaner's checkpoint, checks the batches on disk are what it means to test
(a gap, an empty batch), then reads as a user does: the latest value of each key,
offsets ascending, no 5xx.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from conftest import BINARY, JSON, ROOT, V2, FranzServer

from core.storage.batch import iter_batches

pytestmark = pytest.mark.timeout(120)

CLEANER = ["log.cleaner.backoff.ms=100", "log.cleaner.min.cleanable.ratio=0.01",
           "offsets.topic.num.partitions=1", "idempotency.topic.num.partitions=1",
           "num.partitions=1"]
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2000",
           "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
BIG = "A" * 600  # three of these fill a 2000-byte segment


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def unb64(text: str | None) -> str | None:
    return None if text is None else base64.b64decode(text).decode()


def key_of(text: str | None) -> str | None:
    """A key as written: the JSON string (keys are JSON too, for the json format)."""
    return None if text is None else str(json.loads(text))


def jv(text: str) -> str:
    """A JSON string value (so the json embedded format can read every record)."""
    return json.dumps(text)


# --- the broker's files ------------------------------------------------------------------


def cleaned_up_to(server: FranzServer, topic: str, partition: int = 0) -> int:
    """The cleaner checkpoint of ``topic-partition`` (its first dirty offset), -1: none."""
    try:
        lines = (server.data_dir / "cleaner-offset-checkpoint").read_text().splitlines()[2:]
    except OSError:
        return -1
    for line in lines:
        name, p, offset = line.rsplit(" ", 2)
        if name == topic and int(p) == partition:
            return int(offset)
    return -1


def wait_cleaned(server: FranzServer, topic: str, past: int, *, partition: int = 0,
                 timeout_s: float = 30.0) -> None:
    """Until the cleaner compacted ``topic-partition`` at least up to offset ``past``."""
    deadline = time.monotonic() + timeout_s
    while cleaned_up_to(server, topic, partition) < past:
        assert time.monotonic() < deadline, (
            f"{topic}-{partition} not cleaned past {past} in {timeout_s:.0f} s "
            f"(checkpoint {cleaned_up_to(server, topic, partition)}):\n{server.log_tail()}")
        time.sleep(0.05)


def batches_on_disk(server: FranzServer, topic: str, partition: int = 0
                    ) -> dict[int, tuple[int, int]]:
    """base offset -> (records, last offset) of every batch in the partition's segments."""
    out: dict[int, tuple[int, int]] = {}
    for seg in sorted((server.data_dir / f"{topic}-{partition}").glob("*.log")):
        for _pos, h in iter_batches(seg.read_bytes()):
            out[h.base_offset] = (h.records_count, h.last_offset)
    return out


def records_on_disk(server: FranzServer, topic: str, partition: int = 0) -> int:
    """How many records the partition holds (what a reader from the log start gets)."""
    return sum(n for n, _last in batches_on_disk(server, topic, partition).values())


def gap_batches(server: FranzServer, topic: str, partition: int = 0) -> dict[int, tuple[int, int]]:
    """The batches compaction took records out of (or emptied)."""
    return {base: (n, last) for base, (n, last) in batches_on_disk(server, topic, partition).items()
            if n != last - base + 1}


# --- the API -----------------------------------------------------------------------------


def cluster_id(http: httpx.Client) -> str:
    return str(http.get("/v3/clusters").json()["data"][0]["cluster_id"])


def create_topic(http: httpx.Client, topic: str, configs: dict[str, str], partitions: int = 1
                 ) -> None:
    r = http.post(f"/v3/clusters/{cluster_id(http)}/topics", json={
        "topic_name": topic, "partitions_count": partitions,
        "configs": [{"name": k, "value": v} for k, v in configs.items()]})
    assert r.status_code == 201, r.text


def produce(http: httpx.Client, topic: str, pairs: list[tuple[str, str]], *,
            partition: int = 0, idempotency_key: str | None = None, status: int = 200,
            **params: Any) -> list[int]:
    headers = {"Content-Type": BINARY}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    r = http.post(f"/topics/{topic}/partitions/{partition}", headers=headers, params=params,
                  json={"records": [{"key": b64(jv(k)), "value": b64(v)} for k, v in pairs]})
    assert r.status_code == status, r.text
    body = r.json()
    if status == 200 and all(o["error_code"] is None for o in body["offsets"]):
        return [o["offset"] for o in body["offsets"]]
    return []


def high_watermark(http: httpx.Client, topic: str, partition: int = 0) -> int:
    r = http.get(f"/topics/{topic}/partitions/{partition}/offsets")
    assert r.status_code == 200, r.text
    return int(r.json()["end_offset"])


#: what ``build_compacted`` leaves: key -> (offset, value) of each key's latest record
Latest = dict[str, tuple[int, str]]


def build_compacted(http: httpx.Client, server: FranzServer, topic: str) -> Latest:
    """A compacted partition holding a batch with a gap and an empty batch.

    offset 0-2: one batch a, b, c; 3: d alone, with an Idempotency-Key (a producer id of
    its own, so its emptied batch stays); 4-8: a (big values); 9: d again; 10-12: a.
    Cleaned up to 10 or more: the batch at 0 keeps b and c (offsets 1, 2), the one at 3
    is empty, a's older values are gone from the cleaned segments."""
    create_topic(http, topic, COMPACT)
    assert produce(http, topic, [("a", jv("a0")), ("b", jv("b0")), ("c", jv("c0"))]) == [0, 1, 2]
    assert produce(http, topic, [("d", jv("d0"))], idempotency_key=f"{topic}-d0") == [3]
    for i in range(5):
        produce(http, topic, [("a", jv(f"{BIG}{i}"))])
    assert produce(http, topic, [("d", jv("d1"))]) == [9]
    for i in range(5, 8):
        produce(http, topic, [("a", jv(f"{BIG}{i}"))])
    wait_cleaned(server, topic, 10)
    gaps = gap_batches(server, topic)
    assert gaps.get(0) == (2, 2) and gaps.get(3) == (0, 3), gaps  # what the tests are about
    return {"a": (12, jv(f"{BIG}7")), "b": (1, jv("b0")), "c": (2, jv("c0")), "d": (9, jv("d1"))}


def check_records(rows: list[tuple[int, str | None, str | None]], latest: Latest,
                  *, removed: tuple[int, ...] = (0, 3)) -> None:
    """What a reader of a compacted topic must see: offsets ascending, the records
    compaction removed absent, and each key's last value read its latest."""
    offsets = [o for o, _k, _v in rows]
    assert offsets == sorted(set(offsets)), offsets
    assert not set(removed) & set(offsets), offsets
    last = {k: (o, v) for o, k, v in rows}
    assert last == latest, last


def range_rows(http: httpx.Client, topic: str, *, offset: int = 0, fmt: str = BINARY,
               **params: Any) -> list[tuple[int, str | None, str | None]]:
    """Every record from ``offset`` to the high watermark through the v2 range read,
    following X-Franz-Next-Offset."""
    rows: list[tuple[int, str | None, str | None]] = []
    for _ in range(200):
        r = http.get(f"/topics/{topic}/partitions/0/records", headers={"Accept": fmt},
                     params={"offset": offset, **params})
        assert r.status_code == 200, (offset, r.status_code, r.text)
        for item in r.json():
            if fmt == BINARY:
                rows.append((item["offset"], key_of(unb64(item["key"])),
                                 unb64(item["value"])))
            else:
                rows.append((item["offset"], item["key"], json.dumps(item["value"])))
        nxt, hw = int(r.headers["X-Franz-Next-Offset"]), int(r.headers["X-Franz-High-Watermark"])
        assert nxt > offset or nxt == hw, (offset, nxt, hw)
        if nxt >= hw:
            return rows
        offset = nxt
    raise AssertionError(f"no end of {topic} after 200 reads")


def v3_rows(http: httpx.Client, topic: str, *, offset: int | None = None, **params: Any
            ) -> list[tuple[int, str | None, str | None]]:
    """Every record through the v3 records route (``next_offset`` followed)."""
    base = f"/v3/clusters/{cluster_id(http)}/topics/{topic}/partitions/0/records"
    rows: list[tuple[int, str | None, str | None]] = []
    query = dict(params) if offset is None else {"offset": offset, **params}
    for _ in range(200):
        r = http.get(base, params=query)
        assert r.status_code == 200, (query, r.status_code, r.text)
        body = r.json()
        for item in body["data"]:
            key = item["key"] and key_of(unb64(item["key"]["data"]))
            value = item["value"] and unb64(item["value"]["data"])
            rows.append((item["offset"], key, value))
        if body["next_offset"] >= body["high_watermark"]:
            return rows
        assert body["next_offset"] > query.get("offset", -1), body["next_offset"]
        query = {**params, "offset": body["next_offset"]}
    raise AssertionError(f"no end of {topic} after 200 reads")


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compacting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A broker whose cleaner runs every 100 ms (the read-only tests share it)."""
    server = FranzServer(tmp_path_factory.mktemp("compacting") / "data", CLEANER)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared(compacting: FranzServer) -> Iterator[tuple[httpx.Client, str, Latest]]:
    """One compacted topic (``build_compacted``) for the tests that only read it."""
    with httpx.Client(base_url=compacting.url, timeout=30.0) as http:
        topic = f"cmp-{uuid.uuid4().hex[:8]}"
        yield http, topic, build_compacted(http, compacting, topic)


# --- reads -------------------------------------------------------------------------------


def test_v2_range_read_over_gaps_and_empty_batch(shared: tuple[httpx.Client, str, Latest]
                                                  ) -> None:
    http, topic, latest = shared
    check_records(range_rows(http, topic), latest)  # binary: per-batch renderings
    check_records(range_rows(http, topic, fmt=JSON), latest)  # json: decoded records
    check_records(range_rows(http, topic, count=1), latest)  # one record a read
    check_records(range_rows(http, topic, max_bytes=1), latest)
    # from inside the gap and from the empty batch: the next record after it
    assert range_rows(http, topic, offset=0, count=1)[0][:2] == (1, "b")
    assert range_rows(http, topic, offset=3, count=1)[0][0] > 3
    r = http.get(f"/topics/{topic}/partitions/0/records", headers={"Accept": BINARY},
                 params={"offset": 3, "count": 1})
    assert r.status_code == 200 and int(r.headers["X-Franz-Next-Offset"]) > 3, r.text


def test_v3_records_over_gaps_and_empty_batch(shared: tuple[httpx.Client, str, Latest]
                                               ) -> None:
    http, topic, latest = shared
    check_records(v3_rows(http, topic), latest)  # from the log start
    check_records(v3_rows(http, topic, offset=0, count=1), latest)
    assert v3_rows(http, topic, offset=3, count=1)[0][0] > 3


def _instance_rows(http: httpx.Client, base: str, fmt: str, want: int, **params: Any
                   ) -> list[tuple[int, str | None, str | None]]:
    """Records of a consumer instance until ``want`` came (or 20 s passed)."""
    rows: list[tuple[int, str | None, str | None]] = []
    deadline = time.monotonic() + 20
    while len(rows) < want and time.monotonic() < deadline:
        r = http.get(f"{base}/records", params={"timeout": 500, **params},
                     headers={"Accept": BINARY if fmt == "binary" else JSON})
        assert r.status_code == 200, r.text
        for item in r.json():
            if fmt == "binary":
                rows.append((item["offset"], key_of(unb64(item["key"])), unb64(item["value"])))
            else:
                rows.append((item["offset"], item["key"], json.dumps(item["value"])))
    return rows


@pytest.mark.parametrize(("fmt", "how"), [("binary", "subscribe"), ("json", "subscribe"),
                                          ("binary", "max_bytes=1"), ("binary", "seek")])
def test_consumer_instance_reads_compacted_topic(
        compacting: FranzServer, shared: tuple[httpx.Client, str, Latest], fmt: str,
        how: str) -> None:
    """A v2 consumer instance: subscribed (binary, json), one record a read (its
    max_bytes cut inside the gapped batch), or assigned and moved by timestamp (to the
    first record left, 1) and by offset (to the emptied batch, 3)."""
    http, topic, latest = shared
    want = records_on_disk(compacting, topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    r = http.post(f"/consumers/{group}", headers={"Content-Type": V2},
                  json={"format": fmt, "auto.offset.reset": "earliest"})
    assert r.status_code == 200, r.text
    base = r.json()["base_uri"]
    try:
        if how == "seek":
            tp = {"topic": topic, "partition": 0}
            r = http.post(f"{base}/assignments", headers={"Content-Type": V2},
                          json={"partitions": [tp]})
            assert r.status_code == 204, r.text
            r = http.post(f"{base}/positions", headers={"Content-Type": V2},
                          json={"timestamps": [{**tp, "timestamp": 0}]})
            assert r.status_code == 204, r.text
            rows = _instance_rows(http, base, fmt, want)
            assert rows and rows[0][0] == 1, rows
            check_records(rows, latest)
            r = http.post(f"{base}/positions", headers={"Content-Type": V2},
                          json={"offsets": [{**tp, "offset": 3}]})
            assert r.status_code == 204, r.text
            rows = _instance_rows(http, base, fmt, 1)
            assert rows and rows[0][0] > 3, rows
            return
        r = http.post(f"{base}/subscription", headers={"Content-Type": V2},
                      json={"topics": [topic]})
        assert r.status_code == 204, r.text
        params = {"max_bytes": 1} if how == "max_bytes=1" else {}
        check_records(_instance_rows(http, base, fmt, want, **params), latest)
    finally:
        http.delete(base, headers={"Content-Type": V2})


def _cli(server: FranzServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--bootstrap-server", server.url],
        cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("with_group", [False, True])
def test_cli_consume_prints_compacted_topic(
        compacting: FranzServer, shared: tuple[httpx.Client, str, Latest],
        with_group: bool) -> None:
    http, topic, latest = shared
    want = records_on_disk(compacting, topic)
    group = ["--group", f"g-{uuid.uuid4().hex[:8]}"] if with_group else []
    done = _cli(compacting, "consume", "--topic", topic, "--from-beginning", *group,
                "--max-messages", str(want), "--timeout-ms", "5000", "--output", "json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    check_records([(r["offset"], key_of(r["key"]), r["value"]) for r in rows], latest)
    assert f"Processed a total of {want} messages" in done.stderr


def test_compaction_runs_again_over_compacted_segments(compacting: FranzServer) -> None:
    """A second cleaning recopies the segments the first one wrote (a batch with a gap
    and an empty batch among them) and takes another record out of the gapped batch."""
    with httpx.Client(base_url=compacting.url, timeout=30.0) as http:
        topic = f"cmp-{uuid.uuid4().hex[:8]}"
        latest = build_compacted(http, compacting, topic)
        first = cleaned_up_to(compacting, topic)
        [b1] = produce(http, topic, [("b", jv("b1"))])
        for i in range(8, 12):
            produce(http, topic, [("a", jv(f"{BIG}{i}"))])
        end = high_watermark(http, topic)
        wait_cleaned(compacting, topic, b1 + 1)
        assert cleaned_up_to(compacting, topic) > first
        gaps = gap_batches(compacting, topic)
        assert gaps.get(0) == (1, 2) and gaps.get(3) == (0, 3), gaps  # c alone; d's empty one
        latest = {**latest, "a": (end - 1, jv(f"{BIG}11")), "b": (b1, jv("b1"))}
        check_records(range_rows(http, topic), latest, removed=(0, 1, 3))
        check_records(v3_rows(http, topic), latest, removed=(0, 1, 3))


def test_compacted_log_recovers_after_a_crash(
        compacting: FranzServer, shared: tuple[httpx.Client, str, Latest]) -> None:
    """SIGKILL, and the indexes of the compacted partition lost: the broker recovers the
    log from its batches (gapped and empty ones among them) and reads it as before.
    (Last of the tests on ``compacting``: it restarts that broker.)"""
    http, topic, latest = shared
    before = batches_on_disk(compacting, topic)
    http.close()
    compacting.kill()
    for index in (compacting.data_dir / f"{topic}-0").glob("*index"):
        index.unlink()
    compacting.start()
    assert batches_on_disk(compacting, topic) == before
    with httpx.Client(base_url=compacting.url, timeout=30.0) as again:
        check_records(range_rows(again, topic), latest)
        check_records(v3_rows(again, topic), latest)


# --- restarts ----------------------------------------------------------------------------
#
# One broker holds a compacted log of each kind (a user topic with an empty producer
# batch, ``__consumer_offsets``, ``_schemas``, ``__franz_idempotency``), built through the
# API and cleaned; it is restarted once, then each test reads its own back.

OFFSETS = "__consumer_offsets"
SCHEMAS = "_schemas"
IDEMPOTENCY = "__franz_idempotency"
SR = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
RESTARTED = [
    *CLEANER,
    "offsets.topic.segment.bytes=4096",
    "log.segment.bytes=1024",  # _schemas takes the broker's
    "log.roll.ms=300",  # __franz_idempotency's segment.bytes is fixed (100 MB)
]


@dataclass
class Built:
    """What each scenario wrote before the restart, to be read back after it."""

    topic: str = ""
    latest: Latest = field(default_factory=dict)
    group: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, Any] = field(default_factory=dict)


def _gap_at(server: FranzServer, topic: str, base: int) -> tuple[int, int] | None:
    return gap_batches(server, topic).get(base)


def build_group(http: httpx.Client, server: FranzServer) -> dict[str, Any]:
    """One commit of three partitions (one batch), then many commits of one of them:
    compaction leaves that batch with the other two."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    parts = [{"topic": topic, "partition": p} for p in range(3)]
    create_topic(http, topic, {}, partitions=3)
    r = http.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={"format": "binary"})
    assert r.status_code == 200, r.text
    base = r.json()["base_uri"].removeprefix(server.url)
    r = http.post(f"{base}/assignments", headers={"Content-Type": V2},
                  json={"partitions": parts})
    assert r.status_code == 204, r.text

    def commit(offsets: dict[int, int]) -> None:
        r = http.post(f"{base}/offsets", headers={"Content-Type": V2}, json={"offsets": [
            {"topic": topic, "partition": p, "offset": o} for p, o in offsets.items()]})
        assert r.status_code == 200, r.text

    three = high_watermark(http, OFFSETS)
    commit({0: 0, 1: 10, 2: 20})
    assert high_watermark(http, OFFSETS) == three + 3
    for i in range(1, 61):
        commit({0: i})
    wait_cleaned(server, OFFSETS, three + 10)
    assert _gap_at(server, OFFSETS, three) == (2, three + 2), batches_on_disk(server, OFFSETS)
    return {"topic": topic, "group": group, "base": base, "parts": parts,
            "committed": {(topic, 0): 61, (topic, 1): 11, (topic, 2): 21}}


def build_schemas(http: httpx.Client, server: FranzServer) -> dict[str, Any]:
    """A soft delete of a subject with a compatibility level writes one batch (the
    delete, a tombstone of the level); a new level takes the tombstone out."""
    subject = f"s-{uuid.uuid4().hex[:8]}"
    r = http.post(f"/subjects/{subject}/versions", headers=SR, json={"schema": '"string"'})
    assert r.status_code == 200, r.text
    schema_id = r.json()["id"]
    r = http.put(f"/config/{subject}", headers=SR, json={"compatibility": "FULL"})
    assert r.status_code == 200, r.text
    deleted_at = high_watermark(http, SCHEMAS)
    r = http.delete(f"/subjects/{subject}", headers=SR)
    assert r.status_code == 200 and r.json() == [1], r.text
    assert high_watermark(http, SCHEMAS) == deleted_at + 2
    r = http.put(f"/config/{subject}", headers=SR, json={"compatibility": "NONE"})
    assert r.status_code == 200, r.text
    others = {}
    for i in range(12):  # fill segments, so the records above get cleaned
        r = http.post(f"/subjects/other-{i}/versions", headers=SR, json={"schema": json.dumps(
            {"type": "enum", "name": f"E{i}", "symbols": [f"S{i}"]})})
        assert r.status_code == 200, r.text
        others[f"other-{i}"] = r.json()["id"]
    wait_cleaned(server, SCHEMAS, deleted_at + 3)
    assert _gap_at(server, SCHEMAS, deleted_at) == (1, deleted_at + 1), batches_on_disk(
        server, SCHEMAS)
    return {"subject": subject, "id": schema_id, "others": others}


def build_keys(http: httpx.Client, server: FranzServer) -> dict[str, Any]:
    """A request that failed retriably (not enough in-sync replicas) leaves its key's
    claim record in the batch of another request's answer; its successful retry's
    answer takes the claim out of that batch."""
    stuck, ok = f"x-{uuid.uuid4().hex[:8]}", f"y-{uuid.uuid4().hex[:8]}"
    run = uuid.uuid4().hex[:8]
    pairs = [(f"{run}-stuck-{i}", f"{run}-ok-{i}") for i in range(3)]
    create_topic(http, stuck, {"min.insync.replicas": "2"})  # acks=all fails, retriably
    create_topic(http, ok, {})
    first: dict[str, list[int]] = {}
    for k_stuck, k_ok in pairs:  # both within one 0.2 s flush of the coordinator: one batch
        assert not produce(http, stuck, [("k", jv(k_stuck))], idempotency_key=k_stuck,
                           acks="all")
        first[k_ok] = produce(http, ok, [("k", jv(k_ok))], idempotency_key=k_ok)
        time.sleep(0.25)
    r = http.put(f"/v3/clusters/{cluster_id(http)}/topics/{stuck}/configs/min.insync.replicas",
                 json={"value": "1"})
    assert r.status_code == 204, r.text
    for k_stuck, _k_ok in pairs:  # the retries succeed: their answers replace the claims
        first[k_stuck] = produce(http, stuck, [("k", jv(k_stuck))], idempotency_key=k_stuck,
                                 acks="all")
        assert first[k_stuck], k_stuck
    time.sleep(0.25)
    end = high_watermark(http, IDEMPOTENCY)
    for i in range(3):  # roll past them (log.roll.ms)
        time.sleep(0.35)
        produce(http, ok, [("k", jv(f"{run}-more-{i}"))], idempotency_key=f"{run}-more-{i}")
    wait_cleaned(server, IDEMPOTENCY, end)
    gaps = {b: g for b, g in gap_batches(server, IDEMPOTENCY).items() if g[0] > 0}
    assert gaps, batches_on_disk(server, IDEMPOTENCY)
    return {"topics": (stuck, ok), "pairs": pairs, "first": first,
            "ends": (high_watermark(http, stuck), high_watermark(http, ok))}


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FranzServer, Built]]:
    server = FranzServer(tmp_path_factory.mktemp("restarted") / "data", RESTARTED)
    server.start()
    built = Built(topic=f"cmp-{uuid.uuid4().hex[:8]}")
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as http:
            built.latest = build_compacted(http, server, built.topic)
            built.group = build_group(http, server)
            built.schemas = build_schemas(http, server)
            built.keys = build_keys(http, server)
        server.restart()  # (no client connection open: a clean stop is quick)
        yield server, built
    finally:
        server.stop()


@pytest.fixture
def after_restart(restarted: tuple[FranzServer, Built]
                  ) -> Iterator[tuple[httpx.Client, FranzServer, Built]]:
    server, built = restarted
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        yield http, server, built


def test_restart_reads_empty_producer_batch(
        after_restart: tuple[httpx.Client, FranzServer, Built]) -> None:
    """After a restart (producer state rebuilt from the compacted log) the empty batch
    and the gap read as before, and a retry of the emptied batch's Idempotency-Key
    request still gets its original offset without writing again."""
    http, server, built = after_restart
    topic, latest = built.topic, built.latest
    assert gap_batches(server, topic).get(3) == (0, 3)
    check_records(range_rows(http, topic), latest)
    check_records(v3_rows(http, topic), latest)
    end = high_watermark(http, topic)
    assert produce(http, topic, [("d", jv("d0"))], idempotency_key=f"{topic}-d0") == [3]
    assert high_watermark(http, topic) == end
    [e] = produce(http, topic, [("e", jv("e0"))])
    assert e == end
    check_records(range_rows(http, topic), {**latest, "e": (e, jv("e0"))})


def test_consumer_group_loads_compacted_offsets_after_restart(
        after_restart: tuple[httpx.Client, FranzServer, Built]) -> None:
    """The group's coordinator loads ``__consumer_offsets`` through the batch with a
    gap: the same committed offsets, the instance and the group still there."""
    http, _server, built = after_restart
    g = built.group
    r = http.request("GET", f"{g['base']}/offsets", headers={"Content-Type": V2},
                     json={"partitions": g["parts"]})
    assert r.status_code == 200, r.text
    got = {(o["topic"], o["partition"]): o["offset"] for o in r.json()["offsets"]}
    assert got == g["committed"]
    r = http.get(f"{g['base']}/assignments", headers={"Accept": V2})
    assert r.status_code == 200 and len(r.json()["partitions"]) == 3, r.text
    r = http.get(f"/v3/clusters/{cluster_id(http)}/consumer-groups/{g['group']}")
    assert r.status_code == 200, r.text
    r = http.delete(g["base"], headers={"Content-Type": V2})
    assert r.status_code == 204, r.text


def test_schema_registry_loads_compacted_schemas_after_restart(
        after_restart: tuple[httpx.Client, FranzServer, Built]) -> None:
    """The registry loads ``_schemas`` through the batch with a gap: subjects,
    the soft delete and the subject's level as before."""
    http, _server, built = after_restart
    subject, others = built.schemas["subject"], built.schemas["others"]
    r = http.get("/subjects", headers=SR)
    assert r.status_code == 200, r.text
    assert sorted(r.json()) == sorted(others)
    r = http.get("/subjects", headers=SR, params={"deleted": "true"})
    assert r.status_code == 200 and sorted(r.json()) == sorted([*others, subject]), r.text
    r = http.get(f"/config/{subject}", headers=SR)
    assert r.status_code == 200 and r.json()["compatibilityLevel"] == "NONE", r.text
    r = http.get(f"/schemas/ids/{built.schemas['id']}", headers=SR)
    assert r.status_code == 200 and r.json()["schema"] == '"string"', r.text
    for name, schema_id in others.items():
        r = http.get(f"/subjects/{name}/versions/latest", headers=SR)
        assert r.status_code == 200 and r.json()["id"] == schema_id, r.text


def test_idempotency_keys_load_from_compacted_log_after_restart(
        after_restart: tuple[httpx.Client, FranzServer, Built]) -> None:
    """The coordinator loads ``__franz_idempotency`` through the batch with a gap and
    reads each answer back from its record: every retry gets its first answer, nothing
    is written again."""
    http, _server, built = after_restart
    k = built.keys
    stuck, ok = k["topics"]
    for k_stuck, k_ok in k["pairs"]:
        assert produce(http, ok, [("k", jv(k_ok))], idempotency_key=k_ok) == k["first"][k_ok]
        assert produce(http, stuck, [("k", jv(k_stuck))], idempotency_key=k_stuck,
                       acks="all") == k["first"][k_stuck]
    assert (high_watermark(http, stuck), high_watermark(http, ok)) == k["ends"]
