"""``validate_untrusted_records``: appends built outside this process (the internal API)
are decoded record by record before anything is written, so a CRC-valid batch whose
records do not parse can never reach a log and make it unreadable."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import codec, native
from core.storage.batch import BatchHeader, assemble_batch, compute_crc, patch_base_offset
from core.storage.config import LogConfig
from core.storage.errors import CorruptRecordError, InvalidRecordError
from core.storage.log import PartitionLog
from core.storage.log_validator import validate_untrusted_records
from core.storage.records import NewRecord, build_batch, decode_records

NOW = 1_700_000_000_000
KEY_LENGTH_AT = 61 + 4  # first record: length, attributes, timestamp and offset deltas
CODECS = [c for c in (codec.AIOKAFKA, codec.PURE_PYTHON) if c is not None]


CHECKERS = (["native"] if native.AVAILABLE else []) + CODECS


@pytest.fixture(params=CHECKERS, ids=lambda c: c if isinstance(c, str) else c.name)
def with_codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test with the C checker (one pass, ``native.record_fault``) and, as a
    machine without the extension runs, with each record-batch codec's decoder."""
    if request.param != "native":
        monkeypatch.setattr(native, "AVAILABLE", False)
        monkeypatch.setattr(codec, "iter_batch_records", request.param.iter_records)
    yield


def varint(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


def record(*fields: bytes) -> bytes:
    """One record of a records section: its length varint, then ``fields``."""
    body = b"".join(fields)
    return varint(len(body)) + body


def batch_of(*records: bytes, count: int | None = None) -> bytearray:
    """A CRC-valid uncompressed batch of hand-made ``records``."""
    n = len(records) if count is None else count
    return assemble_batch(
        BatchHeader(0, 0, -1, 2, 0, 0, n - 1, NOW, NOW, -1, -1, -1, n), b"".join(records)
    )


def good_batch(n: int = 3, compression: int = codec.NONE) -> bytearray:
    return build_batch(
        [NewRecord(f"v{i}".encode(), key=b"k", headers=[("h", b"1")]) for i in range(n)],
        now_ms=NOW, compression=compression,
    )  # fmt: skip


def with_bad_key_length() -> bytearray:
    """A valid batch whose first record's key length varint claims 63 bytes, CRC fixed."""
    buf = good_batch()
    assert buf[KEY_LENGTH_AT] == 0x02  # varint 1: the key b"k"
    buf[KEY_LENGTH_AT] = 0x7E
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return buf


A, T0, K, V = b"\x00", varint(0), varint(1) + b"k", varint(1) + b"v"

MALFORMED = {
    "key length past the record": with_bad_key_length(),
    "record length past the batch": batch_of(varint(50) + record(A, T0, T0, K, V, T0)[1:]),
    "more records counted than written": batch_of(record(A, T0, T0, K, V, T0), count=2),
    "negative header count": batch_of(record(A, T0, T0, K, V, varint(-1))),
    "header count past the record": batch_of(record(A, T0, T0, K, V, varint(5))),
    "header key not UTF-8": batch_of(
        record(A, T0, T0, K, V, varint(1), varint(1) + b"\xff", varint(-1))),
    "bytes after the last record": batch_of(record(A, T0, T0, K, V, T0) + b"\x00\x00"),
}


@pytest.mark.usefixtures("with_codec")
def test_well_formed_batches_pass() -> None:
    for compression in (codec.NONE, codec.GZIP, codec.LZ4, codec.ZSTD, codec.SNAPPY):
        second = good_batch(2, compression)
        patch_base_offset(second, 0, 3)  # base offsets are the sender's; deltas count
        validate_untrusted_records(good_batch(3, compression) + second, where="t-0")
    validate_untrusted_records(batch_of(record(A, T0, T0, varint(-1), varint(-1), T0)),
                               where="t-0")  # null key and value  # fmt: skip


@pytest.mark.usefixtures("with_codec")
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_records_are_refused(name: str) -> None:
    with pytest.raises(CorruptRecordError):
        validate_untrusted_records(good_batch() + MALFORMED[name], where="t-0")


@pytest.mark.skipif(not native.AVAILABLE, reason="the C reader is not built")
def test_null_lengths_below_minus_one_are_refused() -> None:
    # the codecs read a key length of -5 as null; the C reader of reads refuses it
    bad = batch_of(record(A, T0, T0, varint(-5), V, T0))
    with pytest.raises(CorruptRecordError, match="record 0"):
        validate_untrusted_records(bad, where="t-0")


@pytest.mark.usefixtures("with_codec")
def test_offset_deltas_must_count_up_from_zero() -> None:
    bad = batch_of(record(A, T0, T0, K, V, T0), record(A, T0, varint(5), K, V, T0))
    with pytest.raises(InvalidRecordError, match="record 1 .* offset delta 5"):
        validate_untrusted_records(bad, where="t-0")


def test_bad_crc_and_partial_batches_are_refused() -> None:
    bad_crc = good_batch()
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_untrusted_records(bad_crc, where="t-0")
    with pytest.raises(CorruptRecordError, match="trailing"):
        validate_untrusted_records(good_batch()[:-3], where="t-0")


def test_a_refused_batch_is_one_the_log_would_have_taken(tmp_path: Path) -> None:
    """Why the check exists: the log checks batches by their headers and CRC only, so
    without it the malformed record is written and every later read of it fails."""
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock=ManualClock(NOW))
    plog.append_as_leader(with_bad_key_length(), leader_epoch=0)
    with pytest.raises(CorruptRecordError):
        decode_records(plog.read(0, 1 << 20).data)
    plog.close()


@pytest.mark.skipif(not native.AVAILABLE, reason="the C checker is not built")
@pytest.mark.parametrize("seed", range(3))
def test_the_c_checker_agrees_with_the_decoders_on_damaged_batches(seed: int) -> None:
    """Every byte of a batch with headers, keys and null values damaged in turn (CRC
    fixed, so the records are what is judged): the one-pass C checker refuses exactly
    the batches the decoders cannot read, read differently, or whose deltas are out of
    sequence (aiokafka's reads a record attributes byte >= 0x80 as a varint)."""
    import random

    rng = random.Random(seed)
    base = build_batch([NewRecord(None if i % 3 == 0 else b"v" * rng.randrange(0, 200),
                                  key=None if i == 2 else f"k{i}".encode(),
                                  headers=[("h\u00e9", b"x"), ("n", None)][: i % 3])
                        for i in range(6)], now_ms=NOW)
    for at in range(61, len(base)):
        damaged = bytearray(base)
        damaged[at] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, damaged[at] ^ 0x40))
        struct.pack_into(">I", damaged, 17, compute_crc(damaged, 0, len(damaged)))
        h = BatchHeader(*struct.unpack_from(">qiibIhiqqqhii", damaged))
        fault = native.record_fault(damaged, h)
        try:  # readable: every decoder reads the same records, deltas in sequence
            rows = [list(c.iter_records(bytes(damaged))) for c in CODECS]
            native.record_sizes(bytes(damaged), h)  # what readers' C reader refuses
            readable = all(r == rows[0] for r in rows) and [
                row[0] for row in rows[0]] == list(range(len(rows[0])))
        except CorruptRecordError:
            readable = False
        assert (fault is None) == readable, (at, damaged[at], fault)
        with pytest.MonkeyPatch.context() as mp:  # the fallback without the extension
            mp.setattr(native, "AVAILABLE", False)
            try:
                validate_untrusted_records(damaged, where="t-0")
                fallback_readable = True
            except (CorruptRecordError, InvalidRecordError):
                fallback_readable = False
        # without the extension nothing refuses lengths below -1 (the codecs read them
        # as null, and so do readers then): the fallback takes what the C checker
        # takes, and never a batch two codecs read differently
        assert fallback_readable or not readable, (at, damaged[at])
        if fallback_readable:
            rows = [list(c.iter_records(bytes(damaged))) for c in CODECS]
            assert all(r == rows[0] for r in rows), (at, damaged[at])


def test_checked_batches_are_appended_without_a_second_crc(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``validate_untrusted_records`` answers is appended as checked: the log reads
    its CRC once (in the check), yet still refuses what the topic's config refuses."""
    from core.storage import log_validator

    checked = validate_untrusted_records(good_batch(3) + good_batch(2), where="t-0")
    calls = []
    real = log_validator.is_crc_valid
    monkeypatch.setattr(log_validator, "is_crc_valid",
                        lambda *a: calls.append(a) or real(*a))
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock=ManualClock(NOW))
    info = plog.append_as_leader(checked, leader_epoch=0)
    assert (info.first_offset, info.last_offset, calls) == (0, 4, [])
    assert [r.value for r in decode_records(plog.read(0, 1 << 20).data)] == [
        b"v0", b"v1", b"v2", b"v0", b"v1"]
    compacted = PartitionLog.open(tmp_path / "c-0", LogConfig(cleanup_policy=("compact",)),
                                  clock=ManualClock(NOW))
    unkeyed = build_batch([NewRecord(b"v")], now_ms=NOW)
    with pytest.raises(InvalidRecordError, match="without a key"):
        compacted.append_as_leader(validate_untrusted_records(unkeyed, where="c-0"),
                                   leader_epoch=0)
    assert compacted.log_end_offset == 0
    plog.close()
    compacted.close()


@pytest.mark.usefixtures("with_codec")
@pytest.mark.parametrize("compression", [codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD],
                         ids=lambda c: codec.CODEC_NAMES[c])
def test_a_batch_that_inflates_past_the_bound_is_refused(
        compression: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decompression bomb: a few KiB of a client's compressed batch holding MiBs of
    records is refused before it takes the memory (the bound lowered to 1 MiB here);
    a batch just within the bound passes."""
    monkeypatch.setattr(native, "MAX_DECOMPRESSED_BYTES", 1 << 20)

    def one_record_of(n: int) -> bytearray:
        body = record(A, T0, T0, varint(-1), varint(n) + bytes(n), T0)
        return assemble_batch(BatchHeader(0, 0, -1, 2, 0, compression, 0, NOW, NOW, -1, -1,
                                          -1, 1), codec.compress(compression, body))

    bomb = one_record_of(3 << 20)
    assert len(bomb) < 200_000
    with pytest.raises(CorruptRecordError, match="decompress"):
        validate_untrusted_records(bomb, where="t-0")
    validate_untrusted_records(one_record_of((1 << 20) - 64), where="t-0")
