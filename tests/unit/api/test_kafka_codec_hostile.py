"""Hostile bytes into franz's Kafka decoders (api/kafka/protocol/codegen.py): random
bytes, every truncation and random bit flips of valid messages, for every message and
version, raise nothing but DecodeError (no IndexError, struct.error, MemoryError,
RecursionError...), and a count or length larger than the bytes left is refused
before anything is allocated. ``FRANZ_CODEC_EXAMPLES`` raises the examples per case."""

from __future__ import annotations

import struct
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import _kafka_codec_oracles as O  # noqa: E402

from api.kafka.protocol import codegen  # noqa: E402
from api.kafka.protocol.codegen import DecodeError, decoder, encode, read_uvarint  # noqa: E402

EXAMPLES = O.env_examples(8)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CASES = list(O.all_versions())
IDS = [f"{n}-v{v}" for n, v in CASES]


def _decode(name: str, version: int, data: Any, pos: int = 0) -> dict[str, Any] | None:
    """The decoded message, or None when refused; anything but DecodeError fails."""
    try:
        obj, end = decoder(name, version)(data, pos)
    except DecodeError:
        return None
    assert pos <= end <= len(data)
    return obj


@pytest.mark.parametrize(("name", "version"), CASES, ids=IDS)
def test_random_bytes(name: str, version: int) -> None:
    @SETTINGS
    @given(st.binary(max_size=300), st.booleans())
    def run(data: bytes, view: bool) -> None:
        _decode(name, version, memoryview(data) if view else data)

    run()


@pytest.mark.parametrize(("name", "version"), CASES, ids=IDS)
def test_truncations_and_bit_flips_of_valid_messages(name: str, version: int) -> None:
    @settings(SETTINGS, max_examples=max(2, EXAMPLES // 2))
    @given(O.message_strategy(name, version), st.lists(st.integers(0, 1 << 20), max_size=40))
    def run(obj: dict[str, Any], flips: list[int]) -> None:
        data = encode(name, version, obj)
        assert _decode(name, version, data) is not None
        for cut in range(len(data)):  # every prefix
            _decode(name, version, memoryview(data)[:cut])
        if data:
            for bit in flips:
                bad = bytearray(data)
                bad[(bit >> 3) % len(bad)] ^= 1 << (bit & 7)
                _decode(name, version, bytes(bad))
                _decode(name, version, memoryview(bad))

    run()


# --- counts and lengths larger than the buffer ---------------------------------------

HUNDRED_MIB = 100 << 20


def _refused_at_once(name: str, version: int, data: bytes) -> str:
    """Refused at once (the best of 5 tries: a loaded machine), with almost no memory
    allocated."""
    decode = decoder(name, version)  # compiled outside what is measured
    with pytest.raises(DecodeError) as info:
        decode(data, 0)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        with pytest.raises(DecodeError):
            decode(data, 0)
        best = min(best, time.perf_counter() - t)
    assert best < 0.001, best  # measured: 2-10 us
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            decode(data, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10, peak
    return str(info.value)


def _uv(n: int) -> bytes:
    return codegen.uvarint(n)


def test_a_100_mib_array_in_a_100_byte_buffer_is_refused_instantly() -> None:
    # MetadataRequest v4 (non-flexible): topics claims 100 Mi elements, 96 bytes follow
    data = struct.pack(">i", HUNDRED_MIB) + b"\x00" * 96
    assert len(data) == 100
    message = _refused_at_once("MetadataRequest", 4, data)
    assert "104857600 elements in 96 bytes" in message
    # the same in a flexible version (compact array: count + 1 as an unsigned varint)
    data = _uv(HUNDRED_MIB + 1) + b"\x00" * (100 - len(_uv(HUNDRED_MIB + 1)))
    _refused_at_once("MetadataRequest", 12, data)
    # an int32 array (a struct's []int32: OffsetForLeaderEpoch? Fetch's forgotten topics)
    t0 = time.perf_counter()
    for _ in range(1000):
        with pytest.raises(DecodeError):
            decoder("MetadataRequest", 4)(struct.pack(">i", HUNDRED_MIB) + bytes(96), 0)
    per_decode = (time.perf_counter() - t0) / 1000
    assert per_decode < 1e-4, per_decode  # measured: ~2 us


@pytest.mark.parametrize(("name", "version", "data"), [
    # a records blob claiming 100 MiB: ProduceRequest v3 (int32 length)
    ("ProduceRequest", 3, b"\xff\xff" + struct.pack(">hi", 1, 1000) + struct.pack(">i", 1)
     + b"\x00\x01t" + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", HUNDRED_MIB)
     + b"\x00" * 40),
    # and in v9 (compact: length + 1 as an unsigned varint)
    ("ProduceRequest", 9, b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02" + b"\x02t" + b"\x02"
     + struct.pack(">i", 0) + _uv(HUNDRED_MIB + 1) + b"\x00" * 40),
    # a string of 32767 bytes in a 20-byte buffer (HeartbeatRequest v0 group id)
    ("HeartbeatRequest", 0, struct.pack(">h", 32767) + b"g" * 18),
    # bytes of 2 GiB - 1 (SaslAuthenticateRequest v0 auth bytes)
    ("SaslAuthenticateRequest", 0, struct.pack(">i", (1 << 31) - 1) + b"\x00" * 60),
    # a compact string of 2^35 - 2 bytes: the largest 5-byte varint
    ("HeartbeatRequest", 4, _uv((1 << 35) - 1) + b"\x00" * 40),
    # a tagged field claiming 100 MiB
    ("HeartbeatResponse", 4, struct.pack(">ih", 0, 0) + b"\x01\x00" + _uv(HUNDRED_MIB) + b"\x00"),
    # a count of tagged fields in the billions
    ("HeartbeatResponse", 4, struct.pack(">ih", 0, 0) + _uv((1 << 35) - 1) + b"\x05\x00" * 30),
])
def test_huge_lengths_are_refused_before_allocating(name: str, version: int, data: bytes
                                                     ) -> None:
    assert len(data) <= 100
    _refused_at_once(name, version, data)


def test_a_varint_longer_than_5_bytes_is_refused() -> None:
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == ((1 << 32) - 1, 5)
    with pytest.raises(DecodeError):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(DecodeError):
        decoder("HeartbeatRequest", 4)(b"\xff" * 64, 0)


def test_bad_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decoder("HeartbeatRequest", 0)(struct.pack(">h", 2) + b"\xc3\x28" + bytes(20), 0)


def test_null_where_the_version_has_none_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="topic_data"):
        decoder("ProduceRequest", 3)(b"\xff\xff" + struct.pack(">hi", 1, 1) + b"\xff\xff\xff\xff",
                                     0)
    with pytest.raises(DecodeError, match="group_id"):
        decoder("HeartbeatRequest", 0)(b"\xff\xff" + bytes(20), 0)
