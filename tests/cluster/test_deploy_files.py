"""The files of ``deploy/`` work as shipped (docs/deploy.md).

- The systemd units: ``systemd-analyze verify`` accepts them (when it is installed), their
  settings hold what the comments promise (restart on failure but not on a refused
  configuration, SIGTERM and a stop timeout longer than the controlled shutdown, a high
  open-files limit, the data directory writable under ``ProtectSystem=strict``), and
  ``ExecStart`` names a real ``franz`` command and real flags.
- The properties files: every key is one franz reads (and none it ignores); the three
  broker files differ only in ``broker.id`` and ``listeners``; ``zookeeper.connect``
  names the servers of ``zookeeper.properties``.
- ``zookeeper.properties``: three real ZooKeeper servers started from it form an
  ensemble (one leader, two followers).
- The cluster: three real ``franz broker`` processes, started with the unit's
  ``ExecStart`` arguments from copies of the broker files in which only the
  machine-specific values are rewritten (``listeners`` to 127.0.0.1 and a free port,
  ``log.dirs`` to a temporary directory, ``zookeeper.connect`` to the session's
  ZooKeeper), form a cluster; a topic created with the files' defaults gets their
  replication factor (3) and ``min.insync.replicas`` (2); an acks=all produce is read
  back through another broker; a rolling restart of one broker (SIGTERM, as systemd
  stops it) exits 0 well within the unit's stop timeout and keeps acks=all writes going.
- The standalone unit and properties: ``franz serve`` from them serves and stops cleanly.

Every wait is bounded; the whole file takes about a minute.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from app.settings import IGNORED_KAFKA_PROPERTIES, ConfigError, load_config, read_properties

from .conftest import JARS, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BROKER_UNIT = DEPLOY / "systemd" / "franz.service"
STANDALONE_UNIT = DEPLOY / "systemd" / "franz-standalone.service"
BROKER_FILES = [DEPLOY / "cluster" / f"broker-{n}.properties" for n in (1, 2, 3)]
ZOOKEEPER_FILE = DEPLOY / "cluster" / "zookeeper.properties"
STANDALONE_FILE = DEPLOY / "standalone" / "server.properties"
SHIPPED_PROPERTIES = [*BROKER_FILES, STANDALONE_FILE]

#: The only keys the test may change in a copy of a shipped properties file.
MACHINE_SPECIFIC = ("listeners", "log.dirs", "zookeeper.connect")
#: The keys in which the three broker files may differ.
PER_BROKER = {"broker.id", "listeners"}
JSON_V2 = "application/vnd.kafka.json.v2+json"
START_TIMEOUT_S = 60.0


# --- the unit files -----------------------------------------------------------------


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file: section -> key -> every value given (systemd keys repeat;
    configparser would refuse that). Comments and blank lines are skipped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        assert not line.endswith("\\"), f"{path}:{number}: keep unit lines unbroken"
        if line.startswith("["):
            assert line.endswith("]"), f"{path}:{number}: bad section header {line!r}"
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path}:{number}: a setting before any section"
        key, sep, value = line.partition("=")
        assert sep, f"{path}:{number}: not KEY=VALUE: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def one(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    values = unit.get(section, {}).get(key)
    assert values, f"[{section}] {key}= is missing"
    return values[-1]


def exec_start(unit_path: Path) -> list[str]:
    return shlex.split(one(parse_unit(unit_path), "Service", "ExecStart"))


def seconds(value: str) -> float:
    """A systemd time span such as ``120``, ``90s``, ``2min`` or ``1min 30s``."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        assert unit in units, f"unexpected time unit in {value!r}"
        total += float(number) * units[unit]
    return total


def is_under(path: str, roots: list[str]) -> bool:
    p = PurePosixPath(path)
    return any(p == PurePosixPath(r) or PurePosixPath(r) in p.parents for r in roots)


@pytest.mark.parametrize("unit_path", [BROKER_UNIT, STANDALONE_UNIT], ids=lambda p: p.name)
def test_unit_settings(unit_path: Path) -> None:
    unit = parse_unit(unit_path)
    service = unit["Service"]
    # franz does not call sd_notify: Type=notify would never become active
    sources = [p for d in ("app", "core", "api") for p in (ROOT / d).rglob("*.py")]
    assert not any("NOTIFY_SOCKET" in p.read_text() for p in sources), \
        "franz speaks sd_notify now: make the units Type=notify"
    assert one(unit, "Service", "Type") == "simple"
    assert one(unit, "Service", "User") not in ("", "root", "0")
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "KillSignal") == "SIGTERM"
    assert int(one(unit, "Service", "LimitNOFILE").partition(":")[0]) >= 65536
    assert one(unit, "Service", "NoNewPrivileges") == "yes"
    assert one(unit, "Service", "ProtectSystem") == "strict"
    assert one(unit, "Install", "WantedBy") == "multi-user.target"
    # every data directory of the files this unit runs is writable under ProtectSystem
    writable = [p for v in service.get("ReadWritePaths", []) for p in v.split()]
    files = BROKER_FILES if unit_path == BROKER_UNIT else [STANDALONE_FILE]
    for f in files:
        data_dir = read_properties(f)["log.dirs"].split(",")[0]
        assert is_under(data_dir, writable), f"{f.name}: log.dirs {data_dir} not in ReadWritePaths"
        assert is_under(data_dir, ["/var/lib/" + s for s in service.get("StateDirectory", [])])
    # the stop timeout covers the controlled shutdown with room for the flush after it
    stop_s = seconds(one(unit, "Service", "TimeoutStopSec"))
    for f in files:
        shutdown_ms = int(read_properties(f).get("controlled.shutdown.timeout.ms", "5000"))
        assert stop_s >= shutdown_ms / 1000 + 30, f"TimeoutStopSec={stop_s} vs {f.name}"
    # a configuration franz refuses exits 2, which is not restarted
    assert "2" in one(unit, "Service", "RestartPreventExitStatus").split()
    argv = exec_start(unit_path)
    assert "--config" in argv, "ExecStart without --config"
    assert is_under(argv[argv.index("--config") + 1], ["/etc/franz"])


def test_refused_configuration_exits_2(tmp_path: Path) -> None:
    """What RestartPreventExitStatus=2 relies on: a key franz does not read stops the
    start with exit code 2 (before anything is bound or written)."""
    bad = tmp_path / "server.properties"
    bad.write_text(STANDALONE_FILE.read_text() + "\nlog.retention.hourz=1\n")
    argv = exec_start(STANDALONE_UNIT)
    args = [a if a != argv[argv.index("--config") + 1] else str(bad) for a in argv[1:]]
    done = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "log.retention.hourz" in done.stderr


@pytest.mark.parametrize("unit_path", [BROKER_UNIT, STANDALONE_UNIT], ids=lambda p: p.name)
def test_exec_start_names_real_command_and_flags(unit_path: Path) -> None:
    argv = exec_start(unit_path)
    assert PurePosixPath(argv[0]).is_absolute() and PurePosixPath(argv[0]).name == "franz"
    command = argv[1]
    top = subprocess.run([sys.executable, "-m", "app.cli", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    assert re.search(rf"\b{re.escape(command)}\b", top.stdout), f"no franz command {command!r}"
    sub = subprocess.run([sys.executable, "-m", "app.cli", command, "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    known = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", sub.stdout))
    used = [a.partition("=")[0] for a in argv[2:] if a.startswith("-")]
    assert used, "ExecStart passes no flags"
    for flag in used:
        assert flag in known, f"franz {command} has no flag {flag} (has {sorted(known)})"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize("unit_path", [BROKER_UNIT, STANDALONE_UNIT], ids=lambda p: p.name)
def test_systemd_analyze_verify(unit_path: Path, tmp_path: Path) -> None:
    """``systemd-analyze verify`` on a copy whose ExecStart executable exists (verify
    insists on that; it is the deployment's path, absent here): no error, no warning."""
    executable = exec_start(unit_path)[0]
    stub = tmp_path / "bin" / "franz"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    copy = tmp_path / unit_path.name
    copy.write_text(unit_path.read_text().replace(executable, str(stub)))
    done = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    problems = [line for line in (done.stdout + done.stderr).splitlines()
                if unit_path.name in line]
    assert not problems, "\n".join(problems)


# --- the properties files -----------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED_PROPERTIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_key_is_read(path: Path) -> None:
    """franz's own check (the one a start runs): every key known, every value valid;
    and none of the Kafka keys franz accepts but ignores (they would mislead)."""
    try:
        load_config(properties_file=path, environ={})
    except ConfigError as exc:
        pytest.fail(str(exc))
    ignored = sorted(set(read_properties(path)) & set(IGNORED_KAFKA_PROPERTIES))
    assert not ignored, f"{path.name} sets keys franz ignores: {ignored}"


def test_broker_files_agree() -> None:
    props = [read_properties(p) for p in BROKER_FILES]
    assert [p["broker.id"] for p in props] == ["1", "2", "3"]
    for key in set().union(*props) - PER_BROKER:
        values = {p.get(key) for p in props}
        assert len(values) == 1, f"{key} differs between the broker files: {values}"
    assert len({p["listeners"] for p in props}) == 3
    base = props[0]
    assert int(base["default.replication.factor"]) == 3
    assert int(base["min.insync.replicas"]) == 2
    assert int(base["offsets.topic.replication.factor"]) == 3
    assert int(base["idempotency.topic.replication.factor"]) == 3
    assert base["unclean.leader.election.enable"] == "false"
    # zookeeper.connect names the ensemble of zookeeper.properties, with a chroot
    zk = read_properties(ZOOKEEPER_FILE)
    hosts, slash, chroot = base["zookeeper.connect"].partition("/")
    assert slash and chroot, "zookeeper.connect without a chroot"
    servers = {v.split(":")[0] for k, v in zk.items() if k.startswith("server.")}
    assert {f"{h}:{zk['clientPort']}" for h in servers} == set(hosts.split(","))
    # the session timeout lies within the ensemble's bounds (2 to 20 ticks)
    tick = int(zk["tickTime"])
    assert 2 * tick <= int(base["zookeeper.session.timeout.ms"]) <= 20 * tick


# --- rewriting a shipped file ---------------------------------------------------------


def rewrite(text: str, values: dict[str, str]) -> str:
    """``text`` with the value of each key of ``values`` (machine-specific keys only)
    replaced, every other line exactly as shipped."""
    assert set(values) <= set(MACHINE_SPECIFIC), sorted(values)
    out: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines(keepends=True):
        key, sep, _ = line.partition("=")
        if sep and key.strip() in values and not line.lstrip().startswith(("#", "!")):
            assert key.strip() not in seen, f"{key} set twice"
            seen.add(key.strip())
            out.append(f"{key}={values[key.strip()]}\n")
        else:
            out.append(line)
    assert seen == set(values), f"not found in the file: {set(values) - seen}"
    return "".join(out)


def local_listeners(shipped: str, port: int) -> str:
    """The shipped listeners with the first one's host and port made local."""
    first, *rest = shipped.split(",")
    scheme = first.split("://")[0]
    return ",".join([f"{scheme}://127.0.0.1:{port}", *rest])


def clean_env() -> dict[str, str]:
    """This environment without FRANZ_* variables: they would override the files."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FRANZ_")}


def unit_environment(unit_path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in parse_unit(unit_path)["Service"].get("Environment", []):
        for item in shlex.split(value):
            key, _, val = item.partition("=")
            env[key] = val
    return env


@dataclass
class Server:
    """One ``franz`` process started as the unit starts it: the unit's ExecStart
    arguments (its --config pointing at ``config``) and Environment=."""

    name: str
    unit_path: Path
    config: Path
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = exec_start(self.unit_path)
        shipped_config = argv[argv.index("--config") + 1]
        args = [str(self.config) if a == shipped_config else a for a in argv[1:]]
        env = {**clean_env(), **unit_environment(self.unit_path)}
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", *args], cwd=ROOT,
                                         env=env, stdout=out, stderr=subprocess.STDOUT)

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                 f"{self.log_tail()}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def terminate(self, timeout_s: float) -> tuple[int, float]:
        """SIGTERM, as systemd stops the unit; (exit code, seconds until it exited)."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} still running {timeout_s:.0f} s after SIGTERM:\n"
                                 f"{self.log_tail()}") from None
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextmanager
def stopped_at_exit(servers: list[Server]) -> Iterator[list[Server]]:
    try:
        yield servers
    finally:
        for s in servers:
            if s.proc is not None and s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
        for s in servers:
            if s.proc is not None:
                try:
                    s.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    s.kill()


# --- HTTP helpers ---------------------------------------------------------------------


def get_json(url: str) -> Any:
    resp = httpx.get(url, timeout=10)
    assert resp.status_code == 200, f"GET {url}: {resp.status_code} {resp.text}"
    return resp.json()


def cluster_id(s: Server) -> str:
    return str(get_json(f"{s.url}/v3/clusters")["data"][0]["cluster_id"])


def replicas(s: Server, cid: str, topic: str, partition: int) -> list[dict[str, Any]]:
    return list(get_json(f"{s.url}/v3/clusters/{cid}/topics/{topic}/partitions/"
                         f"{partition}/replicas")["data"])


def produce(s: Server, topic: str, partition: int, values: list[Any]) -> list[int]:
    resp = httpx.post(f"{s.url}/topics/{topic}/partitions/{partition}", params={"acks": "all"},
                      headers={"Content-Type": JSON_V2}, timeout=20,
                      content=json.dumps({"records": [{"value": v} for v in values]}))
    assert resp.status_code == 200, resp.text
    offsets = [o["offset"] for o in resp.json()["offsets"]]
    assert all(o is not None for o in offsets), resp.text
    return offsets


def read_values(s: Server, topic: str, partition: int) -> list[Any]:
    out: list[Any] = []
    while True:
        resp = httpx.get(f"{s.url}/topics/{topic}/partitions/{partition}/records", timeout=20,
                         params={"offset": len(out)}, headers={"Accept": JSON_V2})
        assert resp.status_code == 200, resp.text
        rows = resp.json()
        if not rows:
            return out
        out += [r["value"] for r in rows]


def under_replicated(s: Server) -> float:
    """``franz_replicamanager_underreplicatedpartitions`` of ``/metrics``, as
    docs/deploy.md checks it between the steps of a rolling restart."""
    text = httpx.get(f"{s.url}/metrics", timeout=10).text
    found = re.search(r"^franz_replicamanager_underreplicatedpartitions(?:\{[^}]*\})? (\S+)$",
                      text, re.MULTILINE)
    assert found, "no franz_replicamanager_underreplicatedpartitions in /metrics"
    return float(found.group(1))


# --- ZooKeeper from zookeeper.properties ----------------------------------------------


def four_letter(port: int, word: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as conn:
        conn.sendall(word)
        chunks = []
        while chunk := conn.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def zk_mode(port: int) -> str | None:
    try:
        found = re.search(r"^Mode: (\w+)", four_letter(port, b"srvr"), re.MULTILINE)
    except OSError:
        return None
    return found.group(1) if found else None


def test_zookeeper_ensemble_from_shipped_file(tmp_path: Path) -> None:
    """Three ZooKeeper servers from copies of zookeeper.properties, only dataDir,
    clientPort and the server.N addresses rewritten (one host here, so ports differ),
    each with its myid as the file's comment says: one leader, two followers, and a
    znode written through one server is read through another."""
    java = shutil.which("java")
    if java is None or not any(JARS.glob("zookeeper*.jar")):
        pytest.skip("needs java and the zookeeper jars (apt-get install -y zookeeper)")
    shipped = ZOOKEEPER_FILE.read_text()
    ids = sorted(int(k.split(".")[1]) for k in read_properties(ZOOKEEPER_FILE)
                 if k.startswith("server."))
    assert ids == [1, 2, 3]
    quorum = {i: (free_port(), free_port()) for i in ids}
    client_ports = {i: free_port() for i in ids}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in ids:
            data = tmp_path / f"zk-{i}"
            data.mkdir()
            (data / "myid").write_text(f"{i}\n")
            text = re.sub(r"(?m)^dataDir=.*$", f"dataDir={data}", shipped)
            text = re.sub(r"(?m)^clientPort=.*$", f"clientPort={client_ports[i]}", text)
            for j, (peer, election) in quorum.items():
                text = re.sub(rf"(?m)^server\.{j}=.*$", f"server.{j}=127.0.0.1:{peer}:{election}",
                              text)
            changed = {a for a, b in zip(shipped.splitlines(), text.splitlines(), strict=True)
                       if a != b}
            assert all(re.match(r"(dataDir|clientPort|server\.\d)=", c) for c in changed)
            cfg = tmp_path / f"zoo-{i}.cfg"
            cfg.write_text(text)
            with (tmp_path / f"zk-{i}.log").open("wb") as log_file:
                procs.append(subprocess.Popen(
                    [java, "-Xmx256m", "-cp", f"/etc/zookeeper/conf:{JARS}/*",
                     "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
                    stdout=log_file, stderr=subprocess.STDOUT, cwd=tmp_path))

        def modes() -> list[str] | None:
            for p in procs:
                assert p.poll() is None, (tmp_path / "zk-1.log").read_text()[-3000:]
            found = [zk_mode(client_ports[i]) for i in ids]
            return found if all(found) else None

        found = wait_until(modes, 45, "a ZooKeeper ensemble from zookeeper.properties",
                           every_s=0.5)
        assert sorted(found) == ["follower", "follower", "leader"], found
        writer = KazooClient(hosts=f"127.0.0.1:{client_ports[1]}", timeout=10)
        reader = KazooClient(hosts=f"127.0.0.1:{client_ports[3]}", timeout=10)
        writer.start(timeout=10)
        reader.start(timeout=10)
        try:
            writer.create("/deploy-check", b"ok")
            reader.sync("/deploy-check")
            assert reader.get("/deploy-check")[0] == b"ok"
        finally:
            for c in (writer, reader):
                c.stop()
                c.close()
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)


# --- the cluster from the shipped files -----------------------------------------------


def test_three_brokers_from_shipped_files(zookeeper: str, tmp_path: Path) -> None:
    started = time.monotonic()
    shipped = [read_properties(p) for p in BROKER_FILES]
    chroot = shipped[0]["zookeeper.connect"].partition("/")[2]
    zk = f"{zookeeper}/{chroot}-deploy-{uuid.uuid4().hex[:8]}"
    servers: list[Server] = []
    for n, (path, props) in enumerate(zip(BROKER_FILES, shipped, strict=True), 1):
        port = free_port()
        home = tmp_path / f"broker-{n}"
        home.mkdir()  # StateDirectory=; log.dirs below it is left to franz to create
        config = home / "server.properties"
        config.write_text(rewrite(path.read_text(), {
            "listeners": local_listeners(props["listeners"], port),
            "log.dirs": str(home / PurePosixPath(props["log.dirs"]).name),
            "zookeeper.connect": zk,
        }))
        servers.append(Server(f"broker-{n}", BROKER_UNIT, config, port, home / "franz.log"))
    unit = parse_unit(BROKER_UNIT)
    stop_timeout_s = seconds(one(unit, "Service", "TimeoutStopSec"))
    ids = [int(p["broker.id"]) for p in shipped]
    with stopped_at_exit(servers):
        for s in servers:
            s.start()
        for s in servers:
            wait_until(s.ready, START_TIMEOUT_S, f"{s.name} ready (/readyz)", every_s=0.2)
        cid = cluster_id(servers[0])
        assert {cluster_id(s) for s in servers} == {cid}

        def live(s: Server) -> bool:
            data = get_json(f"{s.url}/v3/clusters/{cid}/brokers")["data"]
            return sorted(b["broker_id"] for b in data) == ids

        for s in servers:
            wait_until(lambda s=s: live(s), 20, f"3 live brokers seen by {s.name}")

        # a topic with the files' defaults: num.partitions, default.replication.factor,
        # min.insync.replicas
        topic = "deploy-orders"
        resp = httpx.post(f"{servers[1].url}/v3/clusters/{cid}/topics", timeout=30,
                          json={"topic_name": topic})
        assert resp.status_code in (200, 201), resp.text
        described = get_json(f"{servers[2].url}/v3/clusters/{cid}/topics/{topic}")
        assert described["replication_factor"] == int(shipped[0]["default.replication.factor"]) == 3
        assert described["partitions_count"] == int(shipped[0]["num.partitions"])
        min_isr = get_json(f"{servers[0].url}/v3/clusters/{cid}/topics/{topic}/configs/"
                           "min.insync.replicas")
        assert min_isr["value"] == shipped[0]["min.insync.replicas"] == "2"
        partitions = range(described["partitions_count"])

        def in_sync() -> bool:
            return all(sorted(r["broker_id"] for r in replicas(servers[0], cid, topic, p)
                              if r["is_in_sync"]) == ids for p in partitions)

        wait_until(in_sync, 20, "every replica of the topic in sync", every_s=0.2)

        # acks=all through one broker, read back through another, for every partition
        leaders = {p: next(r["broker_id"] for r in replicas(servers[0], cid, topic, p)
                           if r["is_leader"]) for p in partitions}
        by_id = dict(zip(ids, servers, strict=True))
        written: dict[int, list[Any]] = {}
        for p in partitions:
            others = [s for i, s in by_id.items() if i != leaders[p]]
            written[p] = [{"p": p, "n": k} for k in range(5)]
            assert produce(others[0], topic, p, written[p]) == list(range(5))
            assert read_values(others[1], topic, p) == written[p]

        # auto.create.topics.enable=false: an unknown topic is not created by a produce
        resp = httpx.post(f"{servers[0].url}/topics/deploy-typo", timeout=20,
                          headers={"Content-Type": JSON_V2},
                          content=json.dumps({"records": [{"value": 1}]}))
        assert resp.status_code == 404, resp.text

        # the internal topics get the files' replication factors once 3 brokers live
        for name, key in (("__consumer_offsets", "offsets.topic.replication.factor"),
                          ("__franz_idempotency", "idempotency.topic.replication.factor")):
            def internal(name: str = name) -> Any:
                r = httpx.get(f"{servers[0].url}/v3/clusters/{cid}/topics/{name}", timeout=10)
                return r.json() if r.status_code == 200 else None

            info = wait_until(internal, 30, f"{name} created", every_s=0.5)
            assert info["replication_factor"] == int(shipped[0][key]) == 3

        # rolling restart, one step: stop broker 3 as systemd does (SIGTERM), a clean exit
        # well within TimeoutStopSec; acks=all writes go on with two in-sync replicas
        third = servers[2]
        code, took = third.terminate(stop_timeout_s)
        assert code == 0, third.log_tail()
        assert took < stop_timeout_s / 2, f"stop took {took:.1f} s"
        for p in partitions:
            more = [{"p": p, "n": k} for k in range(5, 8)]
            produce(servers[0], topic, p, more)
            written[p] += more
        # start it again from the same file; the step is done when it is ready and no
        # broker reports an under-replicated partition (docs/deploy.md)
        third.start()
        wait_until(third.ready, START_TIMEOUT_S, "broker-3 ready again", every_s=0.2)
        wait_until(lambda: all(under_replicated(s) == 0 for s in servers), 30,
                   "no under-replicated partitions after the restart", every_s=0.5)
        assert in_sync()
        for p in partitions:
            assert read_values(third, topic, p) == written[p]
        for s in servers:
            code, took = s.terminate(stop_timeout_s)
            assert code == 0, s.log_tail()
    assert time.monotonic() - started < 120


def test_standalone_from_shipped_files(tmp_path: Path) -> None:
    """franz serve as franz-standalone.service runs it, from deploy/standalone's file:
    ready, a topic with the file's defaults, an acks=all produce, a clean stop."""
    shipped = read_properties(STANDALONE_FILE)
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(rewrite(STANDALONE_FILE.read_text(), {
        "listeners": local_listeners(shipped["listeners"], port),
        "log.dirs": str(tmp_path / PurePosixPath(shipped["log.dirs"]).name),
    }))
    server = Server("standalone", STANDALONE_UNIT, config, port, tmp_path / "franz.log")
    with stopped_at_exit([server]):
        server.start()
        wait_until(server.ready, START_TIMEOUT_S, "standalone ready (/readyz)", every_s=0.2)
        cid = cluster_id(server)
        resp = httpx.post(f"{server.url}/v3/clusters/{cid}/topics", timeout=30,
                          json={"topic_name": "deploy-events"})
        assert resp.status_code in (200, 201), resp.text
        described = get_json(f"{server.url}/v3/clusters/{cid}/topics/deploy-events")
        assert described["replication_factor"] == int(shipped["default.replication.factor"])
        assert described["partitions_count"] == int(shipped["num.partitions"])
        assert produce(server, "deploy-events", 0, ["a", "b"]) == [0, 1]
        assert read_values(server, "deploy-events", 0) == ["a", "b"]
        code, _ = server.terminate(seconds(one(parse_unit(STANDALONE_UNIT), "Service",
                                                   "TimeoutStopSec")))
        assert code == 0, server.log_tail()
