"""The keyed produce path in one pass (issue 18): the C extension's murmur2 and key grouping
against Kafka's values and the pure-Python partitioner, its batches byte for byte against
the Python builders (keys, null keys, headers, per-record timestamps, a subset of the
records), and the producer answering as Kafka would for mixed requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_partitioner import KAFKA_VECTORS  # Kafka's UtilsTest.testMurmur2 values

from app.assembly import build_broker
from app.settings import load_config
from core.broker.broker import Broker
from core.broker.produce import partitioner
from core.broker.produce.partitioner import key_partitions, murmur2, partition_for_key
from core.broker.types import ProduceColumns, ProduceRecord
from core.storage import codec, native
from core.storage.batch import BuiltBatch, set_producer
from core.storage.records import build_batch_at, decode_batch

needs_c = pytest.mark.skipif(not native.AVAILABLE, reason="C extension not built")

PYTHON_CODECS = [codec.PURE_PYTHON] + ([codec.AIOKAFKA] if codec.AIOKAFKA is not None else [])

headers_st = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=12)),
                      max_size=3)


@needs_c
@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_c_murmur2_gives_kafkas_values(key: bytes, expected: int) -> None:
    assert native.murmur2(key) == expected
    for n in (1, 3, 8, 1000):
        assert partition_for_key(key, n) == (expected & 0x7FFFFFFF) % n


@needs_c
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_c_murmur2_equals_the_python_one(key: bytes) -> None:
    assert native.murmur2(key) == murmur2(key)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=20), max_size=60), st.integers(1, 40))
def test_key_partitions_groups_in_order_as_kafkas_partitioner(
        keys: list[bytes | None], n: int) -> None:
    got = key_partitions(keys, n)
    expected: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        expected.setdefault(-1 if k is None else (murmur2(k) & 0x7FFFFFFF) % n, []).append(i)
    assert got == expected
    assert list(got) == list(expected)  # partitions in order of first appearance
    assert key_partitions(tuple(keys), n) == expected  # not a list: the Python path


def test_key_partitions_of_a_large_request_many_partitions() -> None:
    # past the C extension's cache of index ints (16,384), over 10,000 partitions
    keys = [None if i % 97 == 0 else b"k%d" % (i * 7919) for i in range(20_000)]
    expected: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        expected.setdefault(-1 if k is None else (murmur2(k) & 0x7FFFFFFF) % 10_007,
                            []).append(i)
    got = key_partitions(keys, 10_007)
    assert got == expected and list(got) == list(expected)


def test_key_partitions_without_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [b"a", None, b"foobar", b"a"]
    with_c = key_partitions(keys, 7)
    monkeypatch.setattr(partitioner.native, "_native", None)
    assert key_partitions(keys, 7) == with_c
    assert partition_for_key(b"foobar", 10) == 6


def _python_batch(values, keys, headers, stamps, now, idxs, codec_: object) -> bytearray:
    builder = codec_.new_builder(compression=codec.NONE)  # type: ignore[attr-defined]
    for j, i in enumerate(idxs):
        ts = now if stamps is None or stamps[i] is None else stamps[i]
        builder.append(j, ts, None if keys is None else keys[i], values[i],
                       [] if headers is None else headers[i])
    return builder.build()


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_c_batches_equal_the_python_builders_byte_for_byte(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 30))
    values = data.draw(st.lists(st.none() | st.binary(max_size=200), min_size=n, max_size=n))
    keys = data.draw(st.none() | st.lists(st.none() | st.binary(max_size=20),
                                          min_size=n, max_size=n))
    headers = data.draw(st.none() | st.lists(headers_st, min_size=n, max_size=n))
    stamps = data.draw(st.none() | st.lists(st.none() | st.integers(0, 2**62),
                                            min_size=n, max_size=n))
    now = data.draw(st.integers(0, 2**45))
    idxs = data.draw(st.just(range(n)) | st.lists(st.integers(0, n - 1), min_size=1)
                     .map(sorted))
    producer = data.draw(st.none() | st.tuples(st.integers(0, 2**63 - 1),
                                               st.integers(0, 2**15 - 1),
                                               st.integers(0, 2**31 - 1)))
    got = build_batch_at(values, keys, headers, stamps, now, idxs, max_bytes=2**31,
                         **({} if producer is None else {"producer": producer}))
    assert got is not None
    assert type(got) is BuiltBatch
    for c in PYTHON_CODECS:
        expected = _python_batch(values, keys, headers, stamps, now, idxs, c)
        if producer is not None:
            set_producer(expected, *producer)
        assert got == expected, c.name
    records = decode_batch(bytes(got))
    assert [r.value for r in records] == [values[i] for i in idxs]


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_c_crc32c_is_the_batch_crc(data: bytes) -> None:
    assert native._native.crc32c(data) == codec.crc32c(data)


@needs_c
def test_c_batch_declines_what_it_cannot_judge() -> None:
    values = [b"a", b"b"]
    assert build_batch_at(values, [b"k", "k"], None, None, 0, range(2), max_bytes=1 << 20) is None
    assert build_batch_at(values, None, [[("h", "text")], []], None, 0, range(2),
                          max_bytes=1 << 20) is None
    assert build_batch_at(values, None, None, [1, 2**63], 0, range(2), max_bytes=1 << 20) is None
    assert build_batch_at(values, None, None, None, 0, range(2), max_bytes=70) is None  # too big
    assert build_batch_at(values, None, None, None, 0, range(2), max_bytes=200) is not None


@needs_c
@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=300), min_size=1, max_size=30), headers_st,
       st.sampled_from(sorted(codec.CODEC_NAMES)))
def test_compressed_batches_with_headers_hold_the_same_records(
        values: list[bytes | None], headers: list, compression: int) -> None:
    hs = [headers] * len(values)
    got = native.encode_batch(values, values, 77, compression, headers=hs)
    builder = codec.new_batch_builder(compression=compression)
    for i, v in enumerate(values):
        builder.append(i, 77, v, v, headers)
    assert got is not None
    assert decode_batch(bytes(got)) == decode_batch(bytes(builder.build()))


# --- the producer ---------------------------------------------------------------------------


@pytest.fixture
async def broker(tmp_path: Path):
    b = await build_broker(load_config(overrides={
        "log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1}, environ={}))
    await b.start()
    yield b
    await b.stop()


async def _read_all(broker: Broker, topic: str, partitions: int) -> dict[int, list]:
    out = {}
    for p in range(partitions):
        out[p] = (await broker.fetch(topic, p, 0, max_bytes=1 << 24)).records
    return out


async def test_keyed_request_lands_per_key_with_headers_and_timestamps(broker: Broker) -> None:
    await broker.create_topic("k", partitions=8)
    n = 500
    keys = [f"key-{i % 97}".encode() for i in range(n)]
    cols = ProduceColumns([f"v{i}".encode() for i in range(n)], keys,
                          [[("h", str(i).encode())] for i in range(n)],
                          [1000 + i if i % 3 else None for i in range(n)])
    results = await broker.produce("k", cols)
    logs = await _read_all(broker, "k", 8)
    for i, r in enumerate(results):
        assert r.error is None
        assert r.partition == partition_for_key(keys[i], 8)
        rec = logs[r.partition][r.offset]
        assert (rec.key, rec.value, rec.headers) == (keys[i], f"v{i}".encode(),
                                                     [("h", str(i).encode())])
        if i % 3:
            assert rec.timestamp == r.timestamp == 1000 + i
    # each partition's records keep the request's order
    for p, recs in logs.items():
        mine = [i for i, k in enumerate(keys) if partition_for_key(k, 8) == p]
        assert [rec.value for rec in recs] == [f"v{i}".encode() for i in mine]


async def test_null_keys_explicit_partitions_and_keys_mixed(broker: Broker) -> None:
    await broker.create_topic("m", partitions=4)
    records = [ProduceRecord(b"0", key=b"foobar"), ProduceRecord(b"1"),
               ProduceRecord(b"2", key=b"abc", partition=3), ProduceRecord(b"3"),
               ProduceRecord(b"4", key=b"21")]
    results = await broker.produce("m", records)
    assert results[0].partition == partition_for_key(b"foobar", 4)
    assert results[2].partition == 3
    assert results[4].partition == partition_for_key(b"21", 4)
    assert results[1].partition == results[3].partition  # unkeyed: one partition a request
    logs = await _read_all(broker, "m", 4)
    for r, rec in zip(results, records, strict=True):
        assert logs[r.partition][r.offset].value == rec.value
    # null keys beside keys (no explicit partition): the C grouping path, merged in order
    cols = ProduceColumns([b"a", b"b", b"c", b"d"], [None, b"foobar", None, b"abc"])
    res = await broker.produce("m", cols)
    assert res[1].partition == partition_for_key(b"foobar", 4)
    assert res[3].partition == partition_for_key(b"abc", 4)
    assert res[0].partition == res[2].partition
    assert res[2].offset > res[0].offset
    logs = await _read_all(broker, "m", 4)
    for r, v in zip(res, (b"a", b"b", b"c", b"d"), strict=True):
        assert logs[r.partition][r.offset].value == v


async def test_keyed_records_over_max_message_bytes_split_and_fail_alone(tmp_path: Path) -> None:
    b = await build_broker(load_config(overrides={
        "log.dirs": str(tmp_path / "d"), "offsets.topic.num.partitions": 1}, environ={}))
    await b.start()
    try:
        await b.create_topic("s", partitions=2, configs={"max.message.bytes": "4000"})
        keys = [b"x" if i % 2 else b"foobar" for i in range(40)]
        values = [b"v" * (5000 if i == 7 else 300) for i in range(40)]
        results = await b.produce("s", ProduceColumns(values, keys,
                                                      [[("h", b"1")]] * 40, None))
        assert results[7].error is not None  # too large alone
        ok = [r for i, r in enumerate(results) if i != 7]
        assert all(r.error is None for r in ok)
        logs = await _read_all(b, "s", 2)
        for i, r in enumerate(results):
            if i != 7:
                assert logs[r.partition][r.offset].value == values[i]
    finally:
        await b.stop()


async def test_without_the_extension_the_answers_are_the_same(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    await broker.create_topic("c", partitions=5)
    await broker.create_topic("py", partitions=5)
    keys = [None if i % 7 == 0 else f"k{i % 13}".encode() for i in range(200)]
    cols = ProduceColumns([f"v{i}".encode() for i in range(200)], keys,
                          [[("h", b"x")] if i % 2 else [] for i in range(200)], None)
    with_c = await broker.produce("c", cols)
    monkeypatch.setattr(native, "_native", None)
    without = await broker.produce("py", cols)
    # keyed records land alike; the unkeyed ones share one partition a request (the
    # rotation starts anywhere per topic, so which one may differ)
    for a, b, k in zip(with_c, without, keys, strict=True):
        assert a.error is None and b.error is None
        if k is not None:
            assert a.partition == b.partition == partition_for_key(k, 5)
    assert len({r.partition for r, k in zip(without, keys, strict=True) if k is None}) == 1
    logs_c, logs_py = await _read_all(broker, "c", 5), await _read_all(broker, "py", 5)
    for res, logs in ((with_c, logs_c), (without, logs_py)):
        for i, r in enumerate(res):
            rec = logs[r.partition][r.offset]
            assert (rec.key, rec.value) == (keys[i], f"v{i}".encode())
