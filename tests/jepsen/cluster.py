"""A franz cluster in network namespaces: Debian's ZooKeeper in host ``zk``, brokers
``n0``.. in their own hosts, each listening on and advertising its own address; the
clients in ``client``, the test's own look-ups (ZooKeeper state, readiness, the final
reads) from ``control``, which no fault ever touches.

The processes are those of the cluster tests (tests/cluster/conftest.py:
``BrokerProcess`` run under ``ip netns exec``, the same ``zoo.cfg``), so a broker here
is started, signalled and stopped as there."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cluster.conftest import CLASSPATH, JARS, MAIN_CLASS, BrokerProcess, _zoo_cfg
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from .net import Network, tail

ZK_PORT = 2181
BROKER_PORT = 8082
SESSION_MS = 4000
LAG_MS = 2000
BROKER_OVERRIDES = [
    f"zookeeper.session.timeout.ms={SESSION_MS}",
    f"replica.lag.time.max.ms={LAG_MS}",
    "replica.fetch.backoff.ms=200",
    "replica.socket.timeout.ms=5000",
    "request.timeout.ms=8000",
    "min.insync.replicas=2",
    "log.flush.scheduler.interval.ms=200",
    "offsets.topic.num.partitions=1",
    "idempotency.topic.num.partitions=3",
    "idempotency.key.claim.timeout.ms=10000",
    "auto.create.topics.enable=false",
    "unclean.leader.election.enable=false",
    # the listeners are reachable only inside the namespaces the harness made
    "listeners.unauthenticated.allow=true",
]


def hosts(brokers: int) -> list[str]:
    return ["zk", *[f"n{i}" for i in range(brokers)], "client", "control"]


@dataclass
class NsBroker(BrokerProcess):
    """A ``BrokerProcess`` in a namespace; readiness asked from ``control``."""

    net: Network | None = None
    hostname: str = ""

    def _ready(self) -> bool:
        assert self.net is not None
        with self.net.inside("control"):
            return super()._ready()


@dataclass
class NetCluster:
    net: Network
    root: Path
    brokers_n: int = 3
    overrides: list[str] = field(default_factory=lambda: list(BROKER_OVERRIDES))
    log: Any = print

    def __post_init__(self) -> None:
        self.chroot = f"/franz-{uuid.uuid4().hex[:8]}"
        self.zk_connect = f"{self.net.ip('zk')}:{ZK_PORT}{self.chroot}"
        self.brokers = [
            NsBroker(i, BROKER_PORT, self.root / f"data-{i}", self.zk_connect,
                     self.root / f"broker-{i}.log", list(self.overrides),
                     host=self.net.ip(f"n{i}"),
                     command_prefix=["ip", "netns", "exec", self.net.ns(f"n{i}")],
                     net=self.net, hostname=f"n{i}")
            for i in range(self.brokers_n)]
        self.zk_log = self.root / "zookeeper.log"
        self.zk: KazooClient | None = None
        self.cluster_id = ""
        self.http = self.net_client("control")

    # --- start and stop ---------------------------------------------------------------

    def start(self) -> None:
        self._start_zookeeper()
        for b in self.brokers:
            b.start()
        with self.net.inside("control"):  # kazoo's thread is started here: it stays here
            self.zk = KazooClient(hosts=self.zk_connect, timeout=10)
            self.zk.start(timeout=15)
        self.cluster_id = self.get(self.brokers[0], "/v3/clusters").json()["data"][0]["cluster_id"]

    def close(self) -> None:
        if self.zk is not None:
            try:
                self.zk.stop()
                self.zk.close()
            except Exception:
                pass
        for b in self.brokers:
            try:
                b.stop()
            except Exception:
                pass
        self.http.close()

    def _start_zookeeper(self) -> None:
        java = shutil.which("java")
        if java is None or not any(JARS.glob("zookeeper*.jar")):
            raise RuntimeError("needs java and Debian's zookeeper package")
        (self.root / "zk-data").mkdir(parents=True, exist_ok=True)
        cfg = self.root / "zoo.cfg"
        cfg.write_text(_zoo_cfg(self.root / "zk-data", ZK_PORT, self.net.ip("zk")))
        with self.zk_log.open("wb") as out:
            self.zk_proc = self.net.popen("zk", [java, "-cp", CLASSPATH, MAIN_CLASS, str(cfg)],
                                          stdout=out, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if self.zk_proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited:\n{tail(self.zk_log)}")
            if self._zk_ruok():
                return
            time.sleep(0.3)
        raise RuntimeError(f"ZooKeeper not serving after 40 s:\n{tail(self.zk_log)}")

    def _zk_ruok(self) -> bool:
        with self.net.inside("control"):
            try:
                with socket.create_connection((self.net.ip("zk"), ZK_PORT), timeout=1) as s:
                    s.sendall(b"ruok")
                    return s.recv(4) == b"imok"
            except OSError:
                return False

    # --- HTTP from the control host ---------------------------------------------------

    def net_client(self, host: str) -> httpx.Client:
        """An httpx client whose connections are opened in ``host`` (a transport whose
        sockets are created while the opening thread is inside it)."""
        return httpx.Client(timeout=10, transport=NsTransport(self.net, host))

    def get(self, b: BrokerProcess, path: str, **kw: Any) -> httpx.Response:
        return self.http.get(f"{b.url}{path}", **kw)

    def v3(self, *parts: str | int) -> str:
        return f"/v3/clusters/{self.cluster_id}" + "".join(f"/{p}" for p in parts)

    def create_topic(self, name: str, partitions: int, rf: int = 3,
                     configs: dict[str, str] | None = None) -> None:
        body = {"topic_name": name, "partitions_count": partitions, "replication_factor": rf,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        r = self.http.post(f"{self.brokers[0].url}{self.v3('topics')}", json=body)
        if r.status_code not in (200, 201):
            raise RuntimeError(f"cannot create {name}: {r.status_code} {r.text}")

    # --- ZooKeeper's view -------------------------------------------------------------

    def state(self, topic: str, p: int) -> dict[str, Any]:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
        except NoNodeError:
            return {"leader": -1, "isr": [], "leader_epoch": -1}
        return dict(json.loads(data))

    def registered(self) -> set[int]:
        assert self.zk is not None
        try:
            return {int(x) for x in self.zk.get_children("/brokers/ids")}
        except NoNodeError:
            return set()

    def controller(self) -> int | None:
        assert self.zk is not None
        try:
            return int(json.loads(self.zk.get("/controller")[0])["brokerid"])
        except NoNodeError:
            return None

    def whole(self, topic: str, partitions: int) -> str | None:
        """Why ``topic`` is not whole (every broker registered, each partition led with
        its full ISR, every broker agreeing with ZooKeeper on leader and epoch), or None."""
        if self.registered() != set(range(self.brokers_n)):
            return f"registered {sorted(self.registered())}"
        states = {}
        for p in range(partitions):
            st = self.state(topic, p)
            if st["leader"] < 0 or sorted(st["isr"]) != list(range(self.brokers_n)):
                return f"{topic}-{p}: leader {st['leader']} isr {st['isr']}"
            states[p] = st
        for b in self.brokers:
            try:
                rows = self.get(b, "/internal/v1/replicas", timeout=5).json()
            except (httpx.HTTPError, ValueError) as exc:
                return f"broker {b.broker_id}: {exc!r}"
            seen = {r["partition"]: r for r in rows if r["topic"] == topic}
            for p, st in states.items():
                r = seen.get(p)
                if r is None or r["leader"] != st["leader"] or \
                        r.get("leader_epoch", st["leader_epoch"]) != st["leader_epoch"]:
                    return f"broker {b.broker_id} disagrees on {topic}-{p}: {r} vs {st}"
        return None

    def wait_whole(self, topic: str, partitions: int, budget_s: float) -> float:
        started = time.monotonic()
        why = None
        while time.monotonic() - started < budget_s:
            why = self.whole(topic, partitions)
            if why is None:
                return time.monotonic() - started
            time.sleep(0.25)
        raise AssertionError(f"{topic} not whole within {budget_s:.0f} s: {why}")


class NsTransport(httpx.HTTPTransport):
    """httpx's transport with every request made while the calling thread is inside the
    namespace of ``host``: new connections are opened there (a pooled one stays where it
    was opened, which is the same host)."""

    def __init__(self, net: Network, host: str, **kw: Any) -> None:
        super().__init__(**kw)
        self._net = net
        self._host = host

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._net.inside(self._host):
            return super().handle_request(request)


__all__ = ["NetCluster", "NsBroker", "hosts"]
