"""Pausing Python's cyclic garbage collector while a request body is parsed.

A produce body of 1,000 records parses into 1,000+ dicts that are garbage a few
microseconds later, once the columns are taken out. With the collector running, those
allocations set off a young-generation collection or two per request, which walk the
document while it is still alive and promote it to the older generations, whose
collections then walk it again (measured: 6,000-8,000 collections in 6 s of produce
load, docs/benchmarks.md). Paused, the dicts are freed by reference counting before
the collector sees them: Python counts a generation's allocations net of frees, so the
parse leaves the count where it found it. The parse must not ``await`` inside the pause.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (reference counting still frees); the
    collector's previous state comes back after it, exception or not."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
