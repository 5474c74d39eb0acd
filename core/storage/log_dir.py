"""One entry of ``log.dirs``: its lock, ``meta.properties``, shutdown marker, checkpoint
files and partition directories. ``LogManager`` owns one ``LogDir`` per entry.

Root-level files (``kafka-internals.md`` 1.1)::

    .lock                  flock(LOCK_EX) held for the broker's lifetime; a second broker
                           (or a second LogManager in the same process) fails to start
    meta.properties        Java properties: version=0, broker.id, cluster.id
    .kafka_cleanshutdown   present only between a clean shutdown and the next startup
    *-checkpoint           see ``core.storage.checkpoint``

Partition directories are ``<topic>-<partition>`` (the partition follows the *last*
``-``). ``<topic>-<partition>.<32 hex>-delete`` is a deleted log awaiting removal;
``-future`` and ``-stray`` directories (moves between dirs, KRaft orphans) are left
alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from core.storage.checkpoint import OffsetCheckpointFile
from core.storage.config import is_valid_topic_name
from core.storage.durability import fsync_dir
from core.storage.errors import CorruptCheckpointError, KafkaStorageError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_SUFFIX = "-delete"
_SKIPPED_SUFFIXES = ("-future", "-stray")
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>0|[1-9][0-9]*)")


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``(topic, partition)`` for a ``<topic>-<partition>`` directory name, else None."""
    m = _PARTITION_DIR.fullmatch(name)
    if m is None or not is_valid_topic_name(m["topic"]):
        return None
    return m["topic"], int(m["partition"])


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def check_meta(
    props: Mapping[str, str], *, broker_id: int | None, cluster_id: str | None, where: Path
) -> tuple[int | None, str | None]:
    """Merge the ids of a ``meta.properties`` with those already known: KafkaStorageError
    if they disagree (Kafka's InconsistentBrokerId / InconsistentClusterId)."""
    found_broker = int(props["broker.id"]) if props.get("broker.id", "").isdigit() else None
    if found_broker is not None and broker_id not in (None, found_broker):
        raise KafkaStorageError(
            f"broker.id {found_broker} in {where / META_PROPERTIES} does not match this "
            f"broker's id {broker_id}"
        )
    found_cluster = props.get("cluster.id") or None
    if found_cluster is not None and cluster_id not in (None, found_cluster):
        raise KafkaStorageError(
            f"cluster.id {found_cluster} in {where / META_PROPERTIES} does not match {cluster_id}"
        )
    return (broker_id if found_broker is None else found_broker), (cluster_id or found_cluster)


class LogDir:
    """One log directory. Not thread-safe; ``LogManager`` serialises access."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create log dir {path}: {exc}") from exc
        self.recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT)
        self.log_starts = OffsetCheckpointFile(path / LOG_START_CHECKPOINT)
        self.high_watermarks = OffsetCheckpointFile(path / HIGH_WATERMARK_CHECKPOINT)
        self.cleaner_offsets = OffsetCheckpointFile(path / CLEANER_CHECKPOINT)
        self._lock_fd: int | None = None

    # --- lock -------------------------------------------------------------------------

    def lock(self) -> None:
        """Take the exclusive lock on ``.lock``; KafkaStorageError if someone holds it.

        flock locks belong to the open file, so this also excludes a second manager in
        the same process.
        """
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise KafkaStorageError(
                f"failed to acquire lock on {self.path / LOCK_FILE}: another process "
                f"is using this log dir ({exc.strerror})"
            ) from exc
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is None:
            return
        fd, self._lock_fd = self._lock_fd, None
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    # --- meta.properties --------------------------------------------------------------

    def read_meta(self) -> dict[str, str] | None:
        """The properties of ``meta.properties``, or None if there is none."""
        try:
            text = (self.path / META_PROPERTIES).read_text("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise KafkaStorageError(f"cannot read {self.path / META_PROPERTIES}: {exc}") from exc
        props: dict[str, str] = {}
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
        return props

    def write_meta(self, props: Mapping[str, str]) -> None:
        """Replace ``meta.properties`` atomically (write, fsync, rename, fsync dir)."""
        body = "#\n#Written by franz\n" + "".join(f"{k}={v}\n" for k, v in props.items())
        self._write_atomically(META_PROPERTIES, body.encode("utf-8"))

    # --- clean-shutdown marker --------------------------------------------------------

    @property
    def had_clean_shutdown(self) -> bool:
        return (self.path / CLEAN_SHUTDOWN_FILE).exists()

    def write_clean_shutdown_marker(self) -> None:
        self._write_atomically(CLEAN_SHUTDOWN_FILE, b"")

    def remove_clean_shutdown_marker(self) -> None:
        try:
            (self.path / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            fsync_dir(self.path)
        except OSError as exc:
            raise KafkaStorageError(f"cannot remove clean-shutdown marker in {self.path}") from exc

    # --- checkpoints ------------------------------------------------------------------

    def read_checkpoint(self, file: OffsetCheckpointFile) -> dict[TopicPartition, int] | None:
        """The checkpoint's offsets; None (after a warning) if the file is corrupt."""
        try:
            return file.read()
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s: %s", file.path, exc.message)
            return None

    # --- partition directories --------------------------------------------------------

    def partition_dirs(self) -> Iterator[tuple[TopicPartition, Path]]:
        """Every ``<topic>-<partition>`` directory, sorted; ``-delete`` dirs are removed
        on the way, anything else unrecognised is skipped with a warning."""
        for child in sorted(self.path.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_SUFFIX):
                log.info("removing log %s left over from an earlier deletion", child)
                shutil.rmtree(child, ignore_errors=True)
                continue
            tp = parse_partition_dir(child.name)
            if tp is None or child.name.endswith(_SKIPPED_SUFFIXES):
                log.warning("skipping %s: not a <topic>-<partition> log directory", child)
                continue
            yield tp, child

    def remove_partition_dir(self, directory: Path) -> None:
        """Rename ``directory`` to ``<name>.<uuid>-delete`` (atomic: a crash leaves it to
        the next startup), then remove it."""
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        try:
            os.rename(directory, doomed)
            fsync_dir(self.path)
        except OSError as exc:
            raise KafkaStorageError(f"cannot rename {directory} for deletion: {exc}") from exc
        shutil.rmtree(doomed, ignore_errors=True)

    # --- helpers ----------------------------------------------------------------------

    def _write_atomically(self, name: str, data: bytes) -> None:
        target = self.path / name
        tmp = target.with_name(name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
            fsync_dir(self.path)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {target}: {exc}") from exc

