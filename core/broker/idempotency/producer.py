"""A produce carrying an Idempotency-Key: claim the key, write under the claim's producer
id, record the answer.

1. ``claim`` at the key's coordinator: the first request's results when it finished
   (returned as they were; nothing is written), else a producer id, the partition count
   and the clock to run with.
2. The records are written as any produce, except that every partition's batches carry
   the key's producer id and epoch and sequences from 0, records without key or
   partition go to the partition the Idempotency-Key hashes to, and partitions are
   counted as at the claim: a request resumed after its broker died (or after an
   unknown outcome) builds the same batches, and each partition's producer state
   answers those already written with their original offsets.
3. A definite outcome (every record written, or refused for what it is) is recorded
   (``complete``); an unknown one (a timeout, a leader that went away) releases the key,
   so the client's retry resumes the request at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from core.broker.idempotency.results_codec import decode_results, encode_results
from core.broker.idempotency.router import IdempotencyRouter
from core.broker.metadata.cache import TopicMetadata
from core.broker.produce.partitioner import partition_for_key
from core.broker.produce.producer import AppendTarget, produce_to_topic
from core.broker.types import ProduceRecord, ProduceResults, TopicPartition
from core.errors import FranzError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IdempotentRequest:
    """``key``: the client's Idempotency-Key scoped to its principal; ``fingerprint``:
    a digest of what the request asks (route, topic, partition, content type, body)."""

    key: bytes
    fingerprint: bytes


class _ClaimLease:
    __slots__ = ("producer_epoch", "producer_id")
    base_sequence = 0

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    def done(self, records: int) -> None:
        pass

    def failed(self) -> None:
        pass


class _ClaimProducers:
    """Every partition's batches under the claim's producer id and epoch from
    sequence 0."""

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self._lease = _ClaimLease(producer_id, producer_epoch)

    async def lease(self, tp: TopicPartition) -> _ClaimLease:
        return self._lease


class _KeyPartition:
    """Records without key or partition: the partition the Idempotency-Key hashes to."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def next_partition(self, topic: str, num_partitions: int) -> int:
        return partition_for_key(self._key, num_partitions)


def _definite(results: ProduceResults) -> bool:
    """No record failed in a way a retry could change (written or not, unknown)."""
    return not any(error.retriable for error in results.errors.values())


class IdempotentProducer:
    def __init__(self, target: AppendTarget, keys: IdempotencyRouter) -> None:
        self._target = target
        self._keys = keys
        self.coordinator = keys.coordinator

    async def produce(
        self, topic: str, meta: TopicMetadata, records: Sequence[ProduceRecord], *,
        default_partition: int | None, acks: int, timeout_ms: int,
        request: IdempotentRequest,
    ) -> ProduceResults:
        claim = await self._keys.claim(request.key, request.fingerprint,
                                       partition_count=meta.num_partitions)
        if claim.results is not None:
            return decode_results(claim.results)
        try:
            results = await produce_to_topic(
                self._target, _KeyPartition(request.key), topic, meta, records,
                default_partition=default_partition, acks=acks, timeout_ms=timeout_ms,
                now_ms=claim.now_ms, producers=_ClaimProducers(claim.producer_id, claim.producer_epoch),
                num_partitions=claim.partition_count)
        except BaseException:
            await self._release(request.key, claim.producer_id)
            raise
        if not _definite(results):
            await self._release(request.key, claim.producer_id)
            return results
        try:
            await self._keys.complete(request.key, claim.producer_id, encode_results(results))
        except FranzError as exc:  # the records are written: answer; a retry resumes
            log.warning("could not record the answer of an Idempotency-Key request: %s", exc)
            await self._release(request.key, claim.producer_id)
        return results

    async def _release(self, key: bytes, producer_id: int) -> None:
        # best effort, even when the request is being cancelled: without it the key
        # stays busy until idempotency.key.claim.timeout.ms
        with contextlib.suppress(Exception):
            await asyncio.shield(self._keys.release(key, producer_id))
