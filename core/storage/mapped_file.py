"""A shared read-write memory mapping of a file that keeps no file descriptor.

Python's ``mmap.mmap`` duplicates the descriptor it maps (so it can resize and report
the size later; 3.13 added ``trackfd=False``): every mapped index then holds a
descriptor, and a broker with 10,000 partitions holds 20,000 of them for its indexes
alone. A mapping needs no descriptor once made, so ``FileMapping`` calls ``mmap(2)``
through ctypes, closes nothing it did not open, and exposes the pages as a writable
``memoryview`` (``struct.pack_into`` / ``unpack_from`` / slicing work on it as on an
``mmap``). Off Linux/glibc (no ``libc.mmap``), ``open_mapping`` falls back to
``mmap.mmap``.

After ``close()`` the view is released (any use raises ValueError), but a *slice* of
it taken earlier is not tracked by ``memoryview``: the caller must not keep slices past
``close()`` (they would point at unmapped pages). Index code takes slices only for the
duration of one call. Used by ``core.storage.index`` for every index mapping.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from typing import Protocol


class Mapping(Protocol):
    @property
    def view(self) -> memoryview: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def _load_libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.msync.restype = ctypes.c_int
    libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.madvise.restype = ctypes.c_int
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return libc


_LIBC = _load_libc()
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux


class FileMapping:
    """``length`` bytes of the file open as ``fd``, mapped shared and writable."""

    __slots__ = ("_addr", "_length", "_view")

    def __init__(self, fd: int, length: int) -> None:
        assert _LIBC is not None
        addr = _LIBC.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self._addr: int | None = addr
        self._length = length
        # No read-ahead on faults: an index is read by binary search and written one
        # entry at a time. With the default, the first touch of a fresh 10 MiB index
        # mapping took 4-8 ms (read-ahead over the preallocated file; ext4, this VM's
        # disk) and its later truncation ~1 ms; with MADV_RANDOM 9 us and 66 us.
        _LIBC.madvise(addr, length, mmap.MADV_RANDOM)  # advice only: a failure is harmless
        self._view = memoryview((ctypes.c_char * length).from_address(addr)).cast("B")

    @property
    def view(self) -> memoryview:
        return self._view

    def flush(self) -> None:
        if (self._addr is not None and _LIBC is not None
                and _LIBC.msync(self._addr, self._length, _MS_SYNC) != 0):
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def close(self) -> None:
        addr, self._addr = self._addr, None
        if addr is not None and _LIBC is not None:
            self._view.release()
            _LIBC.munmap(addr, self._length)

    def __del__(self) -> None:  # an index dropped without close() must not leak the pages
        self.close()


class _PythonMapping:
    """The fallback: ``mmap.mmap`` (holds a duplicate descriptor)."""

    __slots__ = ("_mm", "_view")

    def __init__(self, fd: int, length: int) -> None:
        self._mm = mmap.mmap(fd, length)
        if hasattr(self._mm, "madvise"):
            self._mm.madvise(mmap.MADV_RANDOM)
        self._view = memoryview(self._mm)

    @property
    def view(self) -> memoryview:
        return self._view

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        self._view.release()
        self._mm.close()


def open_mapping(fd: int, length: int) -> Mapping:
    """Map ``length`` (> 0) bytes of ``fd``; the descriptor may be closed right after."""
    if _LIBC is not None:
        return FileMapping(fd, length)
    return _PythonMapping(fd, length)


HOLDS_DESCRIPTOR = _LIBC is None
"""Whether a mapping keeps a descriptor (the partition budget counts it)."""
