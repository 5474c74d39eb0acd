"""After a restart, batches that were on disk at load are CRC-checked before a Kafka
Fetch serves them (the copying read); what was written since goes out with sendfile(2).
A batch corrupted on disk while the broker was down is never handed to a Kafka client."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import FranzServer, free_port

ck = pytest.importorskip("confluent_kafka")

WAIT_S = 20


def read_all(server: FranzServer, topic: str, *, until: int) -> tuple[list[int], list[int]]:
    """(offsets read, error codes seen) from offset 0 until ``until`` records or a pause."""
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "restart-reader",
                     "enable.auto.commit": False, "check.crcs": True})
    offsets, codes = [], []
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT_S
        quiet_since = time.monotonic()
        while len(offsets) < until and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None:
                if time.monotonic() - quiet_since > 4:
                    break
                continue
            quiet_since = time.monotonic()
            if m.error():
                codes.append(m.error().code())
                continue
            offsets.append(m.offset())
    finally:
        c.close()
    return offsets, codes


def test_fetches_after_a_restart_check_old_batches_and_skip_a_corrupt_one(tmp_path: Path) -> None:
    # small segments: the corrupt batch is in one the load does not scan (a clean
    # shutdown scans only the active segment's tail), so the read path must catch it
    server = FranzServer(tmp_path / "data", ["num.partitions=1", "log.segment.bytes=1024"])
    server.kafka_port = free_port()
    server.start()
    topic = "restart-fetch"
    try:
        p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
        for i in range(30):
            p.produce(topic, value=b"record-%02d" % i)
            p.flush(WAIT_S)  # one batch per record
        server.stop()
        segment = next(f for f in sorted((tmp_path / "data" / f"{topic}-0").glob("*.log"))
                       if b"record-20" in f.read_bytes())
        raw = bytearray(segment.read_bytes())
        at = raw.find(b"record-20")
        raw[at + 7] ^= 0x01  # a flipped bit in the value of offset 20
        segment.write_bytes(bytes(raw))
        server.start()
        offsets, _codes = read_all(server, topic, until=30)
        assert offsets == list(range(20))  # everything before the corrupt batch, nothing of it
        p = ck.Producer({"bootstrap.servers": server.bootstrap})
        delivered = []
        p.produce(topic, value=b"after", on_delivery=lambda err, msg: delivered.append(
            (err, msg.offset())))
        p.flush(WAIT_S)
        assert delivered == [(None, 30)]  # nothing was cut at the load
        c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "tail"})
        try:
            c.assign([ck.TopicPartition(topic, 0, 30)])  # written since the start
            m = None
            deadline = time.monotonic() + WAIT_S
            while m is None and time.monotonic() < deadline:
                m = c.poll(0.5)
            assert m is not None, "nothing read at offset 30"
            assert m.error() is None, m.error()
            assert m.value() == b"after"
        finally:
            c.close()
    finally:
        server.stop()
