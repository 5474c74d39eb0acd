"""Value objects shared by the broker core and its callers (api/, the coordinator)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from core.errors import FranzError
from core.storage.records import Record


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


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResult:
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    records: list[Record]
    next_offset: int
