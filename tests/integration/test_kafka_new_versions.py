"""The versions Kafka 3.9 answers and today's clients negotiate, over raw connections to
a real broker: Fetch v13-v17 by topic id (KIP-516), with fetch sessions keyed by id;
Produce v10-v11; ApiVersions v4; Metadata v12 by topic id.

- Fetch by the id Metadata answers returns the records produced, at every version; an
  id no topic has is UNKNOWN_TOPIC_ID (100) per partition.
- A session made by ids goes on incrementally by ids (forgotten partitions by id), and
  a session made by names cannot go on at v13+ (FETCH_SESSION_TOPIC_ID_ERROR, 106).
- A topic deleted and created again under its name has a new id: the old id is
  UNKNOWN_TOPIC_ID without a session and INCONSISTENT_TOPIC_ID (103) in the session that
  held it (UNKNOWN_TOPIC_OR_PARTITION while the name has no topic), never the new
  topic's records.
- Produce v10/v11 appends as before (transactional batches still refused); a follower's
  Fetch v15 (ReplicaState) closes the connection.

The NOT_LEADER_OR_FOLLOWER answers of Produce v10 and Fetch v16 that name the current
leader and its endpoint need a broker that does not lead: tests/cluster/
test_kafka_new_versions_cluster.py.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any

import httpx
import pytest
from conftest import FranzServer

from api.kafka.protocol.codegen import decoder, encode
from api.kafka.protocol.schema import load
from core.storage.records import NewRecord, build_batch, decode_records

WAIT_S = 10
FETCH_VERSIONS = [13, 14, 15, 16, 17]
UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID = 3, 100, 103
FETCH_SESSION_TOPIC_ID_ERROR = 106


class Raw:
    """One connection; ``call`` sends a request at a version and decodes its answer."""

    def __init__(self, server: FranzServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.kafka_port), timeout=WAIT_S)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, api: str, key: int, version: int, body: dict[str, Any]) -> None:
        self.correlation += 1
        flexible = version in load(f"{api}Request").flexible
        header = encode("RequestHeader", 2 if flexible else 1, {
            "request_api_key": key, "request_api_version": version,
            "correlation_id": self.correlation, "client_id": "new-versions"})
        payload = header + encode(f"{api}Request", version, body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def call(self, api: str, key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api, key, version, body)
        (size,) = struct.unpack(">i", self._exactly(4))
        frame = self._exactly(size)
        assert struct.unpack_from(">i", frame)[0] == self.correlation
        # flexible answers have a tagged header, except ApiVersions' (KIP-511)
        tagged = version in load(f"{api}Response").flexible and api != "ApiVersions"
        answer, end = decoder(f"{api}Response", version)(frame, 5 if tagged else 4)
        assert end == len(frame)
        return answer

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    def closed_by_server(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def _cluster(server: FranzServer) -> str:
    return httpx.get(f"{server.url}/v3/clusters", timeout=WAIT_S).json()["data"][0]["cluster_id"]


def create_topic(server: FranzServer, name: str, partitions: int = 2) -> None:
    url = f"{server.url}/v3/clusters/{_cluster(server)}/topics"
    deadline = time.monotonic() + 30
    while True:  # a name just deleted may take a moment to be free again
        r = httpx.post(url, json={"topic_name": name, "partitions_count": partitions},
                       timeout=WAIT_S)
        if r.status_code == 201 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.status_code == 201, r.text


def delete_topic(server: FranzServer, name: str) -> None:
    r = httpx.delete(f"{server.url}/v3/clusters/{_cluster(server)}/topics/{name}",
                     timeout=WAIT_S)
    assert r.status_code == 204, r.text


def produce_rest(server: FranzServer, topic: str, partition: int, values: list[str]) -> None:
    r = httpx.post(f"{server.url}/topics/{topic}", timeout=WAIT_S,
                   headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                   json={"records": [{"value": v, "partition": partition} for v in values]})
    assert r.status_code == 200, r.text


def topic_id(server: FranzServer, name: str) -> bytes:
    """The id Metadata v12 answers for ``name`` (what a client fetches by)."""
    with Raw(server) as c:
        answer = c.call("Metadata", 3, 12, {
            "topics": [{"name": name, "topic_id": bytes(16)}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    (t,) = answer["topics"]
    assert t["error_code"] == 0 and t["topic_id"] != bytes(16), t
    return bytes(t["topic_id"])


def fetch_body(topics: list[tuple[bytes, dict[int, int]]], *, session_id: int = 0,
               session_epoch: int = -1, forgotten: list[tuple[bytes, list[int]]] = (),
               ) -> dict[str, Any]:
    return {
        "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": session_epoch, "rack_id": "",
        "topics": [{"topic_id": tid, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
            for p, o in offsets.items()]} for tid, offsets in topics],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": ps} for tid, ps in forgotten]}


def by_partition(answer: dict[str, Any]) -> dict[tuple[bytes, int], dict[str, Any]]:
    return {(bytes(t["topic_id"]), p["partition_index"]): p
            for t in answer["responses"] for p in t["partitions"]}


def values(records: Any) -> list[bytes | None]:
    """The record values of the answer's batches, decoded by the broker's own reader."""
    return [r.value for r in decode_records(bytes(records))]


@pytest.fixture(scope="module")
def topic(kafka_server: FranzServer) -> str:
    name = f"nv-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_server, name)
    produce_rest(kafka_server, name, 0, ["a", "b", "c"])
    return name


# --- ApiVersions ------------------------------------------------------------------------


def test_api_versions_v4_answers_the_new_ranges(kafka_server: FranzServer) -> None:
    with Raw(kafka_server) as c:
        answer = c.call("ApiVersions", 18, 4, {"client_software_name": "nv",
                                               "client_software_version": "1"})
    assert answer["error_code"] == 0
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert ranges[0] == (3, 11) and ranges[1] == (4, 17) and ranges[18] == (0, 4)
    assert ranges[3] == (0, 12)  # Metadata: 3.9 has no v13
    assert not answer["supported_features"]  # franz finalizes no feature


# --- Fetch by topic id -----------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_by_topic_id_returns_the_records(kafka_server: FranzServer, topic: str,
                                               version: int) -> None:
    tid = topic_id(kafka_server, topic)
    with Raw(kafka_server) as c:
        answer = c.call("Fetch", 1, version, fetch_body([(tid, {0: 0, 1: 0})]))
    assert answer["error_code"] == 0 and answer["session_id"] == 0
    (t,) = answer["responses"]
    assert bytes(t["topic_id"]) == tid
    parts = by_partition(answer)
    p0, p1 = parts[(tid, 0)], parts[(tid, 1)]
    assert (p0["error_code"], p0["high_watermark"], p1["error_code"], p1["high_watermark"]) == (
        0, 3, 0, 0)
    assert values(p0["records"]) == [b'"a"', b'"b"', b'"c"']
    assert p0["current_leader"] == {"leader_id": -1, "leader_epoch": -1}  # only on errors
    assert not answer["node_endpoints"]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_an_unknown_topic_id_answers_unknown_topic_id(kafka_server: FranzServer, topic: str,
                                                      version: int) -> None:
    tid, unknown = topic_id(kafka_server, topic), uuid.uuid4().bytes
    with Raw(kafka_server) as c:
        answer = c.call("Fetch", 1, version, fetch_body([(unknown, {0: 0, 5: 0}), (tid, {0: 1})]))
    parts = by_partition(answer)
    assert {k: p["error_code"] for k, p in parts.items()} == {
        (unknown, 0): UNKNOWN_TOPIC_ID, (unknown, 5): UNKNOWN_TOPIC_ID, (tid, 0): 0}
    assert parts[(unknown, 0)]["records"] == b""
    assert values(parts[(tid, 0)]["records"])[-2:] == [b'"b"', b'"c"']  # from offset 1 on


def test_a_session_by_topic_ids_goes_on_incrementally(kafka_server: FranzServer) -> None:
    name = f"nv-sess-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_server, name, partitions=3)
    tid = topic_id(kafka_server, name)
    produce_rest(kafka_server, name, 0, ["x", "y"])
    with Raw(kafka_server) as c:
        full = c.call("Fetch", 1, 16, fetch_body([(tid, {0: 0, 1: 0, 2: 0})], session_epoch=0))
        sid = full["session_id"]
        assert full["error_code"] == 0 and sid > 0
        assert {k[1]: p["high_watermark"] for k, p in by_partition(full).items()} == {
            0: 2, 1: 0, 2: 0}
        # positions moved on partition 0, nothing new: nothing answered
        quiet = c.call("Fetch", 1, 16, fetch_body([(tid, {0: 2})], session_id=sid,
                                                  session_epoch=1))
        assert quiet["error_code"] == 0 and quiet["session_id"] == sid
        assert by_partition(quiet) == {}
        # a partition that got records is answered, by id, though the request names none
        produce_rest(kafka_server, name, 1, ["z"])
        moved = c.call("Fetch", 1, 13, fetch_body([], session_id=sid, session_epoch=2))
        assert list(by_partition(moved)) == [(tid, 1)]
        assert values(by_partition(moved)[(tid, 1)]["records"]) == [b'"z"']
        # a partition forgotten by id is answered no more
        produce_rest(kafka_server, name, 2, ["w"])
        forgot = c.call("Fetch", 1, 17, fetch_body([(tid, {1: 1})], session_id=sid,
                                                   session_epoch=3, forgotten=[(tid, [2])]))
        assert forgot["error_code"] == 0 and by_partition(forgot) == {}
        # an id added to the session that no topic has answers UNKNOWN_TOPIC_ID each time
        unknown = uuid.uuid4().bytes
        added = c.call("Fetch", 1, 16, fetch_body([(unknown, {0: 0})], session_id=sid,
                                                  session_epoch=4))
        assert {k: p["error_code"] for k, p in by_partition(added).items()} == {
            (unknown, 0): UNKNOWN_TOPIC_ID}
        again = c.call("Fetch", 1, 16, fetch_body([], session_id=sid, session_epoch=5))
        assert {k: p["error_code"] for k, p in by_partition(again).items()} == {
            (unknown, 0): UNKNOWN_TOPIC_ID}
        # a session by ids cannot go on by names (v12), as Kafka answers
        by_name = c.call("Fetch", 1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": sid, "session_epoch": 6, "topics": [],
            "forgotten_topics_data": [], "rack_id": ""})
        assert by_name["error_code"] == FETCH_SESSION_TOPIC_ID_ERROR


def test_a_session_by_names_cannot_go_on_by_ids(kafka_server: FranzServer, topic: str) -> None:
    with Raw(kafka_server) as c:
        full = c.call("Fetch", 1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": 0, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}]})
        assert full["session_id"] > 0
        answer = c.call("Fetch", 1, 13, fetch_body([], session_id=full["session_id"],
                                                   session_epoch=1))
        assert answer["error_code"] == FETCH_SESSION_TOPIC_ID_ERROR


def test_a_recreated_topic_is_not_served_from_the_old_id(kafka_server: FranzServer) -> None:
    name = f"nv-re-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_server, name, partitions=1)
    produce_rest(kafka_server, name, 0, ["old"])
    old = topic_id(kafka_server, name)
    with Raw(kafka_server) as c:
        full = c.call("Fetch", 1, 16, fetch_body([(old, {0: 0})], session_epoch=0))
        sid = full["session_id"]
        assert values(by_partition(full)[(old, 0)]["records"]) == [b'"old"']

        delete_topic(kafka_server, name)
        gone = c.call("Fetch", 1, 16, fetch_body([], session_id=sid, session_epoch=1))
        assert {k: p["error_code"] for k, p in by_partition(gone).items()} == {
            (old, 0): UNKNOWN_TOPIC_OR_PARTITION}  # Kafka's, while the name has no topic

        create_topic(kafka_server, name, partitions=1)
        produce_rest(kafka_server, name, 0, ["new-1", "new-2"])
        new = topic_id(kafka_server, name)
        assert new != old
        # the session's partition keeps the old id: never the new topic's records
        stale = c.call("Fetch", 1, 16, fetch_body([], session_id=sid, session_epoch=2))
        (part,) = by_partition(stale).values()
        assert (part["error_code"], part["records"]) == (INCONSISTENT_TOPIC_ID, b"")
        assert list(by_partition(stale)) == [(old, 0)]
        # without a session the old id is no topic's
        sessionless = c.call("Fetch", 1, 16, fetch_body([(old, {0: 0})]))
        assert {k: p["error_code"] for k, p in by_partition(sessionless).items()} == {
            (old, 0): UNKNOWN_TOPIC_ID}
        # the client forgets the old id and adds the new one to the same session
        moved = c.call("Fetch", 1, 16, fetch_body([(new, {0: 0})], session_id=sid,
                                                  session_epoch=3, forgotten=[(old, [0])]))
        assert list(by_partition(moved)) == [(new, 0)]
        assert values(by_partition(moved)[(new, 0)]["records"]) == [b'"new-1"', b'"new-2"']


def test_a_follower_fetch_v15_closes_the_connection(kafka_server: FranzServer,
                                                    topic: str) -> None:
    """v15 moves the replica id into the tagged ReplicaState; franz brokers replicate
    over HTTP, so a broker's Fetch is not served at any version."""
    tid = topic_id(kafka_server, topic)
    with Raw(kafka_server) as c:
        c.send("Fetch", 1, 15, {**fetch_body([(tid, {0: 0})]),
                                "replica_state": {"replica_id": 1, "replica_epoch": 3}})
        assert c.closed_by_server()


# --- Metadata v12 by topic id -----------------------------------------------------------


def test_metadata_v12_by_topic_id(kafka_server: FranzServer, topic: str) -> None:
    tid, unknown = topic_id(kafka_server, topic), uuid.uuid4().bytes
    with Raw(kafka_server) as c:
        answer = c.call("Metadata", 3, 12, {
            "topics": [{"name": None, "topic_id": tid}, {"name": None, "topic_id": unknown}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    known, missing = answer["topics"]
    assert (known["error_code"], known["name"], bytes(known["topic_id"])) == (0, topic, tid)
    assert len(known["partitions"]) == 2
    assert (missing["error_code"], missing["name"], bytes(missing["topic_id"])) == (
        UNKNOWN_TOPIC_ID, None, unknown)


# --- Produce v10-v11 -------------------------------------------------------------------


@pytest.mark.parametrize("version", [10, 11])
def test_produce_v10_and_v11_append(kafka_server: FranzServer, topic: str, version: int) -> None:
    batch = build_batch([NewRecord(f"p{version}".encode())], now_ms=int(time.time() * 1000))
    txn = build_batch([NewRecord(b"t")], now_ms=int(time.time() * 1000), producer_id=7,
                      producer_epoch=0, base_sequence=0, transactional=True)
    with Raw(kafka_server) as c:
        answer = c.call("Produce", 0, version, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 1, "records": bytes(batch)}]},
                {"name": f"nv-none-{uuid.uuid4().hex[:6]}", "partition_data": [
                    {"index": 0, "records": bytes(batch)}]}]})
        refused = c.call("Produce", 0, version, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 1, "records": bytes(txn)}]}]})
    (ok,), (missing,) = (t["partition_responses"] for t in answer["responses"])
    assert ok["error_code"] == 0 and ok["base_offset"] >= 0
    assert ok["current_leader"] == {"leader_id": -1, "leader_epoch": -1}  # only on errors
    assert missing["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert not answer["node_endpoints"]
    (no,) = refused["responses"][0]["partition_responses"]
    assert no["error_code"] == 42 and "transactions" in no["error_message"]
    with Raw(kafka_server) as c:
        fetched = c.call("Fetch", 1, 17, fetch_body([(topic_id(kafka_server, topic),
                                                      {1: ok["base_offset"]})]))
    (part,) = by_partition(fetched).values()
    assert values(part["records"])[0] == f"p{version}".encode()
