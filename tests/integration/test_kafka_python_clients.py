"""kafka-python, aiokafka and kcat against franz's Kafka listener: producers, consumers
in groups that rebalance, admin calls, as their users run them."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest
from conftest import FranzServer

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

WAIT_S = 20


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def server(kafka_server: FranzServer) -> FranzServer:
    return kafka_server


def test_kafka_python_admin_produce_and_a_group(server: FranzServer) -> None:
    topic, group = name("kp"), name("kpg")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        admin.create_topics([NewTopic(topic, 3, 1)])
        assert topic in admin.list_topics()
        p = KafkaProducer(bootstrap_servers=server.bootstrap, compression_type="gzip",
                          acks="all")
        futures = [p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                          headers=[("n", str(i).encode())]) for i in range(60)]
        p.flush(WAIT_S)
        assert all(f.get(WAIT_S).offset >= 0 for f in futures)
        p.close()
        c = KafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id=group,
                          auto_offset_reset="earliest", consumer_timeout_ms=4000,
                          enable_auto_commit=False)
        got = list(c)
        c.commit()
        c.close()
        assert sorted(m.value for m in got) == sorted(f"v{i}".encode() for i in range(60))
        assert {m.headers[0][0] for m in got} == {"n"}
        offsets = admin.list_group_offsets(group)[group]
        assert sum(o.offset for o in offsets.values()) == 60
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Empty"} in \
            admin.list_groups()
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
    finally:
        admin.close()


def test_kafka_python_seek_and_end_offsets(server: FranzServer) -> None:
    topic = name("kps")
    p = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(10):
        p.send(topic, value=b"%d" % i, partition=0)
    p.flush(WAIT_S)
    p.close()
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, consumer_timeout_ms=3000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    assert c.end_offsets([tp]) == {tp: 10}
    c.seek(tp, 7)
    assert [m.value for m in c] == [b"7", b"8", b"9"]
    c.close()


async def _aiokafka_group(server: FranzServer, topic: str, group: str) -> tuple[int, set, set]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True)
    await p.start()
    try:
        for i in range(40):
            await p.send(topic, key=f"k{i}".encode(), value=b"v")
        await p.flush()
    finally:
        await p.stop()
    consumers = [AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id=group,
                                  auto_offset_reset="earliest", session_timeout_ms=6000,
                                  heartbeat_interval_ms=500) for _ in range(2)]
    seen: set = set()
    for c in consumers:
        await c.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 40 and time.monotonic() < deadline:
            for c in consumers:
                batch = await c.getmany(timeout_ms=300)
                for msgs in batch.values():
                    seen.update((m.partition, m.offset) for m in msgs)
        a, b = ({tp.partition for tp in c.assignment()} for c in consumers)
        return len(seen), a, b
    finally:
        for c in consumers:
            await c.stop()


def test_aiokafka_idempotent_producer_and_a_group_of_two(server: FranzServer) -> None:
    from kafka.admin import KafkaAdminClient as Admin

    topic = name("ak")
    admin = Admin(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(topic, 4, 1)])
    admin.close()
    count, a, b = asyncio.run(_aiokafka_group(server, topic, name("akg")))
    assert count == 40
    assert a and b and not a & b and a | b == {0, 1, 2, 3}


kcat = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(kcat is None, reason="kcat is not installed (Debian's kcat package)")
def test_kcat_lists_produces_and_consumes(server: FranzServer) -> None:
    topic = name("kcat")
    listed = subprocess.run([kcat, "-b", server.bootstrap, "-L"], capture_output=True,
                            text=True, timeout=WAIT_S)
    assert listed.returncode == 0, listed.stderr
    assert f"broker 0 at {server.bootstrap}" in listed.stdout
    put = subprocess.run([kcat, "-b", server.bootstrap, "-P", "-t", topic, "-p", "0", "-K:"],
                         input="a:1\nb:2\nc:3\n", capture_output=True, text=True, timeout=WAIT_S)
    assert put.returncode == 0, put.stderr
    got = subprocess.run([kcat, "-b", server.bootstrap, "-C", "-t", topic, "-p", "0", "-e", "-o",
                          "beginning", "-f", "%k=%s@%o\n"], capture_output=True, text=True,
                         timeout=WAIT_S)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["a=1@0", "b=2@1", "c=3@2"]
