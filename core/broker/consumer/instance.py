"""A REST consumer instance: its settings (persisted with its group membership) and its
runtime state (positions; rebuilt from committed offsets after a restart).

Settings travel in the member's ``properties`` under Confluent's names::

    format                       binary | json | avro | jsonschema | protobuf
    auto.offset.reset            earliest | latest | none
    auto.commit.enable           bool
    fetch.min.bytes              -1 (off) .. 10,000,000
    consumer.request.timeout.ms  0 .. 2^31-1 | null (null: the server's
                                 consumer.request.timeout.ms; every wait is capped at
                                 consumer.request.timeout.max.ms)
    franz.owner                  the principal that created it (``User:alice``)

New group ids and instance names are what Kafka takes in practice (``id_problem``):
1..249 characters of ``[A-Za-z0-9._-]``, not "." or "..". They travel in URLs, logs
and the int16-length strings of ``__consumer_offsets`` records. Groups and instances
that exist already are not checked again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from core.broker.errors import InvalidConsumerConfigError, InvalidGroupIdError
from core.broker.replica.batch_cache import CachedBatch
from core.broker.replica.delayed import Flag
from core.broker.types import TopicPartition
from core.storage.records import Record

FORMATS = frozenset({"binary", "json", "avro", "jsonschema", "protobuf"})
OFFSET_RESETS = frozenset({"earliest", "latest", "none"})
MAX_FETCH_MIN_BYTES = 10_000_000
OWNER_PROPERTY = "franz.owner"
ANONYMOUS_OWNER = "User:ANONYMOUS"
MAX_ID_LENGTH = 249
MAX_REQUEST_TIMEOUT_MS = 2**31 - 1
_ID = re.compile(r"[A-Za-z0-9._-]+")


def id_problem(kind: str, name: object) -> str | None:
    """Why ``name`` cannot be a new group id or instance name (``kind`` says which, for
    the message), or None: 1..249 characters of [A-Za-z0-9._-], not "." or ".."."""
    if not isinstance(name, str) or not name:
        return f"{kind} must not be empty"
    if len(name) > MAX_ID_LENGTH:
        return f"{kind} is {len(name)} characters long, more than the {MAX_ID_LENGTH} allowed"
    if name in (".", ".."):
        return f"{kind} {name!r} is not allowed"
    if not _ID.fullmatch(name):
        return (f"{kind} {name!r} contains characters other than ASCII letters, digits, "
                f"'.', '_' and '-'")
    return None


def validate_group_id(group: str) -> None:
    """InvalidGroupIdError (400 / 40002 over HTTP) for a group id no new group may have."""
    problem = id_problem("the group id", group)
    if problem is not None:
        raise InvalidGroupIdError(f"Invalid group id: {problem}.")


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
        problem = id_problem("the consumer instance name", instance_id)
        if problem is not None:
            raise InvalidConsumerConfigError(f"Invalid consumer configuration: {problem}")
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
        if request_timeout_ms is not None and not (
            0 <= int(request_timeout_ms) <= MAX_REQUEST_TIMEOUT_MS
        ):
            raise InvalidConsumerConfigError(
                f"Invalid consumer configuration: consumer.request.timeout.ms must lie in "
                f"[0, {MAX_REQUEST_TIMEOUT_MS}] (got {request_timeout_ms})"
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

    # Shadows Sequence.count(value) with the number of records: no caller counts
    # occurrences of a pair, and renaming it would change this class's interface.
    @property
    def count(self) -> int:  # type: ignore[override]
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
