"""Internal topics and what may be written, against real servers: ``__consumer_offsets``
cannot be deleted, reconfigured or repartitioned through any route, nor appended to over
the internal API; the internal API decodes every record before writing; and no
``segment.bytes`` makes a topic unwritable."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import ROOT, FranzServer, V2Client

from core.broker.group.hashing import coordinator_partition
from core.broker.group.records import offset_tombstone
from core.broker.types import OFFSETS_TOPIC, TopicPartition
from core.storage.batch import compute_crc
from core.storage.records import NewRecord, build_batch

OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions: the servers' default
OCTET = {"Content-Type": "application/octet-stream"}
INVALID_TOPIC, CORRUPT_MESSAGE = 17, 2  # Kafka's error codes


# --- helpers ---------------------------------------------------------------------------


def cluster_base(http: httpx.Client) -> str:
    return "/v3/clusters/" + http.get("/v3/clusters").json()["data"][0]["cluster_id"]


def refused_as_internal(resp: httpx.Response) -> None:
    """Confluent's answer to Kafka's INVALID_TOPIC_EXCEPTION, naming the topic."""
    assert resp.status_code == 400, (resp.status_code, resp.text)
    body = resp.json()
    assert body["error_code"] == 40002, body
    assert f"'{OFFSETS_TOPIC}' is internal" in body["message"], body


def commit(v2: V2Client, group: str, topic: str, offset: int) -> None:
    """Commit ``offset`` for ``topic``-0 through a v2 consumer, then remove it."""
    config: dict[str, Any] = {"name": "c", "auto.commit.enable": "false"}
    v2.create_consumer(group, **config)
    inst = f"/consumers/{group}/instances/c"
    v2.post(inst + "/offsets", {"offsets": [{"topic": topic, "partition": 0, "offset": offset}]},
            status=200)  # fmt: skip
    assert v2.http.delete(inst).status_code == 204


def committed(http: httpx.Client, group: str, *, deadline_s: float = 20.0) -> dict[tuple[str, int], int]:
    """The group's committed offsets (v3), retried while the coordinator loads them."""
    end = time.monotonic() + deadline_s
    while True:
        resp = http.get(f"{cluster_base(http)}/consumer-groups/{group}/offsets")
        if resp.status_code == 200 or time.monotonic() > end:
            break
        time.sleep(0.2)
    assert resp.status_code == 200, resp.text
    return {(r["topic_name"], r["partition_id"]): r["current_offset"] for r in resp.json()["data"]}


def offsets_topic(http: httpx.Client) -> tuple[int, str]:
    """Partition count and cleanup.policy of ``__consumer_offsets``."""
    base = f"{cluster_base(http)}/topics/{OFFSETS_TOPIC}"
    count = len(http.get(base + "/partitions").json()["data"])
    return count, http.get(base + "/configs/cleanup.policy").json()["value"]


def internal_append(http: httpx.Client, topic: str, partition: int, data: bytes) -> httpx.Response:
    return http.post("/internal/v1/append", params={"topic": topic, "partition": partition},
                     content=data, headers=OCTET)  # fmt: skip


def log_end(http: httpx.Client, topic: str, partition: int) -> int:
    resp = http.get("/internal/v1/offsets", params={"topic": topic, "partition": partition})
    assert resp.status_code == 200, resp.text
    return int(resp.json()["log_end_offset"])


def malformed_batch() -> bytes:
    """A CRC-valid batch whose first record's key length varint runs past the record:
    written, it would fail every read of the partition."""
    buf = build_batch([NewRecord(b"forged", key=b"k"), NewRecord(b"x", key=b"k")],
                      now_ms=int(time.time() * 1000))  # fmt: skip
    key_length_at = 61 + 4  # record length, attributes, timestamp and offset deltas
    assert buf[key_length_at] == 0x02  # varint 1: the key b"k"
    buf[key_length_at] = 0x7E
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))  # CRC-32C, as Kafka's
    return bytes(buf)


def read_values(http: httpx.Client, topic: str, partition: int = 0) -> list[bytes | None]:
    """Every value up to the high watermark (a read stops at a segment's end, as Kafka's)."""
    out: list[bytes | None] = []
    offset, high = 0, 1
    while offset < high:
        resp = http.get(f"/topics/{topic}/partitions/{partition}/records",
                        params={"offset": offset})  # fmt: skip
        assert resp.status_code == 200, resp.text
        out += [V2Client.unb64(r["value"]) for r in resp.json()]
        offset = int(resp.headers["X-Franz-Next-Offset"])
        high = int(resp.headers["X-Franz-High-Watermark"])
    return out


@pytest.fixture
def own(restartable_server: FranzServer) -> Iterator[tuple[FranzServer, httpx.Client, V2Client]]:
    """A broker of this test's own, with a client and v2 helpers."""
    with httpx.Client(base_url=restartable_server.url, timeout=30.0) as http:
        yield restartable_server, http, V2Client(http)


# --- deleting and changing __consumer_offsets ------------------------------------------------


def test_offsets_topic_cannot_be_deleted_and_offsets_survive(
    client: httpx.Client, v2: V2Client, topic: str, group: str
) -> None:
    v2.produce_values(topic, ["a", "b", "c"], partition=0)
    commit(v2, group, topic, 1)
    before = committed(client, group)
    assert before[(topic, 0)] > 0
    refused_as_internal(client.delete(f"{cluster_base(client)}/topics/{OFFSETS_TOPIC}"))
    assert client.get(f"{cluster_base(client)}/topics/{OFFSETS_TOPIC}").status_code == 200
    assert committed(client, group) == before


def test_the_cli_cannot_delete_the_offsets_topic(franz_url: str) -> None:
    cmd = [sys.executable, "-m", "app.cli", "topics", "--bootstrap-server", franz_url,
           "--delete", "--topic", OFFSETS_TOPIC]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, cwd=ROOT, timeout=60, check=False, text=True)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert f"'{OFFSETS_TOPIC}' is internal and cannot be deleted" in proc.stderr


CHANGES: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "set one config": ("PUT", "/configs/cleanup.policy", {"value": "delete"}),
    "reset one config": ("DELETE", "/configs/cleanup.policy", None),
    "alter configs": ("POST", "/configs:alter", {"data": [
        {"name": "segment.bytes", "value": "14"}, {"name": "retention.ms", "value": "1"}]}),
    "validate an alteration": ("POST", "/configs:alter", {
        "data": [{"name": "min.insync.replicas", "value": "5"}], "validate_only": True}),
    "reset in an alteration": ("POST", "/configs:alter", {
        "data": [{"name": "cleanup.policy", "operation": "DELETE"}]}),
    "add partitions": ("PATCH", "", {"partitions_count": OFFSETS_PARTITIONS + 1}),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_offsets_topic_cannot_be_reconfigured_or_repartitioned(
    client: httpx.Client, change: str
) -> None:
    method, path, body = CHANGES[change]
    before = offsets_topic(client)
    assert before == (OFFSETS_PARTITIONS, "compact")
    url = f"{cluster_base(client)}/topics/{OFFSETS_TOPIC}{path}"
    refused_as_internal(client.request(method, url, json=body))
    assert offsets_topic(client) == before


# --- appends over the internal API ---------------------------------------------------------


def test_forged_offsets_append_is_refused_and_commits_survive_restart(
    own: tuple[FranzServer, httpx.Client, V2Client], topic: str, group: str
) -> None:
    server, http, v2 = own
    v2.produce_values(topic, ["a", "b", "c"], partition=0)
    commit(v2, group, topic, 1)
    before = committed(http, group)
    assert before[(topic, 0)] > 0
    # the tombstone the coordinator writes when a group's offset is deleted
    forged = build_batch([offset_tombstone(group, TopicPartition(topic, 0), 0)], now_ms=0)
    partition = coordinator_partition(group, OFFSETS_PARTITIONS)
    end = log_end(http, OFFSETS_TOPIC, partition)
    resp = internal_append(http, OFFSETS_TOPIC, partition, bytes(forged))
    assert resp.status_code == 400, resp.text
    assert resp.json()["kafka_error_code"] == INVALID_TOPIC, resp.json()
    assert "Cannot append to internal topic" in resp.json()["message"]
    assert log_end(http, OFFSETS_TOPIC, partition) == end
    server.restart()  # the coordinator reloads the group from the log
    assert committed(http, group) == before


def test_malformed_record_is_refused_and_the_partition_stays_readable(
    own: tuple[FranzServer, httpx.Client, V2Client], topic: str
) -> None:
    server, http, v2 = own
    v2.produce_values(topic, ["a", "b"], partition=0)
    resp = internal_append(http, topic, 0, malformed_batch())
    assert resp.status_code == 400, resp.text
    assert resp.json()["kafka_error_code"] == CORRUPT_MESSAGE, resp.json()
    assert log_end(http, topic, 0) == 2
    assert read_values(http, topic) == [b"a", b"b"]
    server.restart()
    assert read_values(http, topic) == [b"a", b"b"]
    assert v2.produce_values(topic, ["c"], partition=0) == [2]
    assert read_values(http, topic) == [b"a", b"b", b"c"]


def test_well_formed_internal_appends_still_work(client: httpx.Client, v2: V2Client,
                                                 topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    batch = build_batch([NewRecord(b"b"), NewRecord(b"c", key=b"k", headers=[("h", b"1")])],
                        now_ms=int(time.time() * 1000))  # fmt: skip
    resp = internal_append(client, topic, 0, bytes(batch))
    assert resp.status_code == 200, resp.text
    assert (resp.json()["first_offset"], resp.json()["num_records"]) == (1, 2)
    assert read_values(client, topic) == [b"a", b"b", b"c"]


# --- segment.bytes ----------------------------------------------------------------------------


def test_segment_bytes_14_keeps_a_topic_writable(
    own: tuple[FranzServer, httpx.Client, V2Client], topic: str
) -> None:
    server, http, v2 = own
    base = cluster_base(http)
    resp = http.post(f"{base}/topics", json={
        "topic_name": topic, "partitions_count": 1,
        "configs": [{"name": "segment.bytes", "value": "14"}]})  # fmt: skip
    assert resp.status_code == 201, resp.text
    assert v2.produce_values(topic, ["a"]) == [0]
    assert v2.produce_values(topic, ["b", "c"]) == [1, 2]
    assert read_values(http, topic) == [b"a", b"b", b"c"]
    server.restart()
    assert v2.produce_values(topic, ["d"]) == [3]
    assert read_values(http, topic) == [b"a", b"b", b"c", b"d"]


def test_segment_bytes_lowered_on_a_topic_with_data(client: httpx.Client, v2: V2Client,
                                                    topic: str) -> None:
    v2.produce_values(topic, ["a", "b"], partition=0)
    url = f"{cluster_base(client)}/topics/{topic}/configs/segment.bytes"
    assert client.put(url, json={"value": "14"}).status_code == 204
    assert v2.produce_values(topic, ["c", "d"], partition=0) == [2, 3]
    assert read_values(client, topic) == [b"a", b"b", b"c", b"d"]
