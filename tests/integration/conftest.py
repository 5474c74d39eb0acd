"""Real franz servers for integration tests: ``python -m app.cli serve`` subprocesses on
free 127.0.0.1 ports, spoken to over HTTP with httpx.

Fixtures
- ``franz_server`` / ``franz_url`` (session): one standalone broker with
  ``num.partitions=3`` and topic auto-creation on; tests use unique topic and group
  names (``topic``, ``group`` fixtures), so they never see each other's data.
- ``strict_url`` (session): a second broker with ``auto.create.topics.enable=false``.
- ``restartable_server`` (per test): a broker of its own with ``restart()``, ``stop()``
  and ``start()`` on the same data dir and port.
- ``client`` (per test): an ``httpx.Client`` on ``franz_url``; ``v2``: small helpers.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FranzServer:
    """One ``franz serve`` process; restartable on the same data dir and port."""

    data_dir: Path
    overrides: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    kafka_port: int | None = None  # a PLAINTEXT Kafka listener there (off when None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        """The Kafka clients' ``bootstrap.servers``."""
        assert self.kafka_port is not None, "this server has no Kafka listener"
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.server.log"

    def start(self) -> None:
        assert self.proc is None, "already running"
        cmd = [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        ]
        if self.kafka_port is not None:
            cmd += ["--override", f"kafka.listeners=PLAINTEXT://127.0.0.1:{self.kafka_port}"]
        for item in self.overrides:
            cmd += ["--override", item]
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n--- start #{self.starts}: {' '.join(cmd)}\n".encode())
        log.flush()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"franz exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                # 401: a server with authentication on is up too
                if httpx.get(self.url + "/", timeout=1.0).status_code in (200, 401):
                    return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"franz did not answer GET / within {START_TIMEOUT_S}s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20.0) -> None:
        """Orderly shutdown (SIGTERM), SIGKILL if it hangs."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _server(
    tmp_path_factory: pytest.TempPathFactory, name: str, overrides: list[str]
) -> FranzServer:
    base = tmp_path_factory.mktemp(name)
    return FranzServer(base / "data", overrides)


@pytest.fixture(scope="session")
def franz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    server = _server(tmp_path_factory, "franz", ["num.partitions=3"])
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A standalone broker with a PLAINTEXT Kafka listener beside its HTTP one."""
    server = _server(tmp_path_factory, "kafka", ["num.partitions=3"])
    server.kafka_port = free_port()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def franz_url(franz_server: FranzServer) -> str:
    return franz_server.url


@pytest.fixture(scope="session")
def strict_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = _server(tmp_path_factory, "strict", ["auto.create.topics.enable=false"])
    server.start()
    yield server.url
    server.stop()


@pytest.fixture
def restartable_server(tmp_path: Path) -> Iterator[FranzServer]:
    server = FranzServer(tmp_path / "data", ["num.partitions=2"])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(franz_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=franz_url, timeout=30.0) as c:
        yield c


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:12]}"


class V2Client:
    """Thin helpers over the v2 API for tests; every call asserts its expected status.
    Tests get it from the ``v2`` fixture (helpers live here, not in an importable module)."""

    V2 = V2
    BINARY = BINARY
    JSON = JSON

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    @staticmethod
    def b64(data: bytes | str) -> str:
        raw = data.encode() if isinstance(data, str) else data
        return base64.b64encode(raw).decode("ascii")

    @staticmethod
    def unb64(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    @staticmethod
    def error_of(resp: httpx.Response, status: int, code: int | set[int]) -> str:
        """Assert a Confluent error answer; returns its message."""
        assert resp.status_code == status, (resp.status_code, resp.text)
        assert resp.headers["content-type"].startswith(V2), resp.headers["content-type"]
        body = resp.json()
        codes = code if isinstance(code, set) else {code}
        assert body["error_code"] in codes, body
        assert isinstance(body["message"], str) and body["message"], body
        return str(body["message"])

    def produce(
        self,
        topic: str,
        records: list[dict[str, Any]],
        *,
        fmt: str = "binary",
        partition: int | None = None,
        status: int = 200,
        **params: Any,
    ) -> dict[str, Any]:
        path = f"/topics/{topic}" + (f"/partitions/{partition}" if partition is not None else "")
        ctype = BINARY if fmt == "binary" else JSON
        r = self.http.post(
            path, json={"records": records}, headers={"Content-Type": ctype}, params=params
        )
        assert r.status_code == status, r.text
        return r.json()  # type: ignore[no-any-return]

    def produce_values(
        self, topic: str, values: list[str], *, partition: int | None = None
    ) -> list[int]:
        body = self.produce(topic, [{"value": self.b64(v)} for v in values], partition=partition)
        assert all(o["error_code"] is None for o in body["offsets"]), body
        return [o["offset"] for o in body["offsets"]]

    def create_consumer(self, group: str, *, status: int = 200, **config: Any) -> dict[str, Any]:
        r = self.http.post(f"/consumers/{group}", json=config, headers={"Content-Type": V2})
        assert r.status_code == status, r.text
        return r.json()  # type: ignore[no-any-return]

    def post(self, url: str, body: Any, *, status: int = 204) -> httpx.Response:
        r = self.http.post(url, json=body, headers={"Content-Type": V2})
        assert r.status_code == status, r.text
        return r

    def records(
        self, base_uri: str, *, fmt: str = "binary", status: int = 200, **params: Any
    ) -> Any:
        accept = {"binary": BINARY, "json": JSON}.get(fmt, fmt)
        r = self.http.get(base_uri + "/records", headers={"Accept": accept}, params=params)
        assert r.status_code == status, r.text
        return r.json()

    def read_until(
        self, base_uri: str, count: int, *, fmt: str = "binary", deadline_s: float = 20.0
    ) -> list[dict[str, Any]]:
        """Poll until ``count`` records came back (franz: usually one call)."""
        out: list[dict[str, Any]] = []
        end = time.monotonic() + deadline_s
        while len(out) < count and time.monotonic() < end:
            out += self.records(base_uri, fmt=fmt, timeout=1000)
        return out


@pytest.fixture
def v2(client: httpx.Client) -> V2Client:
    return V2Client(client)


# --- brokers with non-default limits (added for test_v2_flows / test_v2_concurrency) ------

#: ``consumer.instance.timeout.ms`` of ``expiry_server``.
INSTANCE_TIMEOUT_MS = 2000
#: ``message.max.bytes`` and ``max.request.size`` of ``limits_server``.
MESSAGE_MAX_BYTES = 2048
MAX_REQUEST_SIZE = 65536
GROUP_MAX_SIZE = 3
IDEMPOTENCY_KEYS_MAX = 3


@pytest.fixture(scope="session")
def expiry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A broker whose idle consumer instances expire after ``INSTANCE_TIMEOUT_MS``."""
    server = _server(
        tmp_path_factory,
        "expiry",
        ["num.partitions=3", f"consumer.instance.timeout.ms={INSTANCE_TIMEOUT_MS}"],
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A broker with small limits: ``message.max.bytes`` (the topic default
    ``max.message.bytes``), ``max.request.size`` (largest HTTP produce body),
    ``group.max.size`` (members of one consumer group) and ``idempotency.keys.max``
    (live Idempotency-Keys; only ``test_idempotency_keys_max`` sends keys there)."""
    server = _server(
        tmp_path_factory,
        "limits",
        [
            "num.partitions=3",
            f"message.max.bytes={MESSAGE_MAX_BYTES}",
            f"max.request.size={MAX_REQUEST_SIZE}",
            f"group.max.size={GROUP_MAX_SIZE}",
            f"idempotency.keys.max={IDEMPOTENCY_KEYS_MAX}",
        ],
    )
    server.start()
    yield server
    server.stop()
