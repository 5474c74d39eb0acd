"""Writes (``df.write.format("franz")`` and ``writeStream``), read back through the
source and over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_write_then_read_back(spark: Any, franz: Any, reader: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=3)
    rows = [
        (
            f"k{i}",
            f"value-{i}".encode(),
            i % 3,
            [("n", str(i).encode()), ("empty", None)] if i % 4 == 0 else None,
        )
        for i in range(50)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    ).repartition(2)
    (
        df.write.format("franz")
        .option("url", franz.url)
        .option("topic", topic)
        .option("batchSize", 7)
        .mode("append")
        .save()
    )

    back = reader(subscribe=topic, includeHeaders="true").load().collect()
    assert len(back) == 50
    got = {r.key.decode(): r for r in back}
    for k, v, p, h in rows:
        r = got[k]
        assert (r.value, r.partition, r.topic) == (v, p, topic)
        assert (None if r.headers is None else [(x.key, x.value) for x in r.headers]) == h
    for p in range(3):  # offsets dense per partition: nothing written twice
        assert sorted(r.offset for r in back if r.partition == p) == list(
            range(17 if p < 2 else 16)
        )


def test_topic_column_routes_rows(spark: Any, franz: Any, reader: Any, topic: str) -> None:
    a, b = topic + "-a", topic + "-b"
    franz.create_topic(a, partitions=1)
    franz.create_topic(b, partitions=1)
    df = spark.createDataFrame(
        [(a if i % 3 else b, f"v{i}", i) for i in range(30)], "topic string, value string, n int"
    )
    df.write.format("franz").option("url", franz.url).mode("append").save()
    assert franz.offsets(a, 0) == (0, 20)
    assert franz.offsets(b, 0) == (0, 10)
    values = sorted(r.value.decode() for r in reader(subscribe=b).load().collect())
    assert values == sorted(f"v{i}" for i in range(0, 30, 3))


def test_write_checks_columns_and_mode(spark: Any, franz: Any, topic: str) -> None:
    def save(df: Any, mode: str = "append", **options: Any) -> None:
        w = df.write.format("franz").option("url", franz.url).mode(mode)
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    with pytest.raises(Exception, match="needs a 'value' column"):
        save(spark.createDataFrame([("x",)], "key string"), topic=topic)
    with pytest.raises(Exception, match="Column 'value' of the franz sink must be binary or"):
        save(spark.createDataFrame([(1,)], "value int"), topic=topic)
    with pytest.raises(Exception, match="needs a target topic"):
        save(spark.createDataFrame([("x",)], "value string"))
    with pytest.raises(Exception, match="only appends"):
        save(spark.createDataFrame([("x",)], "value string"), mode="overwrite", topic=topic)
    with pytest.raises(Exception, match="Unknown option 'batchsise'.*did you mean 'batchSize'"):
        save(spark.createDataFrame([("x",)], "value string"), topic=topic, batchsise=5)


def test_write_stream_copies_a_topic(
    spark: Any, franz: Any, reader: Any, stream_reader: Any, topic: str, tmp_path: Path
) -> None:
    src, dst = topic + "-src", topic + "-dst"
    franz.create_topic(src, partitions=2)
    franz.create_topic(dst, partitions=2)
    for p in range(2):
        franz.produce(
            src,
            [
                {
                    "key": f"k{p}-{i}",
                    "value": f"v{p}-{i}",
                    "headers": [("h", b"x")] if i == 0 else None,
                }
                for i in range(15)
            ],
            partition=p,
        )
    df = stream_reader(
        subscribe=src, startingOffsets="earliest", includeHeaders="true", maxOffsetsPerTrigger=10
    )
    q = (
        df.selectExpr("key", "value", "partition", "headers")
        .writeStream.format("franz")
        .option("url", franz.url)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120)
    assert q.exception() is None
    copied = reader(subscribe=dst, includeHeaders="true").load().collect()
    assert sorted((r.partition, r.key, r.value) for r in copied) == sorted(
        (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for p in range(2) for i in range(15)
    )
    assert sum(1 for r in copied if r.headers) == 2
