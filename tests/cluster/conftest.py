"""A real ZooKeeper for cluster tests.

Fixtures
- ``zookeeper`` (session): one ZooKeeper server from Debian's ``zookeeper`` package, run as
  ``java -cp "/etc/zookeeper/conf:/usr/share/java/*" org.apache.zookeeper.server.ZooKeeperServerMain
  zoo.cfg`` with a temporary data dir on a free 127.0.0.1 port; yields
  ``"127.0.0.1:<port>"``. Its log is ``zookeeper.log`` beside ``zoo.cfg`` in the session's
  temporary directory. Skips the tests when java or the jars are missing.
- ``zk_chroot`` (per test): ``"127.0.0.1:<port>/franz-<uuid>"``, a chroot of its own, so
  tests never see each other's znodes.

Helpers
- ``BrokerProcess``: one real ``franz broker`` process (``python -m app.cli broker``) on
  a loopback port with its own data dir, ``--override`` properties and log file; start,
  signal, SIGKILL, restart, stop.
- ``wait_until(cond, timeout_s, what)``: poll until ``cond()`` is truthy, else fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

JARS = Path("/usr/share/java")
CLASSPATH = f"/etc/zookeeper/conf:{JARS}/*"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _zoo_cfg(data_dir: Path, port: int, host: str = "127.0.0.1") -> str:
    return "\n".join([
        "tickTime=500",  # sessions may last 1 s (2 ticks) to 10 s (20 ticks)
        f"dataDir={data_dir}",
        f"clientPort={port}",
        f"clientPortAddress={host}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,stat",
        "",
    ])


def _log_tail(log_path: Path, lines: int = 30) -> str:
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_until_serving(proc: subprocess.Popen[bytes], hosts: str, log_path: Path) -> None:
    """Until a kazoo client connects; fails with the server's log if it dies or is slow."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"ZooKeeper exited with {proc.returncode}:\n{_log_tail(log_path)}")
        client = KazooClient(hosts=hosts, timeout=5.0)
        try:
            client.start(timeout=1.0)  # stops and closes the client itself on timeout
        except KazooTimeoutError:
            continue
        client.stop()
        client.close()
        return
    pytest.fail(f"ZooKeeper not serving on {hosts} after {START_TIMEOUT_S:.0f} s:\n"
                f"{_log_tail(log_path)}")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    java = shutil.which("java")
    if java is None:
        pytest.skip("ZooKeeper tests need java on PATH (apt-get install -y zookeeper)")
    if not any(JARS.glob("zookeeper*.jar")):
        pytest.skip(f"ZooKeeper tests need the zookeeper jars in {JARS} "
                    "(apt-get install -y zookeeper)")
    root = tmp_path_factory.mktemp("zookeeper")
    (root / "data").mkdir()
    port = free_port()
    cfg = root / "zoo.cfg"
    cfg.write_text(_zoo_cfg(root / "data", port))
    log_path = root / "zookeeper.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen([java, "-cp", CLASSPATH, MAIN_CLASS, str(cfg)],
                                stdout=log_file, stderr=subprocess.STDOUT, cwd=root)
    hosts = f"127.0.0.1:{port}"
    try:
        _wait_until_serving(proc, hosts, log_path)
        yield hosts
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def zk_chroot(zookeeper: str) -> str:
    return f"{zookeeper}/franz-{uuid.uuid4().hex}"


ROOT = Path(__file__).resolve().parents[2]


def wait_until(cond: Callable[[], Any], timeout_s: float, what: str, *, every_s: float = 0.1) -> Any:
    """``cond()``'s first truthy value, polled every ``every_s``; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


@dataclass
class BrokerProcess:
    """One ``franz broker`` process; ``start()`` again after ``kill()`` restarts it on the
    same port and data dir (its log file is appended to). ``host`` is the address it
    listens on and advertises; ``command_prefix`` runs it under another command (such as
    ``ip netns exec <ns>``, which replaces itself with the broker)."""

    broker_id: int
    port: int
    data_dir: Path
    zk: str
    log_path: Path
    overrides: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"
    command_prefix: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, ready_timeout_s: float = 40.0) -> None:
        cmd = [*self.command_prefix, sys.executable, "-m", "app.cli", "broker",
               "--broker-id", str(self.broker_id),
               "--zookeeper", self.zk, "--host", self.host, "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        for o in self.overrides:
            cmd += ["--override", o]
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wait_until(self._ready, ready_timeout_s, f"broker {self.broker_id} serving", every_s=0.2)

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker {self.broker_id} exited:\n{self.log_tail()}")
        try:
            return httpx.get(f"{self.url}/v3/clusters", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextmanager
def running(brokers: list[BrokerProcess]) -> Iterator[list[BrokerProcess]]:
    """Start ``brokers`` in order; stop every one of them on the way out, whatever
    happened (a broker that failed to start included)."""
    try:
        for b in brokers:
            b.start()
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def kafka_brokers(zookeeper: str, root: Path, name: str, kafka_ports: dict[int, int],
                  overrides: list[str]) -> list[BrokerProcess]:
    """Brokers ``0..n-1``, one per ``kafka_ports`` entry, in a ZooKeeper chroot of their
    own (``name`` in it), each with a PLAINTEXT Kafka listener on its port beside HTTP;
    not started (``running``)."""
    zk = f"{zookeeper}/franz-{name}-{os.getpid()}-{time.monotonic_ns()}"
    return [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                          overrides=[*overrides, f"kafka.listeners=PLAINTEXT://127.0.0.1:{port}"])
            for i, port in sorted(kafka_ports.items())]


def live_broker_ids(b: BrokerProcess) -> list[int]:
    """The broker ids ``b`` lists as live (GET /brokers); none while it does not answer."""
    try:
        return sorted(httpx.get(f"{b.url}/brokers", timeout=5).json()["brokers"])
    except (httpx.HTTPError, KeyError, ValueError):
        return []


def read_instance_records(instance_url: str, want: int, *, query: str = "") -> list[dict[str, Any]]:
    """JSON-format records of the consumer instance at ``instance_url`` (long polls of
    1 s, ``query`` appended), until ``want`` of them came or 30 s passed."""
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while len(rows) < want and time.monotonic() < deadline:
        r = httpx.get(f"{instance_url}/records?timeout=1000{query}",
                      headers={"Accept": "application/vnd.kafka.json.v2+json"}, timeout=30)
        assert r.status_code == 200, r.text
        rows += r.json()
    return rows


@pytest.fixture(scope="module")
def zk(brokers: list[BrokerProcess]) -> Iterator[KazooClient]:
    """A ZooKeeper client in the cluster's chroot, for the test modules whose three-broker
    cluster is their module's ``brokers`` fixture (others define their own ``zk``)."""
    client = KazooClient(hosts=brokers[0].zk, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "life: the life test (tests/cluster/life/, docs/life-test.md)")
