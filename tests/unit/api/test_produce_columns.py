"""``native_render.produce_columns``: a binary v2 produce body of the usual shape read
in C straight from its JSON text. Whatever it answers is what the general parse
(orjson, then the Python decoders) answers for the same body; for anything else it
answers None and leaves the body to that parse."""

from __future__ import annotations

import base64
import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import native_render
from api.errors import ApiError
from api.v2.embedded import EmbeddedFormat
from api.v2.produce import parse_produce

pytestmark = pytest.mark.skipif(not native_render.AVAILABLE, reason="C extension not built")

WS = st.text(alphabet=" \t\r\n", max_size=2)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _general(body: bytes) -> tuple[list, list | None] | ApiError:
    """What parse_produce answers with the C extension out of the way."""
    saved, native_render._render = native_render._render, None
    try:
        cols = parse_produce(EmbeddedFormat.BINARY, body)
    except ApiError as exc:
        return exc
    finally:
        native_render._render = saved
    return list(cols.values), None if cols.keys is None else list(cols.keys)


@st.composite
def usual_bodies(draw) -> tuple[bytes, list[bytes], list[bytes] | None]:
    keyed = draw(st.booleans())
    values = draw(st.lists(st.binary(max_size=40), min_size=1, max_size=12))
    keys = [draw(st.binary(max_size=12)) for _ in values] if keyed else None
    ws = lambda: draw(WS)  # noqa: E731
    rows = []
    for i, v in enumerate(values):
        fields = [f'{ws()}"value"{ws()}:{ws()}"{_b64(v)}"{ws()}']
        if keys is not None:
            key = f'{ws()}"key"{ws()}:{ws()}"{_b64(keys[i])}"{ws()}'
            fields.insert(draw(st.integers(0, 1)), key)
        rows.append("{" + ",".join(fields) + "}")
    text = f'{ws()}{{{ws()}"records"{ws()}:{ws()}[{ws()}' + f"{ws()},{ws()}".join(rows) \
        + f"{ws()}]{ws()}}}{ws()}"
    return text.encode(), values, keys


@settings(max_examples=400, deadline=None)
@given(usual_bodies())
def test_the_usual_bodies_are_read_in_c_as_the_general_parse_reads_them(case) -> None:
    body, values, keys = case
    assert native_render.produce_columns(body, 100) == (values, keys)
    assert _general(body) == (values, keys)


MUTATIONS = ['"', "\\", ",", ":", "{", "}", "[", "]", "=", "null", " ", "A", "/", "+",
             "\u00e9", "\x00", '\\/', '"partition":1,', '"key":null,', "-", "_"]


@settings(max_examples=1500, deadline=None)
@given(usual_bodies(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 2),
                                          st.sampled_from(MUTATIONS)), min_size=1, max_size=3))
def test_a_damaged_body_is_declined_or_read_as_the_general_parse_reads_it(case, edits) -> None:
    body = case[0].decode("utf-8")
    for where, cut, text in edits:  # insert, replace or delete at a position
        at = where % (len(body) + 1)
        body = body[:at] + (text if cut < 2 else "") + body[at + (1 if cut else 0):]
    raw = body.encode("utf-8")
    fast = native_render.produce_columns(raw, 100)
    if fast is not None:
        assert _general(raw) == fast


@pytest.mark.parametrize("body", [
    b'{"records":[{"value":"YQ\\/="}]}',  # a JSON escape: valid JSON, left to orjson
    b'{"records":[{"value":"YQ=="},{"key":"YQ==","value":"YQ=="}]}',  # mixed shapes
    b'{"records":[]}',
    b'{"records":[{"value":"YQ=="}]} x',
    b'{"records":[{"value":"YQ=="}],"records":[{"value":"Yg=="}]}',
    b'{"records":[{"value":null}]}',
    b'{"records":[{"value":"YR=="}]}',  # non-zero padding bits
    b'{"records":[{"value":"YQ==","value":"Yg=="}]}',
    b'{"records":[{"value":"YQ==","partition":0}]}',
    b'{"records":[{"value":"YQ=="}]',
    b'\xef\xbb\xbf{"records":[{"value":"YQ=="}]}',
])
def test_anything_else_is_left_to_the_general_parse(body: bytes) -> None:
    assert native_render.produce_columns(body, 100) is None


def test_more_rows_than_the_limit_are_left_to_the_general_parse() -> None:
    body = orjson.dumps({"records": [{"value": "YQ=="}] * 11})
    assert native_render.produce_columns(body, 10) is None
    assert native_render.produce_columns(body, 11) == ([b"a"] * 11, None)


def test_a_large_keyed_body() -> None:
    rng = random.Random(7)
    values = [rng.randbytes(rng.randrange(0, 3000)) for _ in range(2000)]
    keys = [b"key-%d" % i for i in range(2000)]
    body = orjson.dumps({"records": [{"key": _b64(k), "value": _b64(v)}
                                     for k, v in zip(keys, values, strict=True)]})
    assert native_render.produce_columns(body, 100_000) == (values, keys)
