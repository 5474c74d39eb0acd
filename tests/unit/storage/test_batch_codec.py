"""The record-batch codecs (core.storage.batch_codec): aiokafka's public API and franz's
pure-Python one write the same batches for the same records, read each other's, turn
any garbage into CorruptRecordError, and the one in use follows FRANZ_PURE_PYTHON_CODEC."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.storage import batch_codec, codec
from core.storage.batch import HEADER_SIZE, is_crc_valid, parse_header, set_log_append_time
from core.storage.batch_codec import (
    PURE_PYTHON_ENV,
    RecordBatchCodec,
    RecordObject,
    select_codec,
    wants_pure_python,
)
from core.storage.errors import CorruptRecordError

ROOT = Path(__file__).resolve().parents[3]
PURE = codec.PURE_PYTHON
AIOKAFKA = codec.AIOKAFKA
CODECS = [c for c in (AIOKAFKA, PURE) if c is not None]
needs_aiokafka = pytest.mark.skipif(AIOKAFKA is None, reason="aiokafka's compiled codec missing")

blobs = st.none() | st.binary(max_size=80)
headers = st.lists(st.tuples(st.text(max_size=12), blobs), max_size=3)
# aiokafka's builder takes a first timestamp of exactly -1 for "no record yet" (see
# batch_codec's docstring), so -1 is left out here; the pure-Python builder's handling
# of it is tested on its own below.
timestamps = st.integers(-(2**40), 2**45).filter(lambda t: t != -1)
records = st.lists(st.tuples(st.integers(1, 3), timestamps, blobs, blobs, headers),
                   min_size=1, max_size=25)
producers = st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1),
                      st.integers(-1, 2**31 - 1), st.booleans())
compressions = st.sampled_from(sorted(codec.CODEC_NAMES))


def _build(c: RecordBatchCodec, rows: list[tuple], compression: int,
           producer: tuple[int, int, int, bool] = (-1, -1, -1, False)) -> bytes:
    pid, epoch, seq, transactional = producer
    builder = c.new_builder(compression=compression, producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=transactional)
    offset = -1
    for gap, ts, key, value, hdrs in rows:
        offset += gap
        builder.append(offset, ts, key, value, hdrs)
    return bytes(builder.build())


def _expected(rows: list[tuple]) -> list[tuple]:
    out, offset = [], -1
    for gap, ts, key, value, hdrs in rows:
        offset += gap
        out.append((offset, ts, 0, key, value, hdrs))
    return out


def _objects(c: RecordBatchCodec, raw: bytes) -> list[tuple]:
    objs = c.record_objects(raw)
    assert all(isinstance(o, RecordObject) for o in objs)
    return [(o.offset, o.timestamp, o.timestamp_type, o.key, o.value, o.headers) for o in objs]


def _decode(c: RecordBatchCodec, raw: bytes) -> list[tuple] | None:
    """The records, or None for CorruptRecordError (any other exception fails)."""
    try:
        rows = list(c.iter_records(raw))
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError):
            c.record_objects(raw)
        return None
    assert _objects(c, raw) == rows
    return rows


def test_both_follow_the_interface() -> None:
    for c in CODECS:
        assert isinstance(c, RecordBatchCodec)
    assert codec.CODEC in CODECS
    assert codec.new_batch_builder == codec.CODEC.new_builder


@needs_aiokafka
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, compressions, producers)
def test_same_records_same_batch(rows: list[tuple], compression: int,
                                 producer: tuple[int, int, int, bool]) -> None:
    theirs = _build(AIOKAFKA, rows, compression, producer)
    ours = _build(PURE, rows, compression, producer)
    if compression == codec.NONE:
        assert ours == theirs
    else:  # aiokafka compresses its own way (gzip level 9, timestamped; lz4 level 9)
        assert parse_header(ours)._replace(crc=0, batch_length=0) == parse_header(
            theirs)._replace(crc=0, batch_length=0)
    want = _expected(rows)
    for raw in (theirs, ours):
        assert is_crc_valid(raw, 0, parse_header(raw))
        assert _decode(AIOKAFKA, raw) == want
        assert _decode(PURE, raw) == want


@needs_aiokafka
@settings(max_examples=100, deadline=None)
@given(records, compressions, st.integers(0, 2**45))
def test_log_append_time_read_alike(rows: list[tuple], compression: int, now: int) -> None:
    raw = bytearray(_build(PURE, rows, compression))
    set_log_append_time(raw, 0, parse_header(raw), now)
    want = [(off, now, 1, k, v, h) for off, _ts, _tt, k, v, h in _expected(rows)]
    assert _decode(AIOKAFKA, bytes(raw)) == want
    assert _decode(PURE, bytes(raw)) == want


@needs_aiokafka
@pytest.mark.parametrize("compression", sorted(codec.CODEC_NAMES))
def test_same_empty_batch_and_sizes(compression: int) -> None:
    builders = [c.new_builder(compression=compression) for c in CODECS]
    assert [b.size() for b in builders] == [HEADER_SIZE] * 2
    for b in builders:
        b.append(0, 5, b"k", b"v" * 300, [("h", None)])
    assert builders[0].size() == builders[1].size() > HEADER_SIZE
    empty = [bytes(c.new_builder(compression=compression).build()) for c in CODECS]
    if compression == codec.NONE:
        assert empty[0] == empty[1]
    for raw in empty:
        assert _decode(PURE, raw) == []
        if compression != codec.SNAPPY:  # aiokafka takes a bare xerial header for raw snappy
            assert _decode(AIOKAFKA, raw) == []


@needs_aiokafka
@pytest.mark.parametrize("compression", sorted(codec.CODEC_NAMES))
def test_long_varints_alike(compression: int) -> None:
    """Lengths and deltas of three bytes and more (the hypothesis tests draw short ones)."""
    rows = [(1, 2**40, b"k" * 70_000, bytes(range(256)) * 80, [("h" * 9000, b"v" * 3000)]),
            (5000, 2**40 + 10_000_000, None, b"x" * 2049, []),
            (2**20, -(2**40), b"", None, [("", None)] * 200)]
    theirs, ours = (_build(c, rows, compression) for c in (AIOKAFKA, PURE))
    if compression == codec.NONE:
        assert ours == theirs
    for raw in (theirs, ours):
        assert _decode(AIOKAFKA, raw) == _decode(PURE, raw) == _expected(rows)


@pytest.mark.parametrize("c", CODECS, ids=lambda c: c.name)
def test_builder_rejects_what_is_not_bytes(c: RecordBatchCodec) -> None:
    for key, value in (("text", b"v"), (None, "text"), (None, 5)):
        with pytest.raises(TypeError):
            c.new_builder().append(0, 1, key, value, [])
    raw = _build(c, [(1, 7, bytearray(b"k"), memoryview(b"v"), [])], codec.NONE)
    assert _decode(c, raw) == [(0, 7, 0, b"k", b"v", [])]


def test_pure_python_keeps_a_first_timestamp_of_minus_one() -> None:
    raw = _build(PURE, [(1, -1, None, b"a", []), (1, 5, None, b"b", [])], codec.NONE)
    h = parse_header(raw)
    assert (h.base_timestamp, h.max_timestamp) == (-1, 5)
    assert [r[1] for r in _decode(PURE, raw)] == [-1, 5]
    if AIOKAFKA is not None:
        assert [r[1] for r in _decode(AIOKAFKA, raw)] == [-1, 5]


@st.composite
def corrupted(draw: st.DrawFn) -> bytes:
    """A valid batch, then flipped bytes, a cut, or junk appended."""
    raw = bytearray(_build(PURE, draw(records), draw(compressions)))
    how = draw(st.sampled_from(["flip", "flip", "cut", "append", "count"]))
    if how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            pos = draw(st.integers(17, len(raw) - 1))  # keep baseOffset, length, magic
            raw[pos] = draw(st.integers(0, 255))
    elif how == "cut":
        del raw[draw(st.integers(0, len(raw) - 1)):]
    elif how == "append":
        raw += draw(st.binary(min_size=1, max_size=8))
    else:  # recordsCount
        raw[57:61] = draw(st.integers(-(2**31), 2**31 - 1)).to_bytes(4, "big", signed=True)
    return bytes(raw)


@settings(max_examples=600, deadline=None)
@given(corrupted())
def test_garbage_raises_corrupt_record_error_only(raw: bytes) -> None:
    results = [_decode(c, raw) for c in CODECS]
    if None not in results and not _has_high_record_attributes(raw):
        # both read it: then alike (flips may hit key/value bytes)
        assert all(r == results[0] for r in results)


def _has_high_record_attributes(raw: bytes) -> bool:
    """Whether a record's attributes byte is >= 0x80. Kafka reads that field as one
    byte (unused, written 0); aiokafka reads it as a varint, so on such garbage the two
    codecs decode the rest of the record differently (the batch CRC rejects it first
    wherever franz reads stored data). Walks the records by their length prefixes."""
    try:
        header = parse_header(raw)
    except CorruptRecordError:
        return False  # a header no reader takes for sane: compare what they made of it
    data = raw[HEADER_SIZE:]
    if header.attributes & 0x07:
        data = codec.decompress(header.attributes & 0x07, data)
    pos = 0
    for _ in range(header.records_count):
        length = shift = 0
        while True:
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if data[pos] >= 0x80:
            return True
        pos += (length >> 1) ^ -(length & 1)
    return False


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_corrupt_record_error_only(raw: bytes) -> None:
    for c in CODECS:
        _decode(c, raw)


def test_wants_pure_python() -> None:
    for value in ("1", "true", "YES", " on ", "anything"):
        assert wants_pure_python({PURE_PYTHON_ENV: value})
    for env in ({}, {PURE_PYTHON_ENV: ""}, {PURE_PYTHON_ENV: "0"}, {PURE_PYTHON_ENV: "False"},
                {PURE_PYTHON_ENV: "no"}, {PURE_PYTHON_ENV: "off"}):
        assert not wants_pure_python(env)


def test_select_codec() -> None:
    theirs = object()
    assert select_codec({}, aiokafka=theirs, pure=PURE) is theirs  # type: ignore[arg-type]
    assert select_codec({PURE_PYTHON_ENV: "1"}, aiokafka=theirs, pure=PURE) is PURE  # type: ignore[arg-type]
    assert select_codec({}, aiokafka=None, pure=PURE) is PURE
    assert select_codec({PURE_PYTHON_ENV: "0"}, aiokafka=None, pure=PURE) is PURE
    assert codec.CODEC is select_codec(os.environ, aiokafka=AIOKAFKA, pure=PURE)


def test_no_aiokafka_no_aiokafka_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiokafka.record", None)  # importing it: ImportError
    assert batch_codec.load_aiokafka_codec() is None


@pytest.mark.parametrize(("env", "expected"), [
    ({PURE_PYTHON_ENV: "1"}, "pure-python"),
    ({"AIOKAFKA_NO_EXTENSIONS": "1"}, "pure-python"),  # aiokafka's Python classes: ours
])
def test_the_codec_in_use_at_import(env: dict[str, str], expected: str) -> None:
    base = {k: v for k, v in os.environ.items()
            if k not in (PURE_PYTHON_ENV, "AIOKAFKA_NO_EXTENSIONS")}
    proc = subprocess.run(
        [sys.executable, "-c", "from core.storage import codec; print(codec.CODEC.name)"],
        cwd=ROOT, env=base | env, capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == expected


def test_only_the_codec_module_imports_aiokafka() -> None:
    pattern = re.compile(r"^\s*(?:import|from)\s+aiokafka\b", re.MULTILINE)
    found = {
        str(path.relative_to(ROOT))
        for top in ("app", "api", "core", "spark_connector", "migrations")
        for path in (ROOT / top).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"core/storage/batch_codec.py"}
