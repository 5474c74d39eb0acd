"""What every schema format gives the registry: a parsed schema (its text to keep, its
identity, what the compatibility rules walk) and incompatibilities found between a
reader and a writer schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.model import Reference

#: how deep a schema's JSON may nest (the rules walk schemas recursively)
MAX_JSON_DEPTH = 64


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    """``text``: what is stored and served; ``canonical``: the identity (two schemas
    with the same type, canonical text and references are one schema, with one id);
    ``normalized``: the canonical form of ``normalize=true`` requests; ``model``: the
    format's own parsed form."""

    schema_type: str
    text: str
    canonical: str
    normalized: str
    references: tuple[Reference, ...]
    model: Any

    def identity(self, *, normalized: bool = False) -> tuple[str, str, tuple[Reference, ...]]:
        return (self.schema_type, self.normalized if normalized else self.canonical,
                self.references)


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason a reader cannot read what a writer wrote: Confluent's error type
    (``TYPE_MISMATCH``, ``READER_FIELD_MISSING_DEFAULT_VALUE``...), where in the
    reader's schema, and what."""

    kind: str
    path: str
    description: str

    def __str__(self) -> str:
        return f"{{errorType:'{self.kind}', description:'{self.description}', path:'{self.path}'}}"


def load_json(text: str, what: str) -> Any:
    """``text`` as JSON, nesting at most MAX_JSON_DEPTH deep (InvalidSchemaError)."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidSchemaError(f"Invalid {what} schema: not JSON: {exc}") from None
    if _depth(doc) > MAX_JSON_DEPTH:
        raise InvalidSchemaError(
            f"Invalid {what} schema: nested deeper than {MAX_JSON_DEPTH} levels")
    return doc


def _depth(doc: Any) -> int:
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def dump_json(doc: Any, *, sort_keys: bool = False) -> str:
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
