"""The C accelerators (api._render, core.storage._native) write exactly the bytes of the Python path
(``binary_fragments``) for every batch shape it accepts, declines batches with headers,
counts record sizes as the Python path does, and turns any garbage into
CorruptRecordError without reading past the buffer."""

from __future__ import annotations

import binascii
import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import native_render
from api.v2.embedded import _native_template, binary_fragments, render_binary
from core.storage import codec, native
from core.storage.batch import HEADER_SIZE, parse_header, set_log_append_time
from core.storage.batch_rewrite import filter_batch
from core.storage.errors import CorruptRecordError
from core.storage.records import NewRecord, build_batch, decode_batch

pytestmark = pytest.mark.skipif(not (native.AVAILABLE and native_render.AVAILABLE),
                                reason="C extensions not built")

TOPIC, PARTITION = 't"%s\\x\u00e9\n', 7


def _python(raw: bytes) -> list[bytes]:
    h = parse_header(raw)
    lat = h.max_timestamp if h.timestamp_type == 1 else None
    return binary_fragments(TOPIC, PARTITION, decode_batch(raw), lat)


def _c(raw: bytes) -> list[bytes] | None:
    return native_render.render_batch(raw, *_native_template(TOPIC, PARTITION))


records = st.lists(
    st.builds(
        NewRecord,
        value=st.none() | st.binary(max_size=70),
        key=st.none() | st.binary(max_size=9),
        timestamp=st.none() | st.integers(-1, 2**45),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(records, st.sampled_from(sorted(codec.CODEC_NAMES)), st.integers(0, 2**40),
       st.booleans())
def test_c_fragments_equal_python(recs: list[NewRecord], compression: int, base: int,
                                  log_append: bool) -> None:
    raw = build_batch(recs, now_ms=1_700_000_000_000, compression=compression, base_offset=base)
    if log_append:
        set_log_append_time(raw, 0, parse_header(raw), 1_800_000_000_123)
    raw = bytes(raw)
    got = _c(raw)
    assert got == _python(raw)
    # and the fragments are the JSON of the v2 answer
    rows = orjson.loads(b"[" + b",".join(got) + b"]")
    assert [r["offset"] for r in rows] == list(range(base, base + len(recs)))
    sizes = [0]
    for r in decode_batch(raw):
        sizes.append(sizes[-1] + len(r.key or b"") + len(r.value or b""))
    assert native.record_sizes(raw) == sizes


@settings(max_examples=200, deadline=None)
@given(records, st.sampled_from(sorted(codec.CODEC_NAMES)), st.booleans(), st.data())
def test_a_record_range_renders_as_that_slice_of_the_whole_batch(
        recs: list[NewRecord], compression: int, log_append: bool, data: st.DataObject) -> None:
    raw = build_batch(recs, now_ms=1_700_000_000_000, compression=compression, base_offset=42)
    if log_append:
        set_log_append_time(raw, 0, parse_header(raw), 1_800_000_000_123)
    raw = bytes(raw)
    lo = data.draw(st.integers(0, len(recs)))
    hi = data.draw(st.integers(lo, len(recs)))
    part = native_render.render_batch(raw, *_native_template(TOPIC, PARTITION), records=(lo, hi))
    assert part == _python(raw)[lo:hi]


def test_a_record_range_outside_the_batch_is_refused() -> None:
    raw = bytes(build_batch([NewRecord(b"a"), NewRecord(b"b")], now_ms=1))
    for bad in ((-1, 1), (1, 0), (0, 3)):
        with pytest.raises(CorruptRecordError, match="outside the batch"):
            native_render.render_batch(raw, *_native_template(TOPIC, PARTITION), records=bad)


def test_compacted_batch_keeps_its_offsets() -> None:
    recs = [NewRecord(b"v%d" % i, key=b"k%d" % (i % 3), timestamp=1000 + i) for i in range(10)]
    raw = bytes(build_batch(recs, now_ms=5, base_offset=100))
    latest = {b"k0": 109, b"k1": 107, b"k2": 108}
    kept = filter_batch(raw, parse_header(raw), is_latest=lambda off, key: latest[key] == off,
                        now_ms=5, delete_retention_ms=0, retain_empty=False, mapped_end=0)
    assert kept.data is not None
    rows = orjson.loads(b"[" + b",".join(_c(kept.data) or []) + b"]")
    assert [r["offset"] for r in rows] == [107, 108, 109]
    assert rows == render_binary([((TOPIC, PARTITION), r) for r in decode_batch(kept.data)])


def test_records_with_headers_are_left_to_python() -> None:
    raw = bytes(build_batch([NewRecord(b"a"), NewRecord(b"b", headers=[("h", b"x")])], now_ms=1))
    assert _c(raw) is None
    assert native.record_sizes(raw) == [0, 1, 2]  # headers are not counted


def test_garbage_never_crashes() -> None:
    rng = random.Random(7)
    recs = [NewRecord(bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))),
                      key=b"k" if i % 2 else None) for i in range(20)]
    good = bytes(build_batch(recs, now_ms=9))
    outcomes = {"error": 0, "same": 0, "other": 0}
    for _ in range(3000):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(HEADER_SIZE, len(bad))] = rng.randrange(256)
        if rng.random() < 0.3:  # and truncated records, with the header still claiming all
            bad = bad[: rng.randrange(HEADER_SIZE, len(bad))]
        try:
            native.record_sizes(bytes(bad), header=parse_header(good))
        except CorruptRecordError:
            pass
        try:
            out = native_render.render_batch(bytes(bad), *_native_template(TOPIC, PARTITION),
                                      header=parse_header(good))
        except CorruptRecordError:
            outcomes["error"] += 1
            continue
        outcomes["same" if out == _c(good) else "other"] += 1
    assert outcomes["error"] > 1000  # most damage is detected; the rest parses as records


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=20))
def test_b64decode_list_decodes_what_b64encode_wrote(values: list[bytes]) -> None:
    texts = [binascii.b2a_base64(v, newline=False).decode() for v in values]
    assert native_render.b64decode_list(texts) == values


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text(alphabet="AQgw+/=aZ09é \n-_", max_size=12), min_size=1, max_size=4))
def test_b64decode_list_accepts_only_what_strict_python_accepts(texts: list[str]) -> None:
    got = native_render.b64decode_list(texts)
    if got is not None:  # C said yes: Python's strict decoder agrees, byte for byte
        assert got == [binascii.a2b_base64(t, strict_mode=True) for t in texts]
    assert native_render.b64decode_list([*texts, 5]) is None  # a non-str declines the column


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=300), min_size=1, max_size=40),
       st.booleans(), st.sampled_from(sorted(codec.CODEC_NAMES)), st.integers(-1, 2**45))
def test_encode_batch_writes_the_c_builders_bytes(values: list[bytes | None], keyed: bool,
                                                  compression: int, ts: int) -> None:
    keys = [None if v is None else v[:3] for v in values] if keyed else None
    builder = codec.new_batch_builder(compression=compression)
    for i, v in enumerate(values):
        builder.append(i, ts, None if keys is None else keys[i], v, [])
    expected = builder.build()
    got = native.encode_batch(values, keys, ts, compression)
    assert got is not None
    # compressors may write other bytes for the same input; the records may not differ
    assert decode_batch(bytes(got)) == decode_batch(bytes(expected))
    assert parse_header(got)._replace(crc=0, batch_length=0) == parse_header(
        expected)._replace(crc=0, batch_length=0)
    if compression == codec.NONE:
        assert got == expected
    with pytest.raises(TypeError):
        native.encode_batch([b"a", "b"], None, ts, compression)  # type: ignore[list-item]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**63 - 1)), max_size=50))
def test_produce_offsets_writes_orjsons_bytes(pairs: list[tuple[int, int]]) -> None:
    parts, offsets = [p for p, _ in pairs], [o for _, o in pairs]
    expected = orjson.dumps([{"partition": p, "offset": o, "error_code": None, "error": None}
                             for p, o in pairs])
    assert b"[" + native_render.produce_offsets(parts, offsets) + b"]" == expected
    with pytest.raises(TypeError):
        native_render.produce_offsets([1, None], [1, 2])  # type: ignore[list-item]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(0, 2**62), st.integers(0, 300))
def test_produce_offsets_range_writes_orjsons_bytes(partition: int, first: int, n: int) -> None:
    expected = orjson.dumps([{"partition": partition, "offset": first + i, "error_code": None,
                              "error": None} for i in range(n)])
    assert b"[" + native_render.produce_offsets_range(partition, first, n) + b"]" == expected


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_produce_offsets_runs_writes_the_scattered_results(data: st.DataObject) -> None:
    from core.broker.types import ProduceResults

    total = data.draw(st.integers(1, 80))
    order = data.draw(st.permutations(range(total)))
    cuts = sorted(data.draw(st.sets(st.integers(1, total - 1), max_size=5))) if total > 1 else []
    runs, start = [], 0
    for end in [*cuts, total]:
        idxs = sorted(order[start:end])
        runs.append((data.draw(st.integers(0, 2**31 - 1)), data.draw(st.integers(0, 2**62)),
                     range(idxs[0], idxs[0] + 1) if len(idxs) == 1 else idxs))
        start = end
    results = ProduceResults.scattered(total, runs, 1_700_000_000_000)
    expected = orjson.dumps([{"partition": r.partition, "offset": r.offset,
                              "error_code": None, "error": None} for r in results])
    assert b"[" + native_render.produce_offsets_runs(total, runs) + b"]" == expected
    assert native_render.produce_offsets(list(results.partitions), list(results.offsets)) \
        == native_render.produce_offsets_runs(total, runs)


def test_produce_offsets_runs_declines_runs_that_do_not_cover_every_record() -> None:
    assert native_render.produce_offsets_runs(3, [(1, 100, [0, 2])]) is None  # 1 missing
    assert native_render.produce_offsets_runs(2, [(1, 100, [0, 0])]) is None  # twice
    assert native_render.produce_offsets_runs(2, [(1, 100, [0, 5])]) is None  # past total
    assert native_render.produce_offsets_runs(2, [(1, 100, [0, "x"])]) is None
    assert native_render.produce_offsets_runs(2, [(1, 100, [0]), (0, 7, [1])]) == (
        b'{"partition":1,"offset":100,"error_code":null,"error":null},'
        b'{"partition":0,"offset":7,"error_code":null,"error":null}')


def test_a_scattered_answer_is_rendered_without_filling_its_lists() -> None:
    from api.v2.produce import produce_answer
    from core.broker.types import ProduceResults

    results = ProduceResults.scattered(3, [(1, 100, [0, 2]), (0, 5, [1])], 1_700_000_000_000)
    assert not results.contiguous
    status, body = produce_answer(results, strict=False)
    assert results._offsets is None  # rendered from the runs
    assert status == 200
    assert orjson.loads(body)["offsets"] == [
        {"partition": 1, "offset": 100, "error_code": None, "error": None},
        {"partition": 0, "offset": 5, "error_code": None, "error": None},
        {"partition": 1, "offset": 101, "error_code": None, "error": None}]
    assert [r.offset for r in results] == [100, 5, 101]  # filled when asked
