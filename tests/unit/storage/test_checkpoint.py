"""Checkpoint files on real disk: Kafka's text format, round trips, corruption detection
and the write-to-temp-then-rename discipline."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.storage import checkpoint
from core.storage.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile
from core.storage.errors import CorruptCheckpointError, KafkaStorageError, StorageError


@pytest.fixture
def offsets_file(tmp_path: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")


@pytest.fixture
def epochs_file(tmp_path: Path) -> LeaderEpochCheckpointFile:
    return LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")


# --- format and round trips --------------------------------------------------------


def test_offsets_are_written_in_kafkas_format(offsets_file: OffsetCheckpointFile) -> None:
    offsets_file.write({("orders", 1): 99, ("orders", 0): 1234, ("a.b-c_d", 7): 0})
    assert offsets_file.path.read_text() == "0\n3\na.b-c_d 7 0\norders 0 1234\norders 1 99\n"


def test_offsets_round_trip(offsets_file: OffsetCheckpointFile) -> None:
    offsets = {("orders", 0): 1234, ("orders", 11): 2**63 - 1, ("__consumer_offsets", 49): 5}
    offsets_file.write(offsets)
    assert offsets_file.read() == offsets


def test_empty_offsets_round_trip(offsets_file: OffsetCheckpointFile) -> None:
    offsets_file.write({})
    assert offsets_file.path.read_text() == "0\n0\n"
    assert offsets_file.read() == {}


def test_leader_epochs_round_trip_in_order(epochs_file: LeaderEpochCheckpointFile) -> None:
    entries = [(0, 0), (2, 150), (5, 9000)]
    epochs_file.write(entries)
    assert epochs_file.path.read_text() == "0\n3\n0 0\n2 150\n5 9000\n"
    assert epochs_file.read() == entries


def test_missing_file_reads_empty(
    offsets_file: OffsetCheckpointFile, epochs_file: LeaderEpochCheckpointFile
) -> None:
    assert offsets_file.read() == {}
    assert epochs_file.read() == []


def test_a_file_written_by_kafka_is_read(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(b"0\n2\nclicks 3 17\nclicks 4 0\n")
    assert OffsetCheckpointFile(path).read() == {("clicks", 3): 17, ("clicks", 4): 0}


def test_rewrite_replaces_content(offsets_file: OffsetCheckpointFile) -> None:
    offsets_file.write({("t", 0): 1, ("t", 1): 2})
    offsets_file.write({("t", 0): 5})
    assert offsets_file.read() == {("t", 0): 5}


def test_unwritable_entries_are_refused_before_touching_disk(
    offsets_file: OffsetCheckpointFile,
) -> None:
    offsets_file.write({("t", 0): 1})
    with pytest.raises(ValueError, match="invalid topic name"):
        offsets_file.write({("bad topic", 0): 1})
    assert offsets_file.read() == {("t", 0): 1}
    assert not offsets_file.tmp_path.exists()


# --- corruption --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "the file is empty"),
        (b"0\n2\nt 0 5\nt 1 6", "truncated"),
        (b"0\n2\nt 0 5\n", "expected 2 entries but found 1"),
        (b"0\n1\nt 0 5\nt 1 6\n", "expected 1 entries but found 2"),
        (b"0\n", "entry count line is missing"),
        (b"1\n1\nt 0 5\n", "unsupported version '1'"),
        (b"x\n1\nt 0 5\n", "unsupported version 'x'"),
        (b"0\nmany\nt 0 5\n", "entry count 'many'"),
        (b"0\n-1\n", "entry count '-1'"),
        (b"0\n1\nt zero 5\n", "line 3 't zero 5': partition 'zero'"),
        (b"0\n1\nt 0 five\n", "offset 'five'"),
        (b"0\n1\nt 0 99999999999999999999\n", "offset '99999999999999999999'"),
        (b"0\n1\nt 0\n", "expected 3 fields"),
        (b"0\n1\nt 0 5 6\n", "expected 3 fields"),
        (b"0\n2\nt 0 5\n\n", "line 4 '': expected 3 fields"),
        (b"0\n1\nt/x 0 5\n", "invalid topic name"),
        (b"0\n1\n\xff\xfe 0 5\n", "not UTF-8"),
        (b"\x00\x00\x00\x00\x00\x00", "truncated"),
    ],
)
def test_malformed_offset_checkpoints_are_detected(
    offsets_file: OffsetCheckpointFile, content: bytes, problem: str
) -> None:
    offsets_file.path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as info:
        offsets_file.read()
    assert str(offsets_file.path) in info.value.message
    assert problem in info.value.message


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"0\n2\n0 0\n1 1", "truncated"),
        (b"0\n3\n0 0\n1 1\n", "expected 3 entries but found 2"),
        (b"0\n1\n0\n", "expected 2 fields"),
        (b"0\n1\n2147483648 0\n", "epoch '2147483648'"),
        (b"0\n1\n1 x\n", "offset 'x'"),
    ],
)
def test_malformed_leader_epoch_checkpoints_are_detected(
    epochs_file: LeaderEpochCheckpointFile, content: bytes, problem: str
) -> None:
    epochs_file.path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError, match=problem):
        epochs_file.read()


def test_half_written_file_of_a_real_checkpoint_is_detected(
    offsets_file: OffsetCheckpointFile,
) -> None:
    offsets_file.write({("orders", p): 1000 + p for p in range(10)})
    whole = offsets_file.path.read_bytes()
    for cut in range(1, len(whole)):
        offsets_file.path.write_bytes(whole[:cut])
        with pytest.raises(CorruptCheckpointError):
            offsets_file.read()


def test_corrupt_checkpoint_is_a_storage_error() -> None:
    assert issubclass(CorruptCheckpointError, StorageError)
    assert CorruptCheckpointError.error_code == -1


# --- atomic replace ----------------------------------------------------------------


def test_stray_tmp_from_an_interrupted_write_is_ignored(offsets_file: OffsetCheckpointFile) -> None:
    offsets_file.write({("t", 0): 10})
    # A crash after writing part of the next version, before the rename.
    offsets_file.tmp_path.write_bytes(b"0\n2\nt 0 20\nt 1 ")
    assert offsets_file.read() == {("t", 0): 10}


def test_next_write_replaces_a_stray_tmp(offsets_file: OffsetCheckpointFile) -> None:
    offsets_file.tmp_path.write_bytes(b"garbage left by a crash" * 100)
    offsets_file.write({("t", 0): 30})
    assert offsets_file.read() == {("t", 0): 30}
    assert not offsets_file.tmp_path.exists()
    assert sorted(p.name for p in offsets_file.path.parent.iterdir()) == [offsets_file.path.name]


def test_failed_rename_keeps_old_content_and_cleans_up(
    offsets_file: OffsetCheckpointFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    offsets_file.write({("t", 0): 10})

    def crash(src: object, dst: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint.os, "replace", crash)
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        offsets_file.write({("t", 0): 20})
    monkeypatch.undo()
    assert offsets_file.read() == {("t", 0): 10}
    assert not offsets_file.tmp_path.exists()


def test_failed_fsync_keeps_old_content(
    epochs_file: LeaderEpochCheckpointFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    epochs_file.write([(0, 0)])

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.os, "fsync", no_space)
    with pytest.raises(KafkaStorageError, match="No space left"):
        epochs_file.write([(0, 0), (1, 50)])
    monkeypatch.undo()
    assert epochs_file.read() == [(0, 0)]
    assert not epochs_file.tmp_path.exists()


def test_unreadable_path_is_a_storage_error(tmp_path: Path) -> None:
    directory = tmp_path / "not-a-file"
    directory.mkdir()
    with pytest.raises(KafkaStorageError):
        OffsetCheckpointFile(directory).read()


def test_write_into_missing_directory_is_a_storage_error(tmp_path: Path) -> None:
    missing = OffsetCheckpointFile(tmp_path / "gone" / "recovery-point-offset-checkpoint")
    with pytest.raises(KafkaStorageError):
        missing.write({("t", 0): 1})
