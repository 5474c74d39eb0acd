"""Fetch sessions (KIP-227) over a raw connection, as the Java consumer uses them: a full
fetch at epoch 0 makes a session; incremental fetches name only what changed and are
answered only what changed; a wrong epoch or an unknown id is refused."""

from __future__ import annotations

import socket
import struct
import uuid

import httpx
import pytest
from conftest import FranzServer

from api.kafka.protocol.codegen import decoder, encode

WAIT_S = 10
VERSION = 12


@pytest.fixture(scope="module")
def topic(kafka_server: FranzServer) -> str:
    name = f"sess-{uuid.uuid4().hex[:8]}"
    r = httpx.post(f"{kafka_server.url}/v3/clusters/{_cluster(kafka_server)}/topics",
                   json={"topic_name": name, "partitions_count": 3}, timeout=WAIT_S)
    assert r.status_code == 201, r.text
    return name


def _cluster(server: FranzServer) -> str:
    return httpx.get(f"{server.url}/v3/clusters", timeout=WAIT_S).json()["data"][0]["cluster_id"]


def _produce(server: FranzServer, topic: str, partition: int, n: int) -> None:
    r = httpx.post(f"{server.url}/topics/{topic}", timeout=WAIT_S,
                   headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                   json={"records": [{"value": i, "partition": partition} for i in range(n)]})
    assert r.status_code == 200, r.text


class Client:
    def __init__(self, server: FranzServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.kafka_port), timeout=WAIT_S)
        self.correlation = 0

    def fetch(self, body: dict) -> dict:
        self.correlation += 1
        header = encode("RequestHeader", 2, {"request_api_key": 1, "request_api_version": VERSION,
                                             "correlation_id": self.correlation,
                                             "client_id": "sessions"})
        payload = header + encode("FetchRequest", VERSION, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "forgotten_topics_data": [], "rack_id": "", **body})
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._exactly(4))
        frame = self._exactly(size)
        answer, _ = decoder("FetchResponse", VERSION)(frame, 5)  # correlation id, tags
        return answer

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out


def partitions(topic: str, offsets: dict[int, int]) -> list[dict]:
    return [{"topic": topic, "partitions": [
        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
         "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in offsets.items()]}]


def answered(answer: dict) -> dict[int, int]:
    """partition -> high watermark of every partition in the answer."""
    return {p["partition_index"]: p["high_watermark"]
            for t in answer["responses"] for p in t["partitions"]}


def test_an_incremental_fetch_answers_only_what_changed(kafka_server: FranzServer,
                                                        topic: str) -> None:
    _produce(kafka_server, topic, 0, 2)
    c = Client(kafka_server)
    full = c.fetch({"session_id": 0, "session_epoch": 0,
                    "topics": partitions(topic, {0: 0, 1: 0, 2: 0})})
    assert full["error_code"] == 0 and full["session_id"] > 0
    assert answered(full) == {0: 2, 1: 0, 2: 0}
    sid = full["session_id"]
    # nothing new, positions moved on partition 0: only what changed is answered
    quiet = c.fetch({"session_id": sid, "session_epoch": 1, "topics": partitions(topic, {0: 2})})
    assert quiet["session_id"] == sid and answered(quiet) == {}
    _produce(kafka_server, topic, 1, 3)
    moved = c.fetch({"session_id": sid, "session_epoch": 2, "topics": []})
    assert answered(moved) == {1: 3}
    # a forgotten partition is answered no more
    _produce(kafka_server, topic, 2, 1)
    forgot = c.fetch({"session_id": sid, "session_epoch": 3,
                      "topics": partitions(topic, {1: 3}),  # its records were read
                      "forgotten_topics_data": [{"topic": topic, "partitions": [2]}]})
    assert answered(forgot) == {}


def test_a_wrong_epoch_or_an_unknown_session_is_refused(kafka_server: FranzServer,
                                                       topic: str) -> None:
    c = Client(kafka_server)
    full = c.fetch({"session_id": 0, "session_epoch": 0, "topics": partitions(topic, {0: 0})})
    sid = full["session_id"]
    assert c.fetch({"session_id": sid, "session_epoch": 5, "topics": []})["error_code"] == 71
    assert c.fetch({"session_id": 2**31 - 7, "session_epoch": 1, "topics": []})["error_code"] == 70
    # epoch -1 closes the session: a full fetch without one
    closing = c.fetch({"session_id": sid, "session_epoch": -1, "topics": partitions(topic, {0: 0})})
    assert closing["session_id"] == 0 and 0 in answered(closing)
    assert c.fetch({"session_id": sid, "session_epoch": 1, "topics": []})["error_code"] == 70
