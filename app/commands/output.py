"""How the commands print: aligned tables for people, JSON for scripts, and a progress
line on stderr for long operations (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import IO, Any

import orjson

MISSING = "-"


def cell(value: Any) -> str:
    return MISSING if value is None or value == "" else str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
                file: IO[str] | None = None) -> None:
    """Left-aligned columns, each as wide as its widest cell, two spaces apart; None
    and "" print as ``-`` (as kafka-consumer-groups.sh does)."""
    out = file or sys.stdout
    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in text)]) for i, h in enumerate(headers)]
    for row in [list(headers), *text]:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


def print_json(value: Any, *, file: IO[str] | None = None) -> None:
    """Indented JSON (one document per command; ``consume`` writes JSON lines instead)."""
    out = file or sys.stdout
    out.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


class Progress:
    """``\\r``-rewritten "N records" on stderr, at most every ``interval`` seconds; a
    no-op when ``enabled`` is false (stderr not a terminal)."""

    def __init__(self, what: str, *, enabled: bool, interval: float = 0.25,
                 stream: IO[str] | None = None) -> None:
        self.what = what
        self.enabled = enabled
        self.interval = interval
        self.stream = stream or sys.stderr
        self.start = self._last = time.monotonic()
        self.count = 0

    def update(self, count: int) -> None:
        self.count = count
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        rate = count / max(now - self.start, 1e-9)
        self.stream.write(f"\r{count} {self.what} ({rate:,.0f}/s)")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")  # erase the line: success prints nothing
            self.stream.flush()
