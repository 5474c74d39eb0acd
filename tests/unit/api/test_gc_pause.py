"""The cyclic GC pause around produce parsing (api.gc_pause)."""

from __future__ import annotations

import base64
import gc

import orjson
import pytest

from api.gc_pause import cyclic_gc_paused
from api.v2.embedded import EmbeddedFormat
from api.v2.produce import parse_produce


@pytest.fixture
def gc_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_back_after_the_block_even_on_an_error(gc_enabled):
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), cyclic_gc_paused():
        raise ValueError("bad body")
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled(gc_enabled):
    gc.disable()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_parsing_a_request_sets_off_no_collection(gc_enabled):
    # rows naming their partition: parsed through orjson's document, not in C
    rows = [{"key": base64.b64encode(b"key-%d" % i).decode(), "partition": i % 3,
             "value": base64.b64encode(bytes(100)).decode()} for i in range(5000)]
    body = orjson.dumps({"records": rows})
    runs: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        with cyclic_gc_paused():
            cols = parse_produce(EmbeddedFormat.BINARY, body)
        paused_runs, young_after = list(runs), gc.get_count()[0]
        unpaused = parse_produce(EmbeddedFormat.BINARY, body)
    finally:
        gc.callbacks.remove(count)
    assert len(cols) == 5000 and cols.keys[4999] == b"key-4999"
    assert list(cols.values) == list(unpaused.values)
    # 5,000 dicts were made and freed inside the pause: no collection ran and none is
    # left counted for the next one; the same parse unpaused sets collections off
    assert paused_runs == []
    assert young_after < 700
    assert len(runs) > len(paused_runs)
