"""The one way blocking file work leaves the event loop.

Storage objects are synchronous: fsync, segment deletion, compaction and checkpoint
writes block the calling thread. The broker's event loop must never run them itself;
it awaits ``run_blocking(fn, *args, **kwargs)``, which runs ``fn`` on a small
module-level thread pool. Use this helper and nothing else (no ad-hoc
``asyncio.to_thread`` or private executors), so the number of threads touching the disk
stays bounded and there is one place to instrument or resize.

The pool does not serialise access: the caller still holds the partition's lock (or is
the only owner of the object) while the work runs, as storage objects are not
thread-safe.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

MAX_WORKERS = 4
"""Threads doing disk work: enough for a flush, a cleaning and a retention pass at once."""

_EXECUTOR = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="franz-storage")


async def run_blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` on the storage thread pool and await its result.

    Exceptions raised by ``fn`` propagate to the awaiting coroutine unchanged.
    Cancelling the await does not stop ``fn`` once it has started.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(fn, *args, **kwargs)
    return await loop.run_in_executor(_EXECUTOR, call)
