"""v2 consumer instances: lifecycle, subscription, assignment, seek, read, commit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import V2Client

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


def _instance(v2: V2Client, group: str, **config: Any) -> str:
    config.setdefault("auto.offset.reset", "earliest")
    return str(v2.create_consumer(group, **config)["base_uri"])


def _tps(topic: str, *partitions: int) -> dict[str, Any]:
    return {"partitions": [{"topic": topic, "partition": p} for p in partitions]}


# --- create / delete --------------------------------------------------------------------


def test_create_named_and_generated(v2: V2Client, franz_url: str, group: str) -> None:
    out = v2.create_consumer(group, name="alice", format="json")
    assert out == {
        "instance_id": "alice",
        "base_uri": f"{franz_url}/consumers/{group}/instances/alice",
    }
    gen = v2.create_consumer(group)
    assert gen["instance_id"] and gen["instance_id"] != "alice"
    assert gen["base_uri"].endswith(f"/consumers/{group}/instances/{gen['instance_id']}")
    assert v2.create_consumer(group, id="bob", name="ignored")["instance_id"] == "bob"


def test_create_with_empty_body_and_no_content_type(client: httpx.Client, group: str) -> None:
    resp = client.post(f"/consumers/{group}")
    assert resp.status_code == 200 and resp.headers["content-type"] == V2
    assert set(resp.json()) == {"instance_id", "base_uri"}


def test_base_uri_follows_the_host_header(client: httpx.Client, franz_url: str, group: str) -> None:
    resp = client.post(
        f"/consumers/{group}", json={"name": "h"}, headers={"Host": "proxy.example:9999"}
    )
    assert resp.json()["base_uri"] == f"http://proxy.example:9999/consumers/{group}/instances/h"


def test_duplicate_name_is_409_40902(v2: V2Client, group: str) -> None:
    v2.create_consumer(group, name="dup")
    v2.error_of(v2.http.post(f"/consumers/{group}", json={"name": "dup"}), 409, 40902)


@pytest.mark.parametrize(
    ("config", "status", "code"),
    [
        ({"auto.offset.reset": "bad"}, 422, 42204),
        ({"auto.commit.enable": "maybe"}, 422, 42204),
        ({"format": "xml"}, 422, 42204),
        ({"fetch.min.bytes": 10_000_001}, 422, 40001),
        ({"fetch.min.bytes": -2}, 422, 40001),
        ({"consumer.request.timeout.ms": -1}, 422, 42204),
        ({"name": "a/b"}, 422, 42204),
        ({"unknown.setting": 1}, 400, 400),
        ({"fetch.min.bytes": "lots"}, 400, 400),
    ],
)
def test_create_rejects_bad_config(
    v2: V2Client, group: str, config: dict[str, Any], status: int, code: int
) -> None:
    v2.error_of(v2.http.post(f"/consumers/{group}", json=config), status, code)


def test_create_accepts_confluent_spellings(v2: V2Client, group: str) -> None:
    v2.create_consumer(
        group,
        format="JSON",
        **{
            "auto.commit.enable": "FALSE",
            "auto.offset.reset": "latest",
            "fetch.min.bytes": 1,
            "consumer.request.timeout.ms": 500,
        },
    )
    v2.create_consumer(group, responseMinBytes=-1, requestWaitMs=100)
    v2.create_consumer(group, **{"auto.commit.enable": False})
    for fmt in ("avro", "JSONSCHEMA", "Protobuf"):  # decoded with franz's Schema Registry
        v2.create_consumer(group, format=fmt)


def test_create_bad_body(v2: V2Client, client: httpx.Client, group: str) -> None:
    v2.error_of(
        client.post(f"/consumers/{group}", content=b"{", headers={"Content-Type": V2}), 400, 400
    )
    v2.error_of(
        client.post(
            f"/consumers/{group}", content=b'{"name": "x"}', headers={"Content-Type": "text/plain"}
        ),
        415,
        415,
    )


def test_delete(v2: V2Client, client: httpx.Client, group: str) -> None:
    base = _instance(v2, group, name="gone")
    assert client.delete(base).status_code == 204
    v2.error_of(client.delete(base), 404, 40403)
    v2.error_of(client.get(base + "/subscription"), 404, 40403)
    v2.create_consumer(group, name="gone")  # the name is free again


def test_unknown_instance_everywhere(v2: V2Client, client: httpx.Client, group: str) -> None:
    base = f"/consumers/{group}/instances/nobody"
    calls = [
        client.delete(base),
        client.get(base + "/subscription"),
        client.delete(base + "/subscription"),
        client.post(base + "/subscription", json={"topics": ["x"]}),
        client.get(base + "/assignments"),
        client.post(base + "/assignments", json=_tps("x", 0)),
        client.post(
            base + "/positions", json={"offsets": [{"topic": "x", "partition": 0, "offset": 0}]}
        ),
        client.post(base + "/positions/beginning", json=_tps("x", 0)),
        client.post(base + "/positions/end", json=_tps("x", 0)),
        client.get(base + "/records", headers={"Accept": BINARY}),
        client.post(base + "/offsets", json={"offsets": []}),
        client.post(base + "/offsets"),
        client.request("GET", base + "/offsets", json=_tps("x", 0)),
    ]
    for resp in calls:
        v2.error_of(resp, 404, 40403)


# --- subscription and assignment ---------------------------------------------------------


def test_subscription_lifecycle(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    base = _instance(v2, group)
    assert client.get(base + "/subscription").json() == {"topics": []}
    v2.post(base + "/subscription", {"topics": [topic]})
    assert client.get(base + "/subscription").json() == {"topics": [topic]}
    assignment = client.get(base + "/assignments").json()["partitions"]
    assert sorted(p["partition"] for p in assignment) == [0, 1, 2]
    assert client.delete(base + "/subscription").status_code == 204
    assert client.get(base + "/subscription").json() == {"topics": []}


def test_subscribe_by_pattern(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    base = _instance(v2, group)
    v2.post(base + "/subscription", {"topic_pattern": topic[:8] + ".*"})
    records = v2.read_until(base, 1)
    assert [v2.unb64(r["value"]) for r in records] == [b"a"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 422, 422),
        ({"topics": []}, 422, 422),
        ({"topics": "t"}, 400, 400),
        ({"topics": ["t"], "nope": 1}, 400, 400),
    ],
)
def test_subscribe_bad_body(
    v2: V2Client, client: httpx.Client, group: str, body: dict[str, Any], status: int, code: int
) -> None:
    base = _instance(v2, group)
    v2.error_of(client.post(base + "/subscription", json=body), status, code)


def test_subscription_needs_a_body(v2: V2Client, client: httpx.Client, group: str) -> None:
    base = _instance(v2, group)
    v2.error_of(client.post(base + "/subscription"), 422, 422)
    v2.error_of(
        client.post(
            base + "/subscription",
            content=b'{"topics": ["a"]}',
            headers={"Content-Type": "text/plain"},
        ),
        415,
        415,
    )


def test_manual_assignment(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["p1"], partition=1)
    v2.produce_values(topic, ["p2"], partition=2)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 1))
    assert client.get(base + "/assignments").json() == _tps(topic, 1)
    records = v2.read_until(base, 1)
    assert [(r["partition"], v2.unb64(r["value"])) for r in records] == [(1, b"p1")]


def test_subscribe_and_assign_exclude_each_other(
    v2: V2Client, client: httpx.Client, group: str, topic: str
) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 0))
    v2.error_of(client.post(base + "/subscription", json={"topics": [topic]}), 409, 40903)
    other = _instance(v2, group + "-b")
    v2.post(other + "/subscription", {"topics": [topic]})
    v2.error_of(client.post(other + "/assignments", json=_tps(topic, 0)), 409, 40903)


def test_assignment_bad_body(v2: V2Client, client: httpx.Client, group: str) -> None:
    base = _instance(v2, group)
    v2.error_of(client.post(base + "/assignments", json={"partitions": [{"topic": "t"}]}), 422, 422)
    v2.error_of(
        client.post(base + "/assignments", json={"partitions": [{"topic": "t", "partition": "x"}]}),
        400,
        400,
    )
    v2.error_of(client.post(base + "/assignments", json={"partition": []}), 400, 400)


# --- seek ---------------------------------------------------------------------------------


def test_seek_offsets_beginning_end(
    v2: V2Client, client: httpx.Client, group: str, topic: str
) -> None:
    v2.produce_values(topic, [f"v{i}" for i in range(5)], partition=0)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 0))
    v2.post(base + "/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]})
    assert [r["offset"] for r in v2.read_until(base, 2)] == [3, 4]
    v2.post(base + "/positions/beginning", _tps(topic, 0))
    assert [r["offset"] for r in v2.read_until(base, 5)] == [0, 1, 2, 3, 4]
    v2.post(base + "/positions/end", _tps(topic, 0))
    assert v2.records(base, timeout=200) == []
    v2.produce_values(topic, ["v5"], partition=0)
    assert [r["offset"] for r in v2.read_until(base, 1)] == [5]


def test_seek_by_timestamp(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    recs = [{"value": v2.b64(f"v{i}"), "timestamp": 1_700_000_000_000 + i * 1000} for i in range(4)]
    v2.produce(topic, recs, partition=0)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 0))
    v2.post(
        base + "/positions",
        {"timestamps": [{"topic": topic, "partition": 0, "timestamp": "2023-11-14T22:13:22Z"}]},
    )  # 1_700_000_002_000
    assert [r["offset"] for r in v2.read_until(base, 2)] == [2, 3]
    v2.post(
        base + "/positions",
        {"timestamps": [{"topic": topic, "partition": 0, "timestamp": 1_700_000_001_000}]},
    )
    assert [r["offset"] for r in v2.read_until(base, 3)] == [1, 2, 3]


def test_seek_errors(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 0))
    bad_offset = {"offsets": [{"topic": topic, "partition": 0, "offset": -1}]}
    v2.error_of(client.post(base + "/positions", json=bad_offset), 422, 422)
    bad_ts = {"timestamps": [{"topic": topic, "partition": 0, "timestamp": "yesterday"}]}
    v2.error_of(client.post(base + "/positions", json=bad_ts), 400, 400)
    unassigned = {"offsets": [{"topic": topic, "partition": 2, "offset": 0}]}
    v2.error_of(client.post(base + "/positions", json=unassigned), 409, 40903)
    v2.error_of(client.post(base + "/positions/beginning", json=_tps(topic, 1)), 409, 40903)
    v2.error_of(client.post(base + "/positions", json={"offset": []}), 400, 400)


# --- read ---------------------------------------------------------------------------------


def test_binary_records_shape(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce(
        topic,
        [
            {
                "key": v2.b64("k"),
                "value": v2.b64("v"),
                "headers": [{"key": "h", "value": v2.b64("x")}],
            }
        ],
        partition=1,
    )
    base = _instance(v2, group)
    v2.post(base + "/subscription", {"topics": [topic]})
    resp = client.get(base + "/records", headers={"Accept": BINARY}, params={"timeout": 5000})
    assert resp.status_code == 200 and resp.headers["content-type"] == BINARY
    [rec] = resp.json()
    ts = rec.pop("timestamp")
    assert isinstance(ts, int) and ts > 0
    assert rec == {
        "topic": topic,
        "key": v2.b64("k"),
        "value": v2.b64("v"),
        "partition": 1,
        "offset": 0,
        "timestamp_type": "CreateTime",
        "headers": [{"key": "h", "value": v2.b64("x")}],
    }


@pytest.mark.parametrize("accept", [None, "*/*", V2, BINARY])
def test_binary_consumer_accepts(
    v2: V2Client, client: httpx.Client, group: str, topic: str, accept: str | None
) -> None:
    v2.produce_values(topic, ["a"], partition=0)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 0))
    headers = {} if accept is None else {"Accept": accept}
    resp = client.get(base + "/records", headers=headers, params={"timeout": 5000})
    assert resp.status_code == 200 and resp.headers["content-type"] == BINARY
    assert len(resp.json()) == 1


def test_json_consumer(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce(
        topic, [{"key": "k", "value": {"n": 1}}, {"value": [1, "two"]}], fmt="json", partition=0
    )
    base = _instance(v2, group, format="json")
    v2.post(base + "/assignments", _tps(topic, 0))
    got = v2.read_until(base, 2, fmt="json")
    assert [(r["key"], r["value"]) for r in got] == [("k", {"n": 1}), (None, [1, "two"])]
    v2.post(base + "/positions/beginning", _tps(topic, 0))
    resp = client.get(
        base + "/records", headers={"Accept": "application/json"}, params={"timeout": 5000}
    )
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    assert len(resp.json()) == 2


@pytest.mark.parametrize(
    ("fmt", "accept"),
    [
        ("json", V2),
        ("json", BINARY),
        ("binary", JSON),
        ("binary", "application/json"),
        ("json", "application/vnd.kafka.avro.v2+json"),
    ],
)
def test_accept_mismatch_is_406_40601(
    v2: V2Client, client: httpx.Client, group: str, fmt: str, accept: str
) -> None:
    base = _instance(v2, group, format=fmt)
    v2.error_of(client.get(base + "/records", headers={"Accept": accept}), 406, 40601)


def test_json_consumer_meets_non_json_bytes(
    v2: V2Client, client: httpx.Client, group: str, topic: str
) -> None:
    v2.produce(topic, [{"value": {"ok": 1}}], fmt="json", partition=0)
    v2.produce_values(topic, ["not json"], partition=0)
    v2.produce(topic, [{"value": {"ok": 2}}], fmt="json", partition=0)
    base = _instance(v2, group, format="json")
    v2.post(base + "/assignments", _tps(topic, 0))
    first = v2.records(base, fmt="json", timeout=5000)
    assert [r["value"] for r in first] == [{"ok": 1}]  # stops before the bad record
    msg = v2.error_of(client.get(base + "/records", headers={"Accept": JSON}), 408, 40801)
    assert "offset 1" in msg
    v2.post(base + "/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": 2}]})
    assert [r["value"] for r in v2.read_until(base, 1, fmt="json")] == [{"ok": 2}]


def test_tiny_max_bytes_still_returns_a_record(v2: V2Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["x" * 1000, "y" * 1000], partition=0)
    base = _instance(v2, group)
    v2.post(base + "/assignments", _tps(topic, 0))
    got = v2.records(base, max_bytes=10, timeout=5000)
    assert len(got) >= 1 and got[0]["offset"] == 0


# --- commit -------------------------------------------------------------------------------


def test_commit_and_committed(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    v2.produce_values(topic, ["a", "b", "c"], partition=0)
    base = _instance(v2, group, **{"auto.commit.enable": "false"})
    v2.post(base + "/assignments", _tps(topic, 0, 1))
    body = {"offsets": [{"topic": topic, "partition": 0, "offset": 1, "metadata": "m"}]}
    resp = client.post(base + "/offsets", json=body)
    assert resp.status_code == 200 and resp.json() == []
    got = client.request("GET", base + "/offsets", json=_tps(topic, 0, 1))
    assert got.status_code == 200
    assert got.json() == {
        "offsets": [{"topic": topic, "partition": 0, "offset": 2, "metadata": "m"}]
    }


def test_empty_commit_commits_positions(
    v2: V2Client, client: httpx.Client, group: str, topic: str
) -> None:
    v2.produce_values(topic, ["a", "b", "c"], partition=0)
    base = _instance(v2, group, **{"auto.commit.enable": "false"})
    v2.post(base + "/assignments", _tps(topic, 0))
    assert len(v2.read_until(base, 3)) == 3
    resp = client.post(base + "/offsets", params={"async": "false"})
    assert resp.status_code == 200 and resp.json() == []
    got = client.request("GET", base + "/offsets", json=_tps(topic, 0)).json()
    assert got["offsets"][0]["offset"] == 3


def test_committed_without_body_is_40402(v2: V2Client, client: httpx.Client, group: str) -> None:
    base = _instance(v2, group)
    v2.error_of(client.get(base + "/offsets"), 404, 40402)


def test_commit_bad_bodies(v2: V2Client, client: httpx.Client, group: str, topic: str) -> None:
    base = _instance(v2, group)
    bad = [
        ({"offsets": [{"topic": topic, "partition": 0, "offset": -3}]}, 422, 422),
        ({"offsets": [{"topic": topic, "partition": 0}]}, 422, 422),
        ({"offsets": [{"topic": topic, "partition": 0, "offset": "x"}]}, 400, 400),
        ({"offsets": [], "more": 1}, 400, 400),
    ]
    for body, status, code in bad:
        v2.error_of(client.post(base + "/offsets", json=body), status, code)
    v2.error_of(
        client.post(base + "/offsets", content=b"{", headers={"Content-Type": V2}), 400, 400
    )


def test_new_instance_resumes_from_commit(
    v2: V2Client, client: httpx.Client, group: str, topic: str
) -> None:
    v2.produce_values(topic, [f"v{i}" for i in range(4)], partition=0)
    base = _instance(v2, group, **{"auto.commit.enable": "false"})
    v2.post(base + "/subscription", {"topics": [topic]})
    assert len(v2.read_until(base, 4)) == 4
    v2.post(
        base + "/offsets", {"offsets": [{"topic": topic, "partition": 0, "offset": 1}]}, status=200
    )
    assert client.delete(base).status_code == 204
    again = _instance(v2, group)
    v2.post(again + "/subscription", {"topics": [topic]})
    assert [r["offset"] for r in v2.read_until(again, 2)] == [2, 3]
