"""Every partition log of one broker, across its log directories (Kafka's ``LogManager``).

Layout of each log dir (``kafka-internals.md`` 1.1, 1.15)::

    .lock                              held with an exclusive flock while a broker runs
    meta.properties                    version=0, broker.id, cluster.id
    .kafka_cleanshutdown               written at clean shutdown, removed after startup
    recovery-point-offset-checkpoint   topic partition offset (all below it was fsynced)
    log-start-offset-checkpoint        topic partition logStartOffset
    replication-offset-checkpoint      topic partition highWatermark
    cleaner-offset-checkpoint          topic partition firstDirtyOffset
    <topic>-<partition>/               one partition log
    <topic>-<partition>.<uuid>-delete/ a deleted log not yet removed

Startup locks every dir, reads ``meta.properties`` and the checkpoints, removes
``-delete`` dirs and opens every ``<topic>-<partition>`` dir. Without the clean-shutdown
marker each log recovers from its checkpointed recovery point; a corrupt recovery-point
checkpoint means "recover everything", and a corrupt log-start or cleaner checkpoint
falls back to the first segment / a full cleaning. Nothing is ever deleted because a
checkpoint could not be read.

Threading: construction, ``close`` and the maintenance methods (``flush_dirty_logs``,
``run_retention``, ``run_cleaner``, the checkpoint writers) block; the broker schedules
them. The manager guards its own map of logs with a lock, but the logs themselves are
not thread-safe: whoever calls a maintenance method must keep appends to the affected
logs out of the way meanwhile (the broker runs retention and cleaning on the loop
thread, between appends).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.clock import Clock
from core.storage.checkpoint import OffsetCheckpointFile
from core.storage.cleaner import (
    DEDUPE_BUFFER_BYTES,
    CleanResult,
    clean,
    compaction_overdue,
    dirty_ratio,
    first_uncleanable_offset,
)
from core.storage.config import LogConfig, is_valid_topic_name, validate_topic_name
from core.storage.errors import CorruptCheckpointError, KafkaStorageError
from core.storage.flusher import flush_due
from core.storage.log import PartitionLog
from core.storage.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    acquire_lock,
    read_meta_properties,
    release_lock,
    write_marker,
    write_meta_properties,
)
from core.storage.retention import segments_to_delete

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_SUFFIX = "-delete"
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>0|[1-9][0-9]*)")
