"""Per-batch renderings and the batch cache answer exactly what the per-record paths do."""

from __future__ import annotations

import random

import orjson

from api.v2.embedded import binary_fragments, render_binary, render_binary_chunks
from core.broker.consumer.fetch import _Read
from core.broker.replica.batch_cache import BatchCache, FetchedRecords
from core.broker.types import FetchResult, TopicPartition
from core.storage.batch import parse_header, patch_base_offset, set_log_append_time
from core.storage.records import NewRecord, build_batch, decode_records

TP = TopicPartition('t"%s\\x', 3)


def _batches(rng: random.Random) -> tuple[bytes, list[int]]:
    """Several batches of mixed shapes at consecutive offsets."""
    data = bytearray()
    base = 7
    shapes = ["plain", "keyed", "mixed", "headers", "nulls", "logappend", "logappend_plain"]
    for shape in shapes * 2:
        n = rng.randint(1, 40)
        recs = []
        for i in range(n):
            v = bytes(rng.randrange(256) for _ in range(rng.randint(0, 30)))
            k = bytes(rng.randrange(256) for _ in range(rng.randint(0, 5)))
            if shape == "plain":
                recs.append(NewRecord(v, timestamp=1000 + i))
            elif shape == "keyed":
                recs.append(NewRecord(v, key=k, timestamp=1000 + i))
            elif shape == "mixed":
                recs.append(NewRecord(v, key=k if i % 2 else None))
            elif shape == "logappend_plain":
                recs.append(NewRecord(v, timestamp=1000 + i))
            elif shape == "logappend":
                recs.append(NewRecord(v, key=k if i % 4 else None, timestamp=1000 + i))
            elif shape == "headers":
                recs.append(NewRecord(v, key=k, headers=[("h%", v), ("n", None)] if i % 3 else []))
            else:
                recs.append(NewRecord(None if i % 2 else v, key=None))
        buf = build_batch(recs, now_ms=5)
        patch_base_offset(buf, 0, base)
        if shape.startswith("logappend"):
            set_log_append_time(buf, 0, parse_header(buf, 0), 777)
        base += n
        data += buf
    return bytes(data), list(range(7, base))


def test_fragments_equal_orjson_of_render_binary() -> None:
    rng = random.Random(1)
    data, _ = _batches(rng)
    records = decode_records(data)
    items = [(TP, r) for r in records]
    expected = orjson.dumps(render_binary(items))
    assert b'"timestamp":777,"timestamp_type":"LogAppendTime"' in expected
    assert b"[" + b",".join(binary_fragments(TP.topic, TP.partition, records)) + b"]" == expected
    cache = BatchCache()
    chunks = cache.chunks(TP.topic, TP.partition, data, min_offset=0, max_offset=None)
    assert render_binary_chunks([(TP, b, lo, hi) for b, lo, hi in chunks]) == expected
    # the second time from the cache
    chunks = cache.chunks(TP.topic, TP.partition, data, min_offset=0, max_offset=None)
    assert cache.hits == len(chunks)
    assert render_binary_chunks([(TP, b, lo, hi) for b, lo, hi in chunks]) == expected


def test_chunks_equal_decode_records_for_every_range() -> None:
    rng = random.Random(2)
    data, offsets = _batches(rng)
    cache = BatchCache(max_bytes=50_000)  # small: entries are evicted along the way
    for _ in range(200):
        lo = rng.randint(0, offsets[-1] + 2)
        hi = rng.choice([None, rng.randint(lo, offsets[-1] + 3)])
        got = FetchedRecords(cache.chunks(TP.topic, TP.partition, data, min_offset=lo,
                                          max_offset=hi))
        assert list(got) == decode_records(data, min_offset=lo, max_offset=hi)
    assert cache.nbytes <= 50_000


async def _no_reset(tp: TopicPartition) -> int:
    raise AssertionError


def test_take_by_chunks_equals_take_by_records() -> None:
    """The same read three ways: per record, per cached batch range, and per range with
    the records left undecoded (``decode=False``)."""
    rng = random.Random(3)
    data, offsets = _batches(rng)
    cache = BatchCache()
    for _ in range(300):
        pos = rng.randint(offsets[0], offsets[-1] + 1)
        max_bytes = rng.choice([1, 5, 17, 60, 200, 10_000])
        prefill = rng.choice([0, 0, 3])
        chunks = cache.chunks(TP.topic, TP.partition, data, min_offset=pos, max_offset=None)
        fetched = FetchedRecords(chunks)
        plain = list(fetched)
        lazy = FetchedRecords(chunks, decode=False)
        assert not lazy and lazy.count == len(plain)
        reads = []
        for recs, decode in ((fetched, True), (plain, True), (lazy, False)):
            read = _Read(None, {TP: pos}, max_bytes=max_bytes, min_bytes=1,  # type: ignore[arg-type]
                         reset=_no_reset, decode=decode)
            other = TopicPartition("o", 0)
            for r in decode_records(data)[:prefill]:  # records of another partition first
                read.out.records.append((other, r))
                read.out.count += 1
                read.out.size += len(r.value or b"")
            next_offset = plain[-1].offset + 1 if plain else pos
            read.take(TP, FetchResult(TP.topic, TP.partition, offsets[-1] + 1, 0, recs,
                                      next_offset))
            reads.append(read.out)
        a, b, c = reads
        assert (a.records, a.positions, a.size, a.full, a.count) == (
            b.records, b.positions, b.size, b.full, b.count)
        assert (c.positions, c.size, c.full, c.count, c.chunks) == (
            a.positions, a.size, a.full, a.count, a.chunks)
        if not prefill:
            assert a.chunks is not None
            assert [(tp, r) for tp, bt, lo, hi in a.chunks for r in bt.records[lo:hi]] == a.records
            assert c.records == []  # nothing decoded
