"""Kafka's text checkpoint files, replaced atomically.

Format (UTF-8, one entry per line, fields separated by a single space), exactly as Kafka
writes it, so a franz log dir and a Kafka log dir can read each other's checkpoints::

    0                 version (always 0)
    2                 number of entries
    orders 0 1234     entry
    orders 1 99       entry

Entries are ``topic partition offset`` in the log-dir files
(``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``) and
``epoch startOffset`` in a partition's ``leader-epoch-checkpoint``.

Writing goes to ``<name>.tmp``, is fsynced, renamed over ``<name>``, then the directory
is fsynced so the rename itself survives a crash. A reader therefore sees the old file
or the new one, never a mix; a ``.tmp`` left by a crash mid-write is never read and is
overwritten by the next write. Reading a missing file gives no entries; any other file
that is not complete and well formed raises ``CorruptCheckpointError`` and the caller
picks the fallback (recover from 0, rebuild the epoch cache, ...). ``OSError`` becomes
``KafkaStorageError`` (Kafka marks the log dir offline on it).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from core.storage.config import is_valid_topic_name
from core.storage.durability import fsync_dir
from core.storage.errors import CorruptCheckpointError, KafkaStorageError

VERSION = 0
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")

E = TypeVar("E")


def _parse_int(text: str, bounds: tuple[int, int], what: str) -> int:
    if not _INTEGER.fullmatch(text) or not bounds[0] <= int(text) <= bounds[1]:
        raise ValueError(f"{what} {text!r} is not a valid integer")
    return int(text)




class CheckpointFile(ABC, Generic[E]):
    """One checkpoint file holding a list of entries of type ``E``.

    Subclasses say how one entry becomes a line and back. Methods take an internal
    lock, so a periodic writer thread and a reader do not interleave on one object;
    two objects on the same path are not coordinated.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.tmp_path = self.path.with_name(self.path.name + ".tmp")
        self._lock = threading.Lock()

    @abstractmethod
    def _format_entry(self, entry: E) -> str:
        """One entry as its line (no line end); ValueError if it cannot be written."""

    @abstractmethod
    def _parse_entry(self, fields: list[str]) -> E:
        """One line's fields as an entry; ValueError when they are malformed."""

    def write_entries(self, entries: Sequence[E]) -> None:
        """Replace the file's content with ``entries``, atomically and durably."""
        lines = [str(VERSION), str(len(entries)), *(self._format_entry(e) for e in entries)]
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        with self._lock:
            try:
                with open(self.tmp_path, "wb") as f:  # truncates a stray .tmp from a crash
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(self.tmp_path, self.path)
                fsync_dir(self.path.parent)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    self.tmp_path.unlink(missing_ok=True)
                raise KafkaStorageError(f"cannot write checkpoint file {self.path}: {exc}") from exc

    def read_entries(self) -> list[E]:
        """The entries in file order; [] if the file does not exist."""
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise KafkaStorageError(f"cannot read checkpoint file {self.path}: {exc}") from exc
        return self._parse(data)

    def _corrupt(self, problem: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"corrupt checkpoint file {self.path}: {problem}")

    def _parse(self, data: bytes) -> list[E]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"not UTF-8 text ({exc})") from exc
        if not text:
            raise self._corrupt("the file is empty")
        # Kafka ends every line with a line end; a missing one means a cut-off write.
        if not text.endswith("\n"):
            raise self._corrupt("truncated: the last line has no line end")
        lines = [line.removesuffix("\r") for line in text[:-1].split("\n")]
        if lines[0].strip() != str(VERSION):
            raise self._corrupt(f"unsupported version {lines[0]!r} (expected {VERSION})")
        if len(lines) < 2:
            raise self._corrupt("the entry count line is missing")
        try:
            count = _parse_int(lines[1].strip(), (0, _INT32[1]), "entry count")
        except ValueError as exc:
            raise self._corrupt(str(exc)) from exc
        body = lines[2:]
        if len(body) != count:
            raise self._corrupt(f"expected {count} entries but found {len(body)}")
        entries = []
        for number, line in enumerate(body, start=3):
            try:
                entries.append(self._parse_entry(line.split()))
            except ValueError as exc:
                raise self._corrupt(f"line {number} {line!r}: {exc}") from exc
        return entries


class OffsetCheckpointFile(CheckpointFile[tuple[str, int, int]]):
    """A log-dir checkpoint of one offset per partition: ``topic partition offset``.

    Used for the recovery point, high watermark, log start and cleaner checkpoints.
    """

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file with ``offsets``, one entry per (topic, partition), sorted."""
        self.write_entries([(t, p, o) for (t, p), o in sorted(offsets.items())])

    def read(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> offset; {} if the file does not exist."""
        return {(t, p): o for t, p, o in self.read_entries()}

    def _format_entry(self, entry: tuple[str, int, int]) -> str:
        topic, partition, offset = entry
        if not is_valid_topic_name(topic):
            raise ValueError(f"cannot checkpoint invalid topic name {topic!r}")
        return f"{topic} {int(partition)} {int(offset)}"

    def _parse_entry(self, fields: list[str]) -> tuple[str, int, int]:
        if len(fields) != 3:
            raise ValueError(f"expected 3 fields (topic partition offset), found {len(fields)}")
        topic, partition, offset = fields
        if not is_valid_topic_name(topic):
            raise ValueError(f"invalid topic name {topic!r}")
        return (
            topic,
            _parse_int(partition, (0, _INT32[1]), "partition"),
            _parse_int(offset, _INT64, "offset"),
        )


class LeaderEpochCheckpointFile(CheckpointFile[tuple[int, int]]):
    """A partition's ``leader-epoch-checkpoint``: ``epoch startOffset`` lines, ascending.

    Order is kept as given; keeping it ascending is the epoch cache's job.
    """

    def write(self, entries: Sequence[tuple[int, int]]) -> None:
        """Replace the file with ``(epoch, start_offset)`` entries, in the given order."""
        self.write_entries(list(entries))

    def read(self) -> list[tuple[int, int]]:
        """``(epoch, start_offset)`` entries in file order; [] if the file does not exist."""
        return self.read_entries()

    def _format_entry(self, entry: tuple[int, int]) -> str:
        epoch, start_offset = entry
        return f"{int(epoch)} {int(start_offset)}"

    def _parse_entry(self, fields: list[str]) -> tuple[int, int]:
        if len(fields) != 2:
            raise ValueError(f"expected 2 fields (epoch startOffset), found {len(fields)}")
        return _parse_int(fields[0], _INT32, "epoch"), _parse_int(fields[1], _INT64, "offset")
