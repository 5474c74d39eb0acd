"""FileMapping: a shared mapping that keeps no descriptor, whose writes reach the file."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from core.storage import mapped_file
from core.storage.mapped_file import open_mapping


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(mapped_file.HOLDS_DESCRIPTOR, reason="no libc mmap: the fallback dups")
def test_mappings_hold_no_descriptor_and_write_through(tmp_path: Path) -> None:
    before = _open_fds()
    maps = []
    for i in range(50):
        fd = os.open(tmp_path / f"{i}.index", os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, 4096)
        maps.append(open_mapping(fd, 4096))
        os.close(fd)
    assert _open_fds() == before  # mmap.mmap would hold 50 more
    for i, m in enumerate(maps):
        struct.pack_into(">ii", m.view, 8, i, i * 10)
        m.flush()
    assert struct.unpack_from(">ii", maps[7].view, 8) == (7, 70)
    for m in maps:
        m.close()
    data = (tmp_path / "7.index").read_bytes()
    assert len(data) == 4096 and struct.unpack_from(">ii", data, 8) == (7, 70)


def test_a_closed_mapping_refuses_access(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "x", os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 4096)
    m = open_mapping(fd, 4096)
    os.close(fd)
    struct.pack_into(">q", m.view, 0, 42)
    m.close()
    with pytest.raises(ValueError):  # released, not a dangling pointer
        struct.unpack_from(">q", m.view, 0)
    m.close()  # twice is harmless
