"""Batch reads (``spark.read.format("franz")``) against a real franz server."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import pytest

F = pytest.importorskip("pyspark.sql.functions")

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _rows(df: Any) -> list[Any]:
    return df.selectExpr(
        "CAST(key AS STRING) AS k",
        "CAST(value AS STRING) AS v",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ).collect()


def _fill(franz: Any, topic: str, counts: dict[int, int]) -> None:
    franz.create_topic(topic, partitions=len(counts))
    for p, n in counts.items():
        # several requests per partition, so ranges span several batches
        for lo in range(0, n, 7):
            franz.produce_values(topic, p, [f"{p}-{i}" for i in range(lo, min(n, lo + 7))])


def test_reads_every_record_once_in_offset_order(franz: Any, reader: Any, topic: str) -> None:
    counts = {0: 40, 1: 3, 2: 0}
    _fill(franz, topic, counts)
    df = reader(subscribe=topic).load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    rows = _rows(df)
    assert len(rows) == 43
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for r in rows:
        by_partition[r.partition].append(r)
    for p, n in counts.items():
        got = by_partition.get(p, [])
        assert [r.offset for r in got] == list(range(n))
        assert [r.v for r in got] == [f"{p}-{i}" for i in range(n)]
        assert all(r.topic == topic and r.k is None and r.timestampType == 0 for r in got)
    # collect() keeps each task's order: within a partition, offsets ascend
    assert df.count() == 43


def test_min_partitions_splits_ranges_without_gaps_or_overlap(
    franz: Any, reader: Any, topic: str
) -> None:
    _fill(franz, topic, {0: 50, 1: 10})
    df = reader(subscribe=topic, minPartitions=6, maxRecordsPerRequest=4).load()
    assert df.rdd.getNumPartitions() >= 5
    rows = _rows(df)
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, i) for i in range(50)] + [(1, i) for i in range(10)]
    )
    # each Spark partition holds a consecutive run of one topic-partition
    tasks = df.select(F.spark_partition_id().alias("task"), "partition", "offset").collect()
    per_task: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for t in tasks:
        per_task[t.task].append((t.partition, t.offset))
    assert len(per_task) >= 5
    for run in per_task.values():
        assert len({p for p, _ in run}) == 1
        offs = [o for _, o in run]
        assert offs == list(range(offs[0], offs[0] + len(offs)))


def test_per_partition_starting_and_ending_offsets(franz: Any, reader: Any, topic: str) -> None:
    _fill(franz, topic, {0: 30, 1: 20, 2: 10})
    start = {topic: {"0": 5, "1": -2, "2": 10}}
    end = {topic: {"0": 12, "1": -1, "2": -1}}
    rows = _rows(
        reader(
            subscribe=topic, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end)
        ).load()
    )
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, i) for i in range(5, 12)] + [(1, i) for i in range(20)]
    # assign + the same offsets: partition 2 alone
    rows = _rows(
        reader(
            assign=json.dumps({topic: [2, 0]}),
            startingOffsets=json.dumps({topic: {"0": 29, "2": 3}}),
            endingOffsets=json.dumps({topic: {"0": 30, "2": 4}}),
        ).load()
    )
    assert sorted((r.partition, r.offset, r.v) for r in rows) == [(0, 29, "0-29"), (2, 3, "2-3")]


def test_nothing_past_the_end_offset_even_when_new_data_arrives(
    franz: Any, reader: Any, topic: str
) -> None:
    _fill(franz, topic, {0: 10})
    df = reader(
        subscribe=topic, endingOffsets=json.dumps({topic: {"0": 6}}), startingOffsets="earliest"
    ).load()
    franz.produce_values(topic, 0, ["late"])
    assert [r.offset for r in _rows(df)] == list(range(6))


def test_subscribe_pattern_and_keys_timestamps(franz: Any, reader: Any, topic: str) -> None:
    franz.create_topic(topic + "-a", partitions=1)
    franz.create_topic(topic + "-b", partitions=1)
    ts = int(time.time() * 1000) - 3_600_123  # recent: older records fall to retention
    franz.produce(topic + "-a", [{"key": "k1", "value": "v1", "timestamp": ts}], partition=0)
    franz.produce(topic + "-b", [{"key": b"\x00\xff", "value": None}], partition=0)
    df = reader(subscribePattern=topic.replace("-", "[-]") + "-.*").load()
    rows = {r.topic: r for r in df.collect()}
    assert set(rows) == {topic + "-a", topic + "-b"}
    a, b = rows[topic + "-a"], rows[topic + "-b"]
    assert (a.key, a.value) == (b"k1", b"v1")
    assert int(a.timestamp.replace(tzinfo=__import__("datetime").UTC).timestamp() * 1000) == ts
    assert (b.key, b.value) == (b"\x00\xff", None)  # a tombstone keeps its null value


def test_headers_column(franz: Any, reader: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    franz.produce(
        topic,
        [
            {"value": "a", "headers": [("trace", b"123"), ("trace", b"456"), ("nil", None)]},
            {"value": "b"},
        ],
        partition=0,
    )
    for arrow in ("true", "false"):
        df = reader(subscribe=topic, includeHeaders="true", arrow=arrow).load()
        assert df.schema["headers"].dataType.simpleString() == (
            "array<struct<key:string,value:binary>>"
        )
        rows = df.orderBy("offset").collect()
        assert [(h.key, h.value) for h in rows[0].headers] == [
            ("trace", b"123"),
            ("trace", b"456"),
            ("nil", None),
        ]
        assert rows[1].headers is None  # Kafka's source: null when a record has none


def test_starting_offsets_by_timestamp(franz: Any, reader: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    franz.produce(
        topic, [{"value": f"a{i}", "timestamp": base + i * 1000} for i in range(10)], partition=0
    )
    franz.produce(
        topic, [{"value": f"b{i}", "timestamp": base + i * 1000} for i in range(3)], partition=1
    )
    stamps = {topic: {"0": base + 4500, "1": base + 1000}}
    rows = _rows(reader(subscribe=topic, startingOffsetsByTimestamp=json.dumps(stamps)).load())
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, i) for i in range(5, 10)] + [(1, 1), (1, 2)]
    )
    # no record that recent: error by default, the end with strategy=latest
    late = json.dumps({topic: {"0": base + 60_000, "1": base}})
    with pytest.raises(Exception, match="no record of .* has a timestamp"):
        reader(subscribe=topic, startingOffsetsByTimestamp=late).load().collect()
    rows = _rows(
        reader(
            subscribe=topic,
            startingOffsetsByTimestamp=late,
            startingOffsetsByTimestampStrategy="latest",
        ).load()
    )
    assert sorted((r.partition, r.offset) for r in rows) == [(1, i) for i in range(3)]


def test_unknown_and_invalid_options_fail_at_load(reader: Any, topic: str) -> None:
    with pytest.raises(Exception, match="Unknown option 'subscibe'.*Supported options"):
        reader(subscibe=topic).load()
    with pytest.raises(Exception, match="Exactly one of the options subscribe"):
        reader(subscribe=topic, assign=json.dumps({topic: [0]})).load()
    with pytest.raises(Exception, match="startingOffsets=latest is not allowed for a batch"):
        reader(subscribe=topic, startingOffsets="latest").load().collect()
    with pytest.raises(Exception, match="Option startingOffsets: not valid JSON"):
        reader(subscribe=topic, startingOffsets="{oops").load()
    with pytest.raises(Exception, match="kafka.group.id.*franz reads without consumer groups"):
        reader(subscribe=topic, **{"kafka.group.id": "g"}).load()


def test_missing_topic_reads_nothing(reader: Any, topic: str) -> None:
    assert reader(subscribe=topic + "-never").load().count() == 0


def test_compacted_gaps_are_not_data_loss(franz: Any, reader: Any, topic: str) -> None:
    franz.create_topic(
        topic,
        partitions=1,
        **{
            "cleanup.policy": "compact",
            "segment.bytes": 200,
            "min.cleanable.dirty.ratio": 0.01,
            "segment.ms": 100,
        },
    )
    for i in range(30):
        franz.produce(topic, [{"key": f"k{i % 3}", "value": f"v{i}"}], partition=0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the cleaner has left gaps
        r = franz.http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0})
        if len(r.json()) < 30:
            break
        time.sleep(0.2)
    rows = _rows(reader(subscribe=topic, maxRecordsPerRequest=2, minPartitions=3).load())
    offsets = [r.offset for r in rows]
    assert len(offsets) < 30, "the log was not compacted"
    assert offsets == sorted(set(offsets)) and offsets[-1] == 29
    latest = {r.k: r.v for r in rows}
    assert latest == {"k0": "v27", "k1": "v28", "k2": "v29"}


def test_explicit_registration(spark: Any, franz: Any, topic: str) -> None:
    from spark_connector import FranzDataSource

    spark.dataSource.register(FranzDataSource)  # the documented way; idempotent
    franz.create_topic(topic, partitions=1)
    franz.produce_values(topic, 0, ["x"])
    df = spark.read.format("franz").option("url", franz.url).option("subscribe", topic).load()
    assert [r.value for r in df.collect()] == [b"x"]
