"""A decoder and an encoder per message and version, generated from Kafka's definitions.

For each (message, version) this module writes the Python source of two functions, one
statement per field, and compiles it once (on first use, then cached):

    decode(buf, pos) -> (dict, pos)      buf: bytes or memoryview
    encode(obj, out, parts) -> None      out: bytearray; parts: list (see below)

Messages are plain dicts keyed by the snake_case field names (``topics``,
``partition_index``); a decoded message holds every field of its definition, those its
version lacks at their defaults (a struct's default is the dict of its fields'
defaults), so handlers need not know the version. An encoder takes what the dict holds
and the field's default for what it does not; it skips fields the version lacks and
raises ValueError for a null where the version has none (or a UUID not of 16 bytes).

Generated straight-line code avoids what an interpreter of the definitions pays per
field (a type dispatch, a version check, a loop over field objects): measured in
``benchmarks/kafka_codec_bench.py`` and docs/kafka-protocol.md.

Records (the ``records`` type: record batches as stored) decode as a slice of the buffer
(a memoryview when given one: no copy). On encoding, a records value that is not a bytes
object (a file region for sendfile, anything with ``__len__``) ends the current chunk:
``out`` is moved to ``parts``, the value appended after it, and ``out`` starts again, so
an answer is a list of byte chunks and regions the server writes in order.

Every decode error (short buffer, bad length, bad UTF-8, a count larger than the bytes
left) raises :class:`DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from api.kafka.protocol.schema import Field, Message, load

I8, I16, U16, I32, U32, I64, F64 = (struct.Struct(f) for f in (">b", ">h", ">H", ">i", ">I", ">q", ">d"))

Decoder = Callable[[Any, int], tuple[dict[str, Any], int]]
Encoder = Callable[[dict[str, Any], bytearray, list[Any]], None]


class DecodeError(ValueError):
    """The bytes are not a valid message of the version asked."""


def read_uvarint(b: Any, p: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = [uvarint(i) for i in range(128)]


def encode_uvarint(value: int) -> bytes:
    return _SMALL_UVARINTS[value] if 0 <= value < 128 else uvarint(value)


_FIXED = {"int8": ("I8", 1), "int16": ("I16", 2), "uint16": ("U16", 2), "int32": ("I32", 4),
          "uint32": ("U32", 4), "int64": ("I64", 8), "float64": ("F64", 8)}


_PACK = {"int8": "_P8", "int16": "_P16", "uint16": "_U16P", "int32": "_P32",
         "uint32": "_U32P", "int64": "_P64", "float64": "_F64P"}


class _Source:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.consts: dict[str, object] = {}  # module globals of the generated code

    def const(self, value: object) -> str:
        """A global of the generated module holding ``value`` (built once, not per call)."""
        name = f"_K{len(self.consts)}"
        self.consts[name] = value
        return name

    def add(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def tmp(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"


def _flexible(f: Field, flexible: bool, version: int) -> bool:
    """Whether ``f`` is compact at ``version``: a field's own "flexibleVersions"
    (RequestHeader's ClientId: "none") overrides the message's."""
    return flexible if f.flexible_override is None else version in f.flexible_override


# --- decoding ------------------------------------------------------------------------


def _decode_value(src: _Source, d: int, f: Field, version: int, flexible: bool, target: str,
                  structs: dict[str, str]) -> None:
    """Lines that read one value of ``f`` at ``p`` into ``target``."""
    nullable = version in f.nullable
    compact = _flexible(f, flexible, version)
    if f.is_array:
        n = src.tmp("n")
        if compact:
            src.add(d, f"{n}, p = _ruv(b, p)")
            src.add(d, f"{n} -= 1")
        else:
            src.add(d, f"{n} = _I32(b, p)[0]")
            src.add(d, "p += 4")
        src.add(d, f"if {n} < 0:")
        if nullable:
            src.add(d + 1, f"{target} = None")
        else:
            src.add(d + 1, f"raise _DE('{f.name}: null array in a version that has none')")
        src.add(d, "else:")
        src.add(d + 1, f"if {n} > L - p:")
        src.add(d + 2, f"raise _DE('{f.name}: ' + str({n}) + ' elements in ' + str(L - p) + ' bytes')")
        lst, i = src.tmp("a"), src.tmp("i")
        src.add(d + 1, f"{lst} = []")
        src.add(d + 1, f"for {i} in range({n}):")
        if f.is_struct:
            src.add(d + 2, f"v, p = {structs[f.element]}(b, p)")
        else:
            _decode_scalar(src, d + 2, f.element, f.name, False, compact, "v")
        src.add(d + 2, f"{lst}.append(v)")
        src.add(d + 1, f"{target} = {lst}")
    elif f.is_struct:
        if nullable:
            src.add(d, "if _I8(b, p)[0] < 0:")
            src.add(d + 1, "p += 1")
            src.add(d + 1, f"{target} = None")
            src.add(d, "else:")
            src.add(d + 1, "p += 1")
            src.add(d + 1, f"{target}, p = {structs[f.element]}(b, p)")
        else:
            src.add(d, f"{target}, p = {structs[f.element]}(b, p)")
    else:
        _decode_scalar(src, d, f.type, f.name, nullable, compact, target)


def _decode_scalar(src: _Source, d: int, kind: str, name: str, nullable: bool, compact: bool,
                   target: str) -> None:
    if kind in _FIXED:
        s, size = _FIXED[kind]
        src.add(d, f"{target} = _{s}(b, p)[0]")
        src.add(d, f"p += {size}")
    elif kind == "bool":
        src.add(d, f"{target} = b[p] != 0")
        src.add(d, "p += 1")
    elif kind == "uuid":
        src.add(d, "if p + 16 > L:")
        src.add(d + 1, f"raise _DE('{name}: short uuid')")
        src.add(d, f"{target} = bytes(b[p:p + 16])")
        src.add(d, "p += 16")
    elif kind in ("string", "bytes", "records"):
        n = src.tmp("n")
        if compact:
            src.add(d, f"{n}, p = _ruv(b, p)")
            src.add(d, f"{n} -= 1")
        elif kind == "string":
            src.add(d, f"{n} = _I16(b, p)[0]")
            src.add(d, "p += 2")
        else:
            src.add(d, f"{n} = _I32(b, p)[0]")
            src.add(d, "p += 4")
        src.add(d, f"if {n} < 0:")
        if nullable:
            src.add(d + 1, f"{target} = None")
        else:
            src.add(d + 1, f"raise _DE('{name}: null in a version where it is not nullable')")
        src.add(d, "else:")
        src.add(d + 1, f"e = p + {n}")
        src.add(d + 1, "if e > L:")
        src.add(d + 2, f"raise _DE('{name}: ' + str({n}) + ' bytes past the end')")
        if kind == "string":
            src.add(d + 1, f"{target} = str(b[p:e], 'utf-8')")
        elif kind == "bytes":
            src.add(d + 1, f"{target} = bytes(b[p:e])")
        else:
            src.add(d + 1, f"{target} = b[p:e]")
        src.add(d + 1, "p = e")
    else:
        raise ValueError(f"unknown type {kind} of {name}")


def _decoder_source(src: _Source, fname: str, fields: tuple[Field, ...], version: int,
                    flexible: bool, structs: dict[str, str]) -> None:
    src.add(0, f"def {fname}(b, p):")
    src.add(1, "L = len(b)")
    src.add(1, "o = {}")
    tagged: list[Field] = []
    for f in fields:
        if version not in f.versions:
            src.add(1, f"o[{f.name!r}] = {_const(f.default)}")
        elif flexible and version in f.tagged:
            src.add(1, f"o[{f.name!r}] = {_const(f.default)}")
            tagged.append(f)
        else:
            _decode_value(src, 1, f, version, flexible, f"o[{f.name!r}]", structs)
    if flexible:
        src.add(1, "nt, p = _ruv(b, p)")
        src.add(1, "for _ in range(nt):")
        src.add(2, "tag, p = _ruv(b, p)")
        src.add(2, "size, p = _ruv(b, p)")
        src.add(2, "end = p + size")
        src.add(2, "if end > L:")
        src.add(3, "raise _DE('tagged field past the end')")
        for k, f in enumerate(tagged):
            src.add(2, f"{'if' if k == 0 else 'elif'} tag == {f.tag}:")
            _decode_value(src, 3, f, version, flexible, f"o[{f.name!r}]", structs)
            src.add(3, "if p != end:")
            src.add(4, f"raise _DE('tagged {f.name}: ' + str(size) + ' bytes declared, '"
                       f" + str(p - end + size) + ' read')")
        src.add(2, "p = end")
    src.add(1, "return o, p")


# --- encoding ------------------------------------------------------------------------


def _encode_value(src: _Source, d: int, f: Field, version: int, flexible: bool, value: str,
                  out: str, structs: dict[str, str]) -> None:
    nullable = version in f.nullable
    compact = _flexible(f, flexible, version)
    if f.is_array:
        null = b"\x00" if compact else b"\xff\xff\xff\xff"
        src.add(d, f"if {value} is None:")
        _null(src, d + 1, f.name, version, nullable, null, out)
        src.add(d, "else:")
        if compact:
            src.add(d + 1, f"{out} += _uv(len({value}) + 1)")
        else:
            src.add(d + 1, f"{out} += _P32(len({value}))")
        item = src.tmp("x")
        src.add(d + 1, f"for {item} in {value}:")
        if f.is_struct:
            src.add(d + 2, f"{structs[f.element]}({item}, {out}, parts)")
        else:
            _encode_scalar(src, d + 2, f.element, f.name, version, False, compact, item, out)
    elif f.is_struct:
        if nullable:
            src.add(d, f"if {value} is None:")
            src.add(d + 1, f"{out} += b'\\xff'")
            src.add(d, "else:")
            src.add(d + 1, f"{out} += b'\\x01'")
            src.add(d + 1, f"{structs[f.element]}({value}, {out}, parts)")
        else:
            src.add(d, f"{structs[f.element]}({value} or _EMPTY, {out}, parts)")
    else:
        _encode_scalar(src, d, f.type, f.name, version, nullable, compact, value, out)


def _null(src: _Source, d: int, name: str, version: int, nullable: bool, null: bytes,
          out: str) -> None:
    """The null marker, or (as Kafka's encoder) an error where the version has no null:
    its readers would refuse the message."""
    if nullable:
        src.add(d, f"{out} += {null!r}")
    else:
        src.add(d, f"raise _VE('{name}: null in v{version}, where it is not nullable')")


def _encode_scalar(src: _Source, d: int, kind: str, name: str, version: int, nullable: bool,
                   compact: bool, value: str, out: str) -> None:
    if kind in _FIXED:
        src.add(d, f"{out} += {_PACK[kind]}({value})")
    elif kind == "bool":
        src.add(d, f"{out} += b'\\x01' if {value} else b'\\x00'")
    elif kind == "uuid":
        src.add(d, f"if {value} is None:")  # Kafka's zero UUID: no id
        src.add(d + 1, f"{out} += _ZERO_UUID")
        src.add(d, f"elif len({value}) == 16:")
        src.add(d + 1, f"{out} += {value}")
        src.add(d, "else:")
        src.add(d + 1, f"raise _VE('{name}: a UUID is 16 bytes, not ' + str(len({value})))")
    elif kind in ("string", "bytes", "records"):
        null = b"\x00" if compact else (b"\xff\xff" if kind == "string" else b"\xff\xff\xff\xff")
        src.add(d, f"if {value} is None:")
        _null(src, d + 1, name, version, nullable, null, out)
        src.add(d, "else:")
        if kind == "string":
            src.add(d + 1, f"s = {value}.encode()")
        elif kind == "bytes":
            src.add(d + 1, f"s = {value}")
        else:
            src.add(d + 1, f"s = {value}")
        if compact:
            src.add(d + 1, f"{out} += _uv(len(s) + 1)")
        elif kind == "string":
            src.add(d + 1, f"{out} += _P16(len(s))")
        else:
            src.add(d + 1, f"{out} += _P32(len(s))")
        if kind == "records":
            src.add(d + 1, "if isinstance(s, _BYTES):")
            src.add(d + 2, f"{out} += s")
            src.add(d + 1, "else:")
            src.add(d + 2, f"parts.append(bytes({out}))")
            src.add(d + 2, f"{out}.clear()")
            src.add(d + 2, "parts.append(s)")
        else:
            src.add(d + 1, f"{out} += s")
    else:
        raise ValueError(f"unknown type {kind}")


def _encoder_source(src: _Source, fname: str, fields: tuple[Field, ...], version: int,
                    flexible: bool, structs: dict[str, str]) -> None:
    src.add(0, f"def {fname}(o, out, parts):")
    tagged: list[Field] = []
    body = False
    for f in fields:
        if version not in f.versions:
            continue
        if flexible and version in f.tagged:
            tagged.append(f)
            continue
        v = src.tmp("v")
        src.add(1, f"{v} = {_get(f)}")
        _encode_value(src, 1, f, version, flexible, v, "out", structs)
        body = True
    if flexible:
        if not tagged:
            src.add(1, "out += b'\\x00'")
        else:
            src.add(1, "tg = []")
            for f in sorted(tagged, key=lambda f: f.tag or 0):
                v = src.tmp("v")
                src.add(1, f"{v} = {_get(f)}")
                src.add(1, f"if {_not_default(src, f, v)}:")
                src.add(2, "t = bytearray()")
                _encode_value(src, 2, f, version, flexible, v, "t", structs)
                src.add(2, f"tg.append(({f.tag}, t))")
            src.add(1, "out += _uv(len(tg))")
            src.add(1, "for tag, t in tg:")
            src.add(2, "out += _uv(tag)")
            src.add(2, "out += _uv(len(t))")
            src.add(2, "out += t")
        body = True
    if not body:
        src.add(1, "pass")


def _get(f: Field) -> str:
    """The value of ``f`` in the dict ``o``: a missing struct is None (its encoder writes
    the default struct, or null where nullable)."""
    if f.is_struct and not f.is_array:
        return f"o.get({f.name!r})"
    return f"o.get({f.name!r}, {_const(f.default)})"


def _not_default(src: _Source, f: Field, value: str) -> str:
    """The test that a tagged field differs from its default (only then is it written,
    as Kafka does: an empty array is its default whatever the sequence type; a struct
    equal to its fields' defaults, or missing, is not written)."""
    if f.is_array:
        return f"{value} is not None" if f.default is None else f"{value} is None or len({value})"
    if f.is_struct:
        if f.default is None:
            return f"{value} is not None"
        return f"{value} is not None and {value} != {src.const(f.default)}"
    return f"{value} != {_const(f.default)}"


# --- assembly ------------------------------------------------------------------------


def _const(value: object) -> str:
    return repr(value)


def _structs(fields: tuple[Field, ...], version: int, found: dict[str, Field]) -> None:
    """Every struct the version uses, by name (Kafka's names are unique per message)."""
    for f in fields:
        if version in f.versions and f.is_struct:
            found.setdefault(f.element, f)
            _structs(f.fields, version, found)


def _compile(message: Message, version: int, direction: str) -> Callable[..., Any]:
    flexible = version in message.flexible
    found: dict[str, Field] = {}
    _structs(message.fields, version, found)
    names = {key: f"_{direction}_{key}" for key in found}
    src = _Source()
    emit = _decoder_source if direction == "d" else _encoder_source
    for key, f in found.items():
        emit(src, names[key], f.fields, version, flexible, names)
    emit(src, "_root", message.fields, version, flexible, names)
    namespace: dict[str, Any] = {
        "_I8": I8.unpack_from, "_I16": I16.unpack_from, "_U16": U16.unpack_from,
        "_I32": I32.unpack_from, "_U32": U32.unpack_from, "_I64": I64.unpack_from,
        "_F64": F64.unpack_from, "_P8": I8.pack, "_P16": I16.pack, "_P32": I32.pack,
        "_P64": I64.pack, "_U16P": U16.pack, "_U32P": U32.pack, "_F64P": F64.pack,
        "_ruv": read_uvarint, "_uv": encode_uvarint, "_DE": DecodeError, "_VE": ValueError,
        "_BYTES": (bytes, bytearray, memoryview), "_EMPTY": {}, "_ZERO_UUID": bytes(16),
        **src.consts,
    }
    code = "\n".join(src.lines)
    exec(compile(code, f"<kafka {message.name} v{version} {direction}>", "exec"), namespace)
    fn = namespace["_root"]
    fn.source = code  # for debugging: print(decoder(...).source)
    return fn


@cache
def decoder(name: str, version: int) -> Decoder:
    """The decoder of ``name`` (``ProduceRequest``) at ``version``."""
    message = load(name)
    if version not in message.valid:
        raise DecodeError(f"{name} has no version {version}")
    raw = _compile(message, version, "d")

    def decode(buf: Any, pos: int = 0) -> tuple[dict[str, Any], int]:
        try:
            return raw(buf, pos)
        except DecodeError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            raise DecodeError(f"malformed {name} v{version}: {exc}") from None

    decode.source = raw.source  # type: ignore[attr-defined]
    return decode


@cache
def encoder(name: str, version: int) -> Encoder:
    """The encoder of ``name`` at ``version``."""
    message = load(name)
    if version not in message.valid:
        raise ValueError(f"{name} has no version {version}")
    return _compile(message, version, "e")  # type: ignore[return-value]


def encode(name: str, version: int, obj: dict[str, Any]) -> bytes:
    """The whole message as bytes (no records regions)."""
    out = bytearray()
    parts: list[Any] = []
    encoder(name, version)(obj, out, parts)
    if parts:
        parts.append(bytes(out))
        return b"".join(bytes(p) for p in parts)
    return bytes(out)
