"""The C accelerator of Kafka's record format, when it was built (``core/storage/_native.c``).

``record_sizes`` gives a batch's cumulative key + value sizes (how reads cut at
``max_bytes``) without decoding its records; ``record_fault`` checks every record of
an untrusted batch in one pass; ``encode_batch`` writes one partition's
batch of a produce request (keys, headers, per-record timestamps) in one pass;
``key_partitions`` and ``murmur2`` are Kafka's default partitioner. All answer None when
the extension is missing (installed without a C compiler); callers then take their
pure-Python path, which gives the same results. The API's JSON rendering has its own accelerator
(``api.native_render``).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.storage import codec
from core.storage.batch import (
    HEADER_SIZE,
    BatchHeader,
    BuiltBatch,
    assemble_batch,
    parse_header,
)
from core.storage.errors import CorruptRecordError

Headers = list[tuple[str, "bytes | None"]]
NO_PRODUCER = (-1, -1, -1)  # producer id, epoch, base sequence of a batch without one

try:
    from core.storage import _native
except ImportError:  # built without a C compiler: callers use their Python path
    _native = None  # type: ignore[assignment]

AVAILABLE = _native is not None


def encode_batch(values: list[bytes | None], keys: list[bytes | None] | None, timestamp: int,
                 compression: int, *, headers: list[Headers] | None = None,
                 timestamps: list[int | None] | None = None,
                 idxs: list[int] | None = None,
                 producer: tuple[int, int, int] = NO_PRODUCER) -> bytearray | None:
    """A v2 batch (base offset 0, CRC set) of the records ``idxs`` of the
    columns (every record when None), in one pass: the bytes the codec's builder
    writes. ``keys``, ``headers``, ``timestamps``: columns as long as ``values`` or None;
    a record's timestamp is its own, else ``timestamp``; ``producer``: its (id, epoch,
    base sequence), none by default. None when the extension is not
    built; TypeError when a column holds what the builder would have to judge."""
    if _native is None:
        return None
    if compression == codec.NONE:  # header and CRC-32C written in C too
        return _native.encode_built(values, keys, headers, timestamps, timestamp, idxs,
                                    *producer, BuiltBatch)
    body, first, max_ts = _native.encode_records(values, keys, headers, timestamps, timestamp,
                                                 idxs)
    body = codec.compress(compression, body)
    n = len(values) if idxs is None else len(idxs)
    return assemble_batch(BatchHeader(0, 0, -1, 2, 0, compression, n - 1, first, max_ts,
                                      *producer, n), body, BuiltBatch)


def key_partitions(keys: list[bytes | None], num_partitions: int) -> dict[int, list[int]] | None:
    """Kafka's default partitioner over a column of keys: partition -> the indexes of
    its records, in order; null keys under -1. None when the extension is not built."""
    if _native is None:
        return None
    return _native.key_partitions(keys, num_partitions)


def scatter_offsets(total: int, runs: list[tuple[int, int, Sequence[int]]]
                    ) -> tuple[list[int | None], list[int | None]] | None:
    """Per-record partitions and offsets, in input order, of a produce request appended
    to several partitions: ``runs`` holds ``(partition, first_offset, order)``, ``order``
    the input indexes appended there in log order; records in no run read None. None
    when the extension is not built."""
    return None if _native is None else _native.scatter_offsets(total, runs)


def reserve_blocks(fd: int, offset: int, length: int) -> bool:
    """Blocks for bytes ``[offset, offset + length)`` of the file, its size unchanged
    (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``). False when not reserved: the extension
    is not built, the file system cannot, or the disk refuses."""
    return _native is not None and _native.reserve_blocks(fd, offset, length)


def start_sync_thread(requests_fd: int, results_fd: int) -> None:
    """Start the C thread of ``core.storage.data_sync`` on these pipe ends (it owns
    them from now on); OSError when the extension is not built or the thread cannot
    start."""
    if _native is None:
        raise OSError("the C extension is not built")
    _native.start_sync_thread(requests_fd, results_fd)


def new_buffer(n: int) -> bytearray:
    """A bytearray of ``n`` bytes to receive into: its contents are not set, so its
    pages are not made resident before bytes arrive (zeros without the extension)."""
    return bytearray(n) if _native is None else _native.new_buffer(n)


def murmur2(data: bytes) -> int | None:
    """Kafka's ``Utils.murmur2`` of ``data`` (signed 32 bits); None without the extension."""
    return None if _native is None else _native.murmur2(data)


#: The most a batch's records may take once decompressed, for batches from outside
#: this process (``validate_untrusted_records``): clients' batches are far smaller
#: (librdkafka's and Java's are at most a few MiB), and a compressed batch of 1 MiB
#: that inflates to gigabytes is refused before it takes the memory.
MAX_DECOMPRESSED_BYTES = 64 << 20


def records_section(raw: bytes | bytearray | memoryview, h: BatchHeader, *,
                    untrusted: bool = False) -> bytes | memoryview:
    """The records of the batch ``raw`` (header ``h``) as they are on disk, decompressed
    (at most MAX_DECOMPRESSED_BYTES when ``untrusted``)."""
    body: bytes | memoryview = memoryview(raw)[HEADER_SIZE : h.size]
    if h.compression != codec.NONE:
        body = codec.decompress(h.compression, body,
                                max_size=MAX_DECOMPRESSED_BYTES if untrusted else None)
    return body


def record_fault(raw: bytes | bytearray | memoryview, h: BatchHeader, *,
                 keys_required: bool = False) -> tuple[int, str, str] | None:
    """The first record of the whole batch ``raw`` (header ``h``) that readers could not
    decode, as ``(index, message, kind)`` (kind ``corrupt``, ``offset`` for an offset
    delta out of sequence, ``key`` for a null key when ``keys_required``), or None when
    all decode: one C pass over the (decompressed) records section. The extension
    must be built (``AVAILABLE``); a codec fault, or records that decompress past
    MAX_DECOMPRESSED_BYTES, raise CorruptRecordError."""
    return _native.check_records(records_section(raw, h, untrusted=True), h.records_count,
                                 keys_required)


def record_sizes(raw: bytes, header: BatchHeader | None = None) -> list[int] | None:
    """``s[i]`` = key + value bytes of the first ``i`` records of the batch ``raw``
    (``records_count + 1`` items); None when the extension is not built."""
    if _native is None:
        return None
    h = header if header is not None else parse_header(raw, 0)
    try:
        return _native.record_sizes(records_section(raw, h), h.records_count)
    except ValueError as exc:
        raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc
