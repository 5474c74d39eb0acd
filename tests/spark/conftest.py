"""Spark connector tests: one local SparkSession and one real franz server per session.

- ``spark`` (session): ``local[2]``, UI and progress bars off, 2 shuffle partitions, UTC,
  log level ERROR, workers on this interpreter with this checkout first on PYTHONPATH
  (the connector must be importable in Spark's Python workers); the checkout's
  ``pyspark_franz`` module on that path registers ``format("franz")`` automatically. Skips
  the tests when pyspark, pyarrow or java is missing.
- ``franz`` (session): a ``python -m app.cli serve`` subprocess (``num.partitions=3``,
  retention and compaction checked every 200 ms so tests can make records disappear),
  wrapped in ``FranzHelper`` (produce, create topics with configs, offsets).
- ``topic``: a fresh topic name per test.

Every Spark test module carries ``pytestmark = [pytest.mark.spark, pytest.mark.timeout(...)]``
so ``-m "not spark"`` skips them and no test can hang the run.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY = "application/vnd.kafka.binary.v2+json"
V2 = "application/vnd.kafka.v2+json"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs a local SparkSession (pyspark + java)")


# --- franz server (the start/stop of tests/integration/conftest.py, trimmed) ------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FranzServer:
    def __init__(self, data_dir: Path, overrides: list[str]) -> None:
        self.data_dir = data_dir
        self.overrides = overrides
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
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
        for item in self.overrides:
            cmd += ["--override", item]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"franz exited with {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"franz did not start: {self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20.0) -> None:
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


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


class FranzHelper:
    """Test-side HTTP helpers (the tests check the connector against these)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30.0)
        self._cluster: str | None = None

    @property
    def cluster(self) -> str:
        if self._cluster is None:
            self._cluster = self.http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        return self._cluster

    def create_topic(self, name: str, partitions: int = 1, **configs: Any) -> None:
        body = {
            "topic_name": name,
            "partitions_count": partitions,
            "configs": [{"name": k.replace("_", "."), "value": str(v)} for k, v in configs.items()],
        }
        r = self.http.post(f"/v3/clusters/{self.cluster}/topics", json=body)
        assert r.status_code == 201, r.text

    def set_config(self, topic: str, name: str, value: Any) -> None:
        r = self.http.put(
            f"/v3/clusters/{self.cluster}/topics/{topic}/configs/{name}", json={"value": str(value)}
        )
        assert r.status_code == 204, r.text

    def produce(
        self, topic: str, records: list[dict[str, Any]], partition: int | None = None
    ) -> list[int]:
        """Records as ``{"value": bytes|str, "key": ..., "headers": [(k, v)], "timestamp"}``."""
        out = []
        for r in records:
            rec: dict[str, Any] = {"value": None if r.get("value") is None else b64(r["value"])}
            if r.get("key") is not None:
                rec["key"] = b64(r["key"])
            if r.get("headers"):
                rec["headers"] = [
                    {"key": k, "value": None if v is None else b64(v)} for k, v in r["headers"]
                ]
            if r.get("timestamp") is not None:
                rec["timestamp"] = r["timestamp"]
            if r.get("partition") is not None:
                rec["partition"] = r["partition"]
            out.append(rec)
        if not out:
            return []
        path = f"/topics/{topic}" + (f"/partitions/{partition}" if partition is not None else "")
        resp = self.http.post(path, json={"records": out}, headers={"Content-Type": BINARY})
        assert resp.status_code == 200, resp.text
        offsets = resp.json()["offsets"]
        assert all(o["error_code"] is None for o in offsets), offsets
        return [o["offset"] for o in offsets]

    def produce_values(self, topic: str, partition: int, values: list[str]) -> list[int]:
        return self.produce(topic, [{"value": v} for v in values], partition=partition)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        body = self.http.get(f"/topics/{topic}/partitions/{partition}/offsets").json()
        return body["beginning_offset"], body["end_offset"]

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        r = self.http.get(f"/v3/clusters/{self.cluster}/consumer-groups/{group}/lags")
        if r.status_code == 404:
            return {}
        assert r.status_code == 200, r.text
        return {(x["topic_name"], x["partition_id"]): x["current_offset"] for x in r.json()["data"]}


@pytest.fixture(scope="session")
def franz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    base = tmp_path_factory.mktemp("franz-spark")
    server = FranzServer(
        base / "data",
        ["num.partitions=3", "log.retention.check.interval.ms=200", "log.cleaner.backoff.ms=200"],
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def franz(franz_server: FranzServer) -> Iterator[FranzHelper]:
    helper = FranzHelper(franz_server.url)
    yield helper
    helper.http.close()


@pytest.fixture
def topic() -> str:
    return f"spark-{uuid.uuid4().hex[:10]}"


# --- Spark -----------------------------------------------------------------------------


#: PySpark registers ``DefaultSource`` of any importable top-level ``pyspark_*`` module
#: (docs/spark.md, "Registration"); the tests rely on it instead of ``register()``.
@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark", minversion="4.2")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no java on PATH (Spark needs Java 17 or 21)")
    from pyspark.sql import SparkSession

    saved = dict(os.environ)
    # Workers run this interpreter with this checkout first on the path, so they import
    # the spark_connector under test (and pyarrow), whatever else is installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    # The checkout's pyspark_franz.py (shipped as a top-level module) registers
    # format("franz") automatically.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    session = (
        SparkSession.builder.master("local[2]")
        .appName("franz-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        for q in session.streams.active:
            with contextlib.suppress(Exception):
                q.stop()
        session.stop()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def reader(spark: Any, franz: FranzHelper) -> Any:
    """``spark.read.format("franz")`` pointed at the test server."""

    def make(**options: Any) -> Any:
        r = spark.read.format("franz").option("url", franz.url)
        for k, v in options.items():
            r = r.option(k, v)
        return r

    return make


@pytest.fixture
def stream_reader(spark: Any, franz: FranzHelper) -> Any:
    """A streaming DataFrame: ``spark.readStream.format("franz")...load()``."""

    def make(**options: Any) -> Any:
        r = spark.readStream.format("franz").option("url", franz.url)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    return make
