"""``GET /metrics`` (api/metrics.py) against a real server: produce and read through the
APIs, scrape, and check that the numbers moved by what was done."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from core.broker.security.memory_store import MemorySecurityStore
from core.broker.security.service import Security, SecuritySettings
from core.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from conftest import FranzServer, V2Client

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

TOPIC_COUNTERS = ("messagesin", "bytesin", "messagesout", "bytesout")


def scrape(client: httpx.Client) -> Samples:
    resp = client.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain; version=")
    out: Samples = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str | int) -> float:
    key = (name, frozenset((k, str(v)) for k, v in labels.items()))
    return samples.get(key, 0.0)


def topic_counter(samples: Samples, kind: str, topic: str) -> float:
    return value(samples, f"franz_server_brokertopicmetrics_{kind}_total", topic=topic)


def test_every_metric_is_exposed(client: httpx.Client) -> None:
    client.get("/")  # at least one request counted
    text = client.get("/metrics").text
    kinds = {f.name: f.type for f in text_string_to_metric_families(text)}
    for name, kind in [
        ("franz_server_brokertopicmetrics_messagesin", "counter"),
        ("franz_server_brokertopicmetrics_bytesin", "counter"),
        ("franz_server_brokertopicmetrics_messagesout", "counter"),
        ("franz_server_brokertopicmetrics_bytesout", "counter"),
        ("franz_http_requests", "counter"),
        ("franz_http_request_duration_seconds", "histogram"),
        ("franz_replicamanager_underreplicatedpartitions", "gauge"),
        ("franz_replicamanager_partitioncount", "gauge"),
        ("franz_replicamanager_leadercount", "gauge"),
        ("franz_replicamanager_isrshrinks", "counter"),
        ("franz_replicamanager_isrexpands", "counter"),
        ("franz_controller_offlinepartitionscount", "gauge"),
        ("franz_controller_activecontrollercount", "gauge"),
        ("franz_consumer_group_lag", "gauge"),
        ("franz_log_size_bytes", "gauge"),
    ]:
        assert kinds.get(name) == kind, (name, kinds.get(name))
    assert "_created" not in text


def test_process_and_gc_metrics_are_the_servers(client: httpx.Client,
                                                franz_server: FranzServer) -> None:
    s = scrape(client)
    # the server process's own figures (not the test's): its descriptors and memory
    assert value(s, "process_open_fds") >= 10  # logs, indexes, sockets
    assert value(s, "process_resident_memory_bytes") > 20 * 2**20
    assert value(s, "process_start_time_seconds") > 0
    assert value(s, "python_gc_collections_total", generation=0) > 0
    assert any(name == "python_info" for name, _ in s)
    assert franz_server.proc is not None and franz_server.proc.pid != os.getpid()


def test_broker_state_gauges(client: httpx.Client) -> None:
    s = scrape(client)
    assert value(s, "franz_controller_activecontrollercount") == 1
    assert value(s, "franz_controller_offlinepartitionscount") == 0
    assert value(s, "franz_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "franz_replicamanager_isrshrinks_total") == 0
    assert value(s, "franz_replicamanager_isrexpands_total") == 0
    hosted = value(s, "franz_replicamanager_partitioncount")
    assert hosted >= 1 and value(s, "franz_replicamanager_leadercount") == hosted


def test_produce_and_read_move_the_topic_counters(v2: V2Client, client: httpx.Client,
                                                  topic: str) -> None:
    before = scrape(client)
    offsets = v2.produce_values(topic, ["one", "two", "three"], partition=0)
    assert offsets == [0, 1, 2]
    s = scrape(client)
    assert topic_counter(s, "messagesin", topic) == 3
    bytes_in = topic_counter(s, "bytesin", topic)
    assert bytes_in > len("onetwothree")  # whole batches: headers and record framing
    assert topic_counter(s, "messagesout", topic) == 0
    assert value(s, "franz_log_size_bytes", topic=topic, partition=0) == bytes_in
    assert value(s, "franz_log_size_bytes", topic=topic, partition=1) == 0
    assert topic_counter(before, "messagesin", topic) == 0

    rows = v2.records(f"/topics/{topic}/partitions/0", offset=1)  # the v2 range read
    assert [v2.unb64(r["value"]) for r in rows] == [b"two", b"three"]
    s = scrape(client)
    assert topic_counter(s, "messagesout", topic) == 2
    assert topic_counter(s, "bytesout", topic) == bytes_in  # the batch holding them

    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    resp = client.get(f"/v3/clusters/{cid}/topics/{topic}/partitions/0/records")
    assert len(resp.json()["data"]) == 3
    resp = client.post(f"/v3/clusters/{cid}/topics/{topic}/records",
                       json=[{"value": {"type": "STRING", "data": "four"}}])
    assert resp.status_code == 200 and b'"error_code":200' in resp.content
    s = scrape(client)
    assert topic_counter(s, "messagesout", topic) == 5
    assert topic_counter(s, "messagesin", topic) == 4


def test_consumer_reads_are_counted_and_lag_follows_commits(v2: V2Client, client: httpx.Client,
                                                            topic: str, group: str) -> None:
    v2.produce_values(topic, ["a", "b", "c", "d"], partition=1)
    v2.create_consumer(group, name="c1", **{"auto.offset.reset": "earliest",
                                             "auto.commit.enable": "false"})
    inst = f"/consumers/{group}/instances/c1"
    try:
        v2.post(inst + "/assignments", {"partitions": [{"topic": topic, "partition": 1}]})
        assert len(v2.read_until(inst, 4)) == 4
        commit = {"offsets": [{"topic": topic, "partition": 1, "offset": 0}]}
        v2.post(inst + "/offsets", commit, status=200)
        s = scrape(client)
        assert topic_counter(s, "messagesout", topic) == 4
        assert value(s, "franz_consumer_group_lag", group=group, topic=topic, partition=1) == 3
        v2.produce_values(topic, ["e", "f"], partition=1)
        s = scrape(client)
        assert value(s, "franz_consumer_group_lag", group=group, topic=topic, partition=1) == 5
        commit = {"offsets": [{"topic": topic, "partition": 1, "offset": 5}]}
        v2.post(inst + "/offsets", commit, status=200)
        s = scrape(client)
        assert value(s, "franz_consumer_group_lag", group=group, topic=topic, partition=1) == 0
    finally:
        client.delete(inst)


def test_requests_are_counted_per_route_template(v2: V2Client, client: httpx.Client,
                                                 topic: str) -> None:
    route = "/topics/{topic}"
    before = scrape(client)
    v2.produce_values(topic, ["x"])
    v2.produce_values(topic, ["y"])
    client.get(f"/topics/{topic}-missing")  # 404 on a known route
    client.get("/no/such/url")
    s = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(s, name, **labels) - value(before, name, **labels)

    assert moved("franz_http_requests_total", method="POST", route=route, status="200") == 2
    assert moved("franz_http_requests_total", method="GET", route=route, status="404") == 1
    assert moved("franz_http_requests_total", method="GET", route="<unmatched>",
                 status="404") == 1
    assert moved("franz_http_request_duration_seconds_count", method="POST", route=route) == 2
    assert moved("franz_http_request_duration_seconds_bucket", method="POST", route=route,
                 le="+Inf") == 2
    assert moved("franz_http_request_duration_seconds_sum", method="POST", route=route) > 0
    assert not any(topic in dict(labels).get("route", "") for _, labels in s)  # templates only


def test_v3_routes_are_labelled_with_their_template(client: httpx.Client) -> None:
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    client.get(f"/v3/clusters/{cid}/topics")
    s = scrape(client)
    assert value(s, "franz_http_requests_total", method="GET",
                 route="/v3/clusters/{cluster_id}/topics", status="200") >= 1


def test_deleted_topics_leave_the_counters(v2: V2Client, client: httpx.Client,
                                           topic: str) -> None:
    v2.produce_values(topic, ["x"])
    assert topic_counter(scrape(client), "messagesin", topic) == 1
    cid = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
    assert client.delete(f"/v3/clusters/{cid}/topics/{topic}").status_code == 204
    s = scrape(client)
    assert topic_counter(s, "messagesin", topic) == 0
    assert not any(dict(labels).get("topic") == topic for _, labels in s)


def test_openmetrics_when_asked_for(client: httpx.Client) -> None:
    resp = client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/openmetrics-text")
    assert resp.text.endswith("# EOF\n")


class _NoBroker:
    """Enough of a broker for an app that only answers unknown URLs: no authentication,
    no authorizer."""

    security = Security(SecuritySettings(), MemorySecurityStore(), clock=SYSTEM_CLOCK)


async def test_each_app_has_its_own_registry() -> None:
    first, second = create_app(_NoBroker()), create_app(_NoBroker())  # type: ignore[arg-type]
    assert first.state.metrics.registry is not second.state.metrics.registry
    transport = httpx.ASGITransport(app=first)
    async with httpx.AsyncClient(transport=transport, base_url="http://franz") as c:
        assert (await c.get("/nowhere")).status_code == 404
    hits = {"method": "GET", "route": "<unmatched>", "status": "404"}
    for app in (first, second):  # no broker to read: look at the request metrics only
        app.state.metrics.registry.unregister(app.state.metrics.collector)
    assert first.state.metrics.registry.get_sample_value("franz_http_requests_total", hits) == 1
    assert second.state.metrics.registry.get_sample_value("franz_http_requests_total", hits) is None
    assert REGISTRY.get_sample_value("franz_http_requests_total", hits) is None


@pytest.mark.parametrize("path", ["/metrics"])
def test_metrics_is_in_the_openapi_document(client: httpx.Client, path: str) -> None:
    assert "get" in client.get("/openapi.json").json()["paths"][path]
