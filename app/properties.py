"""Java's ``.properties`` format, read as Kafka's tools and brokers read their files:
``key=value``, ``key: value`` or ``key value``, ``#`` and ``!`` comments, a line ending in
an odd number of backslashes continues on the next, ``\\t \\n \\r \\f \\uXXXX`` and any
other escaped character as itself. One difference from Java: unescaped trailing blanks
of a value are dropped (a hand-edited ``num.partitions=3 `` means 3). Used for the
broker's configuration (``app.settings``) and the client tools' ``--command-config``
(``app.client_config``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_WHITESPACE = " \t\f"
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """Text Java's ``Properties.load`` refuses (a malformed ``\\uXXXX``); the message
    names the source and the line."""


@dataclass(frozen=True, slots=True)
class Property:
    key: str
    value: str
    line: int  # where its logical line starts, from 1


def parse_properties(text: str, *, source: str = "<properties>") -> list[Property]:
    """Every ``key=value`` of ``text`` in file order (a repeated key appears twice: the
    last wins when they are merged); PropertiesSyntaxError naming ``source`` and the
    line for a malformed ``\\uXXXX`` escape."""
    lines = _NATURAL_LINES.split(text)
    out: list[Property] = []
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line is never continued
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_WHITESPACE)
                i += 1
        out.append(_split(line, where=f"{source}:{start + 1}", line_no=start + 1))
    return out


def _continues(line: str) -> bool:
    """Whether the line ends in an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(text: str, *, where: str, line_no: int) -> Property:
    """A logical line (leading whitespace gone) as key and value."""
    end = 0
    while end < len(text) and text[end] not in "=:" + _WHITESPACE:
        end += 2 if text[end] == "\\" else 1
    key, rest = text[:end], text[end:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    while rest and rest[-1] in _WHITESPACE and not _escaped(rest, len(rest) - 1):
        rest = rest[:-1]
    return Property(_unescape(key, where), _unescape(rest, where), line_no)


def _escaped(text: str, index: int) -> bool:
    """Whether ``text[index]`` follows an odd number of backslashes."""
    run = len(text[:index]) - len(text[:index].rstrip("\\"))
    return run % 2 == 1


def _unescape(text: str, where: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append("" if c == "\\" else c)  # a lone trailing backslash is dropped
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise PropertiesSyntaxError(f"{where}: malformed \\uXXXX escape \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
