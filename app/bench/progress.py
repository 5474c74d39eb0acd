"""The progress line of ``franz bench`` on stderr, every ``interval`` seconds while a
load runs: on a terminal rewritten in place (``\\r``) and erased at the end; elsewhere
(``--progress`` into a file or pipe) one plain line each time. Off unless enabled."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from typing import IO


class ProgressLine:
    """``label  elapsed  N records  rate`` from a ``counts()`` callback returning
    (records, bytes) so far."""

    def __init__(self, label: str, counts: Callable[[], tuple[int, int]], *, enabled: bool,
                 interval: float = 0.5, stream: IO[str] | None = None,
                 unit: str = "records") -> None:
        self.label, self.counts, self.enabled = label, counts, enabled
        self.interval, self.unit = interval, unit
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self.lines = 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def render(self) -> str:
        records, nbytes = self.counts()
        secs = max(time.monotonic() - self.start, 1e-9)
        text = (f"{self.label}  {secs:5.1f} s  {records:,} {self.unit}  "
                f"{records / secs:,.0f}/s")
        if nbytes:
            text += f"  {nbytes / secs / 1e6:,.1f} MB/s"
        return text

    def show(self) -> None:
        if self.enabled:
            text = self.render()
            self.stream.write("\r\x1b[K" + text if self.tty else text + "\n")
            self.stream.flush()
            self.lines += 1

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.show()

    def __enter__(self) -> ProgressLine:
        self.start = time.monotonic()
        if self.enabled:
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.enabled and self.tty:
            with contextlib.suppress(Exception):
                self.stream.write("\r\x1b[K")
                self.stream.flush()
