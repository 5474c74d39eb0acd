"""Storage-level domain errors: the log, its records, checkpoints and topic configuration.

    FranzError (core.errors)
    └── StorageError                          -1  base of everything raised by core.storage
        ├── OffsetOutOfRangeError              1
        ├── CorruptRecordError                 2  (retriable, as in Kafka)
        ├── MessageTooLargeError              10
        ├── InvalidTopicError                 17
        ├── RecordBatchTooLargeError          18
        ├── InvalidTimestampError             32
        ├── InvalidConfigError                40
        ├── OutOfOrderSequenceError           45
        ├── DuplicateSequenceError            46
        ├── InvalidProducerEpochError         47
        ├── KafkaStorageError                 56  (retriable: the log dir failed)
        ├── InvalidRecordError                87
        ├── NonMonotonicAppendError           -1
        ├── CorruptIndexError                 -1
        └── CorruptCheckpointError            -1

``error_code`` is Kafka's wire error number; HTTP status and Confluent codes are chosen
in ``api/errors.py`` only.
"""

from __future__ import annotations

from core.errors import FranzError


class StorageError(FranzError):
    """Base of every error raised by ``core.storage``."""

    error_code = -1


class OffsetOutOfRangeError(StorageError):
    """The requested offset is below the log start offset or above the log end offset."""

    error_code = 1


class CorruptRecordError(StorageError):
    """A record or batch failed its CRC, framing or decoding checks."""

    error_code = 2
    retriable = True


class MessageTooLargeError(StorageError):
    """A batch is larger than max.message.bytes (or the segment size)."""

    error_code = 10


class InvalidTopicError(StorageError):
    """A topic name breaks Kafka's naming rules, or the topic may not be written to,
    deleted or changed (an internal topic)."""

    error_code = 17


class RecordBatchTooLargeError(StorageError):
    """A produce request's record list is too large for the log (RECORD_LIST_TOO_LARGE)."""

    error_code = 18


class InvalidTimestampError(StorageError):
    """A record timestamp lies outside message.timestamp.before/after.max.ms of now."""

    error_code = 32


class InvalidConfigError(StorageError):
    """A topic configuration key is unknown or its value is malformed or out of range."""

    error_code = 40


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's batch sequence does not follow the last one written."""

    error_code = 45


class DuplicateSequenceError(StorageError):
    """An idempotent producer re-sent a batch that is already in the log."""

    error_code = 46


class InvalidProducerEpochError(StorageError):
    """A batch carries a producer epoch older than the one already seen."""

    error_code = 47


class KafkaStorageError(StorageError):
    """Disk I/O failed under a log directory; the replica is offline on this broker."""

    error_code = 56
    retriable = True


class InvalidRecordError(StorageError):
    """A record is well formed but breaks a log rule (e.g. a null key on a compacted topic)."""

    error_code = 87


class NonMonotonicAppendError(StorageError):
    """An append whose offsets are not above the current log end offset."""


class CorruptIndexError(StorageError):
    """An offset or time index file fails its sanity checks and must be rebuilt."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file is malformed or half written; the caller picks a fallback."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot fails its version, length or CRC-32C check (Kafka's
    CorruptSnapshotException); the loader deletes it and falls back to an older one."""
