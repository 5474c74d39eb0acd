"""The Idempotency-Key coordinator: the leader of a key's ``__franz_idempotency``
partition decides, for every request carrying that key, whether it runs, resumes, gets
the first request's answer, or is refused.

A partition's keys are loaded from its log the first time a request needs them, and
again whenever the partition's leader epoch moved (another broker may have led it
meanwhile). ``claim`` answers:

- a new key: a ``claim`` record is appended with acks=all; the request runs with the
  claim's producer id (``claims.producer_id_of``);
- a key whose request finished: the ``done`` record's results (nothing is written);
- a key whose request is unfinished and not busy (it failed with an unknown outcome, or
  its broker died and ``claim_timeout_ms`` passed): the request resumes under the same
  producer id, so what the first one wrote is recognised, not written again;
- a key whose request is still running: ``IdempotencyKeyInUseError`` (409);
- another request's key (other fingerprint): ``IdempotencyKeyReusedError`` (422).

Keys are forgotten ``retention_ms`` after their claim (the topic's ``retention.ms`` is
the same, with compaction). Event-loop only; the appends are the only awaits, and a key
is marked busy before its claim is written, so concurrent requests see it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass

from core.broker.errors import (
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    IdempotencyOutcomeUnknownError,
)
from core.broker.idempotency.claims import (
    CLAIM,
    KeyEntry,
    claim_value,
    done_value,
    parse_value,
    producer_id_of,
)
from core.broker.produce.partitioner import partition_for_key
from core.broker.replica.internal_log import InternalTopicLog
from core.clock import Clock
from core.storage.records import NewRecord, build_batch

log = logging.getLogger(__name__)

ACKS_ALL = -1


@dataclass(frozen=True, slots=True)
class Claim:
    """``claim``'s answer: ``results`` (encoded) when the key's request finished, else
    the producer id, partition count and clock the request runs (again) with."""

    producer_id: int
    partition_count: int
    now_ms: int
    claim_offset: int
    results: bytes | None = None


class _Partition:
    __slots__ = ("keys", "leader_epoch")

    def __init__(self, leader_epoch: int) -> None:
        self.leader_epoch = leader_epoch
        self.keys: OrderedDict[bytes, KeyEntry] = OrderedDict()  # in claim order


class IdempotencyCoordinator:
    def __init__(self, log_: InternalTopicLog, clock: Clock, *, num_partitions: int,
                 retention_ms: int, claim_timeout_ms: int, producer_expiration_ms: int,
                 append_timeout_ms: int) -> None:
        self._log = log_
        self._clock = clock
        self.num_partitions = num_partitions
        self._retention_ms = retention_ms
        self._claim_timeout_ms = claim_timeout_ms
        self._producer_expiration_ms = producer_expiration_ms
        self._append_timeout_ms = append_timeout_ms
        self._partitions: dict[int, _Partition] = {}
        self._loads: dict[int, asyncio.Lock] = {}

    def partition_for(self, key: bytes) -> int:
        return partition_for_key(key, self.num_partitions)

    # --- loading ----------------------------------------------------------------------

    async def _keys(self, partition: int) -> OrderedDict[bytes, KeyEntry]:
        """The partition's keys, loaded for the current leader epoch
        (``NotLeaderOrFollowerError`` when this broker does not lead it)."""
        epoch = self._log.leader_epoch(partition)
        loaded = self._partitions.get(partition)
        if loaded is not None and loaded.leader_epoch == epoch:
            return loaded.keys
        lock = self._loads.setdefault(partition, asyncio.Lock())
        async with lock:
            loaded = self._partitions.get(partition)
            epoch = self._log.leader_epoch(partition)
            if loaded is None or loaded.leader_epoch != epoch:
                loaded = await self._load(partition, epoch)
                self._partitions[partition] = loaded
            return loaded.keys

    async def _load(self, partition: int, epoch: int) -> _Partition:
        loaded = _Partition(epoch)
        keys = loaded.keys
        now = self._clock.now_ms()
        skipped = 0
        async for record in self._log.read(partition):
            if record.key is None or record.value is None:
                skipped += 1
                continue
            try:
                kind, entry, _results = parse_value(record.value, record.offset)
            except ValueError:
                skipped += 1
                continue
            if kind == CLAIM:  # unfinished: its request may still run on another broker
                entry.busy_until = entry.created_ms + self._claim_timeout_ms
            keys.pop(record.key, None)
            keys[record.key] = entry
        self._expire(keys, now)
        log.debug("loaded %s-%d: %d keys (%d records skipped)", self._log.topic, partition,
                 len(keys), skipped)
        return loaded

    def _expire(self, keys: OrderedDict[bytes, KeyEntry], now_ms: int) -> None:
        limit = now_ms - self._retention_ms
        while keys:
            key, entry = next(iter(keys.items()))
            if entry.created_ms > limit:
                break
            del keys[key]

    def expire_all(self) -> None:
        """Forget expired keys everywhere (the maintenance loop calls it)."""
        now = self._clock.now_ms()
        for loaded in self._partitions.values():
            self._expire(loaded.keys, now)

    # --- requests -----------------------------------------------------------------------

    async def claim(self, key: bytes, fingerprint: bytes, *, partition_count: int) -> Claim:
        partition = self.partition_for(key)
        keys = await self._keys(partition)
        now = self._clock.now_ms()
        entry = keys.get(key)
        if entry is not None and entry.created_ms <= now - self._retention_ms:
            del keys[key]
            entry = None
        if entry is not None:
            return await self._again(partition, key, entry, fingerprint, now)
        entry = KeyEntry(fingerprint, now, partition_count, now,
                         busy_until=now + self._claim_timeout_ms)
        keys[key] = entry
        batch = build_batch([NewRecord(claim_value(entry), key)], now_ms=now)
        try:
            offset = await self._log.append(partition, bytes(batch), acks=ACKS_ALL,
                                            timeout_ms=self._append_timeout_ms)
        except BaseException:
            if keys.get(key) is entry:
                del keys[key]
            raise
        entry.claim_offset = offset
        return Claim(producer_id_of(partition, offset), partition_count, now, offset)

    async def _again(self, partition: int, key: bytes, entry: KeyEntry, fingerprint: bytes,
                     now: int) -> Claim:
        """A key seen before: its answer, a resumption, or a refusal."""
        if entry.fingerprint != fingerprint:
            raise IdempotencyKeyReusedError(
                "This Idempotency-Key was used for a different request (another body, topic, "
                "partition or content type); use a new key for a new request")
        if entry.done_offset >= 0:
            record = await self._log.read_at(partition, entry.done_offset)
            if record is not None and record.value is not None:
                _kind, _entry, results = parse_value(record.value, record.offset)
                return Claim(producer_id_of(partition, entry.claim_offset),
                             entry.partition_count, entry.now_ms, entry.claim_offset, results)
            raise IdempotencyOutcomeUnknownError(
                "The answer of the first request with this Idempotency-Key is gone from "
                "the log; nothing was written again")
        if entry.claim_offset < 0 or entry.busy_until > now:
            raise IdempotencyKeyInUseError(
                "A request with this Idempotency-Key is in progress; retry once it answered")
        if now - entry.created_ms >= self._producer_expiration_ms:
            raise IdempotencyOutcomeUnknownError(
                "The first request with this Idempotency-Key did not finish and its outcome "
                "can no longer be told (producer.id.expiration.ms passed); nothing was "
                "written again")
        entry.busy_until = now + self._claim_timeout_ms
        return Claim(producer_id_of(partition, entry.claim_offset), entry.partition_count,
                     entry.now_ms, entry.claim_offset)

    async def complete(self, key: bytes, claim_offset: int, results: bytes) -> None:
        """The request of ``claim_offset`` finished with ``results``: a ``done`` record
        (acks=all) answers every later request with the key."""
        partition = self.partition_for(key)
        keys = await self._keys(partition)
        entry = keys.get(key)
        if entry is None or entry.claim_offset != claim_offset:
            return  # expired meanwhile, or a newer claim: nothing to answer for
        batch = build_batch([NewRecord(done_value(entry, results), key)],
                            now_ms=self._clock.now_ms())
        try:
            offset = await self._log.append(partition, bytes(batch), acks=ACKS_ALL,
                                            timeout_ms=self._append_timeout_ms)
        finally:
            entry.busy_until = 0
        entry.done_offset = offset

    async def release(self, key: bytes, claim_offset: int) -> None:
        """The request of ``claim_offset`` ended without a definite outcome: the next
        request with the key resumes it at once."""
        keys = await self._keys(self.partition_for(key))
        entry = keys.get(key)
        if entry is not None and entry.claim_offset == claim_offset:
            entry.busy_until = 0
