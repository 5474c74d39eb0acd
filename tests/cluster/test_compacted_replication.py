"""Replication of really compacted logs: a replica that starts from nothing fetches, from
the leader's log start, the batches compaction left (one with an offset gap, one emptied
but kept for its producer id), and serves the same records once it leads.

Two real ``franz broker`` processes on a real ZooKeeper; the cleaner runs every 100 ms.
A replica joins through ``franz reassign-partitions`` and then takes the partition over
alone; a follower whose data dir was wiped catches up again and becomes the leader when
the other broker dies. Each read is what a user gets: the latest value of each key,
offsets ascending, no 5xx (before 9cd5bf1 every read of such a batch was a 500).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from core.storage.batch import iter_batches

from .conftest import BrokerProcess, free_port, running, wait_until

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
BINARY = "application/vnd.kafka.binary.v2+json"
OVERRIDES = [
    "log.cleaner.backoff.ms=100", "log.cleaner.min.cleanable.ratio=0.01",
    "offsets.topic.num.partitions=1", "offsets.topic.replication.factor=1",
    "idempotency.topic.num.partitions=1", "idempotency.topic.replication.factor=1",
    "zookeeper.session.timeout.ms=4000", "replica.lag.time.max.ms=2000",
    "replica.fetch.backoff.ms=200", "replica.fetch.wait.max.ms=200",
]
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2000",
           "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
BIG = "A" * 600
Latest = dict[str, tuple[int, str]]


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("compacted-replication")
    zk = f"{zookeeper}/franz-compacted-{os.getpid()}-{time.monotonic_ns()}"
    procs = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                           overrides=OVERRIDES) for i in range(2)]
    with running(procs):
        yield procs


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def unb64(text: str | None) -> str | None:
    return None if text is None else base64.b64decode(text).decode()


def cid(b: BrokerProcess) -> str:
    return str(httpx.get(f"{b.url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"])


def assignment(zk: KazooClient, topic: str) -> list[int]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return list(json.loads(data)["partitions"]["0"])


def state(zk: KazooClient, topic: str) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    return dict(json.loads(data))


def replica(b: BrokerProcess, topic: str) -> dict[str, Any] | None:
    try:
        rows = httpx.get(f"{b.url}/internal/v1/replicas", timeout=5).json()
    except httpx.HTTPError:
        return None
    return next((r for r in rows if r["topic"] == topic and r["partition"] == 0), None)


def cleaned_up_to(b: BrokerProcess, topic: str) -> int:
    try:
        lines = (b.data_dir / "cleaner-offset-checkpoint").read_text().splitlines()[2:]
    except OSError:
        return -1
    for line in lines:
        name, p, offset = line.rsplit(" ", 2)
        if name == topic and p == "0":
            return int(offset)
    return -1


def batches_on_disk(b: BrokerProcess, topic: str) -> dict[int, tuple[int, int]]:
    """base offset -> (records, last offset) of every batch of ``topic``-0 on ``b``."""
    out: dict[int, tuple[int, int]] = {}
    for seg in sorted((b.data_dir / f"{topic}-0").glob("*.log")):
        for _pos, h in iter_batches(seg.read_bytes()):
            out[h.base_offset] = (h.records_count, h.last_offset)
    return out


def gap_batches(b: BrokerProcess, topic: str) -> dict[int, tuple[int, int]]:
    return {base: (n, last) for base, (n, last) in batches_on_disk(b, topic).items()
            if n != last - base + 1}


def produce(b: BrokerProcess, topic: str, key: str, value: str,
            idempotency_key: str | None = None) -> int:
    headers = {"Content-Type": BINARY}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    r = httpx.post(f"{b.url}/topics/{topic}/partitions/0", headers=headers, timeout=30,
                   params={"acks": "all"},
                   json={"records": [{"key": b64(key), "value": b64(value)}]})
    assert r.status_code == 200, r.text
    [o] = r.json()["offsets"]
    assert o["error_code"] is None, o
    return int(o["offset"])


def build_compacted(brokers: list[BrokerProcess], zk: KazooClient, topic: str, rf: int
                    ) -> tuple[BrokerProcess, Latest]:
    """``topic``-0 (its leader returned): a batch a, b, c (0-2), d alone under an
    Idempotency-Key (3), then a and d overwritten; cleaned past 10 on the leader, the
    batch at 0 keeps b and c and the one at 3 is empty."""
    first = brokers[0]
    r = httpx.post(f"{first.url}/v3/clusters/{cid(first)}/topics", timeout=30, json={
        "topic_name": topic, "partitions_count": 1, "replication_factor": rf,
        "configs": [{"name": k, "value": v} for k, v in COMPACT.items()]})
    assert r.status_code == 201, r.text
    wait_until(lambda: zk.exists(f"/brokers/topics/{topic}/partitions/0/state")
               and len(state(zk, topic)["isr"]) == rf, 20, f"{topic} in sync")
    leader = brokers[state(zk, topic)["leader"]]
    wait_until(lambda: (r := replica(leader, topic)) is not None
               and r["leader"] == leader.broker_id,
               20, f"{topic} led")
    r = httpx.post(f"{leader.url}/topics/{topic}/partitions/0", timeout=30,
                   params={"acks": "all"}, headers={"Content-Type": BINARY},
                   json={"records": [{"key": b64(k), "value": b64(f"{k}0")} for k in "abc"]})
    assert r.status_code == 200, r.text
    assert [o["offset"] for o in r.json()["offsets"]] == [0, 1, 2]
    assert produce(leader, topic, "d", "d0", f"{topic}-d0") == 3
    for i in range(5):
        produce(leader, topic, "a", f"{BIG}{i}")
    assert produce(leader, topic, "d", "d1") == 9
    for i in range(5, 8):
        produce(leader, topic, "a", f"{BIG}{i}")
    wait_until(lambda: cleaned_up_to(leader, topic) >= 10, 30, f"{topic} cleaned")
    gaps = gap_batches(leader, topic)
    assert gaps.get(0) == (2, 2) and gaps.get(3) == (0, 3), gaps
    return leader, {"a": (12, f"{BIG}7"), "b": (1, "b0"), "c": (2, "c0"), "d": (9, "d1")}


def read_all(b: BrokerProcess, topic: str) -> list[tuple[int, str | None, str | None]]:
    """Every record through ``b``'s v2 range read, following X-Franz-Next-Offset."""
    rows: list[tuple[int, str | None, str | None]] = []
    offset = 0
    for _ in range(100):
        r = httpx.get(f"{b.url}/topics/{topic}/partitions/0/records", timeout=30,
                      params={"offset": offset}, headers={"Accept": BINARY})
        assert r.status_code == 200, (offset, r.status_code, r.text)
        rows += [(x["offset"], unb64(x["key"]), unb64(x["value"])) for x in r.json()]
        nxt, hw = int(r.headers["X-Franz-Next-Offset"]), int(r.headers["X-Franz-High-Watermark"])
        if nxt >= hw:
            return rows
        assert nxt > offset, (offset, nxt)
        offset = nxt
    raise AssertionError("no end")


def read_v3(b: BrokerProcess, topic: str) -> list[tuple[int, str | None, str | None]]:
    url = f"{b.url}/v3/clusters/{cid(b)}/topics/{topic}/partitions/0/records"
    rows: list[tuple[int, str | None, str | None]] = []
    params: dict[str, int] = {}
    for _ in range(100):
        r = httpx.get(url, params=params, timeout=30)
        assert r.status_code == 200, (params, r.status_code, r.text)
        body = r.json()
        rows += [(x["offset"], x["key"] and unb64(x["key"]["data"]),
                  x["value"] and unb64(x["value"]["data"])) for x in body["data"]]
        if body["next_offset"] >= body["high_watermark"]:
            return rows
        params = {"offset": body["next_offset"]}
    raise AssertionError("no end")


def check_records(rows: list[tuple[int, str | None, str | None]], latest: Latest) -> None:
    offsets = [o for o, _k, _v in rows]
    assert offsets == sorted(set(offsets)), offsets
    assert not {0, 3} & set(offsets), offsets
    assert {k: (o, v) for o, k, v in rows} == latest


def reassign(b: BrokerProcess, topic: str, replicas: list[int], tmp_path: Path,
             zk: KazooClient) -> None:
    plan = tmp_path / f"plan-{'-'.join(map(str, replicas))}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}))
    cli = [sys.executable, "-m", "app.cli", "reassign-partitions", "--bootstrap-server", b.url,
           "--reassignment-json-file", str(plan)]
    done = subprocess.run([*cli, "--execute"], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    wait_until(lambda: subprocess.run([*cli, "--verify"], cwd=ROOT, capture_output=True,
                                      timeout=60).returncode == 0, 60, f"{topic} -> {replicas}")
    assert assignment(zk, topic) == replicas


def caught_up(leader: BrokerProcess, follower: BrokerProcess, topic: str) -> bool:
    lr, fr = replica(leader, topic), replica(follower, topic)
    return (lr is not None and fr is not None
            and fr["log_end_offset"] == lr["log_end_offset"] == lr["high_watermark"])


def test_replica_added_by_reassignment_fetches_compacted_batches_then_leads(
        brokers: list[BrokerProcess], zk: KazooClient, tmp_path: Path) -> None:
    topic = "compacted-moved"
    old, latest = build_compacted(brokers, zk, topic, 1)
    new = brokers[1 - old.broker_id]
    reassign(new, topic, [old.broker_id, new.broker_id], tmp_path, zk)
    wait_until(lambda: caught_up(old, new, topic), 30, "the new replica caught up")
    # it fetched from the log start: the leader's compacted batches, as they are
    gaps = gap_batches(new, topic)
    assert gaps.get(0) == (2, 2) and gaps.get(3) == (0, 3), gaps
    reassign(old, topic, [new.broker_id], tmp_path, zk)  # the newcomer alone: it leads
    wait_until(lambda: state(zk, topic)["leader"] == new.broker_id
               and (r := replica(new, topic)) is not None and r["leader"] == new.broker_id,
               20, "the new replica leads")
    check_records(read_all(new, topic), latest)
    check_records(read_v3(new, topic), latest)
    check_records(read_all(old, topic), latest)  # through the other broker too (forwarded)
    # the producer state it rebuilt from those batches answers the emptied batch's retry
    assert produce(new, topic, "d", "d0", f"{topic}-d0") == 3
    assert produce(new, topic, "e", "e0") == 13


def test_wiped_follower_fetches_compacted_log_again_then_leads(
        brokers: list[BrokerProcess], zk: KazooClient) -> None:
    topic = "compacted-wiped"
    leader, latest = build_compacted(brokers, zk, topic, 2)
    follower = brokers[1 - leader.broker_id]
    wait_until(lambda: caught_up(leader, follower, topic), 30, "the follower caught up")
    follower.stop()
    shutil.rmtree(follower.data_dir)  # a lost disk: the broker starts from nothing
    follower.start()
    wait_until(lambda: caught_up(leader, follower, topic)
               and sorted(state(zk, topic)["isr"]) == [0, 1], 40, "the wiped follower in sync")
    gaps = gap_batches(follower, topic)
    assert gaps.get(0) == (2, 2) and gaps.get(3) == (0, 3), gaps
    check_records(read_all(follower, topic), latest)  # forwarded to the leader
    leader.kill()
    try:
        wait_until(lambda: state(zk, topic)["leader"] == follower.broker_id
                   and (r := replica(follower, topic)) is not None
                   and r["leader"] == follower.broker_id, 30, "failover to the wiped follower")
        check_records(read_all(follower, topic), latest)
        check_records(read_v3(follower, topic), latest)
    finally:
        leader.start()
