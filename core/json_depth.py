"""How deep a JSON text nests, told from its bytes in C-level passes (no parse).

Used on the way in (a request body deeper than ``api.input_limits.MAX_JSON_DEPTH`` is
400) and on the way out (a stored key or value deeper than ``MAX_VALUE_DEPTH`` cannot be
embedded in a JSON answer: orjson writes at most 254 levels).
"""

from __future__ import annotations

import re

#: The most levels a key or value read back as JSON may nest (objects and arrays; for
#: Avro a record, array, map or union branch): a consume answer wraps it in two more.
MAX_VALUE_DEPTH = 128

_KEPT = b'"[]{}'
#: bytes.translate: keep quotes and brackets (both kinds as parentheses).
_SKELETON = bytes.maketrans(b"[]{}", b"()()")
_DROPPED = bytes(b for b in range(256) if b not in _KEPT)
_STRING = re.compile(rb'"[^"]*"')
_SMALL_BODY = 8192


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """True when the JSON text ``body`` nests containers deeper than ``limit``.

    C-level passes over the bytes only: a small body with at most ``limit`` brackets
    is answered by two counts; otherwise strings are cut out (escaped backslashes and
    quotes first) and the bracket skeleton is peeled one level per ``replace``, at most
    ``limit`` times. Brackets inside strings do not count. Malformed JSON may come out
    either way (its parser refuses it anyway)."""
    if len(body) <= _SMALL_BODY and body.count(b"[") + body.count(b"{") <= limit:
        return False  # a small body with few brackets: the usual admin request
    if b"\\" in body:  # escaped backslashes, then escaped quotes; other escapes are inert
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = body.translate(_SKELETON, _DROPPED)
    quotes = s.count(b'"')
    if quotes:
        if 2 * s.count(b'""') == quotes:  # no string holds a bracket: the common case
            s = s.translate(None, b'"')
        else:
            # Adjacent quotes go first: an empty string, or the end of one string and
            # the start of the next (merging them); the quotes left still pair up.
            s = _STRING.sub(b"", s.replace(b'""', b""))
    for _ in range(limit):
        if not s:
            return False
        peeled = s.replace(b"()", b"")
        if len(peeled) == len(s):
            return False  # unbalanced: malformed, the parser says so
        s = peeled
    return b"()" in s


#: A key or value up to this long cannot nest deeper than MAX_VALUE_DEPTH (each level
#: takes two bytes): the usual one needs no scan.
SHALLOW_VALUE_BYTES = 2 * MAX_VALUE_DEPTH


def value_depth_exceeds(data: bytes | memoryview) -> bool:
    """``json_depth_exceeds(data, MAX_VALUE_DEPTH)``, answered by the length alone for
    the usual value (a memoryview is copied only when it is longer)."""
    return len(data) > SHALLOW_VALUE_BYTES and json_depth_exceeds(bytes(data), MAX_VALUE_DEPTH)
