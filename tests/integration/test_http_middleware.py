"""The opt-in HTTP middleware against real servers (docs/http.md): CORS as Confluent REST
Proxy configures it, gzip of large answers, the access log and ``log.format=json``; and
a broker with the defaults has none of them."""

from __future__ import annotations

import base64
import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import BINARY, V2, FranzServer

ORIGIN = "https://ui.example.com"


@pytest.fixture(scope="module")
def featured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A broker with every feature on."""
    server = FranzServer(tmp_path_factory.mktemp("featured") / "data", [
        "num.partitions=1",
        f"access.control.allow.origin={ORIGIN}, https://*.corp.example",
        "access.control.allow.methods=GET,POST,DELETE",
        "access.control.allow.headers=Content-Type,Authorization",
        "http.gzip.min.bytes=1024",
        "http.access.log=true",
        "log.format=json",
    ])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http(featured: FranzServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=featured.url, timeout=30.0) as c:
        yield c


def _wait_ready(c: httpx.Client) -> None:
    deadline = time.monotonic() + 30
    while c.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "not ready"
        time.sleep(0.1)


def _raw_get(c: httpx.Client, url: str, **kw: object) -> httpx.Response:
    """A GET whose body stays as sent (no automatic gzip decoding)."""
    with c.stream("GET", url, **kw) as r:  # type: ignore[arg-type]
        r.raw = b"".join(r.iter_raw())  # type: ignore[attr-defined]
        return r


# --- CORS ----------------------------------------------------------------------------------


def test_preflight_is_answered_without_credentials(http: httpx.Client) -> None:
    _wait_ready(http)
    r = http.options("/topics/t", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert set(r.headers["access-control-allow-methods"].split(", ")) == {"GET", "POST", "DELETE"}
    assert "Content-Type" in r.headers["access-control-allow-headers"]
    assert "Authorization" in r.headers["access-control-allow-headers"]
    assert r.headers["access-control-max-age"] == "1800"


def test_a_wildcard_origin_pattern_matches(http: httpx.Client) -> None:
    r = http.options("/v3/clusters", headers={
        "Origin": "https://team.corp.example", "Access-Control-Request-Method": "GET"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "https://team.corp.example"


def test_preflight_from_another_origin_or_method_is_refused(http: httpx.Client) -> None:
    other = http.options("/topics/t", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    put = http.options("/topics/t", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "PUT"})
    assert put.status_code == 400


def test_simple_requests_carry_the_cors_headers(http: httpx.Client, topic: str) -> None:
    r = http.post(f"/topics/{topic}", json={"records": [{"value": {"a": 1}}]},
                  headers={"Origin": ORIGIN, "Content-Type": "application/vnd.kafka.json.v2+json"})
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert http.get("/topics", headers={"Origin": "https://evil.example"}).headers.get(
        "access-control-allow-origin") is None


def test_cors_is_off_by_default(client: httpx.Client) -> None:
    r = client.options("/topics/t", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in client.get(
        "/topics", headers={"Origin": ORIGIN}).headers


# --- gzip ----------------------------------------------------------------------------------


def test_large_answers_are_gzipped_when_accepted(http: httpx.Client) -> None:
    r = _raw_get(http, "/openapi.json", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["content-encoding"] == "gzip"
    assert "Accept-Encoding" in r.headers["vary"]
    doc = json.loads(gzip.decompress(r.raw))  # type: ignore[attr-defined]
    assert doc["openapi"].startswith("3.")
    plain = _raw_get(http, "/openapi.json", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert json.loads(plain.raw) == doc  # type: ignore[attr-defined]


def test_small_answers_are_not_gzipped(http: httpx.Client) -> None:
    r = _raw_get(http, "/healthz", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and "content-encoding" not in r.headers


def test_hot_routes_with_gzip(http: httpx.Client, topic: str) -> None:
    """v2 produce and the records read (api.hot_routes) under gzip: the request body is
    read as sent, a large read answer comes back gzipped and intact."""
    values = [base64.b64encode(bytes([i]) * 200).decode() for i in range(40)]
    produced = http.post(f"/topics/{topic}", json={"records": [{"value": v} for v in values]},
                         headers={"Content-Type": BINARY, "Accept-Encoding": "gzip"})
    assert produced.status_code == 200, produced.text
    assert [o["offset"] for o in produced.json()["offsets"]] == list(range(40))
    r = _raw_get(http, f"/topics/{topic}/partitions/0/records",
                 params={"offset": 0, "count": 100},
                 headers={"Accept": "application/vnd.kafka.binary.v2+json",
                          "Accept-Encoding": "gzip"})
    assert r.status_code == 200, r.raw  # type: ignore[attr-defined]
    assert r.headers["content-encoding"] == "gzip"
    records = json.loads(gzip.decompress(r.raw))  # type: ignore[attr-defined]
    assert [rec["value"] for rec in records] == values


def test_v3_streaming_produce_with_gzip(http: httpx.Client, topic: str) -> None:
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]

    def body() -> Iterator[bytes]:  # chunked: the streaming path
        for i in range(30):
            yield json.dumps({"value": {"type": "STRING", "data": f"v{i}" * 20}}).encode()

    r = http.post(f"/v3/clusters/{cluster}/topics/{topic}/records", content=body(),
                  headers={"Content-Type": "application/json", "Accept-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    reports = [json.loads(line) for line in r.text.strip().split("\r\n")]
    assert [rep["offset"] for rep in reports] == list(range(30))
    assert {rep["error_code"] for rep in reports} == {200}


def test_gzip_is_off_by_default(client: httpx.Client) -> None:
    r = _raw_get(client, "/openapi.json", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in r.headers


# --- access log and JSON log lines --------------------------------------------------------


def _json_lines(path: Path) -> list[dict[str, object]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_access_log_lines_are_json(featured: FranzServer, http: httpx.Client,
                                   topic: str) -> None:
    _wait_ready(http)
    marker = f"/topics/{topic}"
    assert http.post(marker, json={"records": [{"value": "eA=="}]},
                     headers={"Content-Type": BINARY, "Accept": V2}).status_code == 200
    assert http.get(f"/topics/{topic}-missing").status_code == 404
    deadline = time.monotonic() + 10
    while True:
        lines = _json_lines(featured.log_path)
        access = [e for e in lines if e.get("logger") == "api.access_log"
                  and str(e.get("path", "")).startswith(marker)]
        if len(access) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    produce, missing = access[:2]
    assert produce["method"] == "POST" and produce["status"] == 200
    assert produce["path"] == marker and produce["principal"] == "User:ANONYMOUS"
    assert isinstance(produce["bytes"], int) and produce["bytes"] > 0
    assert isinstance(produce["duration_ms"], float)
    assert missing["status"] == 404 and missing["method"] == "GET"
    assert "POST " + marker in str(produce["message"])
    # every line of the server's log is one JSON object with the common fields
    text_lines = [ln for ln in featured.log_path.read_text().splitlines()
                  if ln and not ln.startswith(("{", "\n--- start", "--- start"))]
    assert text_lines == [], text_lines[:5]
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in lines)


def test_access_log_is_off_by_default(franz_server: FranzServer, client: httpx.Client) -> None:
    client.get("/topics")
    assert "api.access_log" not in franz_server.log_path.read_text()
