"""A real ZooKeeper for cluster tests.

Fixtures
- ``zookeeper`` (session): one ZooKeeper server from Debian's ``zookeeper`` package, run as
  ``java -cp "/etc/zookeeper/conf:/usr/share/java/*" org.apache.zookeeper.server.ZooKeeperServerMain
  zoo.cfg`` with a temporary data dir on a free 127.0.0.1 port; yields
  ``"127.0.0.1:<port>"``. Its log is ``zookeeper.log`` beside ``zoo.cfg`` in the session's
  temporary directory. Skips the tests when java or the jars are missing.
- ``zk_chroot`` (per test): ``"127.0.0.1:<port>/franz-<uuid>"``, a chroot of its own, so
  tests never see each other's znodes.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

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


def _zoo_cfg(data_dir: Path, port: int) -> str:
    return "\n".join([
        "tickTime=500",  # sessions may last 1 s (2 ticks) to 10 s (20 ticks)
        f"dataDir={data_dir}",
        f"clientPort={port}",
        "clientPortAddress=127.0.0.1",
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
