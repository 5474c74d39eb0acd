"""A clean shutdown's final flush (core.storage.durability, LogManager.close): the
logs' fsyncs are deferred to one syncfs of the file system, and a failed syncfs leaves
the directory without its clean-shutdown marker, so the next start recovers it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import durability
from core.storage.log_dir import CLEAN_SHUTDOWN_FILE
from core.storage.log_manager import LogManager
from core.storage.records import build_batch_at

pytestmark = pytest.mark.skipif(not durability.can_defer(), reason="no syncfs(2) here")


def _fill(path: Path, logs: int) -> LogManager:
    manager = LogManager(path, server_defaults={}, clock=ManualClock(1_000))
    for p in range(logs):
        plog = manager.get_or_create_log("t", p)
        batch = build_batch_at([b"v%d" % p], None, None, None, 1_000, range(1),
                               max_bytes=1 << 20, producer=(7, 0, 0))
        plog.append_as_leader(batch, leader_epoch=0, flush_inline=False)
    return manager


def test_final_flush_syncs_the_file_system_once_instead_of_each_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _fill(tmp_path, 20)
    fsyncs: list[int] = []
    syncfs_calls: list[Path] = []
    real_fsync, real_syncfs = os.fsync, durability.sync_filesystem
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    monkeypatch.setattr(durability, "sync_filesystem",
                        lambda path: syncfs_calls.append(path) or real_syncfs(path))
    manager.close()
    assert syncfs_calls == [tmp_path]
    # what is left is the checkpoint files and the marker (a handful), not 20 logs x 5
    assert len(fsyncs) < 10
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = LogManager(tmp_path, server_defaults={}, clock=ManualClock(2_000))
    try:
        assert reopened.get_log("t", 19).log_end_offset == 1
        assert reopened.get_log("t", 19).producer_state.last_entry(7) is not None
    finally:
        reopened.close()


def test_a_failed_syncfs_leaves_the_directory_to_be_recovered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _fill(tmp_path, 3)
    monkeypatch.setattr(durability, "sync_filesystem", lambda path: False)
    manager.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_deferred_is_per_thread_and_restored() -> None:
    assert not durability.deferring()
    with durability.deferred():
        assert durability.deferring()
        with durability.deferred(False):
            assert not durability.deferring()
        assert durability.deferring()
    assert not durability.deferring()
