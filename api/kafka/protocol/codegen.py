"""A decoder and an encoder per message and version, generated from Kafka's definitions.

For each (message, version) this module writes the Python source of two functions,
straight-line code for every field, and compiles it once (on first use, then cached):

    decode(buf, pos) -> (dict, pos)      buf: bytes or memoryview
    encode(obj, out, parts) -> None      out: bytearray; parts: list (see below)

Messages are plain dicts keyed by the snake_case field names (``topics``,
``partition_index``); a decoded message holds every field of its definition, those its
version lacks at their defaults (a struct's default is the dict of its fields'
defaults), so handlers need not know the version. An encoder takes what the dict holds
and the field's default for what it does not; it skips fields the version lacks and
raises ValueError for a null where the version has none (or a UUID not of 16 bytes).

Generated straight-line code avoids what an interpreter of the definitions pays per
field (a type dispatch, a version check, a loop over field objects). Nested structs are
written inline (no call per array element), adjacent fixed-size fields are read and
written by one ``struct`` call, an array of one fixed-size type by one call, a varint
length below 16384 without a call, and a decoded struct is one dict display of locals.
Measured in ``benchmarks/kafka_codec_bench.py`` and docs/kafka-protocol.md.

Records (the ``records`` type: record batches as stored) decode as a slice of the buffer
(a memoryview when given one: no copy). On encoding, a records value that is not a bytes
object (a file region for sendfile, anything with ``__len__``), or a bytes-like one of
``LARGE_RECORDS`` (64 KiB) or more, ends the current chunk: ``out`` is copied to
``parts``, the value itself appended after it (no copy), and ``out`` starts again empty,
so an answer is a list of byte chunks, blobs and regions the server writes in order.
Smaller bytes-like records are copied into ``out``.

Every decode error (short buffer, bad length, bad UTF-8, a count larger than the bytes
left) raises :class:`DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from api.kafka.protocol.schema import Field, Message, load

I8, I16, I32 = (struct.Struct(f) for f in (">b", ">h", ">i"))

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


_SMALL_UVARINTS = tuple(uvarint(i) for i in range(128))


def encode_uvarint(value: int) -> bytes:
    return _SMALL_UVARINTS[value] if 0 <= value < 128 else uvarint(value)


# records of this size or more are a part of their own when encoding (not copied into
# the chunk): bytes and views of them are sent as they are
LARGE_RECORDS = 64 << 10

# struct codes of the fixed-size types: adjacent ones are read (and written) by one
# Struct call; bool reads as Kafka's `byte != 0`; a uuid reads as 16 bytes (written apart:
# its length is checked)
_CODE = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
         "float64": "d", "bool": "?", "uuid": "16s"}
_SIZE = {"b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8, "?": 1, "16s": 16}


# arrays of one fixed-size type: a Struct of each small length, made once
_SMALL_ARRAY = 64
_ARRAY_UNPACK = {c: tuple(struct.Struct(f">{n}{c}").unpack_from for n in range(_SMALL_ARRAY))
                 for c in "bhHiIqd?"}
_ARRAY_PACK = {c: tuple(struct.Struct(f">{n}{c}").pack for n in range(_SMALL_ARRAY))
               for c in "bhHiIqd?"}


def _unpack_array(code: str, n: int, b: Any, p: int) -> list[Any]:
    """``n`` values of one fixed-size type at ``p`` (bounds checked by the caller)."""
    return list(struct.Struct(f">{n}{code}").unpack_from(b, p))


def _pack_array(code: str, values: Any) -> bytes:
    return struct.Struct(f">{len(values)}{code}").pack(*values)


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


def _wire(fields: tuple[Field, ...], version: int, flexible: bool) -> list[Field]:
    """The fields written in order at ``version`` (not tagged)."""
    return [f for f in fields if version in f.versions and not (flexible and version in f.tagged)]


def _tagged(fields: tuple[Field, ...], version: int, flexible: bool) -> list[Field]:
    return sorted((f for f in fields if flexible and version in f.versions
                   and version in f.tagged), key=lambda f: f.tag or 0)


def _runs(wire: list[Field], codes: dict[str, str]) -> list[list[Field]]:
    """The wire fields, adjacent fixed-size scalars (those in ``codes``) grouped."""
    runs: list[list[Field]] = []
    for f in wire:
        fixed = not f.is_array and not f.is_struct and f.type in codes
        if fixed and runs and runs[-1][0].type in codes and not runs[-1][0].is_array \
                and not runs[-1][0].is_struct:
            runs[-1].append(f)
        else:
            runs.append([f])
    return runs


# --- decoding ------------------------------------------------------------------------


def _read_length(src: _Source, d: int, n: str, compact: bool, kind: str) -> None:
    """Lines that read a length (or count) into ``n``: -1 is null."""
    if compact:  # an unsigned varint of length + 1: one byte below 128, two below 16384
        src.add(d, f"{n} = b[p]")
        src.add(d, f"if {n} < 128:")
        src.add(d + 1, "p += 1")
        src.add(d, "elif b[p + 1] < 128:")
        src.add(d + 1, f"{n} = ({n} & 127 | b[p + 1] << 7)")
        src.add(d + 1, "p += 2")
        src.add(d, "else:")
        src.add(d + 1, f"{n}, p = _ruv(b, p)")
        src.add(d, f"{n} -= 1")
    elif kind == "string":
        src.add(d, f"{n} = _I16(b, p)[0]")
        src.add(d, "p += 2")
    else:
        src.add(d, f"{n} = _I32(b, p)[0]")
        src.add(d, "p += 4")


def _null_read(src: _Source, d: int, name: str, nullable: bool, target: str, what: str) -> None:
    if nullable:
        src.add(d, f"{target} = None")
    else:
        src.add(d, f"raise _DE('{name}: null {what} in a version where it is not nullable')")


def _decode_value(src: _Source, d: int, f: Field, version: int, flexible: bool,
                  target: str) -> None:
    """Lines that read one value of ``f`` at ``p`` into the local ``target``."""
    nullable = version in f.nullable
    compact = _flexible(f, flexible, version)
    if f.is_array:
        n = src.tmp("n")
        _read_length(src, d, n, compact, "array")
        src.add(d, f"if {n} < 0:")
        _null_read(src, d + 1, f.name, nullable, target, "array")
        src.add(d, "else:")
        code = None if f.is_struct else _CODE.get(f.element)
        if code is not None and len(code) == 1:  # one Struct call for the whole array
            e = src.tmp("e")
            src.add(d + 1, f"{e} = p + {n} * {_SIZE[code]}")
            src.add(d + 1, f"if {e} > L:")
            src.add(d + 2, f"raise _DE('{f.name}: ' + str({n}) + ' elements in ' + str(L - p)"
                           " + ' bytes')")
            small = src.const(_ARRAY_UNPACK[code])
            src.add(d + 1, f"{target} = list({small}[{n}](b, p)) if {n} < {_SMALL_ARRAY} "
                           f"else _ua({code!r}, {n}, b, p)")
            src.add(d + 1, f"p = {e}")
            return
        # no element takes less than a byte: a larger count is refused before any
        # allocation
        src.add(d + 1, f"if {n} > L - p:")
        src.add(d + 2, f"raise _DE('{f.name}: ' + str({n}) + ' elements in ' + str(L - p)"
                       " + ' bytes')")
        add = src.tmp("ap")
        src.add(d + 1, f"{target} = []")
        src.add(d + 1, f"{add} = {target}.append")
        src.add(d + 1, f"for _ in range({n}):")
        if f.is_struct:  # the element's fields inline: no call per element
            _decode_fields(src, d + 2, f.fields, version, flexible, f"{add}({{}})")
        else:
            v = src.tmp("v")
            _decode_scalar(src, d + 2, f.element, f.name, False, compact, v)
            src.add(d + 2, f"{add}({v})")
    elif f.is_struct:
        if nullable:  # KIP-893: an int8 marker, -1 null
            src.add(d, "if _I8(b, p)[0] < 0:")
            src.add(d + 1, "p += 1")
            src.add(d + 1, f"{target} = None")
            src.add(d, "else:")
            src.add(d + 1, "p += 1")
            _decode_fields(src, d + 1, f.fields, version, flexible, f"{target} = {{}}")
        else:
            _decode_fields(src, d, f.fields, version, flexible, f"{target} = {{}}")
    else:
        _decode_scalar(src, d, f.type, f.name, nullable, compact, target)


def _decode_scalar(src: _Source, d: int, kind: str, name: str, nullable: bool, compact: bool,
                   target: str) -> None:
    if kind in _CODE:
        code = _CODE[kind]
        src.add(d, f"{target} = {src.const(struct.Struct('>' + code).unpack_from)}(b, p)[0]")
        src.add(d, f"p += {_SIZE[code]}")
    elif kind in ("string", "bytes", "records"):
        n = src.tmp("n")
        _read_length(src, d, n, compact, kind)
        src.add(d, f"if {n} < 0:")
        _null_read(src, d + 1, name, nullable, target, kind)
        src.add(d, "else:")
        src.add(d + 1, f"e = p + {n}")
        src.add(d + 1, "if e > L:")
        src.add(d + 2, f"raise _DE('{name}: ' + str({n}) + ' bytes past the end')")
        if kind == "string":
            src.add(d + 1, f"{target} = str(b[p:e], 'utf-8')")
        elif kind == "bytes":
            src.add(d + 1, f"{target} = bytes(b[p:e])")
        else:  # records: a slice of the buffer (a view of it when given a memoryview)
            src.add(d + 1, f"{target} = b[p:e]")
        src.add(d + 1, "p = e")
    else:
        raise ValueError(f"unknown type {kind} of {name}")


def _decode_fields(src: _Source, d: int, fields: tuple[Field, ...], version: int,
                   flexible: bool, sink: str) -> None:
    """Lines that read a struct's fields at ``p`` into locals, then ``sink`` with ``{}``
    replaced by the dict of them (every field of the definition: those the version lacks,
    or an absent tagged one, at their defaults). Nested structs are read inline."""
    local: dict[str, str] = {}  # field name -> the local holding its value
    for run in _runs(_wire(fields, version, flexible), _CODE):
        if len(run) > 1:
            fmt = ">" + "".join(_CODE[f.type] for f in run)
            names = [local.setdefault(f.name, src.tmp("f")) for f in run]
            src.add(d, f"{', '.join(names)} = {src.const(struct.Struct(fmt).unpack_from)}(b, p)")
            src.add(d, f"p += {struct.calcsize(fmt)}")
        else:
            f = run[0]
            _decode_value(src, d, f, version, flexible, local.setdefault(f.name, src.tmp("f")))
    tagged = _tagged(fields, version, flexible)
    for f in tagged:
        local[f.name] = src.tmp("t")
        src.add(d, f"{local[f.name]} = {_const(f.default)}")
    if flexible:
        nt, tag, size, end = (src.tmp(x) for x in ("nt", "tag", "size", "end"))
        src.add(d, "if b[p] == 0:")  # no tagged fields: nearly always
        src.add(d + 1, "p += 1")
        src.add(d, "else:")
        src.add(d + 1, f"{nt}, p = _ruv(b, p)")
        src.add(d + 1, f"for _ in range({nt}):")
        src.add(d + 2, f"{tag}, p = _ruv(b, p)")
        src.add(d + 2, f"{size}, p = _ruv(b, p)")
        src.add(d + 2, f"{end} = p + {size}")
        src.add(d + 2, f"if {end} > L:")
        src.add(d + 3, "raise _DE('tagged field past the end')")
        for k, f in enumerate(tagged):
            src.add(d + 2, f"{'if' if k == 0 else 'elif'} {tag} == {f.tag}:")
            _decode_value(src, d + 3, f, version, flexible, local[f.name])
            src.add(d + 3, f"if p != {end}:")
            src.add(d + 4, f"raise _DE('tagged {f.name}: ' + str({size}) + ' bytes declared, '"
                           f" + str(p - {end} + {size}) + ' read')")
        src.add(d + 2, f"p = {end}")  # an unknown tag is skipped
    items = ", ".join(f"{f.name!r}: {local.get(f.name) or _const(f.default)}" for f in fields)
    src.add(d, sink.replace("{}", "{" + items + "}", 1))


# --- encoding ------------------------------------------------------------------------


def _write_length(src: _Source, d: int, out: str, length: str, compact: bool, kind: str) -> None:
    if compact:
        k = src.tmp("k")
        src.add(d, f"{k} = {length} + 1")
        src.add(d, f"if {k} < 128:")
        src.add(d + 1, f"{out} += _SUV[{k}]")
        src.add(d, f"elif {k} < 16384:")  # two bytes
        src.add(d + 1, f"{out} += _PH(({k} & 127 | 128) << 8 | {k} >> 7)")
        src.add(d, "else:")
        src.add(d + 1, f"{out} += _uvb({k})")
    elif kind == "string":
        src.add(d, f"{out} += _P16({length})")
    else:
        src.add(d, f"{out} += _P32({length})")


def _encode_value(src: _Source, d: int, f: Field, version: int, flexible: bool, value: str,
                  out: str) -> None:
    nullable = version in f.nullable
    compact = _flexible(f, flexible, version)
    if f.is_array:
        null = b"\x00" if compact else b"\xff\xff\xff\xff"
        src.add(d, f"if {value} is None:")
        _null(src, d + 1, f.name, version, nullable, null, out)
        src.add(d, "else:")
        code = None if f.is_struct else _CODE.get(f.element)
        if code is not None and len(code) == 1:
            n = src.tmp("n")
            src.add(d + 1, f"{n} = len({value})")
            _write_length(src, d + 1, out, n, compact, "array")
            small = src.const(_ARRAY_PACK[code])
            src.add(d + 1, f"{out} += {small}[{n}](*{value}) if {n} < {_SMALL_ARRAY} "
                           f"else _pa({code!r}, {value})")
            return
        _write_length(src, d + 1, out, f"len({value})", compact, "array")
        item = src.tmp("x")
        src.add(d + 1, f"for {item} in {value}:")
        if f.is_struct:  # the element's fields inline: no call per element
            _encode_fields(src, d + 2, f.fields, version, flexible, item, out)
        else:
            _encode_scalar(src, d + 2, f.element, f.name, version, False, compact, item, out)
    elif f.is_struct:
        if nullable:
            src.add(d, f"if {value} is None:")
            src.add(d + 1, f"{out} += b'\\xff'")
            src.add(d, "else:")
            src.add(d + 1, f"{out} += b'\\x01'")
            _encode_fields(src, d + 1, f.fields, version, flexible, value, out)
        else:
            src.add(d, f"if {value} is None:")  # the default struct
            src.add(d + 1, f"{value} = _EMPTY")
            _encode_fields(src, d, f.fields, version, flexible, value, out)
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
    if kind == "uuid":
        src.add(d, f"if {value} is None:")  # Kafka's zero UUID: no id
        src.add(d + 1, f"{out} += _ZERO_UUID")
        src.add(d, f"elif len({value}) == 16:")
        src.add(d + 1, f"{out} += {value}")
        src.add(d, "else:")
        src.add(d + 1, f"raise _VE('{name}: a UUID is 16 bytes, not ' + str(len({value})))")
    elif kind in _CODE:
        src.add(d, f"{out} += {src.const(struct.Struct('>' + _CODE[kind]).pack)}({value})")
    elif kind in ("string", "bytes", "records"):
        null = b"\x00" if compact else (b"\xff\xff" if kind == "string" else b"\xff\xff\xff\xff")
        src.add(d, f"if {value} is None:")
        _null(src, d + 1, name, version, nullable, null, out)
        src.add(d, "else:")
        src.add(d + 1, f"s = {value}.encode()" if kind == "string" else f"s = {value}")
        _write_length(src, d + 1, out, "len(s)", compact, kind)
        if kind == "records":
            src.add(d + 1, f"if len(s) < {LARGE_RECORDS} and isinstance(s, _BYTES):")
            src.add(d + 2, f"{out} += s")
            src.add(d + 1, "else:")  # a region, or a large blob: it ends the chunk
            src.add(d + 2, f"parts.append(bytes({out}))")
            src.add(d + 2, f"{out}.clear()")
            src.add(d + 2, "parts.append(s)")
        else:
            src.add(d + 1, f"{out} += s")
    else:
        raise ValueError(f"unknown type {kind}")


# bool packs as 1/0 from any truth value; a uuid is written apart (its length is checked)
_PACK_CODE = {k: v for k, v in _CODE.items() if k != "uuid"}


def _encode_fields(src: _Source, d: int, fields: tuple[Field, ...], version: int,
                   flexible: bool, obj: str, out: str) -> None:
    """Lines that write the struct held by the dict ``obj`` to ``out`` (nested structs
    inline)."""
    for run in _runs(_wire(fields, version, flexible), _PACK_CODE):
        if len(run) > 1:
            fmt = ">" + "".join(_PACK_CODE[f.type] for f in run)
            args = ", ".join(_get(f, obj) for f in run)
            src.add(d, f"{out} += {src.const(struct.Struct(fmt).pack)}({args})")
            continue
        f = run[0]
        v = src.tmp("v")
        src.add(d, f"{v} = {_get(f, obj)}")
        _encode_value(src, d, f, version, flexible, v, out)
    if flexible:
        tagged = _tagged(fields, version, flexible)
        if not tagged:
            src.add(d, f"{out} += b'\\x00'")
            return
        tg, t = src.tmp("tg"), src.tmp("t")
        src.add(d, f"{tg} = []")
        for f in tagged:  # in the order of their tags
            v = src.tmp("v")
            src.add(d, f"{v} = {_get(f, obj)}")
            src.add(d, f"if {_not_default(src, f, v)}:")
            src.add(d + 1, f"{t} = bytearray()")
            _encode_value(src, d + 1, f, version, flexible, v, t)
            src.add(d + 1, f"{tg}.append(({f.tag}, {t}))")
        src.add(d, f"{out} += _uv(len({tg}))")
        src.add(d, f"for tag, {t} in {tg}:")
        src.add(d + 1, f"{out} += _uv(tag)")
        src.add(d + 1, f"{out} += _uv(len({t}))")
        src.add(d + 1, f"{out} += {t}")


def _get(f: Field, obj: str) -> str:
    """The value of ``f`` in the dict ``obj``: a missing struct is None (written as the
    default struct, or null where nullable)."""
    if f.is_struct and not f.is_array:
        return f"{obj}.get({f.name!r})"
    return f"{obj}.get({f.name!r}, {_const(f.default)})"


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


def _compile(message: Message, version: int, direction: str) -> Callable[..., Any]:
    flexible = version in message.flexible
    src = _Source()
    if direction == "d":  # one function, every nested struct inline
        src.add(0, "def _root(b, p):")
        src.add(1, "L = len(b)")
        _decode_fields(src, 1, message.fields, version, flexible, "return {}, p")
    else:
        src.add(0, "def _root(o, out, parts):")
        _encode_fields(src, 1, message.fields, version, flexible, "o", "out")
        src.add(1, "return None")
    namespace: dict[str, Any] = {
        "_I8": I8.unpack_from, "_I16": I16.unpack_from, "_I32": I32.unpack_from,
        "_P16": I16.pack, "_P32": I32.pack, "_PH": struct.Struct(">H").pack, "_ua": _unpack_array, "_pa": _pack_array,
        "_ruv": read_uvarint, "_uv": encode_uvarint, "_uvb": uvarint,
        "_SUV": _SMALL_UVARINTS, "_DE": DecodeError, "_VE": ValueError,
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
    """The whole message as bytes (records bytes-like, not regions)."""
    out = bytearray()
    parts: list[Any] = []
    encoder(name, version)(obj, out, parts)
    if parts:
        parts.append(out)
        return b"".join(parts)
    return bytes(out)
