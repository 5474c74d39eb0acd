"""``schema.registry.listeners``: parsed like ``listeners``, none by default, never a port
of the main listeners (``app.listeners.registry_listeners_of``); and what such a
listener serves: the registry's paths and the health probes, a 404 in the registry's
shape for anything else (``api.schema_registry.listener``)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.schema_registry.listener import PREFIXES, registry_only, serves
from app.listeners import Listener, ListenerConfigError, listeners_of, registry_listeners_of
from app.settings import ConfigError, load_config


def _registry(**props: object) -> list[Listener]:
    config = load_config(overrides=props, environ={})
    return registry_listeners_of(config, listeners_of(config))


def test_none_by_default() -> None:
    assert _registry() == []


def test_parsed_like_listeners() -> None:
    assert _registry(**{"schema.registry.listeners": "http://127.0.0.1:8081, SSL://:8444"}) == [
        Listener("http", "127.0.0.1", 8081), Listener("https", "", 8444)]


@pytest.mark.parametrize(("value", "message"), [
    ("ftp://127.0.0.1:8081", "unknown scheme"),
    ("http://127.0.0.1", "is not SCHEME://HOST:PORT"),
    ("http://127.0.0.1:8082", "duplicates"),  # the main listener's port
    ("http://0.0.0.0:8082", "duplicates"),
    ("http://127.0.0.1:8081,http://127.0.0.1:8081", "duplicates"),
])
def test_bad_values_name_the_property(value: str, message: str) -> None:
    with pytest.raises(ListenerConfigError, match=message) as caught:
        _registry(**{"schema.registry.listeners": value})
    assert str(caught.value).startswith("schema.registry.listeners: ")


def test_a_known_property() -> None:
    with pytest.raises(ConfigError, match="did you mean schema.registry.listeners"):
        load_config(overrides={"schema.registry.listener": "http://127.0.0.1:8081"},
                    environ={})


def test_the_paths_a_registry_listener_serves() -> None:
    assert {"/schemas", "/subjects", "/config", "/mode", "/compatibility"} == PREFIXES
    for path in ("/subjects", "/subjects/a%2Fb/versions/1", "/schemas/ids/1", "/config",
                 "/mode/s", "/compatibility/subjects/s/versions", "/healthz", "/readyz"):
        assert serves(path), path
    for path in ("/", "/topics", "/v3/clusters", "/metrics", "/openapi.json", "/docs",
                 "/internal/v1/schemas/register", "/configs", "/healthz/x", ""):
        assert not serves(path), path


def test_other_paths_are_404_in_the_registrys_shape() -> None:
    app = FastAPI()

    @app.get("/{path:path}")
    async def anything(path: str) -> dict[str, str]:
        return {"path": path}

    client = TestClient(registry_only(app))
    assert client.get("/subjects").json() == {"path": "subjects"}
    resp = client.get("/v3/clusters")
    assert resp.status_code == 404
    assert resp.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert resp.json() == {"error_code": 404, "message": "HTTP 404 Not Found"}
