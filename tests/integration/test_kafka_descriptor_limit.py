"""The Kafka listener under a small open-files limit: more connections than the broker
may hold are refused (``max.connections`` lowered to what the limit leaves), the log
keeps its descriptors (produce over HTTP and Kafka still work), and once the crowd is
gone a new Kafka client is served."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from pathlib import Path

import httpx
from conftest import free_port
from test_partition_limits import LimitedServer

from api.kafka.protocol.codegen import decoder, encode

NOFILE = (512, 512)


def api_versions(port: int) -> int:
    """ApiVersions v3's error code over a fresh connection."""
    header = encode("RequestHeader", 2, {"request_api_key": 18, "request_api_version": 3,
                                         "correlation_id": 1, "client_id": "fd"})
    body = encode("ApiVersionsRequest", 3, {"client_software_name": "t",
                                            "client_software_version": "1"})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header + body)) + header + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "closed"
            data += chunk
    answer, _ = decoder("ApiVersionsResponse", 3)(data, 8)
    return int(answer["error_code"])


def test_a_crowd_past_the_descriptor_limit_costs_no_one_else(tmp_path: Path) -> None:
    kafka_port = free_port()
    server = LimitedServer(tmp_path / "data", [f"kafka.listeners=PLAINTEXT://127.0.0.1:{kafka_port}"],
                           NOFILE)
    server.start()
    crowd: list[socket.socket] = []
    try:
        for _ in range(600):  # more than the whole limit
            with contextlib.suppress(OSError):
                crowd.append(socket.create_connection(("127.0.0.1", kafka_port), timeout=2))
        r = httpx.post(f"{server.url}/topics/crowded", timeout=10,
                       headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                       json={"records": [{"value": 1}]})
        assert r.status_code == 200, r.text  # the log still has descriptors to write with
        for sock in crowd:
            sock.close()
        crowd.clear()
        # the broker notices the crowd's closes as it reads them: a client arriving
        # meanwhile may still find the listener full (closed at once) and tries again
        deadline, answer = time.monotonic() + 15, None
        while answer is None and time.monotonic() < deadline:
            try:
                answer = api_versions(kafka_port)
            except (AssertionError, OSError):
                time.sleep(0.2)
        assert answer == 0
        assert server.proc is not None and server.proc.poll() is None
    finally:
        for sock in crowd:
            sock.close()
        server.stop()
