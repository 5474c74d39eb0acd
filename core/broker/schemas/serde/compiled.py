"""What a schema needs to encode or decode (fastavro's schema and converters, a validator,
a descriptor pool and its message classes), made once per parsed schema and kept for
the ``SIZE`` schemas used last. Encoders run on the event loop or in a thread, decoders
in threads: the table is locked."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from core.broker.schemas.formats import ParsedSchema

SIZE = 1000

T = TypeVar("T")

_made: OrderedDict[tuple[int, str], tuple[ParsedSchema, Any]] = OrderedDict()
_lock = threading.Lock()


def once(parsed: ParsedSchema, kind: str, make: Callable[[ParsedSchema], T]) -> T:
    """``make(parsed)``, made once for ``parsed`` and ``kind`` (what is made). The
    resolver hands out one object per schema id, so its identity is the key (the entry
    keeps it alive: the identity is not reused). A failed ``make`` is not kept."""
    key = (id(parsed), kind)
    with _lock:
        hit = _made.get(key)
        if hit is not None and hit[0] is parsed:
            _made.move_to_end(key)
            return hit[1]
    made = make(parsed)
    with _lock:
        _made[key] = (parsed, made)
        while len(_made) > SIZE:
            _made.popitem(last=False)
    return made
