"""Input validation pieces (issue 14, docs/limits.md): the JSON depth check, the record
count of produce requests, names, ranges, waits and topic-config messages."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from api.content_types import EmbeddedFormat
from api.errors import ApiError
from api.input_limits import (
    MAX_JSON_DEPTH,
    MAX_RECORDS_PER_REQUEST,
    json_depth_exceeds,
    prefix_exceeds_record_limit,
)
from api.v2.consumers import create_kwargs
from api.v2.offsets import timestamp_ms
from api.v2.produce import parse_produce
from api.v2.schemas import BINARY_PRODUCE, COMMIT, JSON_PRODUCE, PARTITIONS, POSITIONS
from api.v3.json_stream import BadJson, JsonValues
from api.v3.produce import parse_record
from core.broker.consumer.instance import ConsumerInstanceInfo, id_problem
from core.storage.config import validate_topic_configs
from core.storage.errors import InvalidConfigError

sys.path.insert(0, str(Path(__file__).parent / "broker"))
from _group_backend_fake import FakeGroupBackend  # noqa: E402

from core.broker.consumer.manager import ConsumerManager  # noqa: E402
from core.broker.errors import InvalidConsumerConfigError, InvalidGroupIdError  # noqa: E402
from core.clock import ManualClock  # noqa: E402


def nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


# --- JSON depth --------------------------------------------------------------------------


def test_depth_limit_is_64_levels() -> None:
    assert MAX_JSON_DEPTH == 64
    assert not json_depth_exceeds(nest(64).encode())
    assert json_depth_exceeds(nest(65).encode())
    objects = '{"a":' * 64 + "1" + "}" * 64
    assert not json_depth_exceeds(objects.encode())
    assert json_depth_exceeds(('{"a":' * 65 + "1" + "}" * 65).encode())


def test_brackets_in_strings_and_escapes_do_not_count() -> None:
    for text in ['{"x":"' + "[" * 500 + '"}', '["\\"[[[[", "\\\\", "]]]]"]',
                 '["\\u005c", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]',
                 '[' + ",".join(['"]]]]"'] * 100) + "," + nest(63) + "]"]:
        json.loads(text)
        assert not json_depth_exceeds(text.encode()), text
    # closing brackets in an early string cannot hide depth behind opening ones later
    hidden = '["' + "]" * 70 + '",' + nest(70) + ',"' + "[" * 70 + '"]'
    json.loads(hidden)
    assert json_depth_exceeds(hidden.encode())


def test_depth_matches_a_parser_on_random_documents() -> None:
    rng = random.Random(14)
    leaves = [1, "a[b", "]]", '\\"[', "", None, "x\\\\", 'q"', "{", 2.5, "\\", "é[", "\n]"]

    def make(depth: int) -> Any:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(leaves)
        if rng.random() < 0.5:
            return [make(depth - 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["k", "[", '"]', ""]): make(depth - 1) for _ in range(rng.randint(0, 3))}

    for _ in range(2000):
        doc = make(rng.randint(1, 80))
        for raw in (json.dumps(doc).encode(), json.dumps(doc, ensure_ascii=False).encode()):
            for limit in (2, 10, 64):
                assert json_depth_exceeds(raw, limit) == (_depth(doc) > limit), (raw[:120], limit)


def test_malformed_json_is_left_to_the_parser() -> None:
    assert not json_depth_exceeds(b"[" * 100)
    assert not json_depth_exceeds(b"]" * 100)


# --- records per produce request ---------------------------------------------------------


def _records(doc: Any) -> Any:
    return doc.get("records") if isinstance(doc, dict) else None


def test_a_million_tiny_records_are_refused_on_a_prefix() -> None:
    body = orjson.dumps({"records": [{"value": "AA=="}] * 1_000_000})
    start = time.perf_counter()
    assert prefix_exceeds_record_limit(body, _records)
    assert time.perf_counter() - start < 1.0  # a full parse takes several times longer
    with pytest.raises(ApiError) as info:
        parse_produce(EmbeddedFormat.BINARY, body)
    assert (info.value.status, info.value.code) == (422, 422)
    assert "at most 100000 records" in info.value.message


@pytest.mark.parametrize("fmt", [EmbeddedFormat.BINARY, EmbeddedFormat.JSON])
def test_the_limit_is_exact(fmt: EmbeddedFormat) -> None:
    row: dict[str, Any] = {"value": "AA==", "partition": 0}
    if fmt is EmbeddedFormat.JSON:
        row = {"value": 1, "partition": 0}
    over = orjson.dumps({"records": [row] * (MAX_RECORDS_PER_REQUEST + 1)})
    with pytest.raises(ApiError) as info:
        parse_produce(fmt, over)
    assert info.value.status == 422 and "got 100001" in info.value.message
    ok = orjson.dumps({"records": [row] * MAX_RECORDS_PER_REQUEST})
    assert len(parse_produce(fmt, ok)) == MAX_RECORDS_PER_REQUEST


def test_v3_splitter_stops_at_the_record_limit() -> None:
    rec = orjson.dumps({"value": {"type": "STRING", "data": "x"}})
    # a whole array body: refused on its prefix, or once parsed
    for n in (1_000_000, MAX_RECORDS_PER_REQUEST + 1):
        body = b"[" + b",".join([rec] * n) + b"]"
        out = JsonValues(max_pending=1 << 30, max_values=MAX_RECORDS_PER_REQUEST).feed(
            body, final=True)
        assert isinstance(out[-1], BadJson) and out[-1].too_many and out[-1].code == 42208
    # concatenated values, in chunks: the values up to the limit, then the refusal
    splitter = JsonValues(max_pending=1 << 20, max_values=5)
    got = splitter.feed(rec * 3) + splitter.feed(rec * 3) + splitter.feed(rec)
    assert len(got) == 6 and isinstance(got[5], BadJson) and got[5].too_many
    assert splitter.close() == []


def test_v3_splitter_refuses_deep_values() -> None:
    good = b'{"value":{"type":"STRING","data":"ok"}}'
    deep = b'{"value":{"type":"JSON","data":' + nest(100).encode() + b"}}"
    whole = JsonValues(max_pending=1 << 20).feed(good + deep, final=True)
    assert len(whole) == 1 and "nested deeper than 64" in whole[0].message
    stream = JsonValues(max_pending=1 << 20)
    got = stream.feed(good) + stream.feed(deep[:50]) + stream.feed(deep[50:] + good)
    assert got[0] == orjson.loads(good) and isinstance(got[1], BadJson) and len(got) == 2
    very = JsonValues(max_pending=1 << 20)  # deeper than the parser's own recursion
    got = very.feed(good + b'{"value":' + b"[" * 5000) + very.feed(b"]" * 5000 + b"}")
    assert got[0] == orjson.loads(good) and isinstance(got[1], BadJson)


# --- v3 records --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [{}, [], {"a": 1}, [1], 5, True])
def test_v3_type_must_be_a_string(kind: Any) -> None:
    for side in ("key", "value"):
        with pytest.raises(ApiError) as info:
            parse_record({side: {"type": kind, "data": "x"}}, "t")
        assert info.value.code == 400
        assert info.value.message.startswith(f"Bad Request: {side}.type=")


def test_v3_partition_and_big_integers() -> None:
    with pytest.raises(ApiError, match="out of range"):
        parse_record({"partition_id": 2**31, "value": None}, "t")
    with pytest.raises(ApiError, match="value.data"):
        parse_record({"value": {"type": "JSON", "data": 2**70}}, "t")
    assert parse_record({"partition_id": 2**31 - 1}, "t").record.partition == 2**31 - 1


# --- v2 ranges ---------------------------------------------------------------------------


def _refused(adapter: Any, doc: Any) -> bool:
    try:
        adapter.validate_python(doc)
    except ValueError:
        return True
    return False


def test_v2_body_ranges() -> None:
    tp = {"topic": "t", "partition": 0}
    assert not _refused(COMMIT, {"offsets": [{**tp, "offset": 2**63 - 2}]})
    for offset in (2**63 - 1, 2**63, -1):
        assert _refused(COMMIT, {"offsets": [{**tp, "offset": offset}]})
        assert _refused(POSITIONS, {"offsets": [{**tp, "offset": offset}]})
    assert _refused(PARTITIONS, {"partitions": [{"topic": "t", "partition": 2**31}]})
    assert not _refused(PARTITIONS, {"partitions": [{"topic": "t", "partition": -1}]})
    for adapter, value in ((BINARY_PRODUCE, "AA=="), (JSON_PRODUCE, 1)):
        assert _refused(adapter, {"records": [{"value": value, "timestamp": 2**63}]})
        assert _refused(adapter, {"records": [{"value": value, "partition": 2**31}]})
        assert not _refused(adapter, {"records": [{"value": value, "timestamp": 2**63 - 1}]})


def test_v2_seek_timestamps() -> None:
    assert timestamp_ms(2**63 - 1, "t") == 2**63 - 1
    for bad, status in ((2**63, 422), (-1, 422), ("1969-12-31T23:59:59Z", 400)):
        with pytest.raises(ApiError) as info:
            timestamp_ms(bad, "timestamps[0].timestamp")
        assert info.value.status == status and "timestamps[0].timestamp" in info.value.message


# --- names and consumer settings ---------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "x" * 249, "...", "-"])
def test_good_ids(name: str) -> None:
    assert id_problem("id", name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a/b", "a\x00b", "<script>", "é", " "])
def test_bad_ids(name: str) -> None:
    assert id_problem("id", name) is not None


def test_create_kwargs_names_and_timeouts() -> None:
    assert create_kwargs({"name": "x" * 249})["name"] == "x" * 249
    for req in ({"name": "x" * 40_000}, {"id": ".."}, {"name": "<b>"},
                {"consumer.request.timeout.ms": 2**31}, {"requestWaitMs": -1}):
        with pytest.raises(ApiError) as info:
            create_kwargs(req)
        assert (info.value.status, info.value.code) == (422, 42204)
        assert len(info.value.message) < 400
    assert create_kwargs({"consumer.request.timeout.ms": 2**31 - 1})["request_timeout_ms"] == 2**31 - 1


def test_core_refuses_bad_instance_settings() -> None:
    base: dict[str, Any] = {"format": "binary", "auto_offset_reset": "latest",
                            "auto_commit": True, "fetch_min_bytes": -1,
                            "request_timeout_ms": None}
    with pytest.raises(InvalidConsumerConfigError):
        ConsumerInstanceInfo.validated("g", "a" * 300, **base)
    with pytest.raises(InvalidConsumerConfigError):
        ConsumerInstanceInfo.validated("g", "ok", **{**base, "request_timeout_ms": 2**40})


@pytest.fixture
async def manager(tmp_path: Path) -> Any:
    clock = ManualClock()
    backend = FakeGroupBackend(tmp_path / "logs", clock=clock)
    backend.create_topic("t", 1)
    config = {"consumer.request.timeout.ms": 1_000_000, "consumer.request.timeout.max.ms": 300}
    m = ConsumerManager(backend, clock=clock, config=config)  # type: ignore[arg-type]
    await m.coordinator.load_owned()
    yield m
    backend.close()


async def test_manager_refuses_bad_new_groups_and_caps_waits(manager: Any) -> None:
    for group in ("<script>", "..", "g" * 250):
        with pytest.raises(InvalidGroupIdError):
            await manager.create(group, name="c")
        assert not [g for g in await manager.list_groups() if g.group_id == group]
    await manager.create("g", name="c", request_timeout_ms=2**31 - 1)
    await manager.assign("g", "c", [("t", 0)])
    assert manager.request_timeout_ms == 300  # the server default is capped too
    start = time.monotonic()
    assert await manager.poll("g", "c") == []
    assert await manager.poll("g", "c", timeout_ms=2**31 - 1) == []
    assert time.monotonic() - start < 3.0  # twice the 300 ms ceiling, not 24 days


# --- topic configs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("segment.bytes", "13", "(allowed: [14, 2147483647])"),
        ("segment.bytes", "2147483648", "(allowed: [14, 2147483647])"),
        ("retention.ms", "-2", "(allowed: [-1, 9223372036854775807])"),
        ("min.insync.replicas", "0", "(allowed: [1, 2147483647])"),
        ("min.cleanable.dirty.ratio", "2", "(allowed: [0, 1])"),
        ("compression.zstd.level", "23", "(allowed: [-131072, 22])"),
        ("retention.bytes", "x", "(allowed: [-9223372036854775808, 9223372036854775807])"),
    ],
)
def test_config_messages_name_the_allowed_range(name: str, value: str, allowed: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        validate_topic_configs({name: value})
    assert info.value.message.startswith(f"Invalid value {value} for configuration {name}: ")
    assert info.value.message.endswith(allowed)


def test_tiny_segments_are_valid() -> None:
    assert validate_topic_configs({"segment.bytes": "14", "segment.index.bytes": "4"}) == {
        "segment.bytes": "14", "segment.index.bytes": "4"}
