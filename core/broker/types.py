"""Value objects shared by the broker core and its callers (api/, the coordinator)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from core.errors import FranzError
from core.storage import native

#: The internal topic of consumer-group offsets and membership (Kafka's name).
OFFSETS_TOPIC = "__consumer_offsets"
#: franz's internal topic of produce Idempotency-Keys (``core.broker.idempotency``).
IDEMPOTENCY_TOPIC = "__franz_idempotency"
#: The Schema Registry's topic (Confluent's name and layout; ``core.broker.schemas``).
SCHEMAS_TOPIC = "_schemas"
#: Internal topics: never produced to by clients, never created by them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", IDEMPOTENCY_TOPIC,
                             SCHEMAS_TOPIC})


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str]  # overrides only


@dataclass(frozen=True, slots=True)
class ProduceRecord:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None
    partition: int | None = None


@dataclass(frozen=True, slots=True)
class RecordResult:
    partition: int | None
    offset: int | None
    timestamp: int | None
    error: FranzError | None = None


Headers = list[tuple[str, "bytes | None"]]
_NO_HEADERS: Headers = []


class _Columns:
    """Shared list-like behaviour of the columnar sequences below."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def _item(self, i: int) -> Any:
        raise NotImplementedError

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index out of range")
        return self._item(i)

    def __iter__(self) -> Iterator[Any]:
        return map(self._item, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_Columns, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class ProduceColumns(_Columns, Sequence[ProduceRecord]):
    """Records to produce as columns: what the REST layer builds, so a request of N
    records costs no N objects. A ``Sequence[ProduceRecord]`` (indexing makes the
    ProduceRecord); the producer reads the columns. A column is None when that field is
    absent (None) in every record: ``keys`` None = no keys, ``headers`` None = no
    headers, ``timestamps`` None = all "now", ``partitions`` None = none given."""

    __slots__ = ("headers", "keys", "partitions", "timestamps", "values")

    def __init__(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Headers] | None = None,
        timestamps: Sequence[int | None] | None = None,
        partitions: Sequence[int | None] | None = None,
    ) -> None:
        n = len(values)
        for name, col in (("keys", keys), ("headers", headers), ("timestamps", timestamps),
                          ("partitions", partitions)):
            if col is not None and len(col) != n:
                raise ValueError(f"{name} has {len(col)} entries for {n} values")
        self.values = values
        self.keys = keys
        self.headers = headers
        self.timestamps = timestamps
        self.partitions = partitions

    @classmethod
    def of(cls, records: Sequence[ProduceRecord]) -> ProduceColumns:
        """``records`` as columns (itself if it already is)."""
        if isinstance(records, ProduceColumns):
            return records
        keys = [r.key for r in records]
        headers = [r.headers for r in records]
        timestamps = [r.timestamp for r in records]
        partitions = [r.partition for r in records]
        return cls(
            [r.value for r in records],
            keys if any(k is not None for k in keys) else None,
            headers if any(headers) else None,
            timestamps if any(t is not None for t in timestamps) else None,
            partitions if any(p is not None for p in partitions) else None,
        )

    def __len__(self) -> int:
        return len(self.values)

    def _item(self, i: int) -> ProduceRecord:
        keys, headers, timestamps, partitions = self.keys, self.headers, self.timestamps, self.partitions
        return ProduceRecord(
            self.values[i],
            None if keys is None else keys[i],
            [] if headers is None else headers[i],
            None if timestamps is None else timestamps[i],
            None if partitions is None else partitions[i],
        )

    if TYPE_CHECKING:  # pragma: no cover

        @overload
        def __getitem__(self, index: int) -> ProduceRecord: ...
        @overload
        def __getitem__(self, index: slice) -> list[ProduceRecord]: ...
        def __getitem__(self, index: Any) -> Any: ...


class ProduceResults(_Columns, Sequence[RecordResult]):
    """What ``Broker.produce`` answers: one RecordResult per input record, in input
    order, held as columns and made on access (a 1000-record request costs no 1000
    objects; ``api`` renders the columns straight to JSON). Behaves as a read-only list
    (len, indexing, slicing, iteration, ``==`` against lists).

    ``partitions`` / ``timestamps``: one value for every record, or one per record;
    ``offsets``: one per record (a ``range`` when contiguous); ``errors``: index ->
    error of the records that failed (their other fields read as None).

    A request spread over several partitions is made by ``scattered`` from its
    ``runs`` (partition, first offset, the input indexes appended there in log order):
    ``partitions`` and ``offsets`` are then filled in on first access, and a renderer
    may read the runs instead (``api.native_render.produce_offsets_runs``)."""

    __slots__ = ("_offsets", "_partitions", "_total", "errors", "runs", "timestamps")

    def __init__(
        self,
        partitions: int | Sequence[int | None] | None,
        offsets: Sequence[int | None],
        timestamps: int | Sequence[int | None] | None,
        errors: dict[int, FranzError] | None = None,
    ) -> None:
        self._partitions = partitions
        self._offsets: Sequence[int | None] | None = offsets
        self._total = len(offsets)
        self.timestamps = timestamps
        self.errors = errors or {}
        self.runs: list[tuple[int, int, Sequence[int]]] | None = None

    @classmethod
    def scattered(cls, total: int, runs: list[tuple[int, int, Sequence[int]]],
                  timestamps: int | Sequence[int | None] | None,
                  errors: dict[int, FranzError] | None = None) -> ProduceResults:
        """``total`` results from ``runs``: ``(partition, first_offset, order)``, ``order``
        the input indexes appended to ``partition`` in log order from ``first_offset``;
        the records in no run read None (the failed ones, in ``errors``)."""
        out = cls(None, (), timestamps, errors)
        out._offsets, out._total, out.runs = None, total, runs
        return out

    def _scatter(self) -> None:
        assert self.runs is not None
        scattered = native.scatter_offsets(self._total, self.runs)
        if scattered is None:  # without the C extension
            partitions: list[int | None] = [None] * self._total
            offsets: list[int | None] = [None] * self._total
            for p, first, order in self.runs:
                for k, i in enumerate(order):
                    partitions[i], offsets[i] = p, first + k
            scattered = partitions, offsets
        self._partitions, self._offsets = scattered

    @property
    def partitions(self) -> int | Sequence[int | None] | None:
        if self._offsets is None:
            self._scatter()
        return self._partitions

    @property
    def offsets(self) -> Sequence[int | None]:
        if self._offsets is None:
            self._scatter()
        assert self._offsets is not None
        return self._offsets

    def __len__(self) -> int:
        return self._total

    def _item(self, i: int) -> RecordResult:
        error = self.errors.get(i) if self.errors else None
        if error is not None:
            return RecordResult(None, None, None, error)
        p, ts = self.partitions, self.timestamps
        return RecordResult(
            p if p is None or isinstance(p, int) else p[i],
            self.offsets[i],
            ts if ts is None or isinstance(ts, int) else ts[i],
        )

    @property
    def contiguous(self) -> bool:
        """One partition, consecutive offsets, no failures: the common answer. Never
        a ``scattered`` one (asking does not fill its per-record lists)."""
        offsets = self._offsets
        return not self.errors and isinstance(self._partitions, int) and isinstance(
            offsets, range) and offsets.step == 1

    if TYPE_CHECKING:  # pragma: no cover

        @overload
        def __getitem__(self, index: int) -> RecordResult: ...
        @overload
        def __getitem__(self, index: slice) -> list[RecordResult]: ...
        def __getitem__(self, index: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
