"""Hostile bytes at franz's Kafka listener, over raw sockets: a frame too large or too
small, a size prefix that never completes, an unknown API key or version, a body that
does not decode, a client that never reads its answers, a corrupt batch. Each gets
Kafka's error or a closed connection; nothing is written; the broker's memory stays
bounded; every other client is served meanwhile."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from api.kafka.protocol.codegen import decoder, encode
from conftest import FranzServer, free_port
from core.storage.records import NewRecord, build_batch

WAIT_S = 10
MAX_REQUEST = 1 << 20  # socket.request.max.bytes of this module's broker
QUEUED = 4 * MAX_REQUEST  # its queued.max.request.bytes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    s = FranzServer(tmp_path_factory.mktemp("kbad") / "data",
                    [f"socket.request.max.bytes={MAX_REQUEST}", "connections.max.idle.ms=3000",
                     f"queued.max.request.bytes={QUEUED}"])
    s.kafka_port = free_port()
    s.start()
    yield s
    s.stop()


def connect(server: FranzServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.kafka_port), timeout=WAIT_S)
    return sock


def request(api: str, key: int, version: int, body: dict, *, correlation_id: int = 7,
            flexible: bool = False) -> bytes:
    header = encode("RequestHeader", 2 if flexible else 1,
                    {"request_api_key": key, "request_api_version": version,
                     "correlation_id": correlation_id, "client_id": "bad-input-test"})
    payload = header + encode(f"{api}Request", version, body)
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def closed_by_server(sock: socket.socket, within_s: float = WAIT_S) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def api_versions_ok(server: FranzServer) -> bool:
    """Another client is served: ApiVersions v3 answers with no error."""
    with connect(server) as sock:
        sock.sendall(request("ApiVersions", 18, 3, {"client_software_name": "t",
                                                    "client_software_version": "1"},
                             flexible=True))
        frame = read_frame(sock)
    body, _ = decoder("ApiVersionsResponse", 3)(frame, 4)  # header v0 even when flexible
    return body["error_code"] == 0 and any(k["api_key"] == 0 for k in body["api_keys"])


def end_offset(server: FranzServer, topic: str) -> int:
    r = httpx.get(f"{server.url}/topics/{topic}/partitions/0/offsets", timeout=WAIT_S)
    return int(r.json()["end_offset"]) if r.status_code == 200 else -1


def test_a_frame_over_socket_request_max_bytes_closes_the_connection(server: FranzServer) -> None:
    with connect(server) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST + 1) + b"\0" * 1000)
        assert closed_by_server(sock)
    assert api_versions_ok(server)


@pytest.mark.parametrize("size", [-1, 0, 3, -2**31])
def test_a_size_below_a_header_closes_the_connection(server: FranzServer, size: int) -> None:
    with connect(server) as sock:
        sock.sendall(struct.pack(">i", size))
        assert closed_by_server(sock)


def test_a_frame_that_never_completes_is_closed_at_the_idle_timeout(server: FranzServer) -> None:
    with connect(server) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\0" * 10)
        assert not closed_by_server(sock, within_s=1.0)  # it waits for the rest...
        assert closed_by_server(sock, within_s=6.0)  # ...up to connections.max.idle.ms
    assert api_versions_ok(server)


def test_unknown_api_key_closes_the_connection(server: FranzServer) -> None:
    with connect(server) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 999, 0, 1, -1))
        assert closed_by_server(sock)


def test_an_unsupported_api_versions_version_is_answered_at_v0(server: FranzServer) -> None:
    """KIP-511: the client learns the ranges from a v0 answer with UNSUPPORTED_VERSION."""
    with connect(server) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 18, 99, 42, -1))
        frame = read_frame(sock)
    (correlation_id,) = struct.unpack_from(">i", frame)
    body, end = decoder("ApiVersionsResponse", 0)(frame, 4)
    assert correlation_id == 42 and end == len(frame)
    assert body["error_code"] == 35
    versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert versions[18][1] >= 3 and 0 in versions and 1 in versions


def test_an_unsupported_version_of_another_api_closes_the_connection(server: FranzServer) -> None:
    with connect(server) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 3, 99, 1, -1))  # Metadata v99
        assert closed_by_server(sock)


@pytest.mark.parametrize("body", [b"", b"\x00\x00\x00\x05ab", b"\x00\x00\x7f\xff" + b"\xff" * 40])
def test_a_body_that_does_not_decode_closes_the_connection(server: FranzServer, body: bytes) -> None:
    header = struct.pack(">hhih", 3, 4, 1, -1)  # Metadata v4
    with connect(server) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert closed_by_server(sock)
    assert api_versions_ok(server)


def _produce(topic: str, records: bytes, *, acks: int = -1) -> bytes:
    return request("Produce", 0, 7, {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                                     "topic_data": [{"name": topic, "partition_data": [
                                         {"index": 0, "records": records}]}]})


def _produce_answer(sock: socket.socket) -> dict:
    frame = read_frame(sock)
    body, _ = decoder("ProduceResponse", 7)(frame, 4)
    return body["responses"][0]["partition_responses"][0]


def _topic(server: FranzServer) -> str:
    topic = f"bad-{uuid.uuid4().hex[:8]}"
    r = httpx.post(f"{server.url}/topics/{topic}",  # made and given one record over REST
                   headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                   json={"records": [{"value": 1, "partition": 0}]}, timeout=WAIT_S)
    assert r.status_code == 200, r.text
    return topic


def test_a_batch_with_a_bad_crc_is_refused_and_nothing_is_written(server: FranzServer) -> None:
    topic = _topic(server)
    good = build_batch([NewRecord(b"v", key=b"k")], now_ms=int(time.time() * 1000))
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with connect(server) as sock:
        sock.sendall(_produce(topic, bytes(bad)))
        answer = _produce_answer(sock)
        assert answer["error_code"] == 2  # CORRUPT_MESSAGE
        assert end_offset(server, topic) == 1
        sock.sendall(_produce(topic, bytes(good)))  # the same connection still works
        assert _produce_answer(sock)["error_code"] == 0
    assert end_offset(server, topic) == 2


def test_invalid_acks_and_internal_topics_are_refused(server: FranzServer) -> None:
    topic = _topic(server)
    batch = bytes(build_batch([NewRecord(b"v")], now_ms=int(time.time() * 1000)))
    with connect(server) as sock:
        sock.sendall(_produce(topic, batch, acks=5))
        assert _produce_answer(sock)["error_code"] == 21  # INVALID_REQUIRED_ACKS
        sock.sendall(_produce("__consumer_offsets", batch))
        assert _produce_answer(sock)["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
    assert end_offset(server, topic) == 1


def test_a_failed_acks_0_produce_closes_the_connection(server: FranzServer) -> None:
    """acks=0 has no answer; Kafka closes the connection so the producer notices."""
    with connect(server) as sock:
        sock.sendall(_produce("__consumer_offsets", b"\0" * 70, acks=0))
        assert closed_by_server(sock)


def test_a_client_that_never_reads_its_answers_costs_only_its_socket(server: FranzServer) -> None:
    """Pipelined Metadata requests, no answer read: the broker stops reading this
    connection once its socket buffers are full, and serves the others meanwhile."""
    one = request("Metadata", 3, 4, {"topics": None, "allow_auto_topic_creation": False})
    with connect(server) as sock:
        sock.setblocking(False)
        sent, deadline = 0, time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                sent += sock.send(one * 100)
            except BlockingIOError:
                break
        assert time.monotonic() < deadline, "the broker kept reading a client that never reads"
        assert sent < 64 * 1024 * 1024
        assert api_versions_ok(server)


def test_many_stalled_large_frames_do_not_block_other_clients(server: FranzServer) -> None:
    """Size prefixes claiming the most a frame may be, their bodies never sent, five
    times queued.max.request.bytes in all: the budget counts bytes that arrived, so
    nothing waits for them."""
    stalled = [connect(server) for _ in range(20)]
    try:
        for sock in stalled:
            sock.sendall(struct.pack(">i", MAX_REQUEST) + b"\0" * 100)
        assert api_versions_ok(server)
        topic = _topic(server)
        assert end_offset(server, topic) == 1
    finally:
        for sock in stalled:
            sock.close()
