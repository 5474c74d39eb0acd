"""fsync, and the deferred mode of a shutdown's final flush.

A clean shutdown flushes every log: at 10,000+ partitions that is tens of thousands of
fsyncs (each ``.log``, index, producer snapshot and directory), each one a journal commit.
Inside ``deferred()`` this thread's fsyncs through this module are skipped, and the
caller makes everything durable at once with one ``syncfs(2)`` of the file system
(``sync_filesystem``), which writes back every dirty page and inode there and reports
a write-back error. Where ``syncfs`` is missing (not Linux/glibc) nothing is deferred.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)
_state = threading.local()


def _load_syncfs() -> object | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
    fn = getattr(libc, "syncfs", None)
    if fn is not None:
        fn.restype, fn.argtypes = ctypes.c_int, (ctypes.c_int,)
    return fn


_SYNCFS = _load_syncfs()


def can_defer() -> bool:
    """Whether ``sync_filesystem`` can stand in for deferred fsyncs here."""
    return _SYNCFS is not None


def deferring() -> bool:
    return getattr(_state, "deferred", False)


@contextlib.contextmanager
def deferred(enabled: bool = True) -> Iterator[None]:
    """Skip this thread's fsyncs inside the block (``sync_filesystem`` must follow)."""
    before = deferring()
    _state.deferred = enabled and can_defer()
    try:
        yield
    finally:
        _state.deferred = before


def fsync(fd: int) -> None:
    if not deferring():
        os.fsync(fd)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so renames and new files in it survive a crash."""
    if deferring():
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: Path) -> bool:
    """``syncfs(2)`` of the file system holding ``path``; False (logged) when it failed
    or cannot be called, so the caller does not count the data as durable."""
    if _SYNCFS is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        log.error("cannot open %s to sync its file system: %s", path.name, exc)
        return False
    try:
        if _SYNCFS(fd) != 0:  # type: ignore[operator]
            err = ctypes.get_errno()
            log.error("syncfs of the file system of %s failed: %s", path.name,
                      os.strerror(err))
            return False
        return True
    finally:
        os.close(fd)
