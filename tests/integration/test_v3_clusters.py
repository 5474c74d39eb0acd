"""v3 clusters, brokers, broker configs, a broker's replicas, ACLs, generic v3 errors and
the OpenAPI document, against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m

JSON = "application/json"


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


def shaped(body: Any, model: Any) -> Any:
    """``body`` matches the declared response type exactly (no extra keys, right kinds)."""
    TypeAdapter(model).validate_python(body)
    return body


def ok(resp: httpx.Response, model: Any, status: int = 200) -> Any:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    return shaped(resp.json(), model)


def error_of(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == JSON
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return str(body["message"])


@pytest.fixture
def base(client: httpx.Client, franz_url: str) -> str:
    return f"{franz_url}/v3/clusters/{cluster_id(client)}"


def test_list_and_get_cluster(client: httpx.Client, franz_url: str) -> None:
    listing = ok(client.get("/v3/clusters"), m.KafkaClusterList)
    assert listing["metadata"] == {"self": f"{franz_url}/v3/clusters", "next": None}
    assert len(listing["data"]) == 1
    cluster = listing["data"][0]
    cid = cluster["cluster_id"]
    assert isinstance(cid, str) and cid
    url = f"{franz_url}/v3/clusters/{cid}"
    assert cluster == {
        "kind": "KafkaCluster",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}"},
        "cluster_id": cid,
        "controller": {"related": f"{url}/brokers/0"},
        "acls": {"related": f"{url}/acls"},
        "brokers": {"related": f"{url}/brokers"},
        "broker_configs": {"related": f"{url}/broker-configs"},
        "consumer_groups": {"related": f"{url}/consumer-groups"},
        "topics": {"related": f"{url}/topics"},
        "partition_reassignments": {"related": f"{url}/topics/-/partitions/-/reassignment"},
    }
    assert ok(client.get(f"/v3/clusters/{cid}"), m.KafkaCluster) == cluster


def test_self_links_follow_the_request_host(client: httpx.Client) -> None:
    body = client.get("/v3/clusters", headers={"Host": "proxy.example:9999"}).json()
    assert body["metadata"]["self"] == "http://proxy.example:9999/v3/clusters"
    assert body["data"][0]["topics"]["related"].startswith("http://proxy.example:9999/v3/")


@pytest.fixture(scope="module")
def advertised_url(franz_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker with ``advertised.host`` set (built with the conftest's server class)."""
    server = type(franz_server)(
        tmp_path_factory.mktemp("advertised") / "data", ["advertised.host=franz.example"]
    )
    server.start()
    yield server.url
    server.stop()


def test_self_links_use_advertised_host(advertised_url: str) -> None:
    with httpx.Client(base_url=advertised_url) as c:
        body = c.get("/v3/clusters").json()
        port = advertised_url.rsplit(":", 1)[1]
        assert body["metadata"]["self"] == f"http://franz.example:{port}/v3/clusters"
        cid = body["data"][0]["cluster_id"]
        broker = c.get(f"/v3/clusters/{cid}/brokers/0").json()
        assert broker["host"] == "franz.example"
        assert (
            broker["metadata"]["self"] == f"http://franz.example:{port}/v3/clusters/{cid}/brokers/0"
        )


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/brokers",
        "/brokers/0",
        "/brokers/0/configs",
        "/brokers/0/partition-replicas",
        "/topics",
        "/topics/any",
        "/topics/any/partitions",
        "/topics/any/configs",
        "/consumer-groups",
        "/consumer-groups/g/lags",
        "/broker-configs",
        "/acls",
    ],
)
def test_unknown_cluster_is_404(client: httpx.Client, path: str) -> None:
    msg = error_of(client.get(f"/v3/clusters/no-such-cluster{path}"), 404, 404)
    assert msg == "Cluster no-such-cluster cannot be found."


def test_unknown_cluster_on_writes_is_404_before_the_body(client: httpx.Client) -> None:
    for method, path in (
        ("POST", "/topics"),
        ("PATCH", "/topics/t"),
        ("DELETE", "/topics/t"),
        ("PUT", "/topics/t/configs/retention.ms"),
        ("POST", "/topics/t/configs:alter"),
        ("POST", "/topics/t/records"),
    ):
        resp = client.request(method, f"/v3/clusters/nope{path}", content=b"not json")
        assert error_of(resp, 404, 404) == "Cluster nope cannot be found.", (method, path)


def test_unknown_v3_url_and_method(client: httpx.Client) -> None:
    cid = cluster_id(client)
    assert error_of(client.get("/v3/nothing-here"), 404, 404) == "HTTP 404 Not Found"
    assert error_of(client.get(f"/v3/clusters/{cid}/nothing"), 404, 404) == "HTTP 404 Not Found"
    error_of(client.put(f"/v3/clusters/{cid}/brokers/0"), 405, 405)


def test_brokers(client: httpx.Client, base: str, franz_server: Any) -> None:
    cid = cluster_id(client)
    listing = ok(client.get(f"{base}/brokers"), m.KafkaBrokerList)
    assert listing["metadata"] == {"self": f"{base}/brokers", "next": None}
    assert listing["data"] == [
        {
            "kind": "KafkaBroker",
            "metadata": {
                "self": f"{base}/brokers/0",
                "resource_name": f"crn:///kafka={cid}/broker=0",
            },
            "cluster_id": cid,
            "broker_id": 0,
            "host": "127.0.0.1",
            "port": franz_server.port,
            "rack": None,
            "configs": {"related": f"{base}/brokers/0/configs"},
            "partition_replicas": {"related": f"{base}/brokers/0/partition-replicas"},
        }
    ]
    assert ok(client.get(f"{base}/brokers/0"), m.KafkaBroker) == listing["data"][0]
    assert error_of(client.get(f"{base}/brokers/7"), 404, 404) == "Broker 7 cannot be found."
    error_of(client.get(f"{base}/brokers/abc"), 404, 404)


def test_broker_partition_replicas(client: httpx.Client, base: str, topic: str) -> None:
    cid = cluster_id(client)
    r = client.post(f"{base}/topics", json={"topic_name": topic, "partitions_count": 2})
    assert r.status_code == 201, r.text
    body = ok(client.get(f"{base}/brokers/0/partition-replicas"), m.KafkaReplicaList)
    assert body["metadata"]["self"] == f"{base}/brokers/0/partition-replicas"
    mine = [x for x in body["data"] if x["topic_name"] == topic]
    assert [x["partition_id"] for x in mine] == [0, 1]
    assert mine[1] == {
        "kind": "KafkaReplica",
        "metadata": {
            "self": f"{base}/topics/{topic}/partitions/1/replicas/0",
            "resource_name": f"crn:///kafka={cid}/topic={topic}/partition=1/replica=0",
        },
        "cluster_id": cid,
        "topic_name": topic,
        "partition_id": 1,
        "broker_id": 0,
        "is_leader": True,
        "is_in_sync": True,
        "broker": {"related": f"{base}/brokers/0"},
    }
    assert any(x["topic_name"] == "__consumer_offsets" for x in body["data"])
    error_of(client.get(f"{base}/brokers/3/partition-replicas"), 404, 404)


def test_broker_configs(client: httpx.Client, base: str) -> None:
    cid = cluster_id(client)
    body = ok(client.get(f"{base}/brokers/0/configs"), m.KafkaBrokerConfigList)
    assert body["metadata"] == {"self": f"{base}/brokers/0/configs", "next": None}
    by_name = {c["name"]: c for c in body["data"]}
    names = [c["name"] for c in body["data"]]
    assert names == sorted(names)
    # num.partitions=3 is set on this broker (conftest): static; others are defaults.
    assert by_name["num.partitions"]["value"] == "3"
    assert by_name["num.partitions"]["source"] == "STATIC_BROKER_CONFIG"
    assert by_name["num.partitions"]["is_default"] is False
    hours = by_name["log.retention.hours"]
    assert hours == {
        "kind": "KafkaBrokerConfig",
        "metadata": {
            "self": f"{base}/brokers/0/configs/log.retention.hours",
            "resource_name": f"crn:///kafka={cid}/broker=0/config=log.retention.hours",
        },
        "cluster_id": cid,
        "broker_id": 0,
        "name": "log.retention.hours",
        "value": "168",
        "is_default": True,
        "is_read_only": True,
        "is_sensitive": False,
        "source": "DEFAULT_CONFIG",
        "synonyms": [{"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"}],
    }
    assert all(c["is_read_only"] for c in body["data"])
    assert "delete.topic.enable" in by_name and by_name["delete.topic.enable"]["value"] == "true"
    one = ok(client.get(f"{base}/brokers/0/configs/num.partitions"), m.KafkaBrokerConfig)
    assert one == by_name["num.partitions"]
    msg = error_of(client.get(f"{base}/brokers/0/configs/no.such.key"), 404, 404)
    assert msg == f"Config no.such.key cannot be found for BROKER 0 in cluster {cid}."
    assert (
        error_of(client.get(f"{base}/brokers/5/configs"), 404, 404) == "Broker 5 cannot be found."
    )
    error_of(client.put(f"{base}/brokers/0/configs/num.partitions", json={"value": "1"}), 405, 405)


def test_cluster_broker_configs_are_empty(client: httpx.Client, base: str) -> None:
    body = ok(client.get(f"{base}/broker-configs"), m.KafkaClusterConfigList)
    assert body == {
        "kind": "KafkaClusterConfigList",
        "metadata": {"self": f"{base}/broker-configs", "next": None},
        "data": [],
    }
    error_of(client.get(f"{base}/broker-configs/log.retention.ms"), 404, 404)


def test_acls_answer_no_authorizer(client: httpx.Client, base: str) -> None:
    for resp in (
        client.get(f"{base}/acls"),
        client.post(f"{base}/acls", json={"resource_type": "TOPIC"}),
        client.post(f"{base}/acls:batch", json={"data": []}),
        client.delete(f"{base}/acls", params={"resource_type": "TOPIC"}),
    ):
        assert error_of(resp, 400, 40002).startswith("Security features are disabled")


def test_openapi_documents_v3(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    expected = {
        "/v3/clusters": {"get"},
        "/v3/clusters/{cluster_id}": {"get"},
        "/v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}": {"get"},
        "/v3/clusters/{cluster_id}/topics": {"get", "post"},
        "/v3/clusters/{cluster_id}/topics/{topic_name}": {"get", "patch", "delete"},
        "/v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}": {"get", "put", "delete"},
        "/v3/clusters/{cluster_id}/topics/{topic_name}/configs:alter": {"post"},
        "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas": {"get"},
        "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary": {"get"},
        "/v3/clusters/{cluster_id}/topics/{topic_name}/records": {"post"},
        "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records": {"get"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
    topic_op = paths["/v3/clusters/{cluster_id}/topics/{topic_name}"]["get"]
    ok_schema = topic_op["responses"]["200"]["content"][JSON]["schema"]
    assert ok_schema == {"$ref": "#/components/schemas/KafkaTopic"}
    assert topic_op["responses"]["404"]["content"][JSON]["example"]["error_code"] == 40403
    create = paths["/v3/clusters/{cluster_id}/topics"]["post"]
    assert create["requestBody"]["content"][JSON]["schema"] == {
        "$ref": "#/components/schemas/CreateTopicRequest"
    }
    produce = paths["/v3/clusters/{cluster_id}/topics/{topic_name}/records"]["post"]
    assert produce["requestBody"]["content"][JSON]["schema"] == {
        "$ref": "#/components/schemas/ProduceRecordRequest"
    }
    schemas = doc["components"]["schemas"]
    for name in ("KafkaTopic", "KafkaConsumerLag", "ProduceReport", "KafkaRecordList", "ErrorBody"):
        assert name in schemas, name
    assert set(schemas["ResourceMetadata"]["properties"]) == {"self", "resource_name"}
    assert "HTTPValidationError" not in schemas
