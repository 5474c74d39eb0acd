"""Per-batch renderings and the batch cache answer exactly what the per-record paths do."""

from __future__ import annotations

import random

import orjson

from api.render_cache import RenderCache
from api.v2.embedded import binary_fragments, render_binary, render_binary_chunks
from core.broker.consumer.fetch import _Read
from core.broker.replica.batch_cache import BatchCache, FetchResult, iter_records
from core.broker.types import TopicPartition
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
    renderings = RenderCache()
    assert render_binary_chunks(renderings, [(TP, b, lo, hi) for b, lo, hi in chunks]) == expected
    assert len(renderings) == len(chunks)
    # the second time from the cache: the same batch objects, rendered already
    chunks = cache.chunks(TP.topic, TP.partition, data, min_offset=0, max_offset=None)
    assert cache.hits == len(chunks)
    assert render_binary_chunks(renderings, [(TP, b, lo, hi) for b, lo, hi in chunks]) == expected
    assert len(renderings) == len(chunks)


def test_renderings_go_with_their_batch() -> None:
    """A rendering lives as long as the core keeps its batch: evicted batches take
    their renderings with them, so the API's memory follows the cache's budget."""
    rng = random.Random(4)
    data, _ = _batches(rng)
    cache = BatchCache(max_bytes=20_000)  # holds a few batches only
    renderings = RenderCache()
    for _ in range(3):
        for b, lo, hi in cache.chunks(TP.topic, TP.partition, data, min_offset=0,
                                      max_offset=None):
            render_binary_chunks(renderings, [(TP, b, lo, hi)])
    assert 0 < len(renderings) <= len(cache._lru) + 1  # the last batch may be uncached


def test_chunks_equal_decode_records_for_every_range() -> None:
    rng = random.Random(2)
    data, offsets = _batches(rng)
    cache = BatchCache(max_bytes=50_000)  # small: entries are evicted along the way
    for _ in range(200):
        lo = rng.randint(0, offsets[-1] + 2)
        hi = rng.choice([None, rng.randint(lo, offsets[-1] + 3)])
        got = iter_records(cache.chunks(TP.topic, TP.partition, data, min_offset=lo,
                                        max_offset=hi))
        assert list(got) == decode_records(data, min_offset=lo, max_offset=hi)
    assert cache.nbytes <= 50_000


def _expected_take(records: list, pos: int, max_bytes: int, used: int, count: int):  # noqa: ANN001, ANN202
    """The rule, record by record: from ``pos``, records while their key + value bytes
    fit in what is left of ``max_bytes``, but the first record of a read always."""
    taken = []
    for r in records:
        if r.offset < pos:
            continue
        size = len(r.key or b"") + len(r.value or b"")
        if (count or taken) and used + size > max_bytes:
            return taken, used, True
        taken.append(r)
        used += size
    return taken, used, False


def test_take_cuts_batches_as_the_record_by_record_rule() -> None:
    rng = random.Random(3)
    data, offsets = _batches(rng)
    records = decode_records(data)
    cache = BatchCache()
    for _ in range(300):
        pos = rng.randint(offsets[0], offsets[-1] + 1)
        max_bytes = rng.choice([1, 5, 17, 60, 200, 10_000])
        prefill = rng.choice([0, 0, 3])  # records of another partition read before
        res = cache.fetch_result(TP.topic, TP.partition, pos, _FetchData(data),
                                 high_watermark=offsets[-1] + 1, log_start_offset=0)
        assert isinstance(res, FetchResult)
        read = _Read(None, {TP: pos}, max_bytes=max_bytes, min_bytes=1,  # type: ignore[arg-type]
                     reset=_no_reset)
        used = sum(len(r.value or b"") for r in records[:prefill])
        read.out.count, read.out.size = prefill, used
        read.take(TP, res)
        taken, size, full = _expected_take(records, pos, max_bytes, used, prefill)
        out = read.out
        got = [r for _tp, b, lo, hi in out.chunks for r in b.records[lo:hi]]
        assert got == taken
        assert (out.count, out.size, out.full) == (prefill + len(taken), size, full)
        after_taken = taken[-1].offset + 1 if taken else pos
        assert out.positions[TP] == (after_taken if full else offsets[-1] + 1)


class _FetchData:
    def __init__(self, data: bytes) -> None:
        self.data, self.high_offset = data, 1 << 62


async def _no_reset(tp: TopicPartition) -> int:
    raise AssertionError("no reset expected")
