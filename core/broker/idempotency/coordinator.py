"""The Idempotency-Key coordinator: the leader of a key's ``__franz_idempotency``
partition decides, for every request carrying that key, whether it runs, resumes, gets
the first request's answer, or is refused.

A partition's keys are loaded from its log the first time a request needs them, and
again whenever the partition's leader epoch moved (another broker may have led it
meanwhile), through the coordinator runtime (``core.broker.coordination.runtime``): the
keys are dropped when this broker's replica resigns, and records decided on keys loaded
at one epoch are never written under another. ``claim`` answers:

- a new key: the request runs with the key's producer id (``claims.producer_id_for``);
- a key whose request finished: its results (nothing is written);
- a key whose request is unfinished and not busy (it failed with an unknown outcome, or
  its broker died and ``claim_timeout_ms`` passed): the request resumes under the same
  producer id, so what the first one wrote is recognised, not written again;
- a key whose request is still running: ``IdempotencyKeyInUseError`` (409);
- another request's key (other fingerprint): ``IdempotencyKeyReusedError`` (422).

Keys are forgotten ``retention_ms`` after their claim (the topic's ``retention.ms`` is
the same, with compaction). Event-loop only: a key is claimed (and marked busy) in
memory, with no await, so concurrent requests see it at once.

The records are written off the request's path: the ``claim`` and ``done`` records of
a partition are appended together (acks=all), one batch every ``FLUSH_S`` (0.2 s) or
``FLUSH_RECORDS`` records (an append per request, twice, cost ~18 % of a 1000-record
produce); an answer whose ``done`` record is in that batch writes no claim record.
Nothing depends on a claim being written before its request's records: the producer id
comes from the key, so a coordinator that never saw the claim (it was lost with a
broker, or its leadership moved) claims the key again under the same producer id, and
the partitions' producer state answers a retry with the original offsets. What a lost
record costs: a retry of a finished request resumes it (same answer) instead of reading
it, and a client that reused the key for another body in that window is not told 422
(its records are taken for the first request's).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass

from core.broker.coordination.partition_log import InternalTopicLog
from core.broker.coordination.runtime import CoordinatorRuntime, Shard
from core.broker.errors import (
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    IdempotencyKeysExhaustedError,
    IdempotencyOutcomeUnknownError,
)
from core.broker.idempotency.claims import (
    CLAIM,
    KeyEntry,
    claim_value,
    done_value,
    parse_value,
    producer_epoch_for,
    producer_id_for,
)
from core.broker.produce.partitioner import partition_for_key
from core.clock import Clock
from core.storage.records import NewRecord, build_batch

log = logging.getLogger(__name__)

ACKS_ALL = -1
#: ``idempotency.keys.max``: live keys a broker holds (~300 bytes each, docs/delivery.md).
DEFAULT_MAX_KEYS = 5_000_000
FLUSH_S = 0.2
FLUSH_RECORDS = 256


@dataclass(frozen=True, slots=True)
class Claim:
    """``claim``'s answer: ``results`` (encoded) when the key's request finished, else
    the producer id, partition count and clock the request runs (again) with."""

    producer_id: int
    producer_epoch: int
    partition_count: int
    now_ms: int
    results: bytes | None = None


def _claim_of(entry: KeyEntry, results: bytes | None = None) -> Claim:
    return Claim(entry.producer_id, entry.producer_epoch, entry.partition_count,
                 entry.now_ms, results)


class _Partition:
    __slots__ = ("keys", "leader_epoch", "producer_ids")

    def __init__(self, leader_epoch: int) -> None:
        self.leader_epoch = leader_epoch
        self.keys: OrderedDict[bytes, KeyEntry] = OrderedDict()  # in claim order
        self.producer_ids: dict[int, bytes] = {}  # of the live keys


class IdempotencyCoordinator:
    def __init__(self, log_: InternalTopicLog, clock: Clock, *, num_partitions: int,
                 retention_ms: int, claim_timeout_ms: int, producer_expiration_ms: int,
                 append_timeout_ms: int, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        if max_keys < 1:
            raise ValueError(f"idempotency.keys.max must be at least 1, got {max_keys}")
        self._log = log_
        self.max_keys = max_keys
        self.live_keys = 0  # in every partition loaded here
        self._clock = clock
        self.num_partitions = num_partitions
        self._retention_ms = retention_ms
        self._claim_timeout_ms = claim_timeout_ms
        self._producer_expiration_ms = producer_expiration_ms
        self._append_timeout_ms = append_timeout_ms
        self._runtime: CoordinatorRuntime[_Partition] = CoordinatorRuntime(
            log_, self._load, loaded=self._installed, unloaded=self._dropped)
        # records to write: per partition, the leader epoch they were decided at
        self._unwritten: dict[int, tuple[int, list[tuple[bytes, KeyEntry]]]] = {}
        self._flushes: dict[int, asyncio.TimerHandle | asyncio.Task[None]] = {}

    def partition_for(self, key: bytes) -> int:
        return partition_for_key(key, self.num_partitions)

    # --- loading ----------------------------------------------------------------------

    def on_role_change(self, partition: int, leader_epoch: int | None) -> None:
        """The replica of ``__franz_idempotency``-``partition`` here leads at
        ``leader_epoch`` now (None: not at all); the replica manager calls it."""
        self._runtime.on_role_change(partition, leader_epoch)

    async def _keys(self, partition: int) -> _Partition:
        """The partition's keys, loaded for the current leader epoch
        (``NotCoordinatorError`` when this broker does not lead it)."""
        return (await self._runtime.shard(partition)).state

    def _installed(self, shard: Shard[_Partition]) -> None:
        self.live_keys += len(shard.state.keys)

    def _dropped(self, shard: Shard[_Partition]) -> None:
        self.live_keys -= len(shard.state.keys)
        queued = self._unwritten.get(shard.partition)
        if queued is not None and queued[0] == shard.epoch:
            del self._unwritten[shard.partition]  # decided on the view that is gone

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
        self._expire(loaded, now)
        loaded.producer_ids = {entry.producer_id: key for key, entry in keys.items()}
        log.debug("loaded %s-%d: %d keys (%d records skipped)", self._log.topic, partition,
                 len(keys), skipped)
        return loaded

    def _expire(self, loaded: _Partition, now_ms: int) -> int:
        """Forget ``loaded``'s keys past retention; how many."""
        keys, ids = loaded.keys, loaded.producer_ids
        limit = now_ms - self._retention_ms
        before = len(keys)
        while keys:
            key, entry = next(iter(keys.items()))
            if entry.created_ms > limit:
                break
            del keys[key]
            if ids.get(entry.producer_id) == key:
                del ids[entry.producer_id]
        return before - len(keys)

    def expire_all(self) -> None:
        """Forget expired keys everywhere (the maintenance loop calls it)."""
        now = self._clock.now_ms()
        for shard in self._runtime.shards():
            self.live_keys -= self._expire(shard.state, now)

    # --- requests -----------------------------------------------------------------------

    async def claim(self, key: bytes, fingerprint: bytes, *, partition_count: int) -> Claim:
        partition = self.partition_for(key)
        loaded = await self._keys(partition)
        keys = loaded.keys
        now = self._clock.now_ms()
        entry = keys.get(key)
        if entry is not None and entry.created_ms <= now - self._retention_ms:
            self.live_keys -= self._expire(loaded, now)
            entry = keys.get(key)
        if entry is not None:
            return await self._again(partition, entry, fingerprint, now)
        if self.live_keys >= self.max_keys:
            self.expire_all()  # at the cap only: every partition, not just this one
            if self.live_keys >= self.max_keys:
                raise IdempotencyKeysExhaustedError(
                    f"This broker holds {self.live_keys} live Idempotency-Keys, its maximum "
                    f"(idempotency.keys.max={self.max_keys}); each is kept for "
                    f"idempotency.key.retention.ms={self._retention_ms} ms. Retry later, or "
                    "produce without the header")
        pid = producer_id_for(partition, key, loaded.producer_ids)
        entry = KeyEntry(fingerprint, now, partition_count, now, pid,
                         producer_epoch_for(now, self._retention_ms),
                         busy_until=now + self._claim_timeout_ms)
        keys[key] = entry
        self.live_keys += 1
        loaded.producer_ids[pid] = key
        self._write_later(partition, loaded.leader_epoch, key, entry)
        return _claim_of(entry)

    async def _again(self, partition: int, entry: KeyEntry, fingerprint: bytes,
                     now: int) -> Claim:
        """A key seen before: its answer, a resumption, or a refusal."""
        if entry.fingerprint != fingerprint:
            raise IdempotencyKeyReusedError(
                "This Idempotency-Key was used for a different request (another body, topic, "
                "partition or content type); use a new key for a new request")
        if entry.results is not None:  # finished; its done record is not written yet
            return _claim_of(entry, entry.results)
        if entry.done_offset >= 0:
            record = await self._log.read_at(partition, entry.done_offset)
            if record is not None and record.value is not None:
                _kind, _entry, results = parse_value(record.value, record.offset)
                return _claim_of(entry, results)
            raise IdempotencyOutcomeUnknownError(
                "The answer of the first request with this Idempotency-Key is gone from "
                "the log; nothing was written again")
        if entry.busy_until > now:
            raise IdempotencyKeyInUseError(
                "A request with this Idempotency-Key is in progress; retry once it answered")
        if now - entry.created_ms >= self._producer_expiration_ms:
            raise IdempotencyOutcomeUnknownError(
                "The first request with this Idempotency-Key did not finish and its outcome "
                "can no longer be told (idempotency.producer.id.expiration.ms passed); nothing was "
                "written again")
        entry.busy_until = now + self._claim_timeout_ms
        return _claim_of(entry)

    async def complete(self, key: bytes, producer_id: int, results: bytes) -> None:
        """The request of ``producer_id`` finished with ``results``: they answer every
        later request with the key, from memory at once and from a ``done`` record
        (acks=all) once the partition's next batch of records is written."""
        partition = self.partition_for(key)
        loaded = await self._keys(partition)
        entry = loaded.keys.get(key)
        if entry is None or entry.producer_id != producer_id:
            return  # expired meanwhile: nothing to answer for
        entry.results = results
        entry.busy_until = 0
        self._write_later(partition, loaded.leader_epoch, key, entry)

    def _write_later(self, partition: int, epoch: int, key: bytes, entry: KeyEntry) -> None:
        """Queue the key's record (a claim, or its answer), decided on the keys loaded at
        leader ``epoch``, for the partition's next batch."""
        queued = self._unwritten.get(partition)
        if queued is None or queued[0] != epoch:  # records of an older view: never written
            queued = self._unwritten[partition] = (epoch, [])
        queue = queued[1]
        queue.append((key, entry))
        pending = self._flushes.get(partition)
        if len(queue) >= FLUSH_RECORDS:
            if isinstance(pending, asyncio.TimerHandle):
                pending.cancel()
            if not isinstance(pending, asyncio.Task):
                self._start_flush(partition)
        elif pending is None:
            self._flushes[partition] = asyncio.get_running_loop().call_later(
                FLUSH_S, self._start_flush, partition)

    def _start_flush(self, partition: int) -> None:
        task = asyncio.ensure_future(self._write(partition))
        self._flushes[partition] = task
        task.add_done_callback(lambda _t: self._flush_ended(partition, task))

    def _flush_ended(self, partition: int, task: asyncio.Task[None]) -> None:
        if self._flushes.get(partition) is task:
            del self._flushes[partition]
        queued = self._unwritten.get(partition)
        if queued is not None and queued[1] and partition not in self._flushes:
            self._flushes[partition] = asyncio.get_running_loop().call_later(
                FLUSH_S, self._start_flush, partition)

    async def _write(self, partition: int) -> None:
        epoch, queue = self._unwritten.pop(partition, (-1, []))
        latest: dict[int, tuple[bytes, KeyEntry]] = {}
        for key, entry in queue:  # one record per entry: its answer if it has one by now
            latest[id(entry)] = (key, entry)
        items = list(latest.values())
        if not items:
            return
        answers = [entry.results for _key, entry in items]  # None: a claim record
        records = [NewRecord(claim_value(entry) if results is None
                             else done_value(entry, results), key)
                   for (key, entry), results in zip(items, answers, strict=True)]
        try:
            base = await self._runtime.append(partition, epoch, bytes(build_batch(
                records, now_ms=self._clock.now_ms())), acks=ACKS_ALL,
                timeout_ms=self._append_timeout_ms)
        except Exception as exc:  # kept in memory; a retry after a failover resumes
            log.warning("could not write %d Idempotency-Key records to %s-%d: %s",
                        len(items), self._log.topic, partition, exc)
            return
        for i, ((_key, entry), results) in enumerate(zip(items, answers, strict=True)):
            if results is not None:  # the answer is in the log now
                entry.done_offset = base + i
                entry.results = None

    async def flush(self) -> None:
        """Write every record still in memory now (a stopping broker, tests)."""
        for partition in list(self._unwritten):
            pending = self._flushes.pop(partition, None)
            if isinstance(pending, asyncio.TimerHandle):
                pending.cancel()
            elif pending is not None:
                await asyncio.shield(pending)
            await self._write(partition)

    async def release(self, key: bytes, producer_id: int) -> None:
        """The request of ``producer_id`` ended without a definite outcome: the next
        request with the key resumes it at once."""
        entry = (await self._keys(self.partition_for(key))).keys.get(key)
        if entry is not None and entry.producer_id == producer_id:
            entry.busy_until = 0
