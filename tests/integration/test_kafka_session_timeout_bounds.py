"""group.min.session.timeout.ms / group.max.session.timeout.ms seen by a real Kafka
client: kafka-python's KafkaConsumer asking for a session timeout outside the broker's
bounds gets INVALID_SESSION_TIMEOUT (26) from JoinGroup, as from Kafka; one at a bound
joins and reads. The server has narrower bounds than Kafka's defaults (6000..1800000),
so the refused 10000 would be accepted by a broker that ignored the properties."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from conftest import FranzServer, _server, free_port

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.errors import InvalidSessionTimeoutError  # noqa: E402

MIN_MS, MAX_MS = 12_000, 50_000
WAIT_S = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    s = _server(tmp_path_factory, "session-bounds",
                ["num.partitions=1", f"group.min.session.timeout.ms={MIN_MS}",
                 f"group.max.session.timeout.ms={MAX_MS}"])
    s.kafka_port = free_port()
    s.start()
    yield s
    s.stop()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consumer(server: FranzServer, topic: str, session_ms: int) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id=name("sb"),
                         session_timeout_ms=session_ms, heartbeat_interval_ms=1000,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         request_timeout_ms=WAIT_S * 1000)


@pytest.mark.parametrize("session_ms", [MIN_MS - 2_000, MAX_MS + 1])
def test_a_session_timeout_outside_the_bounds_is_refused(server: FranzServer,
                                                         session_ms: int) -> None:
    c = consumer(server, name("sbt"), session_ms)
    try:
        with pytest.raises(InvalidSessionTimeoutError) as info:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:  # the join happens inside poll
                c.poll(timeout_ms=1000)
        assert info.value.errno == 26
    finally:
        c.close()


def test_a_session_timeout_at_the_bound_joins_and_reads(server: FranzServer) -> None:
    topic = name("sbt")
    p = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(5):
        p.send(topic, value=b"%d" % i)
    p.flush(WAIT_S)
    p.close()
    c = consumer(server, topic, MIN_MS)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 5 and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        assert sorted(got) == [b"%d" % i for i in range(5)]
    finally:
        c.close()


def test_the_broker_describes_the_bounds(server: FranzServer) -> None:
    cluster = httpx.get(f"{server.url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    for key, value in (("group.min.session.timeout.ms", MIN_MS),
                       ("group.max.session.timeout.ms", MAX_MS)):
        r = httpx.get(f"{server.url}/v3/clusters/{cluster}/brokers/0/configs/{key}", timeout=10)
        assert r.status_code == 200, r.text
        assert (r.json()["value"], r.json()["source"]) == (str(value), "STATIC_BROKER_CONFIG")
