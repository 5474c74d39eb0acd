"""The cluster driver: a real ZooKeeper, three real ``franz broker`` processes, the real
``franz`` tools, and the cluster's state as ZooKeeper and each broker tell it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from ..conftest import (
    CLASSPATH,
    JARS,
    MAIN_CLASS,
    ROOT,
    BrokerProcess,
    _zoo_cfg,
    free_port,
)
from .errors import Violation
from .http import Http
from .settings import BROKER_OVERRIDES, HEAL_S, INTERNAL_TOPICS, OFFSETS_PARTITIONS, TOPICS

BROKERS = 3
TOOL_TIMEOUT_S = 60.0


@contextmanager
def zookeeper(root: Path) -> Iterator[str]:
    """A ZooKeeper server of its own (for runs outside pytest, such as the soak);
    yields ``127.0.0.1:<port>``."""
    java = shutil.which("java")
    if java is None or not any(JARS.glob("zookeeper*.jar")):
        raise RuntimeError("the life test needs java and Debian's zookeeper package")
    (root / "zk-data").mkdir(parents=True, exist_ok=True)
    port = free_port()
    cfg = root / "zoo.cfg"
    cfg.write_text(_zoo_cfg(root / "zk-data", port))
    with (root / "zookeeper.log").open("wb") as log_file:
        proc = subprocess.Popen([java, "-cp", CLASSPATH, MAIN_CLASS, str(cfg)],
                                stdout=log_file, stderr=subprocess.STDOUT, cwd=root)
    hosts = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            client = KazooClient(hosts=hosts, timeout=5.0)
            try:
                client.start(timeout=1.0)
                client.stop()
                client.close()
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("ZooKeeper did not start") from None
        yield hosts
    finally:
        proc.kill()
        proc.wait(timeout=30)


def franz_tool() -> list[str]:
    """The ``franz`` command as ``python -m app.cli`` (the executable's entry point) run
    in the tree under test, so the tools are those of the brokers' code."""
    return [sys.executable, "-m", "app.cli"]


class Cluster:
    def __init__(self, root: Path, zk: str, http: Http, log: Any = print) -> None:
        self.root = root
        self.zk_connect = zk
        self.http = http
        self.log = log
        self.brokers = [BrokerProcess(i, free_port(), root / f"data-{i}", zk,
                                      root / f"broker-{i}.log", list(BROKER_OVERRIDES))
                        for i in range(BROKERS)]
        self.paused: set[int] = set()
        self.zk = KazooClient(hosts=zk, timeout=10)
        self.cluster_id = ""
        self.tool_runs = 0

    # --- life cycle --------------------------------------------------------------------

    def start(self) -> None:
        for b in self.brokers:
            b.start()
        self.zk.start(timeout=15)
        self.cluster_id = httpx.get(f"{self.brokers[0].url}/v3/clusters",
                                    timeout=10).json()["data"][0]["cluster_id"]
        for spec in TOPICS:
            body = {"topic_name": spec.name, "partitions_count": spec.partitions,
                    "replication_factor": 3,
                    "configs": [{"name": k, "value": v} for k, v in spec.configs]}
            a = self.http.until(f"create {spec.name}", lambda body=body: self.http.send(
                "POST", self.v3(self.brokers[0], "topics"), json=body))
            if a.status not in (201, 200):
                raise RuntimeError(f"cannot create {spec.name}: {a.brief()}")
        self.heal("the cluster's first start")

    def close(self) -> None:
        for b in self.brokers:  # SIGTERM to all at once: the controlled shutdowns overlap
            with _quiet():
                if b.running:
                    b.signal(signal.SIGCONT)
                    b.signal(signal.SIGTERM)
        for b in self.brokers:
            with _quiet():
                b.stop()
        with _quiet():
            self.zk.stop()
            self.zk.close()

    # --- who is where --------------------------------------------------------------------

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.running and b.broker_id not in self.paused]

    def v3(self, b: BrokerProcess, *parts: str | int) -> str:
        return f"{b.url}/v3/clusters/{self.cluster_id}" + "".join(f"/{p}" for p in parts)

    def controller(self) -> int | None:
        try:
            return int(json.loads(self.zk.get("/controller")[0])["brokerid"])
        except NoNodeError:
            return None

    def registered(self) -> set[int]:
        try:
            return {int(x) for x in self.zk.get_children("/brokers/ids")}
        except NoNodeError:
            return set()

    def assignment(self, topic: str) -> dict[int, list[int]]:
        try:
            data, _ = self.zk.get(f"/brokers/topics/{topic}")
        except NoNodeError:
            return {}
        return {int(p): list(r) for p, r in json.loads(data)["partitions"].items()}

    def state(self, topic: str, p: int) -> dict[str, Any]:
        try:
            data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
        except NoNodeError:
            return {"leader": -1, "isr": [], "leader_epoch": -1}
        return dict(json.loads(data))

    def leader(self, topic: str, p: int) -> int:
        return int(self.state(topic, p)["leader"])

    def all_partitions(self) -> list[tuple[str, int]]:
        out = []
        for topic in [s.name for s in TOPICS] + list(INTERNAL_TOPICS):
            out += [(topic, p) for p in sorted(self.assignment(topic))]
        return out

    # --- healing ---------------------------------------------------------------------------

    def unhealed(self) -> str | None:
        """Why the cluster is not whole, or None: every broker running, registered and
        ready; every partition led, its ISR full; no reassignment or election pending;
        each broker's replicas agree with ZooKeeper's leader and epoch."""
        if self.paused or not all(b.running for b in self.brokers):
            return "a broker is down or paused"
        if self.registered() != set(range(BROKERS)):
            return f"registered brokers {sorted(self.registered())}"
        for path in ("/admin/reassign_partitions", "/admin/preferred_replica_election"):
            if self.zk.exists(path):
                return f"{path} pending"
        if len(self.assignment("__consumer_offsets")) != OFFSETS_PARTITIONS:
            return "__consumer_offsets not created yet"
        states = {}
        for topic, p in self.all_partitions():
            st = self.state(topic, p)
            if st["leader"] < 0 or sorted(st["isr"]) != list(range(BROKERS)):
                return f"{topic}-{p}: leader {st['leader']} isr {st['isr']}"
            states[(topic, p)] = st
        for b in self.brokers:
            try:
                if httpx.get(f"{b.url}/readyz", timeout=3).status_code != 200:
                    return f"broker {b.broker_id} not ready"
                rows = httpx.get(f"{b.url}/internal/v1/replicas", timeout=5).json()
            except (httpx.HTTPError, ValueError) as exc:
                return f"broker {b.broker_id}: {exc!r}"
            seen = {(r["topic"], r["partition"]): r for r in rows}
            for key, st in states.items():
                r = seen.get(key)
                if r is None:
                    return f"broker {b.broker_id} hosts no replica of {key[0]}-{key[1]}"
                if r["leader"] != st["leader"] or r.get("leader_epoch", st["leader_epoch"]) \
                        != st["leader_epoch"]:
                    return (f"broker {b.broker_id} sees {key[0]}-{key[1]} led by "
                            f"{r['leader']} epoch {r.get('leader_epoch')}, ZooKeeper "
                            f"{st['leader']} epoch {st['leader_epoch']}")
        return None

    def heal(self, after: str, budget_s: float = HEAL_S) -> float:
        """Seconds until the cluster is whole; ``not-healed`` past ``budget_s``."""
        started = time.monotonic()
        why = None
        while time.monotonic() - started < budget_s:
            why = self.unhealed()
            if why is None:
                return time.monotonic() - started
            time.sleep(0.25)
        raise Violation("not-healed", f"{budget_s:.0f} s after {after}: {why}")

    # --- the franz tools -------------------------------------------------------------------

    def tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.tool_runs += 1
        b = self.live()[0]
        return subprocess.run([*franz_tool(), *args, "--bootstrap-server", b.url], cwd=ROOT,
                              capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def move_leader(self, topic: str, p: int, to: int) -> dict[str, Any]:
        """Leadership of ``topic``-``p`` to broker ``to`` with the tools, as an operator
        does it: ``reassign-partitions --execute`` with ``to`` first (the same replicas),
        ``--verify`` until done, then ``leader-election`` for the partition."""
        replicas = self.assignment(topic)[p]
        target = [to] + [r for r in replicas if r != to]
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.root,
                                         delete=False) as f:
            json.dump({"version": 1, "partitions": [
                {"topic": topic, "partition": p, "replicas": target}]}, f)
        plan = f.name
        try:
            self._tool_until(f"reassign {topic}-{p} to {target}", "reassign-partitions",
                             "--reassignment-json-file", plan, "--execute")
            self._tool_until(f"verify {topic}-{p}", "reassign-partitions",
                             "--reassignment-json-file", plan, "--verify")
        finally:
            os.unlink(plan)
        self._tool_until(f"leader-election {topic}-{p}", "leader-election", "--topic", topic,
                         "--partition", str(p))
        deadline = time.monotonic() + 30
        while self.leader(topic, p) != to:
            if time.monotonic() > deadline:
                raise Violation("not-healed", f"{topic}-{p}: leader {self.leader(topic, p)} "
                                f"30 s after the election for {to} (replicas {target}, "
                                f"isr {self.state(topic, p)['isr']})")
            time.sleep(0.2)
        return {"topic": topic, "partition": p, "replicas": target}

    def _tool_until(self, what: str, *args: str, budget_s: float = 60.0) -> None:
        deadline = time.monotonic() + budget_s
        while True:
            done = self.tool(*args)
            if done.returncode == 0:
                return
            if "Traceback" in done.stderr:
                raise Violation("tool-crashed", f"franz {' '.join(args)}: {done.stderr[-800:]}")
            if time.monotonic() > deadline:
                raise Violation("not-healed", f"{what}: exit {done.returncode} for "
                                f"{budget_s:.0f} s: {done.stdout[-300:]} {done.stderr[-500:]}")
            time.sleep(0.5)


@contextmanager
def _quiet() -> Iterator[None]:
    try:
        yield
    except Exception:  # teardown goes on whatever one broker did
        pass
