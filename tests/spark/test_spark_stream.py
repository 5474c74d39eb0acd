"""Streaming reads (``spark.readStream.format("franz")``): checkpointed offsets, resume,
rate limits, Trigger.AvailableNow, data loss, commit-back to a consumer group."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

QUERY_TIMEOUT_S = 120


def run_available_now(df: Any, checkpoint: Path) -> tuple[list[Any], list[int], Any]:
    """One ``Trigger.AvailableNow`` run, rows collected per micro-batch (``foreachBatch``
    recovers from a checkpoint; the memory sink does not): (rows, rows per batch, query)."""
    batches: list[tuple[int, list[Any]]] = []

    def collect(batch: Any, batch_id: int) -> None:
        batches.append((batch_id, batch.collect()))

    q = (
        df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS v")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finished = q.awaitTermination(QUERY_TIMEOUT_S)
    if not finished:
        q.stop()
        raise AssertionError(f"query did not finish within {QUERY_TIMEOUT_S}s")
    if q.exception() is not None:
        raise q.exception()
    ids = [b for b, _ in batches]
    assert ids == sorted(set(ids)), f"a micro-batch ran twice: {ids}"
    rows = [r for _, rs in batches for r in rs]
    return rows, [len(rs) for _, rs in batches if rs], q


def keys(rows: list[Any]) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in rows)


def test_resume_without_loss_or_duplicates(
    franz: Any, stream_reader: Any, topic: str, tmp_path: Path
) -> None:
    franz.create_topic(topic, partitions=3)
    for p in range(3):
        franz.produce_values(topic, p, [f"a{p}-{i}" for i in range(10)])
    checkpoint = tmp_path / "ckpt"
    df = stream_reader(subscribe=topic, startingOffsets="earliest")
    rows1, _, _ = run_available_now(df, checkpoint)
    assert keys(rows1) == [(p, i) for p in range(3) for i in range(10)]

    # new data between the runs, unevenly spread
    for p, n in ((0, 4), (1, 0), (2, 9)):
        franz.produce_values(topic, p, [f"b{p}-{i}" for i in range(n)])
    # startingOffsets is ignored on restart: the checkpoint decides
    df2 = stream_reader(subscribe=topic, startingOffsets="latest")
    rows2, _, _ = run_available_now(df2, checkpoint)
    assert keys(rows2) == [(0, i) for i in range(10, 14)] + [(2, i) for i in range(10, 19)]
    assert {r.v for r in rows2} == {f"b0-{i}" for i in range(4)} | {f"b2-{i}" for i in range(9)}

    # nothing new: a third run reads nothing
    rows3, _, _ = run_available_now(stream_reader(subscribe=topic), checkpoint)
    assert rows3 == []

    # the checkpoint holds Kafka-shaped offsets: {"topic": {"partition": next offset}}
    logs = sorted(
        (f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()),
        key=lambda f: int(f.name),
    )
    last = json.loads(logs[-1].read_text().strip().splitlines()[-1])
    assert last == {topic: {"0": 14, "1": 10, "2": 19}}


def test_latest_start_then_new_data(
    franz: Any, stream_reader: Any, topic: str, tmp_path: Path
) -> None:
    franz.create_topic(topic, partitions=2)
    franz.produce_values(topic, 0, ["old"] * 5)
    checkpoint = tmp_path / "ckpt"
    rows, _, _ = run_available_now(stream_reader(subscribe=topic), checkpoint)
    assert rows == []  # default startingOffsets for a stream: latest
    franz.produce_values(topic, 1, ["new1", "new2"])
    rows, _, _ = run_available_now(stream_reader(subscribe=topic), checkpoint)
    assert [(r.partition, r.offset, r.v) for r in sorted(rows, key=lambda r: r.offset)] == [
        (1, 0, "new1"),
        (1, 1, "new2"),
    ]


def test_max_offsets_per_trigger_splits_available_now(
    franz: Any, stream_reader: Any, topic: str, tmp_path: Path
) -> None:
    franz.create_topic(topic, partitions=2)
    franz.produce_values(topic, 0, [str(i) for i in range(30)])
    franz.produce_values(topic, 1, [str(i) for i in range(10)])
    df = stream_reader(subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=8)
    rows, sizes, q = run_available_now(df, tmp_path / "ckpt")
    # each batch takes 8 offsets, shared 6:2 in proportion to the backlogs
    assert sizes == [8, 8, 8, 8, 8]
    assert keys(rows) == [(0, i) for i in range(30)] + [(1, i) for i in range(10)]
    # progress shows how far behind the latest offsets each batch was (reportLatestOffset)
    first = next(p for p in q.recentProgress if p["numInputRows"])["sources"][0]
    assert json.loads(first["endOffset"]) == {topic: {"0": 6, "1": 2}}
    assert json.loads(first["latestOffset"]) == {topic: {"0": 30, "1": 10}}


def test_stream_options_checked(stream_reader: Any, topic: str, tmp_path: Path) -> None:
    df = stream_reader(subscribe=topic, endingOffsets="latest")
    with pytest.raises(Exception, match="endingOffsets is for batch reads only"):
        run_available_now(df, tmp_path / "ckpt")
    with pytest.raises(
        Exception,
        match="(?i)Unknown option 'maxOffsetPerTrigger' .*did you mean 'maxOffsetsPerTrigger'",
    ):
        stream_reader(subscribe=topic, maxOffsetPerTrigger=5).load()


def test_commit_offsets_to_group(
    franz: Any, stream_reader: Any, topic: str, tmp_path: Path
) -> None:
    franz.create_topic(topic, partitions=2)
    franz.produce_values(topic, 0, [str(i) for i in range(12)])
    franz.produce_values(topic, 1, [str(i) for i in range(3)])
    group = f"spark-lag-{uuid.uuid4().hex[:8]}"
    df = stream_reader(
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=5,
        commitOffsetsToGroup=group,
    )
    checkpoint = tmp_path / "ckpt"
    rows, sizes, _ = run_available_now(df, checkpoint)
    assert len(rows) == 15 and len(sizes) >= 3
    # everything processed is committed, the last batch of the run included
    assert franz.group_offsets(group) == {(topic, 0): 12, (topic, 1): 3}
    franz.produce_values(topic, 1, ["x", "y"])
    run_available_now(df, checkpoint)
    assert franz.group_offsets(group) == {(topic, 0): 12, (topic, 1): 5}


def _shrink(franz: Any, topic: str, keep_from: int) -> int:
    """Make retention delete the partition's old segments; the new log start offset."""
    franz.set_config(topic, "retention.bytes", 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        start, _ = franz.offsets(topic, 0)
        if start >= keep_from:
            return start
        time.sleep(0.1)
    raise AssertionError("retention did not delete the old segments")


def test_data_loss_after_retention(
    franz: Any, stream_reader: Any, reader: Any, topic: str, tmp_path: Path
) -> None:
    # small segments: every produce request below rolls a new one
    franz.create_topic(topic, partitions=1, **{"segment.bytes": 200})
    for i in range(10):
        franz.produce_values(topic, 0, [f"a{i}-{j}" for j in range(5)])
    strict, lenient = tmp_path / "strict", tmp_path / "lenient"
    for ckpt in (strict, lenient):
        rows, _, _ = run_available_now(
            stream_reader(subscribe=topic, startingOffsets="earliest"), ckpt
        )
        assert len(rows) == 50
    # the queries stop; meanwhile 50 more records arrive and retention deletes old ones
    for i in range(10):
        franz.produce_values(topic, 0, [f"b{i}-{j}" for j in range(5)])
    log_start = _shrink(franz, topic, keep_from=60)
    _, end = franz.offsets(topic, 0)
    assert end == 100

    with pytest.raises(Exception) as failed:
        run_available_now(stream_reader(subscribe=topic), strict)
    text = str(failed.value)
    assert f"offsets 50 to {log_start - 1} were deleted" in text, text
    assert f"earliest available offset is now {log_start}" in text
    assert "failOnDataLoss=false" in text

    rows, _, _ = run_available_now(stream_reader(subscribe=topic, failOnDataLoss="false"), lenient)
    assert keys(rows) == [(0, i) for i in range(log_start, 100)]

    # batch reads apply the same rule to an explicit start below the log start
    start = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match=f"offsets 0 to {log_start - 1} were deleted"):
        reader(subscribe=topic, startingOffsets=start).load().collect()
    df = reader(subscribe=topic, startingOffsets=start, failOnDataLoss="false").load()
    assert [r.offset for r in df.orderBy("offset").collect()] == list(range(log_start, 100))
