"""A batch's rendering as one text (``api.render_cache.Rendering``): every range of its
records reads exactly the comma-joined fragments the per-record rendering gives, from
the C renderer's joined text as from the Python fragments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import native_render
from api.render_cache import Rendering
from core.storage.batch import parse_header, set_log_append_time
from core.storage.records import NewRecord, build_batch

HEAD, MID = b'{"topic":"t","key":', b',"partition":0,"offset":'

rows_st = st.lists(st.tuples(st.none() | st.binary(max_size=20),
                             st.none() | st.binary(max_size=200)), min_size=1, max_size=30)


def _spans_match(rendering: Rendering, fragments: list[bytes]) -> None:
    assert len(rendering) == len(fragments)
    for lo in range(len(fragments) + 1):
        for hi in range(lo, len(fragments) + 1):
            assert rendering.span(lo, hi) == b",".join(fragments[lo:hi]), (lo, hi)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=30), max_size=12))
def test_a_rendering_of_fragments_reads_every_range(fragments: list[bytes]) -> None:
    _spans_match(Rendering.of_fragments(fragments), fragments)


def test_the_whole_range_is_the_text_itself() -> None:
    rendering = Rendering.of_fragments([b'{"a":1}', b'{"b":2}'])
    assert rendering.span(0, 2) is rendering.text


@pytest.mark.skipif(not native_render.AVAILABLE, reason="C extension not built")
@settings(max_examples=100, deadline=None)
@given(rows_st, st.booleans(), st.data())
def test_the_c_joined_text_is_the_fragments_joined(
        rows: list[tuple[bytes | None, bytes | None]], log_append: bool,
        data: st.DataObject) -> None:
    raw = bytes(build_batch([NewRecord(value=v, key=k, timestamp=1_000 + i)
                             for i, (k, v) in enumerate(rows)], now_ms=5))
    if log_append:
        buf = bytearray(raw)
        set_log_append_time(buf, 0, parse_header(buf, 0), 777)
        raw = bytes(buf)
    fragments = native_render.render_batch(raw, HEAD, MID)
    joined = native_render.render_batch_joined(raw, HEAD, MID)
    assert fragments is not None and joined is not None
    _spans_match(Rendering(*joined), fragments)
    lo = data.draw(st.integers(0, len(rows)))
    hi = data.draw(st.integers(lo, len(rows)))
    part = native_render.render_batch_joined(raw, HEAD, MID, records=(lo, hi))
    assert part is not None and part[0] == b",".join(fragments[lo:hi])


@pytest.mark.skipif(not native_render.AVAILABLE, reason="C extension not built")
def test_records_with_headers_are_left_to_the_general_path() -> None:
    raw = bytes(build_batch([NewRecord(value=b"v", headers=[("h", b"x")])], now_ms=5))
    assert native_render.render_batch_joined(raw, HEAD, MID) is None
