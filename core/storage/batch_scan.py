"""Walking the batches of a ``.log`` file through an open fd, with ``os.pread``.

Walks, all per batch (never per record):

- ``scan_frames`` / ``scan_headers``: each whole batch as a ``Frame`` (the first 27
  bytes: enough for positions and offsets, one ``struct`` unpack) or as a full
  ``BatchHeader``, reading the file in 16 KiB chunks so a walk over small batches costs
  one read per chunk. Frames serve the read path (offset to position, log end).
- ``whole_batches``: how many bytes at the front of a read buffer are whole batches
  (optionally stopping at a base offset), from the 12-byte frame and lastOffsetDelta.
- ``validated_batches``: recovery's walk; yields each batch that passes every check
  (sane header, inside the file, at most ``max_message_bytes``, CRC, offsets above the
  previous batch and within the segment) and stops silently at the first that fails.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from core.storage.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    is_crc_valid,
    parse_header,
)
from core.storage.errors import CorruptRecordError
from core.storage.index import MAX_RELATIVE_OFFSET

log = logging.getLogger(__name__)

SCAN_CHUNK = 16 * 1024
_RECOVERY_CHUNK = 1024 * 1024
_FRAME = struct.Struct(">qi")  # baseOffset, batchLength
_INT32 = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
_FRAME27 = struct.Struct(">qiibIhi")


class Frame(NamedTuple):
    """A batch located in a file: what the read path needs, without the full header."""

    position: int
    size: int
    base_offset: int
    last_offset: int


def scan_frames(fd: int, start: int, end: int, *, large: bool = False) -> Iterator[Frame]:
    """Each whole batch in ``[start, end)``; stops at a torn tail. CorruptRecordError
    for an impossible frame (wrong magic, length below the minimum). ``large``: the
    batches are expected to be larger than a read chunk, so the first read is just a
    frame too."""
    pos, buf, buf_start, size = start, b"", start, SCAN_CHUNK if large else 0
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            # after a batch larger than a chunk, the next is probably large too: read
            # just its frame rather than a chunk of data the walk would skip
            want = HEADER_SIZE if size >= SCAN_CHUNK else SCAN_CHUNK
            buf, buf_start, rel = os.pread(fd, min(want, end - pos), pos), pos, 0
            if len(buf) < HEADER_SIZE:
                return
        base, length, _epoch, magic, _crc, _attrs, delta = _FRAME27.unpack_from(buf, rel)
        if magic != 2 or length < MIN_BATCH_LENGTH or delta < 0:
            raise CorruptRecordError(
                f"impossible batch frame at byte {pos} (magic {magic}, length {length})"
            )
        size = length + LOG_OVERHEAD
        if pos + size > end:
            return
        yield Frame(pos, size, base, base + delta)
        pos += size


def scan_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch in ``[start, end)``; stops at a torn
    tail. CorruptRecordError for an impossible header (the file needs recovery)."""
    pos, buf, buf_start = start, b"", start
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf, buf_start, rel = os.pread(fd, min(SCAN_CHUNK, end - pos), pos), pos, 0
            if len(buf) < HEADER_SIZE:
                return
        header = parse_header(buf, rel)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def whole_batches(buf: bytes, max_offset: int | None) -> tuple[int, int]:
    """Bytes of whole batches at the front of ``buf``, stopping before the first batch
    whose base offset is >= ``max_offset``, and the offset after the last of them
    (-1 if none)."""
    used, next_offset, end = 0, -1, len(buf)
    while end - used >= HEADER_SIZE:
        base, length = _FRAME.unpack_from(buf, used)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {length} below the v2 minimum")
        size = length + LOG_OVERHEAD
        if used + size > end or (max_offset is not None and base >= max_offset):
            break
        next_offset = base + _INT32.unpack_from(buf, used + _LAST_OFFSET_DELTA_AT)[0] + 1
        used += size
    return used, next_offset


def validated_batches(
    fd: int, file_size: int, *, base_offset: int, max_message_bytes: int, name: object
) -> Iterator[tuple[int, BatchHeader]]:
    """Recovery's walk from position 0: each valid batch in order; the walk ends at the
    first invalid or partial one (the caller truncates the file where it stopped)."""
    pos, expected, buf, buf_start = 0, base_offset, b"", 0
    while file_size - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf, buf_start, rel = os.pread(fd, _RECOVERY_CHUNK, pos), pos, 0
        try:
            header = parse_header(buf, rel)
        except CorruptRecordError as exc:
            log.warning("%s: bad batch header at byte %d: %s", name, pos, exc)
            return
        if header.size > max_message_bytes or pos + header.size > file_size:
            log.warning("%s: batch at byte %d is too large or runs past the end", name, pos)
            return
        if len(buf) - rel < header.size:
            buf, buf_start, rel = os.pread(fd, max(_RECOVERY_CHUNK, header.size), pos), pos, 0
        if not is_crc_valid(buf, rel, header):
            log.warning("%s: CRC mismatch in the batch at byte %d", name, pos)
            return
        if header.base_offset < expected or header.last_offset - base_offset > MAX_RELATIVE_OFFSET:
            log.warning("%s: out-of-order offsets at byte %d", name, pos)
            return
        yield pos, header
        expected = header.next_offset
        pos += header.size
