"""Never a poisoned group, over HTTP: a change whose group record cannot be written to
``__consumer_offsets`` (here: larger than its max.message.bytes) is refused with a 4xx,
leaves the group as it was, and later joins, reads and commits of the group work, also
after a restart (docs/limits.md, "Consumer groups")."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import FranzServer

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
#: message.max.bytes of this module's broker, so of __consumer_offsets too
MAX_MESSAGE_BYTES = 16384


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FranzServer]:
    srv = FranzServer(tmp_path / "data", [f"message.max.bytes={MAX_MESSAGE_BYTES}"])
    srv.start()
    yield srv
    srv.stop()


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text[:500])
    body = resp.json()
    assert body["error_code"] == code, body
    return str(body["message"])


def new_instance(http: httpx.Client, group: str, name: str, **config: Any) -> str:
    resp = http.post(f"/consumers/{group}", json={"name": name, **config},
                     headers={"Content-Type": V2})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["base_uri"])


def subscribe(http: httpx.Client, base: str, topics: list[str]) -> httpx.Response:
    return http.post(base + "/subscription", json={"topics": topics},
                     headers={"Content-Type": V2})


def read(http: httpx.Client, base: str) -> list[bytes]:
    for _ in range(20):  # bounded: each read waits at most 500 ms
        rows = http.get(base + "/records", params={"timeout": 500},
                        headers={"Accept": BINARY}).json()
        if rows:
            return [base64.b64decode(r["value"]) for r in rows]
    return []


def members(http: httpx.Client, group: str) -> list[str]:
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    resp = http.get(f"/v3/clusters/{cluster}/consumer-groups/{group}/consumers")
    assert resp.status_code == 200, resp.text
    return sorted(c["consumer_id"] for c in resp.json()["data"])


def test_a_change_too_large_for_the_offsets_topic_leaves_the_group_working(
    server: FranzServer,
) -> None:
    group, topic = f"g-{uuid.uuid4().hex[:8]}", "orders"
    with httpx.Client(base_url=server.url, timeout=60.0) as http:
        resp = http.post(f"/topics/{topic}", json={"records": [{"value": "eA=="}]},
                         headers={"Content-Type": BINARY})
        assert resp.status_code == 200, resp.text
        a = new_instance(http, group, "a", **{"auto.offset.reset": "earliest",
                                              "auto.commit.enable": "false"})
        assert subscribe(http, a, [topic]).status_code == 204
        b = new_instance(http, group, "b")

        # 100 topic names of 200 characters: the group's record would be ~20 KB
        many = [f"t{i:03d}-" + "x" * 195 for i in range(100)]
        msg = error_of(subscribe(http, b, many), 400, 40002)
        assert f"group '{group}'" in msg and "__consumer_offsets" in msg, msg
        assert "nothing was changed" in msg
        assert http.get(b + "/subscription").json() == {"topics": []}
        assert http.get(a + "/subscription").json() == {"topics": [topic]}

        # not poisoned: joins, reads and commits go on
        c = new_instance(http, group, "c")
        assert members(http, group) == ["a", "b", "c"]
        assert read(http, a) == [b"x"]
        resp = http.post(a + "/offsets", json={"offsets": [
            {"topic": topic, "partition": 0, "offset": 0}]}, headers={"Content-Type": V2})
        assert resp.status_code in (200, 204), resp.text
        assert subscribe(http, c, [topic]).status_code == 204
    server.restart()
    with httpx.Client(base_url=server.url, timeout=60.0) as http:
        assert members(http, group) == ["a", "b", "c"]
        assert http.get(b + "/subscription").json() == {"topics": []}
        committed = http.request("GET", a + "/offsets", json={"partitions": [
            {"topic": topic, "partition": 0}]}, headers={"Content-Type": V2})
        assert committed.status_code == 200, committed.text
        assert committed.json()["offsets"][0]["offset"] == 1  # v2 stores offset + 1
        new_instance(http, group, "d")
        assert members(http, group) == ["a", "b", "c", "d"]
