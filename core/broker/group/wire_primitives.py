"""Kafka's primitive types as ``__consumer_offsets`` records and the embedded consumer
protocol write them: a ``Writer`` that appends and a ``Reader`` that consumes, both
starting at the record's leading int16 version.

Classic (non-flexible) encoding::

    int16/int32/int64   big-endian, signed
    string              int16 length + UTF-8 bytes        (nullable: length -1 = null)
    bytes               int32 length + bytes              (nullable: length -1 = null)
    array               int32 count + elements

Flexible versions (``Writer(flexible=True)``, ``Reader.flexible = True``)::

    compact string/bytes/array   unsigned varint (length + 1), 0 = null
    tagged fields                at the end of each struct: uvarint count, then per field
                                 uvarint tag, uvarint size, size bytes (unknown tags are
                                 skipped)

``Reader`` raises :class:`CorruptOffsetsRecordError` on malformed input (truncated,
trailing bytes, bad lengths, invalid UTF-8); ``Writer`` raises ``ValueError`` on values
the format cannot hold (too-long strings, out-of-range ints).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from core.errors import FranzError


class CorruptOffsetsRecordError(FranzError):
    """A ``__consumer_offsets`` key or value (or embedded protocol blob) that cannot be
    decoded: truncated, trailing bytes, bad lengths, invalid UTF-8 or unknown version."""

    error_code = 2  # CORRUPT_MESSAGE


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_INT16 = 0x7FFF
_MAX_INT32 = 0x7FFFFFFF


class Writer:
    """Appends Kafka primitives; ``flexible`` switches to compact encodings."""

    __slots__ = ("_parts", "_flexible")

    def __init__(self, version: int, *, flexible: bool = False) -> None:
        self._parts: list[bytes] = []
        self._flexible = flexible
        self.int16(version)

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def _pack(self, fmt: struct.Struct, value: int) -> None:
        try:
            self._parts.append(fmt.pack(value))
        except struct.error as exc:
            raise ValueError(f"{value} does not fit in {fmt.size * 8} bits") from exc

    def int16(self, value: int) -> None:
        self._pack(_I16, value)

    def int32(self, value: int) -> None:
        self._pack(_I32, value)

    def int64(self, value: int) -> None:
        self._pack(_I64, value)

    def uvarint(self, value: int) -> None:
        out = bytearray()
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self._parts.append(bytes(out))

    def _length(self, length: int | None, *, wide: bool) -> None:
        """Length prefix of a string/bytes/array; None = null."""
        if self._flexible:
            self.uvarint(0 if length is None else length + 1)
        elif wide:
            self.int32(-1 if length is None else length)
        else:
            if length is not None and length > _MAX_INT16:
                raise ValueError(f"string of {length} bytes exceeds the int16 length limit")
            self.int16(-1 if length is None else length)

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self._length(None, wide=False)
            return
        raw = value.encode("utf-8")
        self._length(len(raw), wide=False)
        self._parts.append(raw)

    def string(self, value: str) -> None:
        if value is None:
            raise ValueError("null given for a non-nullable string")
        self.nullable_string(value)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is not None and len(value) > _MAX_INT32:
            raise ValueError(f"bytes of length {len(value)} exceed the int32 length limit")
        self._length(None if value is None else len(value), wide=True)
        if value is not None:
            self._parts.append(bytes(value))

    def bytes_(self, value: bytes) -> None:
        if value is None:
            raise ValueError("null given for non-nullable bytes")
        self.nullable_bytes(value)

    def array_length(self, count: int) -> None:
        self._length(count, wide=True)

    def int32_array(self, values: Sequence[int]) -> None:
        self.array_length(len(values))
        try:
            self._parts.append(struct.pack(f">{len(values)}i", *values))
        except struct.error as exc:
            raise ValueError(f"partition out of int32 range in {list(values)}") from exc

    def maybe_tagged_fields(self) -> None:
        """An empty tagged-field section, in flexible versions only."""
        if self._flexible:
            self.uvarint(0)


class Reader:
    """Reads Kafka primitives from ``data``; every failure is a corrupt record."""

    __slots__ = ("_buf", "_pos", "flexible", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self._buf = memoryview(data)
        self._pos = 0
        self.flexible = False
        self.what = what

    def corrupt(self, reason: str) -> CorruptOffsetsRecordError:
        return CorruptOffsetsRecordError(f"corrupt {self.what}: {reason} at byte {self._pos}")

    def _take(self, size: int) -> memoryview:
        end = self._pos + size
        if size < 0 or end > len(self._buf):
            raise self.corrupt(f"needs {size} more bytes, {len(self._buf) - self._pos} left")
        view = self._buf[self._pos : end]
        self._pos = end
        return view

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value
        raise self.corrupt("unsigned varint longer than 32 bits")

    def _length(self, *, wide: bool) -> int | None:
        """A length prefix; None = null. Negative lengths other than null are corrupt."""
        length = self._compact_length() if self.flexible else self._classic_length(wide=wide)
        if length == -1:
            return None
        if length < 0:
            raise self.corrupt(f"negative length {length}")
        return length

    def _compact_length(self) -> int:
        return self.uvarint() - 1

    def _classic_length(self, *, wide: bool) -> int:
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        length = self._length(wide=False)
        if length is None:
            return None
        try:
            return str(self._take(length), "utf-8")
        except UnicodeDecodeError as exc:
            raise self.corrupt("string is not valid UTF-8") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self.corrupt("null in a non-nullable string")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self._length(wide=True)
        return None if length is None else bytes(self._take(length))

    def bytes_(self) -> bytes:
        value = self.nullable_bytes()
        if value is None:
            raise self.corrupt("null in non-nullable bytes")
        return value

    def array_length(self) -> int:
        count = self._length(wide=True)
        if count is None:
            raise self.corrupt("null in a non-nullable array")
        if count > len(self._buf) - self._pos:  # every element takes at least one byte
            raise self.corrupt(f"array of {count} elements cannot fit")
        return count

    def int32_array(self) -> tuple[int, ...]:
        count = self.array_length()
        return struct.unpack(f">{count}i", self._take(4 * count))

    def maybe_skip_tagged_fields(self) -> None:
        """Skips a tagged-field section (flexible versions only); no tags are known."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def expect_end(self) -> None:
        if self._pos != len(self._buf):
            raise self.corrupt(f"{len(self._buf) - self._pos} trailing bytes")


def check_version(version: int, highest: int, what: str) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"cannot write {what} version {version} (0..{highest})")
