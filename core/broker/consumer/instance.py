"""A REST consumer instance: its settings (persisted with its group membership) and its
runtime state (positions; rebuilt from committed offsets after a restart).

Settings travel in the member's ``properties`` under Confluent's names::

    format                       binary | json | avro | jsonschema | protobuf
    auto.offset.reset            earliest | latest | none
    auto.commit.enable           bool
    fetch.min.bytes              -1 (off) .. 10,000,000
    consumer.request.timeout.ms  int | null (null: the server's consumer.request.timeout.ms)
    franz.owner                  the principal that created it (``User:alice``)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from core.broker.errors import InvalidConsumerConfigError
from core.broker.replica.batch_cache import CachedBatch
from core.broker.replica.delayed import Flag
from core.broker.types import TopicPartition
from core.storage.records import Record

FORMATS = frozenset({"binary", "json", "avro", "jsonschema", "protobuf"})
OFFSET_RESETS = frozenset({"earliest", "latest", "none"})
MAX_FETCH_MIN_BYTES = 10_000_000
OWNER_PROPERTY = "franz.owner"
ANONYMOUS_OWNER = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class ConsumerInstanceInfo:
    """What ``create`` accepted and ``get`` returns; ``api/`` builds ``base_uri`` from it."""

    group: str
    instance_id: str
    format: str = "binary"
    auto_offset_reset: str = "latest"
    auto_commit: bool = True
    fetch_min_bytes: int = -1
    request_timeout_ms: int | None = None
    owner: str = ANONYMOUS_OWNER  # the principal that created it; only it may use it

    @classmethod
    def validated(
        cls,
        group: str,
        instance_id: str,
        *,
        format: str,
        auto_offset_reset: str,
        auto_commit: bool,
        fetch_min_bytes: int,
        request_timeout_ms: int | None,
        owner: str = ANONYMOUS_OWNER,
    ) -> ConsumerInstanceInfo:
        """The settings, normalised; InvalidConsumerConfigError names the bad one."""
        fmt = str(format).lower()
        if fmt not in FORMATS:
            raise InvalidConsumerConfigError(f"Invalid format type: {format!r}.")
        reset = str(auto_offset_reset).lower()
        if reset not in OFFSET_RESETS:
            raise InvalidConsumerConfigError(
                f"Invalid consumer configuration: auto.offset.reset must be one of "
                f"earliest, latest, none (got {auto_offset_reset!r})"
            )
        if not -1 <= int(fetch_min_bytes) <= MAX_FETCH_MIN_BYTES:
            raise InvalidConsumerConfigError(
                f"Invalid consumer configuration: fetch.min.bytes must lie in "
                f"[-1, {MAX_FETCH_MIN_BYTES}] (got {fetch_min_bytes})"
            )
        if request_timeout_ms is not None and int(request_timeout_ms) < 0:
            raise InvalidConsumerConfigError(
                f"Invalid consumer configuration: consumer.request.timeout.ms must not be "
                f"negative (got {request_timeout_ms})"
            )
        return cls(
            group,
            instance_id,
            fmt,
            reset,
            bool(auto_commit),
            int(fetch_min_bytes),
            None if request_timeout_ms is None else int(request_timeout_ms),
            owner,
        )

    def to_properties(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "auto.offset.reset": self.auto_offset_reset,
            "auto.commit.enable": self.auto_commit,
            "fetch.min.bytes": self.fetch_min_bytes,
            "consumer.request.timeout.ms": self.request_timeout_ms,
            OWNER_PROPERTY: self.owner,
        }

    @classmethod
    def from_properties(
        cls, group: str, instance_id: str, props: dict[str, Any]
    ) -> ConsumerInstanceInfo:
        """Settings of a member, tolerating missing keys (defaults apply)."""
        timeout = props.get("consumer.request.timeout.ms")
        return cls(
            group,
            instance_id,
            str(props.get("format", "binary")),
            str(props.get("auto.offset.reset", "latest")),
            bool(props.get("auto.commit.enable", True)),
            int(props.get("fetch.min.bytes", -1)),
            None if timeout is None else int(timeout),
            str(props.get(OWNER_PROPERTY, ANONYMOUS_OWNER)),
        )


#: ``(partition, batch, lo, hi)``: the records ``batch.records[lo:hi]`` of a partition.
PartitionChunk = tuple[TopicPartition, CachedBatch, int, int]


class PolledRecords(Sequence[tuple[TopicPartition, Record]]):
    """A read's records, in read order, as ranges of fetched batches (``chunks``): the
    API renders per batch from them; as a sequence it gives ``(partition, record)``
    pairs, each batch decoded on first use (once, in the batch cache)."""

    __slots__ = ("_pairs", "chunks")

    def __init__(self, chunks: list[PartitionChunk] | None = None) -> None:
        self.chunks: list[PartitionChunk] = chunks or []
        self._pairs: list[tuple[TopicPartition, Record]] | None = None

    @property
    def count(self) -> int:
        return sum(hi - lo for _tp, _b, lo, hi in self.chunks)

    def _decoded(self) -> list[tuple[TopicPartition, Record]]:
        if self._pairs is None:
            self._pairs = [(tp, r) for tp, batch, lo, hi in self.chunks
                           for r in batch.records[lo:hi]]
        return self._pairs

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, index: int) -> tuple[TopicPartition, Record]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[TopicPartition, Record]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self._decoded()[index]

    def __iter__(self) -> Iterator[tuple[TopicPartition, Record]]:
        return iter(self._decoded())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PolledRecords | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True)
class InstanceState:
    """Runtime state of one instance, attached to its group member (``Member.runtime``).

    ``positions`` are the next offsets to read; ``auto_committed`` the offsets this
    instance last committed or started from (so auto-commit of an idle instance writes
    nothing). ``poll_lock`` serialises reads of one
    instance; ``changed`` wakes a waiting read when a seek or an assignment change makes
    its plan stale. Event-loop only.
    """

    info: ConsumerInstanceInfo
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    auto_committed: dict[TopicPartition, int] = field(default_factory=dict)
    next_start: int = 0  # round-robin: the partition index the next read starts at
    poll_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    changed: Flag = field(default_factory=Flag)

    def forget(self, partitions: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)
            self.auto_committed.pop(tp, None)
        self.changed.set()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset
        self.changed.set()

    def uncommitted(self, assignment: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        """Positions of assigned partitions that auto-commit has not written yet."""
        return {
            tp: pos
            for tp, pos in self.positions.items()
            if tp in assignment and self.auto_committed.get(tp) != pos
        }

    def apply_read(
        self,
        start: Mapping[TopicPartition, int],
        positions: Mapping[TopicPartition, int],
        chunks: list[PartitionChunk],
    ) -> PolledRecords:
        """Take a read's positions where nobody moved them meanwhile (a seek, a
        revocation); records of partitions that moved under the read are dropped."""
        kept = set()
        for tp, pos in positions.items():
            if self.positions.get(tp) == start[tp]:
                self.positions[tp] = pos
                kept.add(tp)
        if len(kept) == len(positions):
            return PolledRecords(chunks)
        return PolledRecords([c for c in chunks if c[0] in kept])

    def rotated(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """``partitions`` starting one further on each call: no partition is always last."""
        if not partitions:
            return []
        start = self.next_start % len(partitions)
        self.next_start = start + 1
        return partitions[start:] + partitions[:start]
