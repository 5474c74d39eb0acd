"""How the commands print: aligned tables for people, JSON for scripts, and a progress
line on stderr for long operations (only when stderr is a terminal); and how the console
tools read Kafka's ``--property KEY=VALUE`` settings (``console_properties``)."""

from __future__ import annotations

import difflib
import sys
import time
from collections.abc import Callable, Sequence
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


# --- the console tools' --property KEY=VALUE (Kafka's formatter / line reader settings) ------


def unescape_separator(text: str) -> str:
    """A separator as typed: ``\\t``, ``\\n`` and ``\\r`` are read as TAB, newline, CR
    (a shell passes them as two characters)."""
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def _boolean(name: str, value: str) -> bool:
    low = value.strip().lower()
    if low not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return low == "true"


def _text(name: str, value: str) -> str:
    return value


#: Readers of the property values: booleans, or text (separators and literals).
BOOLEAN: Callable[[str, str], object] = _boolean
TEXT: Callable[[str, str], object] = _text


def console_properties(given: Sequence[str], known: dict[str, Callable[[str, str], object]],
                       *, unsupported: Sequence[str] = ()) -> dict[str, object]:
    """``--property KEY=VALUE`` arguments -> ``{KEY: value}`` (the later of two wins),
    each value read by its reader in ``known``. ValueError, with one line to show, for
    a missing ``=``, a bad value, or a key that is not known: naming the closest known
    key, or saying that franz does not support a Kafka one (``unsupported``)."""
    out: dict[str, object] = {}
    for item in given:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--property needs KEY=VALUE, got {item!r}")
        if key not in known:
            if key in unsupported:
                raise ValueError(f"property {key!r} is not supported by franz (supported: "
                                 f"{', '.join(known)})")
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"unknown property {key!r}{hint} (known: {', '.join(known)})")
        out[key] = known[key](key, value)
    return out
