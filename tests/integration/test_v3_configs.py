"""v3 topic configs: list, get, set, reset, batch alter; changes applied live (describe,
produce limits, retention); exact errors for unknown topics, keys and bad values."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

JSON = "application/json"
NO_TOPIC = "This server does not host this topic-partition."


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


def ok(resp: httpx.Response, model: Any, status: int = 200) -> Any:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    TypeAdapter(model).validate_python(body)
    return body


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


def no_content(resp: httpx.Response) -> None:
    assert resp.status_code == 204, (resp.status_code, resp.text)
    assert resp.content == b""


@pytest.fixture
def base(client: httpx.Client, franz_url: str) -> str:
    return f"{franz_url}/v3/clusters/{cluster_id(client)}"


@pytest.fixture
def made(client: httpx.Client, base: str, topic: str) -> str:
    """``topic``, created with 2 partitions and a retention.ms override."""
    body = {
        "topic_name": topic,
        "partitions_count": 2,
        "configs": [{"name": "retention.ms", "value": "3600000"}],
    }
    assert client.post(f"{base}/topics", json=body).status_code == 201
    return topic


def config(client: httpx.Client, base: str, topic: str, name: str) -> Any:
    return ok(client.get(f"{base}/topics/{topic}/configs/{name}"), m.KafkaTopicConfig)


def produce(client: httpx.Client, base: str, topic: str, record: Any) -> Any:
    resp = client.post(f"{base}/topics/{topic}/records", json=record)
    assert resp.status_code == 200, resp.text
    return resp.json()


# --- reading ------------------------------------------------------------------------------------


def test_list_topic_configs(client: httpx.Client, base: str, made: str) -> None:
    cid = cluster_id(client)
    body = ok(client.get(f"{base}/topics/{made}/configs"), m.KafkaTopicConfigList)
    assert body["metadata"] == {"self": f"{base}/topics/{made}/configs", "next": None}
    names = [c["name"] for c in body["data"]]
    assert names == sorted(names) and len(names) == len(set(names)) >= 30
    by_name = {c["name"]: c for c in body["data"]}
    assert by_name["retention.ms"] == {
        "kind": "KafkaTopicConfig",
        "metadata": {
            "self": f"{base}/topics/{made}/configs/retention.ms",
            "resource_name": f"crn:///kafka={cid}/topic={made}/config=retention.ms",
        },
        "cluster_id": cid,
        "topic_name": made,
        "name": "retention.ms",
        "value": "3600000",
        "is_default": False,
        "is_read_only": False,
        "is_sensitive": False,
        "source": "DYNAMIC_TOPIC_CONFIG",
        "synonyms": [
            {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
            {"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"},
        ],
    }
    assert by_name["cleanup.policy"]["value"] == "delete"
    assert by_name["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    assert by_name["cleanup.policy"]["is_default"] is True
    assert by_name["max.message.bytes"]["value"] == "1048588"


def test_get_one_config(client: httpx.Client, base: str, made: str) -> None:
    listing = client.get(f"{base}/topics/{made}/configs").json()["data"]
    segment = next(c for c in listing if c["name"] == "segment.bytes")
    assert config(client, base, made, "segment.bytes") == segment


def test_all_topics_configs(client: httpx.Client, base: str, made: str) -> None:
    body = ok(client.get(f"{base}/topics/-/configs"), m.KafkaTopicConfigList)
    assert body["metadata"]["self"] == f"{base}/topics/-/configs"
    mine = [c for c in body["data"] if c["topic_name"] == made]
    assert {c["name"] for c in mine} >= {"retention.ms", "cleanup.policy"}
    assert {c["topic_name"] for c in body["data"]} >= {made, "__consumer_offsets"}


def test_unknown_config_and_topic(client: httpx.Client, base: str, made: str) -> None:
    cid = cluster_id(client)
    msg = error_of(client.get(f"{base}/topics/{made}/configs/no.such.key"), 404, 404)
    assert msg == f"Config no.such.key cannot be found for TOPIC {made} in cluster {cid}."
    msg = error_of(
        client.put(f"{base}/topics/{made}/configs/no.such.key", json={"value": "1"}), 404, 404
    )
    assert msg == f"Config no.such.key cannot be found for TOPIC {made} in cluster {cid}."
    error_of(client.delete(f"{base}/topics/{made}/configs/no.such.key"), 404, 404)
    alter = {
        "data": [{"name": "retention.ms", "value": "1"}, {"name": "no.such.key", "value": "1"}]
    }
    error_of(client.post(f"{base}/topics/{made}/configs:alter", json=alter), 404, 404)
    assert config(client, base, made, "retention.ms")["value"] == "3600000"  # nothing applied
    for resp in (
        client.get(f"{base}/topics/nope-x/configs"),
        client.get(f"{base}/topics/nope-x/configs/retention.ms"),
        client.put(f"{base}/topics/nope-x/configs/retention.ms", json={"value": "1"}),
        client.delete(f"{base}/topics/nope-x/configs/retention.ms"),
        client.post(
            f"{base}/topics/nope-x/configs:alter",
            json={"data": [{"name": "retention.ms", "value": "1"}]},
        ),
    ):
        assert error_of(resp, 404, 40403) == NO_TOPIC


# --- writing ------------------------------------------------------------------------------------


def test_put_and_delete_one_config(client: httpx.Client, base: str, made: str) -> None:
    no_content(
        client.put(f"{base}/topics/{made}/configs/retention.bytes", json={"value": "123456"})
    )
    entry = config(client, base, made, "retention.bytes")
    assert entry["value"] == "123456" and entry["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entry["is_default"] is False
    assert client.get(f"/topics/{made}").json()["configs"]["retention.bytes"] == "123456"
    # numbers and booleans are taken as their text
    no_content(client.put(f"{base}/topics/{made}/configs/retention.bytes", json={"value": 654321}))
    assert config(client, base, made, "retention.bytes")["value"] == "654321"
    no_content(client.put(f"{base}/topics/{made}/configs/preallocate", json={"value": True}))
    assert config(client, base, made, "preallocate")["value"] == "true"
    # reset: back to the default, other overrides kept
    no_content(client.delete(f"{base}/topics/{made}/configs/retention.bytes"))
    entry = config(client, base, made, "retention.bytes")
    assert entry["value"] == "-1" and entry["source"] == "DEFAULT_CONFIG" and entry["is_default"]
    assert config(client, base, made, "retention.ms")["value"] == "3600000"
    # resetting a key without an override is fine
    no_content(client.delete(f"{base}/topics/{made}/configs/retention.bytes"))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retention.ms", "soon"),
        ("retention.ms", "-7"),
        ("cleanup.policy", "shred"),
        ("min.insync.replicas", "0"),
        ("preallocate", "maybe"),
        ("min.cleanable.dirty.ratio", "2.5"),
    ],
)
def test_put_invalid_value_names_the_key(
    client: httpx.Client, base: str, made: str, name: str, value: str
) -> None:
    before = config(client, base, made, name)["value"]
    msg = error_of(
        client.put(f"{base}/topics/{made}/configs/{name}", json={"value": value}), 400, 40002
    )
    assert f"configuration {name}" in msg and value in msg
    assert config(client, base, made, name)["value"] == before


def test_put_body_problems(client: httpx.Client, base: str, made: str) -> None:
    url = f"{base}/topics/{made}/configs/retention.ms"
    assert "Null value" in error_of(client.put(url, json={"value": None}), 400, 40002)
    error_of(client.put(url, json={}), 422, 42206)
    error_of(client.put(url, json={"value": "1", "extra": 2}), 400, 400)
    error_of(client.put(url, json={"value": [1]}), 400, 400)
    error_of(client.put(url, content=b"", headers={"Content-Type": JSON}), 422, 42206)
    error_of(client.put(url, content=b"{", headers={"Content-Type": JSON}), 400, 400)
    error_of(
        client.put(url, content=b'{"value":"1"}', headers={"Content-Type": "text/plain"}), 415, 415
    )


def test_alter_batch(client: httpx.Client, base: str, made: str) -> None:
    body = {
        "data": [
            {"name": "retention.ms", "operation": "DELETE"},
            {"name": "cleanup.policy", "value": "compact", "operation": "SET"},
            {"name": "segment.ms", "value": "600000"},  # operation defaults to SET
            {"name": "retention.bytes", "value": 1000000, "operation": "set"},
        ]
    }
    no_content(client.post(f"{base}/topics/{made}/configs:alter", json=body))
    assert client.get(f"/topics/{made}").json()["configs"] == {
        "cleanup.policy": "compact",
        "segment.ms": "600000",
        "retention.bytes": "1000000",
    }
    assert config(client, base, made, "retention.ms")["source"] != "DYNAMIC_TOPIC_CONFIG"


def test_alter_is_all_or_nothing(client: httpx.Client, base: str, made: str) -> None:
    body = {
        "data": [
            {"name": "retention.bytes", "value": "5000"},
            {"name": "retention.ms", "value": "not-a-number"},
        ]
    }
    msg = error_of(client.post(f"{base}/topics/{made}/configs:alter", json=body), 400, 40002)
    assert "retention.ms" in msg
    assert config(client, base, made, "retention.bytes")["value"] == "-1"
    assert config(client, base, made, "retention.ms")["value"] == "3600000"


def test_alter_validate_only(client: httpx.Client, base: str, made: str) -> None:
    url = f"{base}/topics/{made}/configs:alter"
    body = {"data": [{"name": "retention.ms", "value": "1000"}], "validate_only": True}
    no_content(client.post(url, json=body))
    assert config(client, base, made, "retention.ms")["value"] == "3600000"
    body = {"data": [{"name": "retention.ms", "value": "x"}], "validate_only": True}
    assert "retention.ms" in error_of(client.post(url, json=body), 400, 40002)


def test_alter_body_problems(client: httpx.Client, base: str, made: str) -> None:
    url = f"{base}/topics/{made}/configs:alter"
    msg = error_of(
        client.post(url, json={"data": [{"name": "retention.ms", "operation": "APPEND"}]}), 400, 400
    )
    assert msg == "data[0].operation: 'APPEND' is not one of SET, DELETE"
    error_of(client.post(url, json={"data": []}), 422, 42206)
    error_of(client.post(url, json={}), 422, 42206)
    error_of(client.post(url, json={"data": [{"value": "1"}]}), 422, 42206)
    error_of(
        client.post(url, json={"data": [{"name": "retention.ms", "value": "1", "x": 1}]}), 400, 400
    )
    error_of(client.post(url, json={"data": {"name": "retention.ms"}}), 400, 400)
    assert "Null value" in error_of(
        client.post(url, json={"data": [{"name": "retention.ms"}]}), 400, 40002
    )
    error_of(client.post(url, content=b"", headers={"Content-Type": JSON}), 422, 42206)
    error_of(client.post(url, content=b"{]", headers={"Content-Type": JSON}), 400, 400)
    error_of(
        client.post(url, content=b'{"data":[]}', headers={"Content-Type": "text/plain"}), 415, 415
    )


# --- applied live ---------------------------------------------------------------------------------


def test_max_message_bytes_applies_at_once(client: httpx.Client, base: str, made: str) -> None:
    big = {"partition_id": 0, "value": {"type": "STRING", "data": "x" * 2000}}
    assert produce(client, base, made, big)["error_code"] == 200
    no_content(client.put(f"{base}/topics/{made}/configs/max.message.bytes", json={"value": "500"}))
    report = produce(client, base, made, big)
    assert report["error_code"] == 413 and "max.message.bytes=500" in report["message"]
    small = {"partition_id": 0, "value": {"type": "STRING", "data": "ok"}}
    assert produce(client, base, made, small) | {"timestamp": None} == {
        "error_code": 200,
        "cluster_id": cluster_id(client),
        "topic_name": made,
        "partition_id": 0,
        "offset": 1,
        "timestamp": None,
        "value": {"type": "STRING", "size": 2},
    }
    no_content(client.delete(f"{base}/topics/{made}/configs/max.message.bytes"))
    assert produce(client, base, made, big)["error_code"] == 200


def test_compaction_policy_applies_at_once(client: httpx.Client, base: str, made: str) -> None:
    keyless = {"partition_id": 0, "value": {"type": "STRING", "data": "v"}}
    assert produce(client, base, made, keyless)["error_code"] == 200
    no_content(
        client.put(f"{base}/topics/{made}/configs/cleanup.policy", json={"value": "compact"})
    )
    report = produce(client, base, made, keyless)  # a compacted topic refuses null keys
    assert report["error_code"] == 40002, report
    keyed = keyless | {"key": {"type": "STRING", "data": "k"}}
    assert produce(client, base, made, keyed)["error_code"] == 200


@pytest.fixture(scope="module")
def retention_url(franz_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker whose retention check runs every 200 ms (built with the conftest's class)."""
    server = type(franz_server)(
        tmp_path_factory.mktemp("retention") / "data",
        ["log.retention.check.interval.ms=200", "log.segment.delete.delay.ms=0"],
    )
    server.start()
    yield server.url
    server.stop()


def test_retention_applies_at_once(retention_url: str, topic: str) -> None:
    with httpx.Client(base_url=retention_url, timeout=30) as c:
        b = f"/v3/clusters/{cluster_id(c)}"
        body = {
            "topic_name": topic,
            "partitions_count": 1,
            "configs": [{"name": "segment.bytes", "value": "1024"}],
        }
        assert c.post(f"{b}/topics", json=body).status_code == 201
        record = {"value": {"type": "STRING", "data": "r" * 200}}
        for _ in range(40):  # one append each: a 1 KiB segment holds a few
            report = c.post(f"{b}/topics/{topic}/records", json=record).json()
            assert report["error_code"] == 200, report
        offsets = f"{b}/topics/{topic}/partitions/0/offset"
        assert c.get(offsets).json()["earliest_offset"] == 0
        time.sleep(0.6)  # a few retention rounds: nothing expires under the defaults
        assert c.get(offsets).json()["earliest_offset"] == 0
        no_content(c.put(f"{b}/topics/{topic}/configs/retention.bytes", json={"value": "2048"}))
        deadline = time.monotonic() + 15
        earliest = 0
        while time.monotonic() < deadline and earliest == 0:
            time.sleep(0.1)
            earliest = c.get(offsets).json()["earliest_offset"]
        assert 0 < earliest < 40
        assert c.get(offsets).json()["latest_offset"] == 40
