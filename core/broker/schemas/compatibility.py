"""Compatibility levels: which earlier versions a new schema is checked against, and in
which direction.

- BACKWARD: the new schema reads data written with the latest version (new = reader);
- FORWARD: the latest version reads data written with the new schema (new = writer);
- FULL: both;
- the ``_TRANSITIVE`` forms: against every earlier version, not only the latest;
- NONE: no check.

Earlier versions are the subject's versions that are not soft-deleted (Confluent).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.broker.schemas.formats import ParsedSchema, check
from core.broker.schemas.model import (
    BACKWARD,
    BACKWARD_TRANSITIVE,
    FORWARD,
    FORWARD_TRANSITIVE,
    FULL,
    FULL_TRANSITIVE,
    NONE,
)

MAX_MESSAGES = 100  # a 409's details are cut there
MAX_SCHEMA_IN_MESSAGE = 4096  # characters of an earlier schema quoted in them

_DIRECTIONS = {
    BACKWARD: (True, False), BACKWARD_TRANSITIVE: (True, False),
    FORWARD: (False, True), FORWARD_TRANSITIVE: (False, True),
    FULL: (True, True), FULL_TRANSITIVE: (True, True), NONE: (False, False),
}


def is_transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


def versions_to_check(level: str, versions: Sequence[int]) -> list[int]:
    """Of a subject's live versions (ascending), those a new schema is checked against."""
    if level == NONE or not versions:
        return []
    return list(versions) if is_transitive(level) else [versions[-1]]


def incompatibilities(level: str, new: ParsedSchema,
                      previous: Sequence[tuple[int, ParsedSchema]]) -> list[str]:
    """Why ``new`` breaks ``level`` against the ``(version, schema)`` pairs given (empty:
    compatible), in Confluent's message style: each problem, then the version it is
    about, that version's schema and the level."""
    backward, forward = _DIRECTIONS.get(level, (False, False))
    out: list[str] = []
    for version, old in sorted(previous, key=lambda item: -item[0]):
        problems = []
        if backward:
            problems += [f"{p} (new schema reading data written with version {version})"
                         for p in check(new, old)]
        if forward:
            problems += [f"{p} (version {version} reading data written with the new schema)"
                         for p in check(old, new)]
        if problems:
            out += problems
            quoted = old.text[:MAX_SCHEMA_IN_MESSAGE]
            out += [f"{{oldSchemaVersion: {version}}}", f"{{oldSchema: '{quoted}'}}",
                    f"{{compatibility: '{level}'}}"]
        if len(out) >= MAX_MESSAGES:
            return out[:MAX_MESSAGES]
    return out
