"""Shared by the Kafka codec tests: hypothesis strategies built from franz's own schema
(``api.kafka.protocol.schema``) and adapters to two codecs no one here wrote,
kafka-python's ``kafka.protocol`` and ``kio``, that turn their decoded objects into
franz-shaped dicts.

Both oracles ship newer Kafka definitions than franz (Kafka 4.x): field names may
differ, so fields are matched by position (the untagged fields of a version, in order:
the wire format of an existing version never changes) and tagged fields by tag.
"""

from __future__ import annotations

import datetime
import importlib
import io
import os
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from api.kafka.protocol.schema import Field, Message, load

MESSAGES = Path(__file__).resolve().parents[3] / "api" / "kafka" / "protocol" / "messages"
NAMES = sorted(p.stem for p in MESSAGES.glob("*.json"))
HEADERS = ("RequestHeader", "ResponseHeader")

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}

# A path names a field from the message root: ("topics", "partitions", "error_code").
Path_ = tuple[str, ...]
Override = Callable[[Field, Path_], "st.SearchStrategy[Any] | None"]


def all_versions() -> Iterator[tuple[str, int]]:
    for name in NAMES:
        m = load(name)
        for v in range(m.valid.low, m.valid.high + 1):
            yield name, v


def is_flexible(message: Message, version: int) -> bool:
    return version in message.flexible


def untagged(fields: tuple[Field, ...], version: int, flexible: bool) -> list[Field]:
    return [f for f in fields if version in f.versions and not (flexible and version in f.tagged)]


def tagged(fields: tuple[Field, ...], version: int, flexible: bool) -> list[Field]:
    return [f for f in fields if version in f.versions and flexible and version in f.tagged]


# --- strategies ----------------------------------------------------------------------


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        # the edges and small values more often than uniform draws would give them
        return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]),
                         st.integers(lo, hi))
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        # every plane, combining marks, NUL; no lone surrogates (not encodable in UTF-8)
        return st.text(max_size=12)
    if kind in ("bytes", "records"):
        return st.binary(max_size=40)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16)
    raise AssertionError(f"no strategy for {kind}")


def value_strategy(f: Field, version: int, flexible: bool, path: Path_ = (),
                   override: Override | None = None, *, in_version: bool = True
                   ) -> st.SearchStrategy[Any]:
    """Valid values of ``f`` at ``version`` (``in_version=False``: any of its type)."""
    path = path + (f.name,)
    nullable = in_version and version in f.nullable
    if f.is_struct:
        inner = struct_strategy(f.fields, version, flexible, path, override)
        base = st.lists(inner, max_size=3) if f.is_array else inner
    else:
        elem = override(f, path) if override else None
        if elem is None:
            elem = _scalar(f.element)
        base = st.lists(elem, max_size=4) if f.is_array else elem
    return st.one_of(st.none(), base) if nullable else base


def struct_strategy(fields: tuple[Field, ...], version: int, flexible: bool, path: Path_ = (),
                    override: Override | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts of the struct at ``version``: every untagged field of the version (its
    nulls, empty and null arrays, nested structs), tagged fields present or not, and
    sometimes fields the version lacks (the encoder must skip them)."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if version not in f.versions:
            if not f.is_struct:  # a struct of another version may name other structs
                optional[f.name] = value_strategy(f, version, flexible, path, override,
                                                  in_version=False)
        elif flexible and version in f.tagged:
            optional[f.name] = value_strategy(f, version, flexible, path, override)
        else:
            required[f.name] = value_strategy(f, version, flexible, path, override)
    return st.fixed_dictionaries(required, optional=optional)


def message_strategy(name: str, version: int, override: Override | None = None
                     ) -> st.SearchStrategy[dict[str, Any]]:
    m = load(name)
    return struct_strategy(m.fields, version, is_flexible(m, version), (), override)


# --- what franz's decoder must give back ---------------------------------------------


def norm(value: Any) -> Any:
    """Lists for every sequence, bytes for every buffer: comparable across codecs."""
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def expected(fields: tuple[Field, ...], version: int, flexible: bool, obj: dict[str, Any]
             ) -> dict[str, Any]:
    """The dict franz's decoder gives for what its encoder wrote from ``obj``: every
    field of the definition, those the version lacks (or a missing tagged one) at
    their defaults."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions or f.name not in obj:
            out[f.name] = norm(f.default)  # a struct's: the dict of its fields' defaults
            continue
        v = obj[f.name]
        if v is None or not f.is_struct:
            out[f.name] = norm(v)
        elif f.is_array:
            out[f.name] = [expected(f.fields, version, flexible, e) for e in v]
        else:
            out[f.name] = expected(f.fields, version, flexible, v)
    return out


def project(fields: tuple[Field, ...], version: int, flexible: bool, obj: dict[str, Any]
            ) -> dict[str, Any]:
    """Only the fields the version has (what another codec can know about)."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        v = obj[f.name]
        if f.is_struct and v is not None:
            v = ([project(f.fields, version, flexible, e) for e in v] if f.is_array
                 else project(f.fields, version, flexible, v))
        out[f.name] = v
    return out


def _same_kind(f: Field, theirs: str) -> None:
    """The field another codec has at the same place has the same wire type."""
    if f.is_struct:
        assert theirs[:2] == f.type[:2] and theirs.lstrip("[]")[:1].isupper(), (f.name, theirs)
    else:
        assert theirs == f.type, (f.name, f.type, theirs)


# --- kafka-python --------------------------------------------------------------------

_KP_PACKAGES = ("admin", "consumer", "metadata", "producer")


def kafka_python_classes() -> dict[str, Any]:
    """kafka-python's message class of each Kafka message name it defines."""
    from kafka.protocol.api_header import RequestHeader, ResponseHeader
    from kafka.protocol.api_message import ApiMessage

    importlib.import_module("kafka.protocol.sasl")
    for pkg in _KP_PACKAGES:
        mod = importlib.import_module(f"kafka.protocol.{pkg}")
        for info in pkgutil.iter_modules(mod.__path__):
            importlib.import_module(f"kafka.protocol.{pkg}.{info.name}")

    def subclasses(c: type) -> Iterator[type]:
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    found: dict[str, Any] = {"RequestHeader": RequestHeader, "ResponseHeader": ResponseHeader}
    for c in subclasses(ApiMessage):
        if getattr(c, "_class_version", None) is None:
            found.setdefault(c.name, c)
    return found


def kafka_python_versions(cls: Any) -> range:
    lo, hi = cls._valid_versions  # kafka-python's own validVersions (Kafka 4.x)
    return range(lo, hi + 1)


def kp_decode(cls: Any, name: str, version: int, data: bytes) -> Any:
    if name in HEADERS:
        # kafka-python's headers pick the version from `flexible` (their lowest valid
        # version or their first flexible one)
        flexible = version in load(name).flexible
        return cls.decode(io.BytesIO(data), flexible=flexible)
    from kafka.protocol.api_message import ApiMessage

    # ApiMessage's own decode: kafka-python's ApiVersionsResponse reads any answer with
    # an error as v0 (a client's view of an unsupported-version answer)
    return ApiMessage.decode.__func__(cls, data, version=version)


def kp_encode(obj: Any, name: str, version: int) -> bytes:
    if name in HEADERS:
        return obj.encode(flexible=version in load(name).flexible)
    for slot in ("_header", "_min_version", "_max_version"):
        # kafka-python's compiled decoder builds objects without __init__: these slots
        # are unset, and encode() reads _header
        if not hasattr(obj, slot):
            setattr(obj, slot, None)
    from kafka.protocol.api_message import ApiMessage

    return ApiMessage.encode(obj, version=version)  # not the per-class fix-ups


def _kp_scalar(f: Field, kpf: Any, v: Any) -> Any:
    bitfield = getattr(kpf, "_type_str", "") == "bitfield"
    if v is None:
        if bitfield:
            return -(1 << 31)  # kafka-python reads INT32_MIN ("not asked") as None
        if f.element == "uuid":
            return bytes(16)  # and the zero UUID as None
        return None
    if bitfield:
        bits = sum(1 << b for b in v)  # kafka-python patches authorized_operations to a set
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    if f.element == "uuid":
        return v.bytes
    if f.element in ("bytes", "records"):
        return bytes(v)
    return v


def kp_plain(kps: Any, obj: Any, fields: tuple[Field, ...], version: int, flexible: bool
             ) -> dict[str, Any]:
    """kafka-python's decoded ``obj`` (of struct ``kps``) as a franz dict of the version."""
    mine = untagged(fields, version, flexible)
    theirs = kps.untagged_fields(version)
    assert len(mine) == len(theirs), (
        f"untagged fields differ: {[f.kafka_name for f in mine]} vs {[k._name for k in theirs]}")
    pairs = list(zip(mine, theirs, strict=True))
    tags = kps.tagged_fields(version)._tags if flexible else {}
    mine_tagged = tagged(fields, version, flexible)
    assert sorted(tags) == sorted(f.tag for f in mine_tagged), (
        f"tags differ: {sorted(tags)} vs {sorted(f.tag for f in mine_tagged)}")
    pairs += [(f, tags[f.tag]) for f in mine_tagged]
    out: dict[str, Any] = {}
    for f, k in pairs:
        _same_kind(f, k._type_str.replace("bitfield", "int32"))
        v = getattr(obj, k.name)
        if v is None and f.is_struct and not f.is_array and f.tag is not None:
            v = f.default  # kafka-python leaves an absent tagged struct None
        elif v is not None and f.is_struct:
            v = ([kp_plain(k, e, f.fields, version, flexible) for e in v] if f.is_array
                 else kp_plain(k, v, f.fields, version, flexible))
        elif v is not None and f.is_array:
            v = [_kp_scalar(f, k, e) for e in v]
        else:
            v = _kp_scalar(f, k, v)
        out[f.name] = v
    return out


# --- kio -----------------------------------------------------------------------------


def kio_class(name: str, version: int) -> Any | None:
    """kio's dataclass of ``name`` at ``version``, or None when kio has none."""
    try:
        from kio.schema.index import schema_name_map
    except ImportError:
        return None
    from kio.static.constants import EntityType

    if name in HEADERS:
        stem = "request_header" if name == "RequestHeader" else "response_header"
        try:
            mod = importlib.import_module(f"kio.schema.{stem}.v{version}.header")
        except ImportError:
            return None
        return getattr(mod, name)
    kind = EntityType.request if name.endswith("Request") else EntityType.response
    stem = _snake(name.removesuffix("Request").removesuffix("Response"))
    try:
        path = schema_name_map[stem][version][kind]
    except KeyError:
        return None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _kio_fields(cls: Any) -> tuple[list[Any], dict[int, Any]]:
    plain, by_tag = [], {}
    for d in dc_fields(cls):
        tag = d.metadata.get("tag")
        if tag is None:
            plain.append(d)
        else:
            by_tag[tag] = d
    return plain, by_tag


def _kio_inner(d: Any) -> Any:
    """The dataclass a struct field (or an array of them) of kio holds."""
    import typing
    from dataclasses import is_dataclass
    from types import NoneType, UnionType

    t = d.type
    if isinstance(t, str):
        raise AssertionError("kio annotations are resolved at class creation")
    while True:
        origin = typing.get_origin(t)
        if origin is tuple:
            t = typing.get_args(t)[0]
        elif origin in (UnionType, typing.Union):
            t = next(a for a in typing.get_args(t) if a is not NoneType)
        else:
            break
    assert is_dataclass(t), t
    return t


def _kio_pairs(cls: Any, fields: tuple[Field, ...], version: int, flexible: bool
               ) -> list[tuple[Field, Any]]:
    plain, by_tag = _kio_fields(cls)
    mine = untagged(fields, version, flexible)
    assert len(mine) == len(plain), (
        f"{cls.__name__}: {[f.name for f in mine]} vs {[d.name for d in plain]}")
    mine_tagged = tagged(fields, version, flexible)
    assert sorted(by_tag) == sorted(f.tag for f in mine_tagged), (cls, sorted(by_tag))
    return list(zip(mine, plain, strict=True)) + [(f, by_tag[f.tag]) for f in mine_tagged]


# kio's own types of int fields, as the wire has them
_KIO_WIRE = {"timedelta_i32": "int32", "timedelta_i64": "int64", "datetime_i64": "int64",
             "error_code": "int16"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def _kio_scalar(f: Field, d: Any, v: Any) -> Any:
    kind = d.metadata.get("kafka_type")
    if v is None:
        if kind == "datetime_i64":
            return -1  # kio reads Kafka's -1 ("no timestamp") as None
        if f.element == "uuid":
            return bytes(16)  # kio reads the zero UUID as None
        return None
    if kind in ("timedelta_i32", "timedelta_i64"):
        return v // _MS
    if kind == "datetime_i64":
        return round((v - _EPOCH) / _MS)  # to the nearest: kio's datetime may be 1 us off
    if kind == "error_code":
        return int(v)
    if f.element == "uuid":
        return v.bytes
    if f.element in ("bytes", "records"):
        return bytes(v)
    if f.element == "bool":
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        return str(v)
    return v


def kio_plain(cls: Any, obj: Any, fields: tuple[Field, ...], version: int, flexible: bool
              ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f, d in _kio_pairs(cls, fields, version, flexible):
        if not f.is_struct:
            kind = _KIO_WIRE.get(d.metadata["kafka_type"], d.metadata["kafka_type"])
            _same_kind(f, f"[]{kind}" if f.is_array else kind)
        v = getattr(obj, d.name)
        if v is not None and f.is_struct:
            inner = _kio_inner(d)
            v = ([kio_plain(inner, e, f.fields, version, flexible) for e in v] if f.is_array
                 else kio_plain(inner, v, f.fields, version, flexible))
        elif v is not None and f.is_array:
            v = [_kio_scalar(f, d, e) for e in v]
        else:
            v = _kio_scalar(f, d, v)
        out[f.name] = v
    return out


def kio_types(cls: Any, fields: tuple[Field, ...], version: int, flexible: bool,
              path: Path_ = ()) -> dict[Path_, str]:
    """kio's ``kafka_type`` of every field path of the version (timedelta, datetime,
    error_code are kio's own types with narrower ranges than the wire's)."""
    found: dict[Path_, str] = {}
    for f, d in _kio_pairs(cls, fields, version, flexible):
        p = path + (f.name,)
        if f.is_struct:
            found.update(kio_types(_kio_inner(d), f.fields, version, flexible, p))
        else:
            found[p] = d.metadata.get("kafka_type", "")
    return found


def kio_override(types: dict[Path_, str]) -> Override:
    """Values kio's typed fields can hold: known error codes, timestamps of its datetimes
    (or -1), durations its timedeltas keep exactly, non-zero UUIDs; the codec's
    behaviour on the rest is tested against kafka-python."""
    from kio.schema.errors import ErrorCode

    codes = sorted(int(e) for e in ErrorCode)

    def override(f: Field, path: Path_) -> st.SearchStrategy[Any] | None:
        kind = types.get(path)
        if kind == "error_code":
            return st.sampled_from(codes)
        if kind == "timedelta_i32":
            return st.integers(-(1 << 31), (1 << 31) - 1)
        if kind == "timedelta_i64":
            return st.integers(-(1 << 40), 1 << 40)  # a timedelta overflows near 2^56 ms
        if kind == "datetime_i64":
            # a datetime: -1 (none) or years 1970-9999 (kio's may be a microsecond off:
            # float seconds; it writes the same milliseconds back)
            return st.one_of(st.just(-1), st.integers(0, 253402300799999))
        if f.element == "uuid":
            return st.binary(min_size=16, max_size=16).filter(lambda b: b != bytes(16))
        return None

    return override


def kio_decode(cls: Any, data: bytes) -> tuple[Any, int]:
    from kio.serial import entity_reader

    return entity_reader(cls)(data, 0)


def kio_encode(cls: Any, obj: Any) -> bytes:
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    return buf.getvalue()


def env_examples(default: int) -> int:
    """``FRANZ_CODEC_EXAMPLES`` raises the examples per (message, version) for a long run."""
    return int(os.environ.get("FRANZ_CODEC_EXAMPLES", default))
