"""Splitting a request body into JSON values as its bytes arrive (the v3 produce stream).

A v3 produce body is one JSON value, several values back to back (with or without
whitespace between them), or a JSON array of values; the array's elements count as the
values (Jackson's ``MappingIterator`` reads all three forms). The body may arrive in
chunks over a long-lived chunked request, so values are handed out as soon as they are
complete::

    values = JsonValues(max_pending=limit)
    values.feed(chunk) -> [value, ...]     # the values completed by this chunk
    values.close()     -> [value, ...]     # at the end of the body: the rest

Malformed JSON, bytes that are not UTF-8, or a record larger than ``max_pending``
(complete or still arriving; an array body is measured whole) end the list with a
``BadJson`` item, after the values before it; the splitter hands out nothing more. A
body that arrives whole is parsed with orjson in one call; only concatenated values go
through the incremental path (the standard library's C scanner, ``raw_decode``).
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

import orjson

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


class BadJson(Exception):
    """Where the stream cannot be read on: ``status`` 400 (malformed) or 413 (too large)."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


class JsonValues:
    """Incremental splitter of one body; not thread-safe, one per request."""

    __slots__ = ("_dead", "_fed", "_max_pending", "_text", "_utf8")

    def __init__(self, *, max_pending: int) -> None:
        self._max_pending = max_pending
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._fed = False
        self._dead = False

    def feed(self, chunk: bytes, *, final: bool = False) -> list[Any]:
        """The values completed by ``chunk`` (the last item may be a BadJson);
        ``final`` marks the last chunk."""
        if self._dead:
            return []
        if final and not self._fed and len(chunk) <= self._max_pending:
            self._fed = True
            try:  # the whole body at once: the common case
                return _values(orjson.loads(chunk)) if chunk.strip() else []
            except orjson.JSONDecodeError:
                pass  # concatenated values, or malformed: find out below
        self._fed = True
        try:
            self._text += self._utf8.decode(chunk, final)
        except UnicodeDecodeError as exc:
            return self._fail(BadJson(f"Malformed JSON: the body is not UTF-8 ({exc.reason})"))
        return self._split(final)

    def _fail(self, error: BadJson, values: list[Any] | None = None) -> list[Any]:
        self._dead, self._text = True, ""
        return [*(values or ()), error]

    def close(self) -> list[Any]:
        """The values left at the end of the body (BadJson if something incomplete is)."""
        return self.feed(b"", final=True)

    def _split(self, final: bool) -> list[Any]:
        text, pos, end = self._text, 0, len(self._text)
        out: list[Any] = []
        while True:
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                break
            try:
                value, stop = _decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                if final:
                    return self._fail(BadJson(_describe(exc, pos)), out)
                break  # incomplete (or malformed: known once the body ends)
            if stop == end and not final and not isinstance(value, dict | list | str):
                break  # a bare number or literal may go on in the next chunk
            if stop - pos > self._max_pending and not isinstance(value, list):
                return self._fail(self._too_large(), out)
            out += _values(value)
            pos = stop
        self._text = text[pos:]
        if len(self._text) > self._max_pending:
            return self._fail(self._too_large(), out)
        return out

    def _too_large(self) -> BadJson:
        return BadJson(
            f"A record of more than {self._max_pending} bytes (max.request.size)", status=413
        )


def _describe(exc: json.JSONDecodeError, start: int) -> str:
    return f"Malformed JSON: {exc.msg} (character {exc.pos - start + 1} of the value)"
