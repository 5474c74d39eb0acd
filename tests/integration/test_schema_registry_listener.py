"""``schema.registry.listeners`` (docs/schema-registry.md, "Listeners"): listeners of
real ``franz serve`` processes that serve the Schema Registry alone, with the health
probes, beside the main listeners (which keep serving it); TLS, client certificates and
HTTP Basic there as on the main listeners; bad settings stop the start naming the
property."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import FranzServer, free_port
from test_security import SECURED, add_users
from test_tls import _refused_start, _ssl_props, _tls, pki, serving  # noqa: F401  (pki: fixture)

SR = "application/vnd.schemaregistry.v1+json"
SCHEMA = {"schema": json.dumps({"type": "record", "name": "R",
                                "fields": [{"name": "a", "type": "int"}]})}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FranzServer, str]]:
    """A broker with a registry listener; (the server, the registry listener's URL)."""
    port = free_port()
    s = FranzServer(tmp_path_factory.mktemp("registry-listener") / "data",
                    ["num.partitions=1", f"schema.registry.listeners=http://127.0.0.1:{port}"])
    s.start()
    yield s, f"http://127.0.0.1:{port}"
    s.stop()


def test_the_registry_alone_on_its_listener(server: tuple[FranzServer, str]) -> None:
    main, url = server
    with httpx.Client(base_url=url, timeout=30.0, headers={"Content-Type": SR}) as registry:
        created = registry.post("/subjects/orders-value/versions", json=SCHEMA)
        assert created.status_code == 200, created.text
        assert created.headers["content-type"] == SR
        schema_id = created.json()["id"]
        assert registry.get("/subjects").json() == ["orders-value"]
        assert registry.get(f"/schemas/ids/{schema_id}").json()["schema"]
        assert registry.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
        assert registry.get("/healthz").status_code == 200
        assert registry.get("/readyz").status_code == 200
        for path in ("/", "/topics", "/v3/clusters", "/metrics", "/openapi.json", "/docs",
                     "/internal/v1/schemas/subjects", "/subjectsx"):
            resp = registry.get(path)
            assert resp.status_code == 404, (path, resp.text)
            assert resp.headers["content-type"] == SR, path
            assert resp.json() == {"error_code": 404, "message": "HTTP 404 Not Found"}, path
        resp = registry.post("/topics/orders", json={"records": [{"value": 1}]})
        assert resp.status_code == 404, resp.text
    # the main listener serves the same registry, and everything else
    with httpx.Client(base_url=main.url, timeout=30.0) as client:
        assert client.get("/subjects/orders-value/versions").json() == [1]
        assert client.get("/v3/clusters").status_code == 200
    summary = [line for line in main.log_path.read_text().splitlines() if " ready in " in line]
    assert f"the Schema Registry alone on {url}" in summary[-1], summary


def test_confluents_client_on_the_registry_listener(server: tuple[FranzServer, str]) -> None:
    registry_client = pytest.importorskip("confluent_kafka.schema_registry")
    _, url = server
    client = registry_client.SchemaRegistryClient({"url": url})
    schema = registry_client.Schema(json.dumps({"type": "string"}), "AVRO")
    schema_id = client.register_schema("plain-value", schema)
    assert client.get_schema(schema_id).schema_str == '"string"'
    assert client.get_latest_version("plain-value").version == 1


def test_tls_and_basic_auth_as_on_the_main_listeners(tmp_path: Path,
                                                     pki: dict[str, Path]) -> None:  # noqa: F811
    main, port = free_port(), free_port()
    url = f"https://127.0.0.1:{port}"
    add_users(tmp_path / "data", {"admin": "admin-pw"})
    props = [*_ssl_props(pki, "REQUESTED"), *SECURED, f"schema.registry.listeners={url}"]
    alice = _tls(pki, "alice")
    with serving(tmp_path, f"http://127.0.0.1:{main}", props, f"{url}/readyz", alice):
        with httpx.Client(base_url=url, verify=_tls(pki), timeout=30.0) as client:
            assert client.get("/healthz").status_code == 200  # probes: no credentials
            assert client.get("/subjects").status_code == 401
            assert client.get("/subjects", auth=("admin", "wrong")).status_code == 401
            assert client.get("/subjects", auth=("admin", "admin-pw")).json() == []
            resp = client.put("/config", json={"compatibility": "FULL"},
                              auth=("admin", "admin-pw"))
            assert resp.status_code == 200, resp.text
        with httpx.Client(base_url=url, verify=alice, timeout=30.0) as client:
            # a client certificate is a principal (User:alice): reads yes, levels no
            assert client.get("/config").json() == {"compatibilityLevel": "FULL"}
            assert client.put("/config", json={"compatibility": "NONE"}).status_code == 403
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the https listener
            httpx.get(f"http://127.0.0.1:{port}/subjects", timeout=5)


@pytest.mark.parametrize(("registry", "props", "named"), [
    ("ftp://127.0.0.1:{free}", [], "schema.registry.listeners: listener 'ftp://127.0.0.1"),
    ("http://127.0.0.1:{main}", [], "schema.registry.listeners: listener http://127.0.0.1:"),
    ("http://0.0.0.0:{free}", [], "listeners.unauthenticated.allow=true"),
    ("https://127.0.0.1:{free}", [], "ssl.keystore.location"),
])
def test_bad_registry_listeners_stop_the_start(tmp_path: Path, registry: str,
                                               props: list[str], named: str) -> None:
    main = free_port()
    value = registry.format(free=free_port(), main=main)
    stderr = _refused_start(tmp_path, f"http://127.0.0.1:{main}",
                            [*props, f"schema.registry.listeners={value}"])
    assert named in stderr, stderr
