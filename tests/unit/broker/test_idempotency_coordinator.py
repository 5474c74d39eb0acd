"""The Idempotency-Key coordinator's rules and the results it keeps (core.broker.idempotency).

The coordinator runs over ``InternalTopicLog``'s surface; here that is a small in-memory
log (append, read, read_at, leader epoch) so the rules can be driven one by one: a new
key, its answer, a reused key, a key in use, a released or timed-out claim resumed under
the same producer id, expiry, a reload after a leadership change, the producer-state
window.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.broker.errors import (
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    IdempotencyKeysExhaustedError,
    IdempotencyOutcomeUnknownError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
)
from core.broker.idempotency.claims import (
    CLAIM_PRODUCER_ID_BASE,
    producer_epoch_for,
    producer_id_for,
)
from core.broker.idempotency.coordinator import (
    FLUSH_RECORDS,
    FLUSH_S,
    IdempotencyCoordinator,
)
from core.broker.idempotency.results_codec import decode_results, encode_results
from core.broker.types import ProduceResults
from core.clock import ManualClock
from core.storage.errors import MessageTooLargeError
from core.storage.records import Record, decode_records

RETENTION = 86_400_000
CLAIM_TIMEOUT = 60_000
EXPIRATION = 3_600_000


class MemoryLog:
    """A partitioned log in memory with a leader epoch per partition."""

    topic = "__franz_idempotency"

    def __init__(self) -> None:
        self.records: dict[int, list[Record]] = {}
        self.epochs: dict[int, int] = {}
        self.fail_next: BaseException | None = None
        self.batches = 0

    def leader_epoch(self, partition: int) -> int:
        epoch = self.epochs.get(partition, 0)
        if epoch < 0:
            raise NotLeaderOrFollowerError("not the leader")
        return epoch

    async def append(self, partition: int, batch: bytes, *, acks: int, timeout_ms: int,
                     leader_epoch: int | None = None) -> int:
        await asyncio.sleep(0)
        if leader_epoch is not None and self.leader_epoch(partition) != leader_epoch:
            raise NotLeaderOrFollowerError(f"led at epoch {self.epochs.get(partition, 0)}")
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        self.batches += 1
        log = self.records.setdefault(partition, [])
        base = len(log)
        for i, r in enumerate(decode_records(bytes(batch))):
            log.append(Record(base + i, r.timestamp, r.key, r.value))
        return base

    async def read(self, partition: int) -> AsyncIterator[Record]:
        for record in list(self.records.get(partition, [])):
            yield record

    async def read_at(self, partition: int, offset: int) -> Record | None:
        log = self.records.get(partition, [])
        return log[offset] if offset < len(log) else None


def _coordinator(log: MemoryLog, clock: ManualClock) -> IdempotencyCoordinator:
    return IdempotencyCoordinator(log, clock, num_partitions=4, retention_ms=RETENTION,  # type: ignore[arg-type]
                                  claim_timeout_ms=CLAIM_TIMEOUT,
                                  producer_expiration_ms=EXPIRATION, append_timeout_ms=1000)


RESULTS = ProduceResults(2, range(40, 43), 1_700_000_000_000)
FP = b"f" * 16


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_a_new_key_is_claimed_then_answered(clock: ManualClock) -> None:
    async def go() -> None:
        log = MemoryLog()
        c = _coordinator(log, clock)
        claim = await c.claim(b"u\0k1", FP, partition_count=3)
        assert claim.results is None and claim.partition_count == 3
        assert claim.now_ms == clock.now_ms()
        p = c.partition_for(b"u\0k1")
        assert claim.producer_id == producer_id_for(p, b"u\0k1") >= CLAIM_PRODUCER_ID_BASE
        assert claim.producer_epoch == producer_epoch_for(clock.now_ms(), RETENTION)
        await c.complete(b"u\0k1", claim.producer_id, encode_results(RESULTS))
        assert p not in log.records  # nothing written on the request's path
        clock.advance(5000)
        again = await c.claim(b"u\0k1", FP, partition_count=7)
        assert again.results is not None
        assert list(decode_results(again.results)) == list(RESULTS)
        assert again.partition_count == 3 and again.now_ms == claim.now_ms
        await asyncio.sleep(FLUSH_S * 2)  # written in the background
        assert len(log.records[p]) == 1  # the done record alone (it holds the claim)
        from_log = await c.claim(b"u\0k1", FP, partition_count=7)  # read back from the log
        assert from_log.results == again.results
    run(go())


def test_another_request_with_the_key_is_refused(clock: ManualClock) -> None:
    async def go() -> None:
        c = _coordinator(MemoryLog(), clock)
        claim = await c.claim(b"k", FP, partition_count=1)
        with pytest.raises(IdempotencyKeyReusedError):
            await c.claim(b"k", b"g" * 16, partition_count=1)
        await c.complete(b"k", claim.producer_id, encode_results(RESULTS))
        with pytest.raises(IdempotencyKeyReusedError):
            await c.claim(b"k", b"g" * 16, partition_count=1)
    run(go())


def test_a_key_in_use_is_409_until_released_or_timed_out(clock: ManualClock) -> None:
    async def go() -> None:
        c = _coordinator(MemoryLog(), clock)
        first = await c.claim(b"k", FP, partition_count=1)
        with pytest.raises(IdempotencyKeyInUseError):
            await c.claim(b"k", FP, partition_count=1)
        await c.release(b"k", first.producer_id)
        resumed = await c.claim(b"k", FP, partition_count=5)
        # the same producer id, partition count and clock: the same batches again
        assert (resumed.producer_id, resumed.partition_count, resumed.now_ms) == (
            first.producer_id, 1, first.now_ms)
        with pytest.raises(IdempotencyKeyInUseError):
            await c.claim(b"k", FP, partition_count=1)
        clock.advance(CLAIM_TIMEOUT + 1)  # its broker is presumed gone
        assert (await c.claim(b"k", FP, partition_count=1)).producer_id == first.producer_id
    run(go())


def test_concurrent_claims_see_the_claim_being_written(clock: ManualClock) -> None:
    async def go() -> None:
        c = _coordinator(MemoryLog(), clock)
        outcomes = await asyncio.gather(c.claim(b"k", FP, partition_count=1),
                                        c.claim(b"k", FP, partition_count=1),
                                        return_exceptions=True)
        assert sum(isinstance(o, IdempotencyKeyInUseError) for o in outcomes) == 1
    run(go())


def test_a_failed_write_keeps_the_answer_in_memory(clock: ManualClock) -> None:
    async def go() -> None:
        log = MemoryLog()
        c = _coordinator(log, clock)
        claim = await c.claim(b"k", FP, partition_count=1)
        await c.complete(b"k", claim.producer_id, encode_results(RESULTS))
        log.fail_next = NotEnoughReplicasError("isr")
        await c.flush()  # logged, not raised
        assert not log.records
        again = await c.claim(b"k", FP, partition_count=1)
        assert again.results is not None
    run(go())


def test_a_key_keeps_its_producer_id_and_a_new_epoch_after_expiry(clock: ManualClock) -> None:
    """The producer id comes from the key (a coordinator that never saw the claim makes
    the same one); a key claimed again after it expired gets the next epoch, so old
    batches still in a partition's producer state are not taken for the new request's."""
    async def go() -> None:
        c = _coordinator(MemoryLog(), clock)
        first = await c.claim(b"k", FP, partition_count=1)
        other = _coordinator(MemoryLog(), clock)
        assert (await other.claim(b"k", FP, partition_count=1)).producer_id == \
            first.producer_id
        clock.advance(RETENTION)
        c.expire_all()
        again = await c.claim(b"k", b"g" * 16, partition_count=1)
        assert again.producer_id == first.producer_id
        assert again.producer_epoch == first.producer_epoch + 1
    run(go())


def test_colliding_producer_ids_are_moved_on() -> None:
    base = producer_id_for(3, b"a")
    assert producer_id_for(3, b"a", {base}) == base + 1
    assert producer_id_for(3, b"a", {base, base + 1}) == base + 2
    assert producer_id_for(2, b"a") != base


def test_a_new_leader_loads_claims_and_answers(clock: ManualClock) -> None:
    async def go() -> None:
        log = MemoryLog()
        c = _coordinator(log, clock)
        done = await c.claim(b"done", FP, partition_count=2)
        await c.complete(b"done", done.producer_id, encode_results(RESULTS))
        open_ = await c.claim(b"open", FP, partition_count=2)
        await c.flush()
        # another broker takes over the log (a new leader epoch): it loads from the log
        log.epochs = {p: 1 for p in range(4)}
        other = _coordinator(log, clock)
        assert (await other.claim(b"done", FP, partition_count=2)).results is not None
        with pytest.raises(IdempotencyKeyInUseError):  # its request may still run elsewhere
            await other.claim(b"open", FP, partition_count=2)
        clock.advance(CLAIM_TIMEOUT)
        assert (await other.claim(b"open", FP, partition_count=2)).producer_id == \
            open_.producer_id
        # the first coordinator, led again under a newer epoch, reloads: a resumption is
        # not in the log, so it may resume too, under the same producer id (what both
        # send is deduplicated by the partitions' producer state)
        log.epochs = {p: 2 for p in range(4)}
        assert (await c.claim(b"open", FP, partition_count=2)).producer_id == open_.producer_id
        with pytest.raises(IdempotencyKeyInUseError):
            await c.claim(b"open", FP, partition_count=2)
    run(go())


def test_not_the_leader(clock: ManualClock) -> None:
    async def go() -> None:
        log = MemoryLog()
        log.epochs = {p: -1 for p in range(4)}
        with pytest.raises(NotCoordinatorError):
            await _coordinator(log, clock).claim(b"k", FP, partition_count=1)
    run(go())


def test_keys_expire_after_retention(clock: ManualClock) -> None:
    async def go() -> None:
        c = _coordinator(MemoryLog(), clock)
        first = await c.claim(b"k", FP, partition_count=1)
        await c.complete(b"k", first.producer_id, encode_results(RESULTS))
        clock.advance(RETENTION)
        c.expire_all()
        fresh = await c.claim(b"k", b"g" * 16, partition_count=1)  # a new request now
        assert fresh.results is None and fresh.producer_epoch != first.producer_epoch
    run(go())


def test_an_unfinished_claim_past_the_producer_state_is_unknown(clock: ManualClock) -> None:
    async def go() -> None:
        c = _coordinator(MemoryLog(), clock)
        await c.claim(b"k", FP, partition_count=1)
        clock.advance(EXPIRATION)
        with pytest.raises(IdempotencyOutcomeUnknownError):
            await c.claim(b"k", FP, partition_count=1)
    run(go())


# --- the results a done record keeps ------------------------------------------------------


def _same(a: ProduceResults, b: ProduceResults) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.partition, x.offset, x.timestamp) == (y.partition, y.offset, y.timestamp)
        assert type(x.error) is type(y.error)
        assert (x.error and x.error.message) == (y.error and y.error.message)


@st.composite
def produce_results(draw: st.DrawFn) -> ProduceResults:
    n = draw(st.integers(1, 60))
    parts = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    failed = draw(st.sets(st.integers(0, n - 1), max_size=n))
    firsts = {p: draw(st.integers(0, 2**40)) for p in set(parts)}
    irregular = draw(st.booleans())
    offsets: list[int | None] = []
    partitions: list[int | None] = []
    seen: dict[int, int] = {}
    for i, p in enumerate(parts):
        if i in failed:
            offsets.append(None)
            partitions.append(None)
            continue
        rank = seen.get(p, 0)
        seen[p] = rank + 1
        offsets.append(firsts[p] + rank * (3 if irregular else 1))
        partitions.append(p)
    stamps = draw(st.one_of(st.none(), st.integers(0, 2**50),
                            st.lists(st.one_of(st.none(), st.integers(0, 2**50)),
                                     min_size=n, max_size=n)))
    errors = {i: MessageTooLargeError(f"record {i} is too large") for i in failed}
    return ProduceResults(partitions, offsets, stamps, errors)


@settings(max_examples=200, deadline=None)
@given(produce_results())
def test_results_round_trip(results: ProduceResults) -> None:
    _same(decode_results(encode_results(results)), results)


def test_one_partition_results_are_small() -> None:
    results = ProduceResults(3, range(10**9, 10**9 + 1000), 1_700_000_000_000)
    data = encode_results(results)
    assert len(data) < 80
    decoded = decode_results(data)
    assert decoded.contiguous and list(decoded) == list(results)


def test_bad_results_are_value_errors() -> None:
    for bad in (b"", b"{}", b'{"v":9}', b'{"v":1,"n":2,"p":"AAAA","f":{}}'):
        with pytest.raises(ValueError):
            decode_results(bad)


def test_answers_are_written_together(clock: ManualClock) -> None:
    async def go() -> None:
        log = MemoryLog()
        c = _coordinator(log, clock)
        keys = [b"k%d" % i for i in range(FLUSH_RECORDS * 3)]
        for k in keys:
            claim = await c.claim(k, FP, partition_count=1)
            await c.complete(k, claim.producer_id, encode_results(RESULTS))
        await c.flush()
        records = sum(len(v) for v in log.records.values())
        assert records == len(keys)  # a done record each (it holds the claim)
        # the records of a partition in a few batches, not one per request
        assert log.batches <= 4 * 4, log.batches
        fresh = _coordinator(log, clock)
        log.epochs = {p: 1 for p in range(4)}
        for k in keys:
            assert (await fresh.claim(k, FP, partition_count=1)).results is not None
    run(go())


def test_an_answer_lost_before_its_record_is_resumable(clock: ManualClock) -> None:
    """The broker stops (or loses the partition) before the done record is written: the
    next coordinator finds the claim unfinished and lets a retry resume it under the
    same producer id (the partitions' producer state then answers the same offsets)."""
    async def go() -> None:
        log = MemoryLog()
        c = _coordinator(log, clock)
        claim = await c.claim(b"k", FP, partition_count=1)
        await c.complete(b"k", claim.producer_id, encode_results(RESULTS))
        log.epochs = {p: 1 for p in range(4)}  # another leader, before the flush
        log.fail_next = NotLeaderOrFollowerError("moved")
        await c.flush()
        other = _coordinator(log, clock)
        clock.advance(CLAIM_TIMEOUT)
        resumed = await other.claim(b"k", FP, partition_count=1)
        assert resumed.results is None and resumed.producer_id == claim.producer_id
    run(go())


def test_new_keys_past_idempotency_keys_max_are_refused(clock: ManualClock) -> None:
    """A broker holds at most ``max_keys`` live keys (~300 bytes each): a client sending a
    new key per request could otherwise grow it without bound for a whole retention.
    Keys already held keep answering; expired ones make room."""
    async def go() -> None:
        c = IdempotencyCoordinator(MemoryLog(), clock, num_partitions=4,  # type: ignore[arg-type]
                                   retention_ms=RETENTION, claim_timeout_ms=CLAIM_TIMEOUT,
                                   producer_expiration_ms=EXPIRATION, append_timeout_ms=1000,
                                   max_keys=3)
        claims = [await c.claim(b"u\0k%d" % i, FP, partition_count=1) for i in range(3)]
        assert c.live_keys == 3
        with pytest.raises(IdempotencyKeysExhaustedError, match="idempotency.keys.max=3"):
            await c.claim(b"u\0k3", FP, partition_count=1)
        assert c.live_keys == 3  # nothing was taken for the refused key
        await c.complete(b"u\0k0", claims[0].producer_id, encode_results(RESULTS))
        again = await c.claim(b"u\0k0", FP, partition_count=1)  # a held key still answers
        assert again.results is not None
        clock.advance(RETENTION)
        fresh = await c.claim(b"u\0k3", FP, partition_count=1)  # the old keys expired
        assert fresh.results is None
        c.expire_all()
        assert c.live_keys == 1
    run(go())
