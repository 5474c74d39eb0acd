"""The per-record work on v2 record batches, behind one interface (``RecordBatchCodec``).

Two implementations give the same results:

* ``AiokafkaCodec``: aiokafka's public ``aiokafka.record.default_records``
  (``DefaultRecordBatch`` / ``DefaultRecordBatchBuilder``), used only when those names
  are aiokafka's compiled (Cython) classes. When aiokafka runs without its extensions
  (not built, or ``AIOKAFKA_NO_EXTENSIONS`` set) they are its own pure-Python classes,
  which compress with aiokafka's settings and may silently drop compression; franz then
  uses ``PurePythonCodec`` instead (``load_aiokafka_codec`` answers None).
* ``PurePythonCodec`` (``core.storage.pure_codec``): Kafka's DefaultRecord layout in
  Python, compressing and checksumming with ``core.storage.codec``'s ``compress``,
  ``decompress`` and ``crc32c``, which it is given.

``core.storage.codec`` picks one once at import with ``select_codec``: aiokafka's
when it loads, else the pure-Python one; the environment variable
``FRANZ_PURE_PYTHON_CODEC`` forces the pure-Python one (any value but empty, ``0``,
``false``, ``no`` or ``off``). This module and no other imports aiokafka.

Known difference, aiokafka's: its builder takes a first record timestamped exactly -1
as "no record yet", so a batch whose first record has timestamp -1 and later ones other
timestamps gets a wrong baseTimestamp there; the pure-Python builder writes Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from core.storage.errors import CorruptRecordError

Headers = list[tuple[str, "bytes | None"]]
RecordTuple = tuple[int, int, int, "bytes | None", "bytes | None", Headers]
Buffer = bytes | bytearray | memoryview

PURE_PYTHON_ENV = "FRANZ_PURE_PYTHON_CODEC"
_OFF = frozenset({"", "0", "false", "no", "off"})
_MAX_BATCH_BYTES = 2**31 - 1  # the builders' size cap: never reached by franz
HEADER_SIZE = 61  # a v2 batch header (core.storage.batch.HEADER_SIZE, which imports codec)


class BatchBuilder(Protocol):
    """Collects records, then writes one v2 batch (base offset 0, CRC set)."""

    def append(self, offset: int, timestamp: int | None, key: Buffer | None,
               value: Buffer | None, headers: Headers, /) -> object:
        """Add a record: ``offset`` is its offset delta, ``timestamp`` None = now.
        TypeError when the key or value is not bytes-like. The result is unused."""
        ...

    def size(self) -> int:
        """Bytes written so far, header included (61 while empty)."""
        ...

    def build(self) -> bytearray:
        """The batch (compressed as asked), once, after the last ``append``."""
        ...


@runtime_checkable
class RecordObject(Protocol):
    """A decoded record: attributes only. Under LogAppendTime ``timestamp`` is the batch
    maxTimestamp and ``timestamp_type`` 1."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Headers


@runtime_checkable
class RecordBatchCodec(Protocol):
    """What franz needs of a record-batch codec (``core.storage.codec`` exports the chosen
    one's methods as ``new_batch_builder``, ``iter_batch_records``,
    ``batch_record_objects``). The decoders read the records of one whole batch, not
    its CRC (validated elsewhere), and raise CorruptRecordError on garbage."""

    name: str

    def new_builder(self, *, compression: int = 0, producer_id: int = -1,
                    producer_epoch: int = -1, base_sequence: int = -1,
                    transactional: bool = False) -> BatchBuilder:
        ...

    def iter_records(self, batch: Buffer) -> Iterator[RecordTuple]:
        """``(offset, timestamp, timestamp_type, key, value, headers)`` per record."""
        ...

    def record_objects(self, batch: bytes) -> list[Any]:
        """The records as ``RecordObject``s, for hot paths reading a few attributes."""
        ...


def wants_pure_python(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` forces the pure-Python codec (``FRANZ_PURE_PYTHON_CODEC``)."""
    return environ.get(PURE_PYTHON_ENV, "").strip().lower() not in _OFF


def select_codec(environ: Mapping[str, str], *, aiokafka: RecordBatchCodec | None,
                 pure: RecordBatchCodec) -> RecordBatchCodec:
    """aiokafka's codec when there is one (``load_aiokafka_codec``), unless ``environ``
    forces the pure-Python one; the pure-Python one otherwise."""
    if aiokafka is None or wants_pure_python(environ):
        return pure
    return aiokafka


# --- aiokafka's public API ----------------------------------------------------------


def load_aiokafka_codec() -> AiokafkaCodec | None:
    """aiokafka's compiled codec, or None if aiokafka is missing or runs without its
    extensions (its public names are then its own Python classes)."""
    try:
        from aiokafka.record import default_records
    except ImportError:
        return None
    batch, builder = default_records.DefaultRecordBatch, default_records.DefaultRecordBatchBuilder
    if default_records.__name__ in (batch.__module__, builder.__module__):  # defined there: Python
        return None
    return AiokafkaCodec(batch, builder)


class AiokafkaCodec:
    """``RecordBatchCodec`` over aiokafka's compiled ``DefaultRecordBatch`` /
    ``DefaultRecordBatchBuilder`` (its builder compresses with aiokafka's settings:
    gzip level 9, lz4 level 9, zstd level 3, xerial snappy)."""

    name = "aiokafka"

    def __init__(self, batch_cls: Any, builder_cls: Any) -> None:
        self._batch = batch_cls
        self._builder = builder_cls

    def __repr__(self) -> str:
        return f"<AiokafkaCodec {self._batch.__module__}>"

    def new_builder(self, *, compression: int = 0, producer_id: int = -1,
                    producer_epoch: int = -1, base_sequence: int = -1,
                    transactional: bool = False) -> BatchBuilder:
        return self._builder(2, compression, int(transactional), producer_id, producer_epoch,
                             base_sequence, _MAX_BATCH_BYTES)

    def iter_records(self, batch: Buffer) -> Iterator[RecordTuple]:
        try:
            data = bytes(batch)  # on garbage its reader may look one byte past the end: NUL
            if len(data) < HEADER_SIZE:  # it reads the header unchecked
                raise CorruptRecordError("record batch shorter than its header")
            for rec in self._batch(data):
                yield (rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value,
                       rec.headers)
        except CorruptRecordError:
            raise
        except Exception as exc:  # aiokafka raises assorted types on garbage
            raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc

    def record_objects(self, batch: bytes) -> list[Any]:
        if len(batch) < HEADER_SIZE:
            raise CorruptRecordError("record batch shorter than its header")
        try:
            return list(self._batch(batch))
        except Exception as exc:
            raise CorruptRecordError(f"cannot decode record batch: {exc}") from exc
