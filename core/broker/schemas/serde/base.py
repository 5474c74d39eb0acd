"""What every format's encoder and decoder share: their types and their errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

Payload = Callable[[Any], bytes]  # a JSON value -> its payload; raises Invalid
Read = Callable[[memoryview], Any]  # a payload (after the header) -> its JSON value


class Invalid(Exception):
    """A value that does not match its schema: what is wrong, and where (path parts
    added innermost first as the error leaves the converters)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.path: list[str] = []

    def where(self) -> str:
        return "".join(reversed(self.path))


class DecodeError(ValueError):
    """Bytes that cannot be decoded; the message says why."""


def show(value: Any) -> str:
    """``value`` as JSON in an error, cut to 60 characters."""
    try:
        text = orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def expected(what: str, value: Any) -> Invalid:
    return Invalid(f"expected {what}, got {show(value)}")


def why(exc: Exception) -> str:
    """A library's exception in an error: its type, and its text if it has one."""
    text = str(exc)
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]
