"""franz's Kafka codec against codecs no one here wrote, on every message in
api/kafka/protocol/messages (requests and responses) and every version both know:

- kafka-python 3.x (``kafka.protocol``: classes generated from Kafka 4.x's JSON);
- kio (Aiven's dataclasses generated from Kafka's JSON, a Rust decoder);
- kafka-python's hand-written legacy structs (``kafka.protocol.old``) for the old
  versions Kafka 4.x dropped (Produce v0-2, Fetch v0-3, ...), which neither of the two
  above has.

Each draws random valid messages from franz's own schema (every type, nulls, tagged
fields present or not, nested arrays of structs, empty and null arrays, unicode), then:
franz encodes -> the oracle decodes -> the same values field by field; the oracle
re-encodes what it decoded -> franz decodes -> the original. With kafka-python the
re-encoding is also byte-identical to franz's. ``FRANZ_CODEC_EXAMPLES`` sets the examples
per (message, version) (default 8; 200 for a long run).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parent))
import _kafka_codec_oracles as O  # noqa: E402

from api.kafka.protocol import codegen  # noqa: E402
from api.kafka.protocol.schema import load  # noqa: E402

EXAMPLES = O.env_examples(8)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

try:  # kafka-python 3.x: its messages generated from Kafka's JSON (2.x has none)
    KP = O.kafka_python_classes()
except ImportError:
    KP = {}
KP_CASES = [(n, v) for n, v in O.all_versions() if n in KP and v in O.kafka_python_versions(KP[n])]
KIO_CASES = [(n, v) for n, v in O.all_versions() if O.kio_class(n, v) is not None]


def _old_class(name: str, version: int) -> Any | None:
    import importlib
    import pkgutil

    try:
        import kafka.protocol.old as old
    except ImportError:
        return None

    for info in pkgutil.iter_modules(old.__path__):
        mod = importlib.import_module(f"kafka.protocol.old.{info.name}")
        cls = getattr(mod, f"{name}_v{version}", None)
        if cls is not None and hasattr(cls, "SCHEMA"):
            return cls
    return None


_COVERED = set(KP_CASES) | set(KIO_CASES)
# kafka-python's legacy struct is wrong there (Partitions one Int32, where Kafka's
# definition has []int32); v0 is v1's layout, which both other oracles check
LEGACY_WRONG = {("DescribeLogDirsRequest", 0)}
OLD_CASES = [(n, v) for n, v in O.all_versions() if (n, v) not in _COVERED
             and (n, v) not in LEGACY_WRONG and _old_class(n, v) is not None]


def _ids(cases: list[tuple[str, int]]) -> list[str]:
    return [f"{n}-v{v}" for n, v in cases]


def test_every_message_version_has_an_oracle() -> None:
    """Only RequestHeader v0 (api key, version, correlation id: tested byte by byte in
    test_kafka_codec.py) and DescribeLogDirsRequest v0 (v1's layout) have no independent
    codec."""
    if not KP or not KIO_CASES:
        pytest.skip("needs kafka-python >= 3 and kio (the dev extra)")
    every = set(O.all_versions())
    assert len(every) > 400
    assert every - _COVERED - set(OLD_CASES) == {("RequestHeader", 0)} | LEGACY_WRONG
    assert load("DescribeLogDirsRequest").flexible.low == 2  # v0 and v1: the same bytes
    assert codegen.decoder("DescribeLogDirsRequest", 0)(b"\xff\xff\xff\xff", 0)[0] == \
        codegen.decoder("DescribeLogDirsRequest", 1)(b"\xff\xff\xff\xff", 0)[0]
    names = {n for n, _ in _COVERED}
    assert names == set(O.NAMES)


def _franz(name: str, version: int, obj: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """franz's bytes of ``obj`` and what its decoder must give back for them."""
    m = load(name)
    flexible = O.is_flexible(m, version)
    data = codegen.encode(name, version, obj)
    want = O.expected(m.fields, version, flexible, obj)
    got, pos = codegen.decoder(name, version)(data, 0)
    assert pos == len(data)
    assert O.norm(got) == want
    # a decoded message encodes to the same bytes (the encoding is canonical)
    assert codegen.encode(name, version, got) == data
    return data, want


@pytest.mark.parametrize(("name", "version"), list(O.all_versions()),
                         ids=_ids(list(O.all_versions())))
def test_franz_round_trip(name: str, version: int) -> None:
    @SETTINGS
    @given(O.message_strategy(name, version))
    def run(obj: dict[str, Any]) -> None:
        _franz(name, version, obj)

    run()


@pytest.mark.parametrize(("name", "version"), KP_CASES, ids=_ids(KP_CASES))
def test_kafka_python(name: str, version: int) -> None:
    cls = KP[name]
    m = load(name)
    flexible = O.is_flexible(m, version)

    @SETTINGS
    @given(O.message_strategy(name, version))
    def run(obj: dict[str, Any]) -> None:
        data, want = _franz(name, version, obj)
        theirs = O.kp_decode(cls, name, version, data)
        assert O.norm(O.kp_plain(cls._struct, theirs, m.fields, version, flexible)) == \
            O.project(m.fields, version, flexible, want)
        back = O.kp_encode(theirs, name, version)
        got, pos = codegen.decoder(name, version)(back, 0)
        assert pos == len(back)
        assert O.norm(got) == want
        assert back == data

    run()


@pytest.mark.parametrize(("name", "version"), KIO_CASES, ids=_ids(KIO_CASES))
def test_kio(name: str, version: int) -> None:
    cls = O.kio_class(name, version)
    m = load(name)
    flexible = O.is_flexible(m, version)
    # kio types some int fields (durations, timestamps, error codes): values it can hold
    override = O.kio_override(O.kio_types(cls, m.fields, version, flexible))

    @SETTINGS
    @given(O.message_strategy(name, version, override))
    def run(obj: dict[str, Any]) -> None:
        data, want = _franz(name, version, obj)
        theirs, size = O.kio_decode(cls, data)
        assert size == len(data)
        assert O.norm(O.kio_plain(cls, theirs, m.fields, version, flexible)) == \
            O.project(m.fields, version, flexible, want)
        back = O.kio_encode(cls, theirs)
        got, pos = codegen.decoder(name, version)(back, 0)
        assert pos == len(back)
        assert O.norm(got) == want

    run()


def _old_plain(values: Any, fields: tuple, version: int) -> dict[str, Any]:
    mine = O.untagged(fields, version, False)
    assert len(mine) == len(values)
    out: dict[str, Any] = {}
    for f, v in zip(mine, values, strict=True):
        if v is not None and f.is_struct:
            v = ([_old_plain(e, f.fields, version) for e in v] if f.is_array
                 else _old_plain(v, f.fields, version))
        elif isinstance(v, memoryview | bytearray):
            v = bytes(v)
        out[f.name] = v
    return out


@pytest.mark.parametrize(("name", "version"), OLD_CASES, ids=_ids(OLD_CASES))
def test_kafka_python_legacy_structs(name: str, version: int) -> None:
    cls = _old_class(name, version)
    m = load(name)
    assert not O.is_flexible(m, version)

    @SETTINGS
    @given(O.message_strategy(name, version))
    def run(obj: dict[str, Any]) -> None:
        data, want = _franz(name, version, obj)
        buf = io.BytesIO(data)
        values = cls.SCHEMA.decode(buf)
        assert buf.tell() == len(data)
        assert O.norm(_old_plain(values, m.fields, version)) == \
            O.project(m.fields, version, False, want)
        assert cls.SCHEMA.encode(values) == data

    run()
