"""A range of a segment file holding whole record batches, to be sent as it is stored.

A Kafka Fetch answer carries batches byte for byte as they are on disk, so a plaintext
connection can hand the range to sendfile(2): the bytes go from the page cache to the
socket without passing through Python (Kafka's zero-copy read). ``FileRegion`` names
the range; ``pin()`` keeps the segment's descriptor open while it is sent (a retention
or compaction pass may unlink the file meanwhile: the open descriptor still reads the
bytes the answer promised). ``read()`` is the copying fallback (TLS connections).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from core.storage.fd_cache import SegmentFile


@dataclass(frozen=True, slots=True)
class FileRegion:
    file: SegmentFile
    position: int
    length: int
    first_offset: int  # base offset of the first batch (or the offset asked, when empty)
    high_offset: int  # the offset after the last batch

    def __len__(self) -> int:
        return self.length

    def acquire(self) -> int:
        """Pin the file and return its descriptor; ``release()`` once sent."""
        return self.file.acquire()

    def release(self) -> None:
        self.file.release()

    def read(self) -> bytes:
        """The bytes, copied (for connections that cannot sendfile)."""
        fd = self.file.acquire()
        try:
            out = os.pread(fd, self.length, self.position)
        finally:
            self.file.release()
        if len(out) != self.length:
            raise OSError(f"{self.file.path}: {self.length} bytes at {self.position} "
                          f"promised, {len(out)} there")
        return out
