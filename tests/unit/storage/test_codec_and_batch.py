"""The codec wrapper and the v2 batch header: byte-exact against Kafka's format."""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.storage import codec
from core.storage.batch import (
    HEADER_SIZE,
    is_crc_valid,
    iter_batches,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    split_batches,
)
from core.storage.errors import CorruptRecordError
from core.storage.records import NewRecord, build_batch, decode_batch, decode_records

CODECS = [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD]


def test_crc32c_known_vector() -> None:
    # RFC 3720 test vector: 32 bytes of zeros.
    assert codec.crc32c(bytes(32)) == 0x8A9136AA
    assert codec.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("cid", CODECS)
@given(data=st.binary(max_size=100_000))
@settings(max_examples=25, deadline=None)
def test_compression_round_trip(cid: int, data: bytes) -> None:
    assert codec.decompress(cid, codec.compress(cid, data)) == data


def test_snappy_uses_xerial_framing_and_reads_raw() -> None:
    data = b"abc" * 50_000  # > one 32 KiB xerial block
    framed = codec.compress(codec.SNAPPY, data)
    assert framed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", framed[8:16]) == (1, 1)
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(data))
    assert codec.decompress(codec.SNAPPY, raw) == data


def test_gzip_is_a_plain_gzip_stream() -> None:
    assert gzip.decompress(codec.compress(codec.GZIP, b"hello")) == b"hello"


@pytest.mark.parametrize("cid", [codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD])
def test_garbage_compressed_data_is_a_corrupt_record(cid: int) -> None:
    with pytest.raises(CorruptRecordError):
        codec.decompress(cid, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\x7fgarbage"
                         if cid == codec.SNAPPY else b"definitely not compressed")


def test_worked_example_bytes_match_kafka() -> None:
    # kafka-internals 1.4: key b"k", value b"v", deltas 0, no headers.
    batch = build_batch([NewRecord(b"v", key=b"k", timestamp=0)], now_ms=0)
    assert len(batch) == 70
    h = parse_header(batch)
    assert h.batch_length == 58 and h.magic == 2 and h.records_count == 1
    assert bytes(batch[HEADER_SIZE:]) == bytes.fromhex("10 00 00 00 02 6b 02 76 00")
    assert is_crc_valid(batch, 0, h)


@pytest.mark.parametrize("cid", CODECS)
def test_batch_round_trip_every_codec(cid: int) -> None:
    recs = [NewRecord(f"value-{i}".encode() * 10, key=None if i % 3 else f"k{i}".encode(),
                      headers=[("h", b"x"), ("null", None)] if i % 2 else [], timestamp=1000 + i)
            for i in range(200)]
    batch = build_batch(recs, now_ms=0, compression=cid)
    h = parse_header(batch)
    assert h.compression == cid and h.records_count == 200 and h.last_offset_delta == 199
    out = decode_batch(batch)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in out] == [
        (i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(recs)]


def test_patching_offsets_and_epoch_keeps_crc_valid() -> None:
    batch = build_batch([NewRecord(b"a"), NewRecord(b"b")], now_ms=5)
    patch_base_offset(batch, 0, 1_000_000)
    patch_leader_epoch(batch, 0, 7)
    h = parse_header(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1_000_000, 7, 1_000_001)
    assert is_crc_valid(batch, 0, h)
    assert [r.offset for r in decode_batch(batch)] == [1_000_000, 1_000_001]


def test_log_append_time_rewrites_crc_and_record_timestamps() -> None:
    batch = build_batch([NewRecord(b"a", timestamp=1), NewRecord(b"b", timestamp=2)], now_ms=0)
    set_log_append_time(batch, 0, parse_header(batch), 99_999)
    h = parse_header(batch)
    assert h.timestamp_type == 1 and h.max_timestamp == 99_999 and is_crc_valid(batch, 0, h)
    assert [r.timestamp for r in decode_batch(batch)] == [99_999, 99_999]


def test_framing_stops_at_partial_tail_and_split_rejects_it() -> None:
    a = build_batch([NewRecord(b"a")], now_ms=0)
    b = build_batch([NewRecord(b"b")], now_ms=0)
    data = bytes(a + b)
    assert [pos for pos, _ in iter_batches(data)] == [0, len(a)]
    cut = data[:-5]
    assert [pos for pos, _ in iter_batches(cut)] == [0]
    with pytest.raises(CorruptRecordError):
        split_batches(cut)
    assert len(decode_records(cut)) == 1  # a fetch may end with a partial batch


def test_bad_headers_are_corrupt() -> None:
    batch = build_batch([NewRecord(b"a")], now_ms=0)
    bad_magic = bytearray(batch)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError):
        parse_header(bad_magic)
    short = bytearray(batch)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(CorruptRecordError):
        parse_header(short)
    flipped = bytearray(batch)
    flipped[-1] ^= 0xFF
    assert not is_crc_valid(flipped, 0, parse_header(flipped))
