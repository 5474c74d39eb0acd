"""The ``franz`` PySpark data source (Spark 4's ``pyspark.sql.datasource`` API).

Where each piece runs (every call is in a separate Python process; objects are pickled
between them): ``FranzDataSource.schema`` / ``reader`` / ``writer`` and the batch
reader's ``partitions`` in a short-lived planner process; ``read`` and ``write`` on
executors; a stream reader's ``initialOffset`` / ``latestOffset`` / ``partitions`` /
``commit`` in one long-lived process per query on the driver. Everything executors need
travels in the options (``ReaderConf`` / ``WriterConf``, a write's schema ids resolved
by ``writer()`` / ``streamWriter()``) and in ``FranzRange``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_connector.client import FranzClient
from spark_connector.metadata import Metadata
from spark_connector.offsets import (
    OffsetRange,
    describe,
    from_json_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)
from spark_connector.options import (
    BINARY_FORMAT,
    FranzOptionError,
    ReaderConf,
    TopicPartition,
    WriterConf,
    batch_checks,
    reader_conf,
    stream_checks,
    writer_conf,
)
from spark_connector.ranges import data_loss, read_rows
from spark_connector.writer import (
    KeyScope,
    Producer,
    check_columns,
    new_write_id,
    resolve_schemas,
    task_key_scope,
)

log = logging.getLogger("spark_connector")

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def _column_type(fmt: str) -> BinaryType | StringType:
    """Binary for the bytes; a string (JSON text) for a side franz decodes."""
    return BinaryType() if fmt == BINARY_FORMAT else StringType()


def franz_schema(
    include_headers: bool = False,
    key_format: str = BINARY_FORMAT,
    value_format: str = BINARY_FORMAT,
) -> StructType:
    """The row schema of Spark's Kafka source (``key`` / ``value`` strings when decoded)."""
    fields = [
        StructField("key", _column_type(key_format)),
        StructField("value", _column_type(value_format)),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def _row_schema(conf: ReaderConf) -> StructType:
    return franz_schema(conf.include_headers, conf.key_format, conf.value_format)


def arrow_schema(schema: StructType) -> Any:
    """The Arrow schema Spark checks yielded ``RecordBatch``es against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


@dataclass(frozen=True)
class FranzRange(InputPartition):
    """One Spark partition: offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def _input_partitions(ranges: list[OffsetRange], conf: ReaderConf) -> list[FranzRange]:
    pieces = split_ranges(
        ranges,
        min_partitions=conf.min_partitions,
        max_records_per_partition=conf.max_records_per_partition,
    )
    return [FranzRange(r.topic, r.partition, r.start, r.end) for r in pieces]


def _read(conf: ReaderConf, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, FranzRange):  # Spark's placeholder for "no partitions"
        return iter(())
    return read_rows(
        conf,
        partition.topic,
        partition.partition,
        partition.start,
        partition.end,
        arrow_schema(schema) if conf.arrow else None,
    )


# --- batch read ------------------------------------------------------------------------


class FranzBatchReader(DataSourceReader):
    """``spark.read.format("franz")``: start and end resolved once, at planning."""

    def __init__(self, conf: ReaderConf, schema: StructType) -> None:
        self.conf = conf
        self.schema = schema

    def plan(self) -> list[OffsetRange]:
        with FranzClient(self.conf.http) as client:
            meta = Metadata(client, self.conf)
            tps = meta.discover()
            bounds = meta.bounds(tps)
            if self.conf.assign:
                meta.require(tps, bounds)
            starts = meta.starts(bounds, "earliest")
            ends = meta.ends(bounds)
        ranges = []
        for tp in sorted(bounds):
            s, e = starts[tp], ends[tp]
            if s > e:
                if self.conf.fail_on_data_loss:
                    raise FranzOptionError(
                        f"franz: the start offset {s} of {tp[0]}-{tp[1]} is after its end "
                        f"offset {e}"
                    )
                continue
            ranges.append(OffsetRange(tp[0], tp[1], s, e))
        return ranges

    def partitions(self) -> list[InputPartition]:
        return list(_input_partitions(self.plan(), self.conf))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.conf, self.schema, partition)


# --- stream read -----------------------------------------------------------------------


class FranzStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("franz")``. Offsets: ``{"topic": {"partition": next}}``."""

    def __init__(self, conf: ReaderConf, schema: StructType) -> None:
        self.conf = conf
        self.schema = schema
        self._client: FranzClient | None = None
        self._initial: dict[str, dict[str, int]] | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self._latest: dict[TopicPartition, int] | None = None  # for progress reports
        self._last_trigger_ms = 0.0
        self._committed: dict[str, dict[str, int]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    @property
    def client(self) -> FranzClient:
        if self._client is None:
            self._client = FranzClient(self.conf.http)
        return self._client

    def _snapshot(self) -> tuple[Metadata, dict[TopicPartition, tuple[int, int]]]:
        meta = Metadata(self.client, self.conf)
        tps = meta.discover()
        return meta, meta.bounds(tps)

    def initialOffset(self) -> dict:
        # Spark calls this more than once per run: resolve once.
        if self._initial is None:
            meta, bounds = self._snapshot()
            if self.conf.assign:
                meta.require(list(self.conf.assign), bounds)
            self._initial = to_json_offsets(meta.starts(bounds, "latest"))
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:
        _, bounds = self._snapshot()
        self._target = {tp: hi for tp, (_lo, hi) in bounds.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.conf.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.conf.max_offsets_per_trigger)
        if self.conf.min_offsets_per_trigger is not None:
            return ReadMinRows(self.conf.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        conf = self.conf
        # Spark plans a batch only after the previous one ran, so ``start`` is processed:
        # committing it here (not only in commit()) also covers an AvailableNow run's last
        # batch, which commit() would see only when the next run starts.
        self._commit_to_group(start)
        begin = from_json_offsets(start)
        _, bounds = self._snapshot()
        latest = {tp: hi for tp, (_lo, hi) in bounds.items()}
        if self._target is not None:  # AvailableNow: never beyond the snapshot
            latest = {
                tp: min(latest.get(tp, hi), hi) for tp, hi in self._target.items() if tp in bounds
            }
        self._latest = dict(latest)

        gone = [tp for tp in begin if tp not in bounds]
        if gone:
            data_loss(
                conf,
                f"partitions {describe(gone)} were read by this query but no "
                "longer exist (topic deleted?)",
            )
        for tp, off in begin.items():
            if tp in bounds and tp not in latest:
                latest[tp] = off  # outside an AvailableNow snapshot: stays where it is
        for tp in sorted(set(latest) - set(begin)):
            lo = bounds[tp][0]
            if lo > 0:
                data_loss(
                    conf,
                    f"partition {tp[0]}-{tp[1]} appeared while the query ran but "
                    f"its offsets 0 to {lo - 1} are already deleted",
                )
        backwards = [tp for tp in begin if tp in latest and latest[tp] < begin[tp]]
        for tp in backwards:
            data_loss(
                conf,
                f"the end offset of {tp[0]}-{tp[1]} went back from {begin[tp]} to "
                f"{latest[tp]} (topic re-created?); records in between are gone",
            )

        fresh = {tp: begin.get(tp, bounds[tp][0] if tp in bounds else 0) for tp in latest}
        end = dict(latest)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(fresh, latest, limit.max_rows)
        now_ms = time.time() * 1000
        if (
            conf.min_offsets_per_trigger is not None
            and self._target is None
            and not isinstance(limit, ReadAllAvailable)
        ):
            backlog = sum(max(0, latest[tp] - fresh[tp]) for tp in latest)
            if (
                backlog < conf.min_offsets_per_trigger
                and now_ms - self._last_trigger_ms < conf.max_trigger_delay_ms
            ):
                return start
        result = to_json_offsets(end)
        if result == start:
            return start
        self._last_trigger_ms = now_ms
        return result

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json_offsets(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_json_offsets(start)
        ranges = []
        for tp, e in sorted(from_json_offsets(end).items()):
            # A partition new to the query starts at 0: if its first offsets are gone, the
            # read reports data loss (or, with failOnDataLoss=false, skips them).
            s = begin.get(tp, 0)
            if e > s:
                ranges.append(OffsetRange(tp[0], tp[1], s, e))
        return _input_partitions(ranges, self.conf)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.conf, self.schema, partition)

    def commit(self, end: dict) -> None:
        self._commit_to_group(end)

    def _commit_to_group(self, offsets: dict) -> None:
        """``commitOffsetsToGroup``: store processed positions as the group's committed
        offsets (for lag tools; never read back). Only when they changed."""
        group = self.conf.commit_group
        if not group or not offsets or offsets == self._committed:
            return
        try:
            self.client.commit_group(group, from_json_offsets(offsets))
            self._committed = offsets
        except Exception as e:  # lag reporting must not stop the query
            log.warning("franz: committing offsets to group %r failed: %s", group, e)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


# --- writes ----------------------------------------------------------------------------


@dataclass
class FranzCommitMessage(WriterCommitMessage):
    records: int
    requests: int
    resends: int = 0


def _write(
    conf: WriterConf, columns: list[str], rows: Iterator[Any], scope: KeyScope | None
) -> FranzCommitMessage:
    producer = Producer(conf, columns, scope)
    try:
        producer.add_rows(rows)
    finally:
        producer.close()
    return FranzCommitMessage(producer.records, producer.requests, producer.resends)


class FranzBatchWriter(DataSourceWriter):
    """``df.write.format("franz")``. Made once per write where Spark plans it and shipped
    (pickled) to every task, ``write_id`` included: every attempt of a task derives the
    same ``Idempotency-Key``s from it (writer.py)."""

    def __init__(self, conf: WriterConf, schema: StructType) -> None:
        self.conf = conf
        self.columns = schema.fieldNames()
        self.write_id = new_write_id(conf) if conf.exactly_once else None

    def write(self, iterator: Iterator[Any]) -> FranzCommitMessage:
        scope = task_key_scope(self.conf, streaming=False, write_id=self.write_id)
        return _write(self.conf, self.columns, iterator, scope)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, FranzCommitMessage)]
        log.info(
            "franz: wrote %d records in %d requests (%d resent)",
            sum(m.records for m in done),
            sum(m.requests for m in done),
            sum(m.resends for m in done),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already sent stay written; nothing to undo. With exactly-once writes,
        # running the job again with the same idempotencyKeyPrefix writes only the rest.
        pass


class FranzStreamWriter(DataSourceStreamWriter):
    """``writeStream.format("franz")``: keys from the query id and micro-batch id Spark
    puts in every task's local properties (writer.py)."""

    def __init__(self, conf: WriterConf, schema: StructType) -> None:
        self.conf = conf
        self.columns = schema.fieldNames()

    def write(self, iterator: Iterator[Any]) -> FranzCommitMessage:
        scope = task_key_scope(self.conf, streaming=True)
        return _write(self.conf, self.columns, iterator, scope)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


# --- the data source ---------------------------------------------------------------------


class FranzDataSource(DataSource):
    """``format("franz")``: read and write franz topics over HTTP.

    Register once per session with ``spark.dataSource.register(FranzDataSource)``."""

    @classmethod
    def name(cls) -> str:
        return "franz"

    def _reader_conf(self) -> ReaderConf:
        return reader_conf(self.options)

    def schema(self) -> StructType:
        # Called by load(): every reader option is checked here, before any job runs.
        return _row_schema(self._reader_conf())

    def _fixed_schema(self, schema: StructType, conf: ReaderConf) -> None:
        expected = _row_schema(conf)
        if schema.simpleString() != expected.simpleString():
            raise FranzOptionError(
                "The franz source has a fixed schema and does not take a user schema: "
                f"{expected.simpleString()} (got {schema.simpleString()})"
            )

    def reader(self, schema: StructType) -> FranzBatchReader:
        conf = self._reader_conf()
        batch_checks(conf)
        self._fixed_schema(schema, conf)
        return FranzBatchReader(conf, schema)

    def streamReader(self, schema: StructType) -> FranzStreamReader:
        conf = self._reader_conf()
        stream_checks(conf)
        self._fixed_schema(schema, conf)
        return FranzStreamReader(conf, schema)

    def _writer_conf(self, schema: StructType) -> WriterConf:
        conf = writer_conf(self.options)
        check_columns({f.name: f.dataType.simpleString() for f in schema.fields}, conf)
        # keyFormat / valueFormat: schemas looked up once, here on the driver, and shipped
        # to every task inside the writer (the same schema ids for every attempt)
        return resolve_schemas(conf)

    def writer(self, schema: StructType, overwrite: bool) -> FranzBatchWriter:
        if overwrite:
            raise FranzOptionError("The franz sink only appends: use mode('append'), not overwrite")
        return FranzBatchWriter(self._writer_conf(schema), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> FranzStreamWriter:
        return FranzStreamWriter(self._writer_conf(schema), schema)
