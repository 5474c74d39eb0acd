"""Consumer instances and data survive a broker restart (design.md §10): the same
base_uri works afterwards and reading resumes from the committed offset."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from conftest import FranzServer

BINARY = "application/vnd.kafka.binary.v2+json"


def _client(server: FranzServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30)


def _produce(c: httpx.Client, topic: str, values: list[str]) -> None:
    records = [{"value": base64.b64encode(v.encode()).decode()} for v in values]
    resp = c.post(
        f"/topics/{topic}/partitions/0", json={"records": records}, headers={"Content-Type": BINARY}
    )
    assert resp.status_code == 200 and all(o["error_code"] is None for o in resp.json()["offsets"])


def _read(c: httpx.Client, base: str, want: int) -> list[int]:
    offsets: list[int] = []
    for _ in range(20):
        resp = c.get(base + "/records", headers={"Accept": BINARY}, params={"timeout": 1000})
        assert resp.status_code == 200, resp.text
        offsets += [r["offset"] for r in resp.json()]
        if len(offsets) >= want:
            break
    return offsets


def test_instance_survives_restart_and_resumes_from_commit(restartable_server: FranzServer) -> None:
    topic, group = "restart-topic", "restart-group"
    with _client(restartable_server) as c:
        _produce(c, topic, [f"v{i}" for i in range(5)])
        created = c.post(
            f"/consumers/{group}",
            json={
                "name": "survivor",
                "auto.offset.reset": "earliest",
                "auto.commit.enable": "false",
            },
        )
        assert created.status_code == 200, created.text
        base = created.json()["base_uri"]
        assert c.post(base + "/subscription", json={"topics": [topic]}).status_code == 204
        assert _read(c, base, 5) == [0, 1, 2, 3, 4]
        commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 2, "metadata": "m"}]}
        assert c.post(base + "/offsets", json=commit).status_code == 200

    restartable_server.restart()

    with _client(restartable_server) as c:
        assert c.get(f"/topics/{topic}/partitions/0/offsets").json() == {
            "beginning_offset": 0,
            "end_offset": 5,
        }
        assert c.get(base + "/subscription").json() == {"topics": [topic]}
        got = c.request(
            "GET", base + "/offsets", json={"partitions": [{"topic": topic, "partition": 0}]}
        )
        assert got.json() == {
            "offsets": [{"topic": topic, "partition": 0, "offset": 3, "metadata": "m"}]
        }
        assert _read(c, base, 2) == [3, 4]
        _produce(c, topic, ["v5"])
        assert _read(c, base, 1) == [5]
        dup = c.post(f"/consumers/{group}", json={"name": "survivor"})
        assert dup.status_code == 409 and dup.json()["error_code"] == 40902


def test_deleted_instance_stays_deleted_after_restart(restartable_server: FranzServer) -> None:
    with _client(restartable_server) as c:
        base = c.post("/consumers/g-del", json={"name": "gone"}).json()["base_uri"]
        assert c.delete(base).status_code == 204
    restartable_server.restart()
    with _client(restartable_server) as c:
        resp = c.get(base + "/subscription")
        assert resp.status_code == 404 and resp.json()["error_code"] == 40403


def test_topic_configs_hold_after_restart(restartable_server: FranzServer) -> None:
    """A log loaded from disk at start gets its topic's configs (not the broker's
    defaults): a compacted topic still refuses a record without a key."""
    topic = "restart-compacted"
    with _client(restartable_server) as c:
        cluster = c.get("/v3/clusters").json()["data"][0]["cluster_id"]
        created = c.post(f"/v3/clusters/{cluster}/topics", json={
            "topic_name": topic, "partitions_count": 1,
            "configs": [{"name": "cleanup.policy", "value": "compact"}]})
        assert created.status_code == 201, created.text
        keyless = {"records": [{"value": base64.b64encode(b"v").decode()}]}
        before = c.post(f"/topics/{topic}/partitions/0", json=keyless,
                        headers={"Content-Type": BINARY})
        assert before.status_code == 200, before.text
        assert before.json()["offsets"][0]["error_code"] is not None, before.text

    restartable_server.restart()

    with _client(restartable_server) as c:
        after = c.post(f"/topics/{topic}/partitions/0", json=keyless,
                       headers={"Content-Type": BINARY})
        assert after.status_code == 200, after.text
        assert after.json()["offsets"][0]["error_code"] is not None, after.text
        assert "without a key" in after.text, after.text
        keyed = {"records": [{"key": base64.b64encode(b"k").decode(),
                              "value": base64.b64encode(b"v").decode()}]}
        ok = c.post(f"/topics/{topic}/partitions/0", json=keyed, headers={"Content-Type": BINARY})
        assert ok.status_code == 200 and ok.json()["offsets"][0]["error_code"] is None, ok.text
