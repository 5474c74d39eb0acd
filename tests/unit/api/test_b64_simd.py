"""Base64 in C, both ways, with AVX2 where the CPU has it: the decoder of produce bodies
(``b64decode_list``, under ``produce_columns``; 32-character blocks, the rest one quantum
at a time) gives exactly what ``base64.b64decode`` gives for canonical input and None for
a character outside the alphabet wherever it sits; the encoder of consume answers
(``render_batch``; 24-byte blocks) writes exactly what ``base64.b64encode`` writes. The
scalar paths (a CPU without AVX2) answer the same."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import native_render
from core.storage.records import NewRecord, build_batch

pytestmark = pytest.mark.skipif(not native_render.AVAILABLE, reason="C extension not built")

ROOT = Path(__file__).resolve().parents[3]
BAD = "-_= .:@[`{\x7f\x00\t"


def decode(items: list[str]) -> list[bytes] | None:
    return native_render._render.b64decode_list(items)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=400), max_size=8))
def test_decodes_what_b64encode_writes(raws: list[bytes]) -> None:
    assert decode([base64.b64encode(r).decode() for r in raws]) == raws


@pytest.mark.parametrize("size", [23, 24, 25, 47, 48, 49, 100, 1000])
def test_a_bad_character_anywhere_is_refused(size: int) -> None:
    text = base64.b64encode(os.urandom(size)).decode()
    for pos in range(len(text)):
        for bad in BAD:
            damaged = text[:pos] + bad + text[pos + 1:]
            if damaged.endswith(("=", "==")) and bad == "=" and pos >= len(text) - 2:
                continue  # '=' in the padding: still canonical when the bits allow
            assert decode([damaged]) is None, (pos, bad)


def test_padding_bits_must_be_zero() -> None:
    assert decode(["QR=="]) is None and decode(["QUI="]) == [b"AB"]
    assert decode(["A" * 64 + "QR=="]) is None  # after a whole AVX2 block too


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=120)),
                          st.binary(max_size=400)), min_size=1, max_size=6))
def test_rendered_keys_and_values_are_what_b64encode_writes(
        rows: list[tuple[bytes | None, bytes]]) -> None:
    batch = build_batch([NewRecord(value=v, key=k, timestamp=1) for k, v in rows], now_ms=1)
    fragments = native_render.render_batch(bytes(batch), b'{"key":', b',"offset":')
    assert fragments is not None
    for (key, value), fragment in zip(rows, fragments, strict=True):
        doc = orjson.loads(fragment)
        assert doc["value"] == base64.b64encode(value).decode()
        assert doc["key"] == (None if key is None else base64.b64encode(key).decode())


def test_the_scalar_paths_answer_the_same(tmp_path: Path) -> None:
    """Decoding and rendering with AVX2 turned off (a CPU without it) answer the same."""
    script = (
        "import base64, hashlib, os, random\n"
        "from api import _render\n"
        "rng = random.Random(7)\n"
        "h = hashlib.sha256()\n"
        "for n in range(0, 700, 7):\n"
        "    raw = rng.randbytes(n)\n"
        "    text = base64.b64encode(raw).decode()\n"
        "    out = _render.b64decode_list([text])\n"
        "    assert out == [raw], n\n"
        "    bad = text[:n // 2] + '-' + text[n // 2 + 1:] if text else '-'\n"
        "    assert _render.b64decode_list([bad]) is None, n\n"
        "    h.update(out[0])\n"
        "    from core.storage.records import NewRecord, build_batch\n"
        "    from api.native_render import render_batch\n"
        "    batch = build_batch([NewRecord(value=raw, key=raw[:n // 3], timestamp=1)],\n"
        "                        now_ms=1)\n"
        "    (fragment,) = render_batch(bytes(batch), b'{\"key\":', b',\"offset\":')\n"
        "    assert text in fragment.decode(), n\n"
        "    h.update(fragment)\n"
        "print(h.hexdigest())\n"
    )
    answers = set()
    for env in ({}, {"FRANZ_NO_AVX2": "1"}):
        run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                             text=True, env={**os.environ, **env}, timeout=60, check=True)
        answers.add(run.stdout.strip())
    assert len(answers) == 1
