"""Health probes as Kubernetes and load balancers use them, against real servers:
``GET /healthz`` (alive, with the version), ``GET /readyz`` (ready, or 503 naming why),
both without credentials on a secured broker, both answered while the broker is still
starting, both in the OpenAPI document; and a cluster broker that loses ZooKeeper turns
not ready."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from tests.cluster.conftest import (
    CLASSPATH,
    JARS,
    MAIN_CLASS,
    BrokerProcess,
    _wait_until_serving,
    _zoo_cfg,
    wait_until,
)
from tests.integration.conftest import ROOT, V2, FranzServer, free_port

JSON = "application/json"


def test_healthz_says_alive_and_which_version(client: httpx.Client) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == JSON
    assert r.json() == {"status": "ok", "version": version("franz")}


def test_readyz_says_ready(client: httpx.Client) -> None:
    r = client.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == JSON
    assert r.json() == {"status": "ready"}


def test_only_get_is_a_probe(client: httpx.Client) -> None:
    r = client.post("/healthz", json={})
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == "GET"


def test_probes_are_in_the_openapi_document(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    live = doc["paths"]["/healthz"]["get"]
    ready = doc["paths"]["/readyz"]["get"]
    assert (live["operationId"], ready["operationId"]) == ("getLiveness", "getReadiness")
    assert live["responses"]["200"]["content"][JSON]["schema"] == {
        "$ref": "#/components/schemas/Liveness"}
    for status in ("200", "503"):
        assert ready["responses"][status]["content"][JSON]["schema"] == {
            "$ref": "#/components/schemas/Readiness"}
    schemas = doc["components"]["schemas"]
    assert set(schemas["Liveness"]["properties"]) == {"status", "version"}
    assert set(schemas["Readiness"]["properties"]) == {"status", "reasons"}


@pytest.fixture(scope="module")
def secured_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = FranzServer(tmp_path_factory.mktemp("secured") / "data",
                         ["authentication.method=BASIC", "authorizer.class.name=AclAuthorizer"])
    server.start()
    yield server.url
    server.stop()


def test_probes_need_no_credentials_on_a_secured_broker(secured_url: str) -> None:
    with httpx.Client(base_url=secured_url, timeout=30) as anonymous:
        assert anonymous.get("/topics").status_code == 401  # the API is closed ...
        assert anonymous.get("/healthz").status_code == 200  # ... the probes are not
        r = anonymous.get("/readyz")
        assert (r.status_code, r.json()) == (200, {"status": "ready"})
        assert anonymous.post("/healthz").status_code == 401  # only GET skips it


def _get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None


def test_probes_answer_while_the_broker_starts(tmp_path: Path) -> None:
    """A cluster broker whose ZooKeeper does not answer stays in its start: alive, not
    ready, the API answering 503 (not refusing connections) until it gives up."""
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=4\nlisteners=http://127.0.0.1:{port}\n"
                      f"log.dirs={tmp_path / 'data'}\n"
                      f"zookeeper.connect=127.0.0.1:{free_port()}\n")  # nothing there
    log_path = tmp_path / "broker.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "broker", "--config",
                                 str(config)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        live = wait_until(lambda: _get(f"{base}/healthz"), 30, "GET /healthz during start")
        assert (live.status_code, live.json()["status"]) == (200, "ok")
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 503, ready.text
        assert ready.json() == {"status": "not_ready",
                                "reasons": ["the broker is starting: joining the cluster"]}
        api = httpx.get(f"{base}/topics", timeout=5)
        assert api.status_code == 503 and api.headers["content-type"] == V2
        assert api.headers["retry-after"] == "1"
        assert api.json()["error_code"] == 50302 and "starting" in api.json()["message"]
        v3 = httpx.get(f"{base}/v3/clusters", timeout=5)
        assert (v3.status_code, v3.headers["content-type"]) == (503, JSON)
    finally:
        proc.kill()
        proc.wait(timeout=10)


# --- a cluster broker and its ZooKeeper --------------------------------------------------


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A ZooKeeper of this test's own (the test kills it)."""
    java = shutil.which("java")
    if java is None or not any(JARS.glob("zookeeper*.jar")):
        pytest.skip("needs java and Debian's zookeeper jars (apt-get install -y zookeeper)")
    root = tmp_path / "zk"
    (root / "data").mkdir(parents=True)
    port = free_port()
    (root / "zoo.cfg").write_text(_zoo_cfg(root / "data", port))
    log_path = root / "zookeeper.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([java, "-cp", CLASSPATH, MAIN_CLASS,
                                 str(root / "zoo.cfg")], stdout=out, stderr=subprocess.STDOUT,
                                cwd=root)
    hosts = f"127.0.0.1:{port}"
    try:
        _wait_until_serving(proc, hosts, log_path)
        yield hosts, proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_broker_that_loses_zookeeper_is_not_ready(
        own_zookeeper: tuple[str, subprocess.Popen[bytes]], tmp_path: Path) -> None:
    hosts, zookeeper = own_zookeeper
    broker = BrokerProcess(0, free_port(), tmp_path / "b0", f"{hosts}/franz-health",
                           tmp_path / "b0.log")
    broker.start()
    try:
        r = httpx.get(f"{broker.url}/readyz", timeout=10)
        assert (r.status_code, r.json()) == (200, {"status": "ready"}), broker.log_tail()
        zookeeper.kill()
        zookeeper.wait(timeout=30)
        r = wait_until(lambda: (x := _get(f"{broker.url}/readyz")) is not None
                       and x.status_code == 503 and x, 30, "GET /readyz answering 503")
        body = r.json()
        assert body["status"] == "not_ready" and len(body["reasons"]) == 1, body
        assert "metadata store" in body["reasons"][0], body
        assert httpx.get(f"{broker.url}/healthz", timeout=10).status_code == 200  # alive
    finally:
        broker.kill()
