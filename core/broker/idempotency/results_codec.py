"""A produce's results (``ProduceResults``) as the compact bytes a ``done`` record keeps,
and back, equal to the original (same partitions, offsets, timestamps, errors), so a
retried request renders the first one's answer byte for byte.

A one-partition answer without failures is three numbers. Otherwise the record's
partition is one int32 per record (-1 for a failed one) and the offsets one first offset
per partition: the records of a partition are appended in input order at consecutive
offsets (``core.broker.produce.producer``), so record i's offset is its partition's first
offset plus the number of that partition's records before it. Results that do not follow
that rule (none today) keep every offset instead. Errors keep their class name, Kafka
code and message (``FranzError.for_name`` makes them again).
"""

from __future__ import annotations

import base64
from array import array
from collections.abc import Sequence
from typing import Any

import orjson

from core.broker.types import ProduceResults
from core.errors import FranzError

VERSION = 1


def _pack(typecode: str, values: Sequence[int]) -> str:
    return base64.b64encode(array(typecode, values).tobytes()).decode()


def _unpack(typecode: str, text: str) -> list[int]:
    out = array(typecode)
    out.frombytes(base64.b64decode(text))
    return out.tolist()


def encode_results(results: ProduceResults) -> bytes:
    total = len(results)
    doc: dict[str, Any] = {"v": VERSION, "n": total}
    ts = results.timestamps
    if ts is None or isinstance(ts, int):
        doc["t"] = ts
    else:
        doc["ts"] = _pack("q", [-1 if t is None else t for t in ts])
    if results.contiguous:
        assert isinstance(results.partitions, int) and isinstance(results.offsets, range)
        doc["c"] = [results.partitions, results.offsets.start]
        return orjson.dumps(doc)
    errors = results.errors
    parts = results.partitions
    per_record = [None if i in errors else (parts if parts is None or isinstance(parts, int)
                                            else parts[i]) for i in range(total)]
    doc["p"] = _pack("i", [-1 if p is None else p for p in per_record])
    firsts: dict[int, int] = {}
    seen: dict[int, int] = {}
    regular = True
    for i, p in enumerate(per_record):
        if p is None:
            continue
        offset = results.offsets[i]
        if offset is None:
            regular = False
            continue
        rank = seen.get(p, 0)
        first = firsts.setdefault(p, offset - rank)
        regular = regular and first + rank == offset
        seen[p] = rank + 1
    if regular:
        doc["f"] = {str(p): first for p, first in firsts.items()}
    else:
        doc["o"] = _pack("q", [-1 if o is None else o for o in results.offsets])
    if errors:
        doc["e"] = [[i, type(e).__name__, e.error_code, e.message] for i, e in errors.items()]
    return orjson.dumps(doc)


def decode_results(data: bytes) -> ProduceResults:
    """``ValueError`` when ``data`` is not an ``encode_results`` document."""
    try:
        doc = orjson.loads(data)
        if doc.get("v") != VERSION:
            raise ValueError(f"unknown results version {doc.get('v')!r}")
        total = int(doc["n"])
        timestamps: int | list[int | None] | None
        if "ts" in doc:
            timestamps = [None if t < 0 else t for t in _unpack("q", doc["ts"])]
        else:
            timestamps = doc["t"]
        if "c" in doc:
            p, first = doc["c"]
            return ProduceResults(int(p), range(first, first + total), timestamps)
        partitions: list[int | None] = [None if p < 0 else p for p in _unpack("i", doc["p"])]
        offsets: list[int | None]
        if "o" in doc:
            offsets = [None if o < 0 else o for o in _unpack("q", doc["o"])]
        else:
            next_of = {int(p): int(first) for p, first in doc["f"].items()}
            offsets = []
            for p in partitions:
                if p is None:
                    offsets.append(None)
                else:
                    offsets.append(next_of[p])
                    next_of[p] += 1
        errors: dict[int, FranzError] = {
            int(i): FranzError.for_name(name, int(code))(message)
            for i, name, code, message in doc.get("e", ())}
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"not a produce result: {exc}") from None
    if len(partitions) != total or len(offsets) != total:
        raise ValueError("not a produce result: column lengths differ")
    return ProduceResults(partitions, offsets, timestamps, errors)
