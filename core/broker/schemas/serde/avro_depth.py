"""How deep an Avro payload nests, read without recursion, before fastavro reads it.

fastavro's reader recurses in C once per nested record, array, map or union: a payload
of a recursive schema (a linked list, a tree) nested a few thousand levels deep
overflows the thread's stack and kills the process, and one nested a few hundred levels
deep decodes into a value no JSON answer can hold (orjson writes at most 254 levels).
Likewise an array or a map of items that take no bytes (nulls, empty records): five
bytes of count make fastavro build a list of a billion items. So the payloads of a
schema that can nest deeper than ``limit`` (a recursive one, or one deeper than that by
itself) or has such items are walked here first, with an explicit stack: one deeper
than ``limit``, or with more items than its bytes plus ``ITEMS_BEYOND_BYTES``, is
refused (``DecodeError``); any other goes to fastavro, which also reports every other
fault (a short payload, a bad union index); this walk stops quietly at those. Nesting counts as the JSON answer does: a record, an array, a map and
a union's non-null branch are one level each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.broker.schemas.serde.base import DecodeError

_FIXED_SIZES = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_VARINTS = frozenset({"int", "long", "enum"})
_SIZED = frozenset({"bytes", "string"})
#: Items of arrays and maps a payload may hold beyond one per byte (items of no bytes:
#: nulls, empty records).
ITEMS_BEYOND_BYTES = 4096
_BLOCKS = object()  # a task: the rest of an array's or a map's blocks


def _inner(node: Any) -> tuple[list[Any], bool]:
    """The schemas inside a parsed schema node that is not a name, and whether they sit
    one level deeper (a union's non-null branches, a record's fields, an array's items,
    a map's values), not for a wrapper (``{"type": "int", "logicalType": ...}``)."""
    if isinstance(node, list):
        return [b for b in node if b != "null"], True
    kind = node.get("type")
    if kind in ("record", "error"):
        return [f["type"] for f in node.get("fields", ())], True
    if kind == "array":
        return [node["items"]], True
    if kind == "map":
        return [node["values"]], True
    if kind in ("enum", "fixed") or kind is None:
        return [], False
    return [kind], False


def static_depth(schema: Any, named: Mapping[str, Any], limit: int) -> int:
    """The most levels a value of ``schema`` can nest, or ``limit + 1`` when it can nest
    deeper than ``limit`` (a recursive schema always can)."""
    # (node, levels around it, named types being defined around it)
    stack: list[tuple[Any, int, frozenset[str]]] = [(schema, 0, frozenset())]
    deepest = 0
    while stack:
        node, depth, seen = stack.pop()
        if isinstance(node, str):
            if node in seen:
                return limit + 1  # recursive
            definition = named.get(node)
            if definition is not None:
                stack.append((definition, depth, seen | {node}))
            continue
        if isinstance(node, dict) and node.get("name") is not None:
            seen = seen | {node["name"]}
        inner, deeper = _inner(node)
        if deeper:
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return limit + 1
        stack.extend((n, depth, seen) for n in inner)
    return deepest


def has_empty_items(schema: Any, named: Mapping[str, Any]) -> bool:
    """Whether ``schema`` has an array or a map whose items can take no bytes (null, a
    record of such fields, a zero-size fixed): its count alone can then ask fastavro
    for billions of items from a few bytes."""
    stack, done = [schema], set()
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if node not in done and node in named:
                done.add(node)
                stack.append(named[node])
            continue
        inner, _deeper = _inner(node)
        if (isinstance(node, dict) and node.get("type") in ("array", "map")
                and _can_be_empty(inner[0], named, set())):
            return True
        stack.extend(inner)
    return False


def _can_be_empty(node: Any, named: Mapping[str, Any], seen: set[str]) -> bool:
    """Whether a value of ``node`` can be encoded in no bytes."""
    if isinstance(node, str):
        if node == "null":
            return True
        if node in seen or node not in named:
            return False  # a primitive of >= 1 byte, or a record holding itself
        return _can_be_empty(named[node], named, seen | {node})
    if isinstance(node, list):
        return False  # a union's branch index
    kind = node.get("type")
    if kind in ("record", "error"):
        inner = seen | {node["name"]} if "name" in node else seen
        return all(_can_be_empty(f["type"], named, inner) for f in node.get("fields", ()))
    if kind == "fixed":
        return int(node.get("size", 1)) == 0
    if kind in ("array", "map", "enum") or kind is None:
        return False
    return _can_be_empty(kind, named, seen)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        """A zig-zag varint; IndexError past the end."""
        data, pos, shift, raw = self.data, self.pos, 0, 0
        while True:
            b = data[pos]
            pos += 1
            raw |= (b & 0x7F) << shift
            if b < 0x80 or shift > 63:
                break
            shift += 7
        self.pos = pos
        return (raw >> 1) ^ -(raw & 1)

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise IndexError
        self.pos += n


def check_depth(payload: memoryview, schema: Any, named: Mapping[str, Any], limit: int) -> None:
    """``DecodeError`` when ``payload`` (Avro binary of ``schema``) nests deeper than
    ``limit``; returns at the end of the value or at the first fault in the bytes."""
    r = _Reader(payload)
    items_left = len(payload) + ITEMS_BEYOND_BYTES
    # tasks: (node, levels around it), or (_BLOCKS, items, their levels, items left in
    # the block, is a map)
    stack: list[tuple[Any, ...]] = [(schema, 0)]
    try:
        while stack:
            task = stack.pop()
            if task[0] is _BLOCKS:
                _tag, items, depth, left, is_map = task
                if left == 0:
                    left = r.varint()
                    if left == 0:
                        continue  # the end of the array or map
                    if left < 0:
                        left = -left
                        r.varint()  # the block's size in bytes
                items_left -= 1
                if items_left < 0:
                    raise DecodeError(f"the value declares more array or map items than "
                                      f"its {len(payload)} bytes can hold")
                stack.append((_BLOCKS, items, depth, left - 1, is_map))
                if is_map:
                    r.skip(r.varint())  # the key
                stack.append((items, depth))
                continue
            node, depth = task
            if isinstance(node, str):
                if node in _FIXED_SIZES:
                    r.skip(_FIXED_SIZES[node])
                elif node in _VARINTS:
                    r.varint()
                elif node in _SIZED:
                    r.skip(r.varint())
                else:
                    definition = named.get(node)
                    if definition is None:
                        return  # fastavro says what is wrong
                    stack.append((definition, depth))
                continue
            if isinstance(node, list):
                index = r.varint()
                if not 0 <= index < len(node):
                    return
                if node[index] == "null":
                    continue
                _deeper(depth, limit)
                stack.append((node[index], depth + 1))
                continue
            kind = node.get("type")
            if kind in ("record", "error"):
                _deeper(depth, limit)
                stack.extend((f["type"], depth + 1) for f in reversed(node.get("fields", ())))
            elif kind in ("array", "map"):
                _deeper(depth, limit)
                items = node["items"] if kind == "array" else node["values"]
                stack.append((_BLOCKS, items, depth + 1, 0, kind == "map"))
            elif kind == "enum":
                r.varint()
            elif kind == "fixed":
                r.skip(int(node["size"]))
            elif kind is not None:
                stack.append((kind, depth))
    except IndexError:
        return  # a short payload: fastavro reports it


def _deeper(depth: int, limit: int) -> None:
    """A container inside ``depth`` levels: one more level."""
    if depth + 1 > limit:
        raise DecodeError(f"the value nests deeper than {limit} levels")
