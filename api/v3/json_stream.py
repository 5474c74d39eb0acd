"""Splitting a request body into JSON values as its bytes arrive (the v3 produce stream).

A v3 produce body is one JSON value, several values back to back (with or without
whitespace between them), or a JSON array of values; the array's elements count as the
values (Jackson's ``MappingIterator`` reads all three forms). The body may arrive in
chunks over a long-lived chunked request, so values are handed out as soon as they are
complete::

    values = JsonValues(max_pending=limit, max_values=n)
    values.feed(chunk) -> [value, ...]     # the values completed by this chunk
    values.close()     -> [value, ...]     # at the end of the body: the rest

Malformed JSON, bytes that are not UTF-8, JSON nested deeper than ``MAX_JSON_DEPTH``
(64) levels, or a record larger than ``max_pending`` (complete or still arriving; an
array body is measured whole) end the list with a ``BadJson`` item, after the values
before it; the splitter hands out nothing more. A body that arrives whole is parsed
with orjson in one call (after a C-level depth check of its bytes); only concatenated
values go through the incremental path (the standard library's C scanner,
``raw_decode``), whose values are depth-checked once per chunk. With ``max_values``, the
value past that many (in all) ends the list with a ``BadJson`` of status 422 / code
42208 (``too_many``), after the values before it; a whole body that is an array of
more is refused on a prefix, before it is parsed whole.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

import orjson

from api.errors import ErrorCode
from api.input_limits import (
    MAX_JSON_DEPTH,
    json_depth_exceeds,
    prefix_exceeds_record_limit,
    too_many_records,
)

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


class BadJson(Exception):
    """Where the stream cannot be read on: ``status`` 400 (malformed), 413 (too large)
    or 422 (too many values; ``too_many``); ``code`` the Confluent error_code."""

    def __init__(self, message: str, *, status: int = 400, code: int | None = None,
                 too_many: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = status if code is None else code
        self.too_many = too_many


def _too_many(count: int | None = None) -> BadJson:
    error = too_many_records(count, code=ErrorCode.BAD_BATCH)
    return BadJson(error.message, status=error.status, code=error.code, too_many=True)


def _array_rows(doc: Any) -> Any:
    return doc if type(doc) is list else None


def _too_deep() -> BadJson:
    return BadJson(f"Malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels")


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


class JsonValues:
    """Incremental splitter of one body; not thread-safe, one per request."""

    __slots__ = ("_count", "_dead", "_deep_checked", "_fed", "_max_pending", "_max_values",
                 "_text", "_utf8")

    def __init__(self, *, max_pending: int, max_values: int | None = None) -> None:
        self._max_pending = max_pending
        self._max_values = max_values
        self._count = 0  # values handed out so far
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._fed = False
        self._dead = False
        self._deep_checked = False  # the whole body's depth is known to be fine

    def feed(self, chunk: bytes, *, final: bool = False) -> list[Any]:
        """The values completed by ``chunk`` (the last item may be a BadJson);
        ``final`` marks the last chunk."""
        if self._dead:
            return []
        if final and not self._fed and len(chunk) <= self._max_pending:
            self._fed = True
            if self._max_values is not None and prefix_exceeds_record_limit(chunk, _array_rows):
                return self._fail(_too_many())
            if json_depth_exceeds(chunk):
                return self._fail(_too_deep())
            self._deep_checked = True
            try:  # the whole body at once: the common case
                values = _values(orjson.loads(chunk)) if chunk.strip() else []
            except orjson.JSONDecodeError:
                pass  # concatenated values, or malformed: find out below
            else:
                return self._counted(values)
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
        spans: list[tuple[int, int, int]] = []  # (start, stop, len(out) before) per value
        while True:
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                break
            try:
                value, stop = _decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                if final:
                    return self._checked(text, spans, out, BadJson(_describe(exc, pos)))
                break  # incomplete (or malformed: known once the body ends)
            except RecursionError:  # nested far deeper than allowed
                return self._checked(text, spans, out, _too_deep())
            if stop == end and not final and not isinstance(value, dict | list | str):
                break  # a bare number or literal may go on in the next chunk
            if stop - pos > self._max_pending and not isinstance(value, list):
                return self._checked(text, spans, out, self._too_large())
            spans.append((pos, stop, len(out)))
            out += _values(value)
            pos = stop
            if self._max_values is not None and self._count + len(out) > self._max_values:
                break  # one too many: decode no further (``_counted`` ends the stream)
        self._text = text[pos:]
        if len(self._text) > self._max_pending:
            return self._checked(text, spans, out, self._too_large())
        return self._checked(text, spans, out, None)

    def _checked(self, text: str, spans: list[tuple[int, int, int]], out: list[Any],
                 error: BadJson | None) -> list[Any]:
        """``out`` (then ``error``, ending the stream) once the values' text is known to
        nest no deeper than MAX_JSON_DEPTH: one check of all of it, and only when that
        fails one per value, to hand out the values before the first deep one."""
        if (spans and not self._deep_checked
                and json_depth_exceeds(text[spans[0][0]:spans[-1][1]].encode())):
            for start, stop, before in spans:
                if json_depth_exceeds(text[start:stop].encode()):
                    return self._fail(_too_deep(), out[:before])
        counted = self._counted(out)
        if error is None or self._dead:
            return counted
        return self._fail(error, counted)

    def _counted(self, values: list[Any]) -> list[Any]:
        """``values`` within ``max_values`` (in all); past it, those before the limit and
        a too-many BadJson, which ends the stream."""
        limit = self._max_values
        if limit is None or self._count + len(values) <= limit:
            self._count += len(values)
            return values
        room = max(0, limit - self._count)
        self._count = limit
        return self._fail(_too_many(), values[:room])

    def _too_large(self) -> BadJson:
        return BadJson(
            f"A record of more than {self._max_pending} bytes (max.request.size)", status=413
        )


def _describe(exc: json.JSONDecodeError, start: int) -> str:
    return f"Malformed JSON: {exc.msg} (character {exc.pos - start + 1} of the value)"
