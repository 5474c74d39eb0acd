"""Two real ``franz broker`` processes whose only listener is https with client
certificates required: they register ``HTTPS://`` endpoints (mapped to SSL) in ZooKeeper
and call each other over mutual TLS (each presents its keystore, verifies the other's
with the truststore), so an acks=all produce to a topic with two in-sync replicas
succeeds."""

from __future__ import annotations

import functools
import json
import os
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme
from kazoo.client import KazooClient

from .conftest import BrokerProcess, free_port, running, wait_until

JSON_V2 = "application/vnd.kafka.json.v2+json"


@dataclass
class TlsBroker(BrokerProcess):
    ca_file: str = ""
    cert_file: str = ""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.load_cert_chain(self.cert_file)  # the broker's own certificate: a valid client
        return ctx

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"broker {self.broker_id} exited:\n{self.log_tail()}")
        try:
            return httpx.get(f"{self.url}/v3/clusters", verify=self.tls(), timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


@pytest.fixture(scope="module")
def tls_cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[TlsBroker]]:
    root = tmp_path_factory.mktemp("tls-cluster")
    ca = trustme.CA()
    ca_file = root / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    zk = f"{zookeeper}/franz-tls-{os.getpid()}-{time.monotonic_ns()}"
    brokers = []
    for i in range(2):
        keystore = root / f"broker-{i}.pem"
        ca.issue_cert("127.0.0.1", common_name=f"broker-{i}") \
            .private_key_and_cert_chain_pem.write_to_path(str(keystore))
        port = free_port()
        overrides = [f"listeners=https://127.0.0.1:{port}", f"ssl.keystore.location={keystore}",
                     f"ssl.truststore.location={ca_file}", "ssl.client.authentication=REQUIRED",
                     "min.insync.replicas=2", "offsets.topic.num.partitions=1",
                     "replica.fetch.backoff.ms=200"]
        brokers.append(TlsBroker(i, port, root / f"data-{i}", zk, root / f"broker-{i}.log",
                                 overrides=overrides, ca_file=str(ca_file),
                                 cert_file=str(keystore)))
    with running(brokers):  # type: ignore[arg-type]
        yield brokers


def test_brokers_register_ssl_endpoints(tls_cluster: list[TlsBroker]) -> None:
    zk = KazooClient(hosts=tls_cluster[0].zk, timeout=10)
    zk.start(timeout=10)
    try:
        for b in tls_cluster:
            doc = json.loads(zk.get(f"/brokers/ids/{b.broker_id}")[0])
            assert doc["endpoints"] == [f"HTTPS://127.0.0.1:{b.port}"]
            assert doc["listener_security_protocol_map"] == {"HTTPS": "SSL"}
            assert (doc["host"], doc["port"]) == (None, -1)
    finally:
        zk.stop()
        zk.close()


def test_acks_all_over_tls_between_brokers(tls_cluster: list[TlsBroker]) -> None:
    b0, b1 = tls_cluster
    cid = httpx.get(f"{b0.url}/v3/clusters", verify=b0.tls()).json()["data"][0]["cluster_id"]
    r = httpx.post(f"{b0.url}/v3/clusters/{cid}/topics", verify=b0.tls(), timeout=30,
                   json={"topic_name": "tls-orders", "partitions_count": 1,
                         "replication_factor": 2})
    assert r.status_code in (200, 201), r.text

    def produced() -> list[int] | None:
        for b in tls_cluster:  # through both: one of them forwards to the leader over TLS
            r = httpx.post(f"{b.url}/topics/tls-orders/partitions/0", params={"acks": "all"},
                           verify=b.tls(), timeout=40, headers={"Content-Type": JSON_V2},
                           content=json.dumps({"records": [{"value": {"via": b.broker_id}}]}))
            if r.status_code != 200 or r.json()["offsets"][0]["error_code"] is not None:
                return None
        return [0]

    # acks=all with min.insync.replicas=2: the follower must have fetched over TLS
    wait_until(produced, 30, "acks=all produces through both brokers")
    for b in tls_cluster:
        rows = wait_until(functools.partial(_read, b), 20, f"records on broker {b.broker_id}")
        assert {r["value"]["via"] for r in rows} >= {0, 1}


def _read(b: TlsBroker) -> list[dict[str, object]] | None:
    r = httpx.get(f"{b.url}/topics/tls-orders/partitions/0/records", params={"offset": 0},
                  verify=b.tls(), headers={"Accept": JSON_V2}, timeout=30)
    rows = r.json() if r.status_code == 200 else []
    return rows if len(rows) >= 2 else None


def test_logs_show_no_tls_failures(tls_cluster: list[TlsBroker]) -> None:
    for b in tls_cluster:
        log = Path(b.log_path).read_text(errors="replace")
        assert "CERTIFICATE_VERIFY_FAILED" not in log, log[-3000:]
