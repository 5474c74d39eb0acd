"""v2 metadata routes, root, brokers, generic errors and the OpenAPI document."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from conftest import V2Client

V2 = "application/vnd.kafka.v2+json"


def test_root_answers_empty_object(client: httpx.Client) -> None:
    for resp in (client.get("/"), client.post("/", json={})):
        assert resp.status_code == 200
        assert resp.headers["content-type"] == V2
        assert resp.json() == {}


def test_brokers(client: httpx.Client) -> None:
    resp = client.get("/brokers")
    assert resp.status_code == 200
    assert resp.headers["content-type"] == V2
    assert resp.json() == {"brokers": [0]}


def test_topics_and_partitions(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=1)
    names = client.get("/topics").json()
    assert topic in names and "__consumer_offsets" in names

    resp = client.get(f"/topics/{topic}")
    assert resp.status_code == 200 and resp.headers["content-type"] == V2
    body = resp.json()
    assert set(body) == {"name", "configs", "partitions"}
    assert body["name"] == topic and isinstance(body["configs"], dict)
    assert [p["partition"] for p in body["partitions"]] == [0, 1, 2]
    for p in body["partitions"]:
        assert p["leader"] == 0
        assert p["replicas"] == [{"broker": 0, "leader": True, "in_sync": True}]

    parts = client.get(f"/topics/{topic}/partitions").json()
    assert parts == body["partitions"]
    assert client.get(f"/topics/{topic}/partitions/2").json() == body["partitions"][2]


def test_partition_offsets(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["a", "b", "c"], partition=0)
    assert client.get(f"/topics/{topic}/partitions/0/offsets").json() == {
        "beginning_offset": 0,
        "end_offset": 3,
    }
    assert client.get(f"/topics/{topic}/partitions/1/offsets").json() == {
        "beginning_offset": 0,
        "end_offset": 0,
    }


def test_unknown_topic_is_40401_and_fast(v2: V2Client, client: httpx.Client) -> None:
    for path in (
        "/topics/nope-x",
        "/topics/nope-x/partitions",
        "/topics/nope-x/partitions/0",
        "/topics/nope-x/partitions/0/offsets",
    ):
        start = time.monotonic()
        v2.error_of(client.get(path), 404, 40401)
        assert time.monotonic() - start < 2.0


def test_unknown_partition_is_40402(v2: V2Client, client: httpx.Client, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    for p in ("3", "99", "-1", "abc"):
        v2.error_of(client.get(f"/topics/{topic}/partitions/{p}"), 404, 40402)
    v2.error_of(client.get(f"/topics/{topic}/partitions/7/offsets"), 404, 40402)
    v2.error_of(client.get(f"/topics/{topic}/partitions/-1/offsets"), 404, 40402)


def test_accept_negotiation(v2: V2Client, client: httpx.Client) -> None:
    v2.error_of(client.get("/topics", headers={"Accept": "text/plain"}), 406, 406)
    resp = client.get("/topics", headers={"Accept": "application/json"})
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    for accept in (
        "*/*",
        V2,
        "application/vnd.kafka.binary.v2+json",
        "application/vnd.kafka.v2+json; q=0.9, application/json; q=0.5",
    ):
        resp = client.get("/brokers", headers={"Accept": accept})
        assert resp.status_code == 200 and resp.headers["content-type"] == V2, accept


def test_unknown_url_and_wrong_method(v2: V2Client, client: httpx.Client) -> None:
    msg = v2.error_of(client.get("/no/such/thing"), 404, 404)
    assert msg == "HTTP 404 Not Found"
    v2.error_of(client.delete("/brokers"), 405, 405)


def test_openapi_document_covers_every_public_route(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["info"]["title"] == "franz"
    paths = doc["paths"]
    expected = {
        ("get", "/"),
        ("post", "/"),
        ("get", "/brokers"),
        ("get", "/topics"),
        ("get", "/topics/{topic}"),
        ("post", "/topics/{topic}"),
        ("get", "/topics/{topic}/partitions"),
        ("get", "/topics/{topic}/partitions/{partition}"),
        ("post", "/topics/{topic}/partitions/{partition}"),
        ("get", "/topics/{topic}/partitions/{partition}/offsets"),
        ("get", "/topics/{topic}/partitions/{partition}/records"),
        ("post", "/consumers/{group}"),
        ("delete", "/consumers/{group}/instances/{instance}"),
    }
    inst = "/consumers/{group}/instances/{instance}"
    expected |= {
        ("post", inst + s)
        for s in (
            "/subscription",
            "/assignments",
            "/positions",
            "/positions/beginning",
            "/positions/end",
            "/offsets",
        )
    }
    expected |= {
        ("get", inst + s) for s in ("/subscription", "/assignments", "/records", "/offsets")
    }
    expected |= {("delete", inst + "/subscription")}
    found = {(m, p) for p, item in paths.items() for m in item}
    assert expected <= found, expected - found
    assert not any(p.startswith("/internal") for p in paths)
    schemas = doc["components"]["schemas"]
    for name in (
        "BinaryProduceRequest",
        "ProduceResponse",
        "ErrorBody",
        "TopicOut",
        "BinaryRecordOut",
        "CreateConsumerRequest",
    ):
        assert name in schemas
    produce = paths["/topics/{topic}"]["post"]
    body = produce["requestBody"]["content"]
    assert "application/vnd.kafka.binary.v2+json" in body and "example" in body["application/json"]
    ok = produce["responses"]["200"]["content"][V2]["example"]
    assert ok["offsets"][0]["error_code"] is None  # examples keep their nulls
    for method, path in expected:
        responses = paths[path][method]["responses"]
        assert any(code.startswith("2") for code in responses), (method, path)
        for resp in responses.values():
            for media in resp.get("content", {}).values():
                assert "example" in media, (method, path)
    assert client.get("/docs").status_code == 200
