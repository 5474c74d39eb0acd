"""The idempotent-producer state wired into the partition log (Kafka's UnifiedLog):
duplicates answered with the original offsets and written once, out-of-order and fenced
batches refused with nothing written, the state rebuilt after a clean shutdown (snapshot)
and after a crash (snapshot + replay of headers), on followers and after truncation,
kept by retention and compaction, expired; batches without a producer id untouched.
Real files under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import log_loader
from core.storage.cleaner import clean
from core.storage.config import LogConfig
from core.storage.errors import (
    InvalidConfigError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from core.storage.log import PartitionLog
from core.storage.log_manager import LogManager
from core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
    read_snapshot,
    snapshot_file_name,
)
from core.storage.records import NewRecord, Record, build_batch, decode_records

NOW = 1_700_000_000_000
PID, OTHER = 4000, 4001


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "idem-0"


def batch(pid: int = PID, epoch: int = 0, seq: int = 0, n: int = 1, *, tag: str = "v",
          key: bytes | None = b"k", ts: int = NOW) -> bytearray:  # fmt: skip
    """A client batch of ``n`` records with sequences ``seq .. seq + n - 1``."""
    records = [NewRecord(value=f"{tag}{i}".encode(), key=key, timestamp=ts) for i in range(n)]
    return build_batch(
        records,
        now_ms=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq if pid >= 0 else -1,
    )


def plain(n: int = 1, *, tag: str = "p") -> bytearray:
    return batch(-1, -1, -1, n, tag=tag)


def open_log(directory: Path, clock: ManualClock, *, clean_shutdown: bool = False,
             **overrides: object) -> PartitionLog:  # fmt: skip
    config = LogConfig(**overrides)  # type: ignore[arg-type]
    return PartitionLog.open(directory, config, clock=clock, clean_shutdown=clean_shutdown)


def read_all(plog: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += decode_records(fetched.data, min_offset=offset)
        offset = fetched.high_offset
    return out


def crash(plog: PartitionLog) -> None:
    """Release the files as a killed process would leave them: no snapshot at the LEO."""
    for seg in plog.segments:
        seg.close()


def snapshots(directory: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob("*.snapshot"))


def summary(plog: PartitionLog) -> dict[int, tuple[int, int, int]]:
    """Per producer id: epoch, last sequence, last offset (what a snapshot keeps)."""
    return {pid: e[:3] for pid, e in state_of(plog).items()}


def all_data(plog: PartitionLog, start: int = 0) -> bytes:
    """The log's batches from ``start``, as a follower fetches them."""
    out, offset = b"", start
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += fetched.data
        offset = fetched.high_offset
    return out


def state_of(plog: PartitionLog) -> dict[int, tuple[int, int, int, list[tuple[int, int, int]]]]:
    """Per producer id: epoch, last sequence, last offset, cached (first seq, last seq,
    last offset) of each batch."""
    return {
        pid: (
            e.producer_epoch,
            e.last_seq,
            e.last_offset,
            [(b.first_seq, b.last_seq, b.last_offset) for b in e.batches],
        )
        for pid, e in plog.producer_state.producers.items()
    }


def log_size(plog: PartitionLog) -> int:
    return sum(os.path.getsize(s.log_path) for s in plog.segments)


# --- leader appends -----------------------------------------------------------------


def test_a_duplicate_is_answered_with_the_original_offsets_and_written_once(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(plain(2), leader_epoch=0)
    first = plog.append_as_leader(batch(seq=0, n=3, tag="a"), leader_epoch=0)
    second = plog.append_as_leader(batch(seq=3, n=2, tag="b"), leader_epoch=0)
    assert (first.first_offset, first.last_offset, first.duplicate) == (2, 4, False)
    assert (second.first_offset, second.last_offset) == (5, 6)
    leo, size = plog.log_end_offset, log_size(plog)

    again = plog.append_as_leader(batch(seq=0, n=3, tag="a"), leader_epoch=0)
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (2, 4)
    assert (again.num_records, again.size, again.log_append_time) == (0, 0, -1)
    assert again.max_timestamp == NOW and again.log_start_offset == 0
    again = plog.append_as_leader(batch(seq=3, n=2, tag="b"), leader_epoch=0)
    assert (again.first_offset, again.last_offset, again.duplicate) == (5, 6, True)

    assert (plog.log_end_offset, log_size(plog)) == (leo, size)
    assert [r.value for r in read_all(plog)] == [b"p0", b"p1", b"a0", b"a1", b"a2", b"b0", b"b1"]
    nxt = plog.append_as_leader(batch(seq=5, tag="c"), leader_epoch=0)
    assert (nxt.first_offset, nxt.duplicate) == (7, False)
    plog.close()


def test_a_duplicate_on_a_log_append_time_topic_answers_the_original_append_time(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, message_timestamp_type="LogAppendTime")
    first = plog.append_as_leader(batch(seq=0, ts=NOW - 5000), leader_epoch=0)
    assert first.log_append_time == NOW
    clock.advance(1000)
    again = plog.append_as_leader(batch(seq=0, ts=NOW - 5000), leader_epoch=0)
    assert again.duplicate and again.log_append_time == NOW and again.max_timestamp == NOW
    plog.close()


def test_a_request_holding_a_duplicate_writes_none_of_its_batches(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(batch(seq=0, tag="a"), leader_epoch=0)
    leo = plog.log_end_offset
    info = plog.append_as_leader(batch(OTHER, seq=0) + batch(seq=0, tag="a"), leader_epoch=0)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 0)
    assert plog.log_end_offset == leo and OTHER not in plog.producer_state.producers
    plog.close()


@pytest.mark.parametrize(
    ("epoch", "seq", "error"),
    [
        (1, 5, OutOfOrderSequenceError),  # a gap after the last sequence (2)
        (1, 1, OutOfOrderSequenceError),  # overlaps the cached batch, not a duplicate of it
        (2, 1, OutOfOrderSequenceError),  # a new epoch must start at sequence 0
        (0, 3, InvalidProducerEpochError),  # an older epoch is fenced
    ],
)
def test_out_of_order_and_fenced_batches_are_refused_and_write_nothing(
    log_dir: Path, clock: ManualClock, epoch: int, seq: int, error: type[Exception]
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(batch(epoch=1, seq=0, n=3), leader_epoch=0)
    leo, size, before = plog.log_end_offset, log_size(plog), state_of(plog)
    with pytest.raises(error):
        plog.append_as_leader(batch(epoch=epoch, seq=seq), leader_epoch=0)
    assert (plog.log_end_offset, log_size(plog), state_of(plog)) == (leo, size, before)
    plog.close()
    again = open_log(log_dir, clock, clean_shutdown=True)
    assert [r.value for r in read_all(again)] == [b"v0", b"v1", b"v2"]
    again.close()


def test_a_fenced_epoch_is_refused_and_a_new_epoch_starts_at_sequence_zero(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(batch(epoch=3, seq=0, n=2), leader_epoch=0)
    leo = plog.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        plog.append_as_leader(batch(epoch=2, seq=2), leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        plog.append_as_leader(batch(epoch=4, seq=2), leader_epoch=0)
    assert plog.log_end_offset == leo
    info = plog.append_as_leader(batch(epoch=4, seq=0), leader_epoch=0)
    assert info.first_offset == leo and not info.duplicate
    with pytest.raises(InvalidProducerEpochError):  # the old epoch is fenced for good
        plog.append_as_leader(batch(epoch=3, seq=2), leader_epoch=0)
    plog.close()


def test_a_bad_batch_after_a_good_one_in_the_same_request_writes_neither(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(batch(seq=0), leader_epoch=0)
    before = state_of(plog)
    with pytest.raises(OutOfOrderSequenceError):
        plog.append_as_leader(batch(seq=1) + batch(seq=7), leader_epoch=0)
    assert plog.log_end_offset == 1 and state_of(plog) == before
    info = plog.append_as_leader(batch(seq=1) + batch(seq=2), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (1, 2)
    assert state_of(plog)[PID][1:3] == (2, 2)
    plog.close()


def test_an_unknown_producer_is_accepted_with_any_sequence(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    info = plog.append_as_leader(batch(epoch=7, seq=1234, n=2), leader_epoch=0)
    assert not info.duplicate and state_of(plog)[PID] == (7, 1235, 1, [(1234, 1235, 1)])
    plog.close()


def test_batches_without_a_producer_id_never_reach_the_producer_state(
    log_dir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=4 * len(plain(1)))

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("the producer state was consulted")

    monkeypatch.setattr(plog.producer_state, "check_batches", boom)
    monkeypatch.setattr(plog.producer_state, "update", boom)
    infos = [plog.append_as_leader(plain(1, tag="same"), leader_epoch=0) for _ in range(9)]
    assert [i.first_offset for i in infos] == list(range(9))  # the same bytes, 9 copies
    assert not any(i.duplicate for i in infos)
    assert [r.value for r in read_all(plog)] == [b"same0"] * 9
    monkeypatch.undo()
    assert dict(plog.producer_state.producers) == {}
    plog.close()
    for offset in snapshots(log_dir):  # rolls and close wrote empty snapshots
        assert read_snapshot(log_dir / snapshot_file_name(offset)) == []


# --- snapshots, reloading ----------------------------------------------------------


def test_a_clean_close_writes_a_snapshot_at_the_log_end_and_reopening_reads_only_it(
    log_dir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(batch(seq=0, n=2), leader_epoch=0)
    plog.append_as_leader(plain(3), leader_epoch=0)
    plog.append_as_leader(batch(OTHER, epoch=2, seq=10), leader_epoch=0)
    before = state_of(plog)
    plog.close()
    assert snapshots(log_dir) == [6]

    def no_replay(*_a: object, **_k: object) -> None:
        raise AssertionError("the log was replayed")

    monkeypatch.setattr(log_loader, "replay_producer_batches", no_replay)
    again = open_log(log_dir, clock, clean_shutdown=True)
    monkeypatch.undo()
    # a snapshot holds each producer's last batch only (as Kafka's)
    assert state_of(again) == {PID: (0, 1, 1, [(0, 1, 1)]), OTHER: before[OTHER]}
    dup = again.append_as_leader(batch(seq=0, n=2), leader_epoch=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    with pytest.raises(OutOfOrderSequenceError):
        again.append_as_leader(batch(seq=5), leader_epoch=0)
    assert again.append_as_leader(batch(seq=2), leader_epoch=0).first_offset == 6
    again.close()


def test_after_a_crash_the_state_is_the_latest_snapshot_plus_a_replay(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=3 * len(batch()))
    for seq in range(4):
        plog.append_as_leader(batch(seq=seq, tag="a"), leader_epoch=0)  # same sizes
        plog.append_as_leader(batch(OTHER, seq=seq, tag="b"), leader_epoch=0)
    plog.append_as_leader(plain(1), leader_epoch=0)
    assert len(plog.segments) > 2
    before = state_of(plog)
    leo = plog.log_end_offset
    rolls = [s.base_offset for s in plog.segments[1:]]
    crash(plog)
    assert snapshots(log_dir) == rolls == [3, 6]  # one per roll, none at the LEO

    again = open_log(log_dir, clock)
    assert again.log_end_offset == leo
    # the latest snapshot holds the last batch per producer, the replay adds what followed
    after = state_of(again)
    for pid in (PID, OTHER):
        assert after[pid][:3] == before[pid][:3]
    dup = again.append_as_leader(batch(OTHER, seq=3, tag="b"), leader_epoch=0)
    assert dup.duplicate and dup.first_offset == 7
    dup = again.append_as_leader(batch(seq=2, tag="a"), leader_epoch=0)  # in the snapshot
    assert dup.duplicate and dup.first_offset == 4
    with pytest.raises(OutOfOrderSequenceError):
        again.append_as_leader(batch(seq=5), leader_epoch=0)
    assert again.append_as_leader(batch(seq=4), leader_epoch=0).first_offset == leo
    again.close()


def test_a_crash_before_any_snapshot_replays_the_whole_log(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    for seq in range(6):
        plog.append_as_leader(batch(seq=seq), leader_epoch=0)
    before = state_of(plog)
    crash(plog)
    assert snapshots(log_dir) == []
    again = open_log(log_dir, clock)
    assert state_of(again) == before  # all 5 cached batches, from the log itself
    for seq in range(1, 6):
        assert again.append_as_leader(batch(seq=seq), leader_epoch=0).duplicate
    again.close()


def test_a_corrupt_snapshot_at_the_log_end_falls_back_to_an_older_one_and_a_replay(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=2 * len(batch()))
    for seq in range(5):
        plog.append_as_leader(batch(seq=seq), leader_epoch=0)
    before = state_of(plog)
    plog.close()
    end = log_dir / snapshot_file_name(5)
    end.write_bytes(end.read_bytes()[:-3])
    again = open_log(log_dir, clock, clean_shutdown=True)
    assert state_of(again)[PID][:3] == before[PID][:3]
    assert not end.exists()
    again.close()


def test_a_log_shut_down_cleanly_without_snapshots_predates_producer_state(
    log_dir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(plain(4), leader_epoch=0)
    plog.close()
    for path in log_dir.glob("*.snapshot"):
        path.unlink()

    def no_replay(*_a: object, **_k: object) -> None:
        raise AssertionError("the log was replayed")

    monkeypatch.setattr(log_loader, "replay_producer_batches", no_replay)
    again = open_log(log_dir, clock, clean_shutdown=True)
    monkeypatch.undo()
    assert again.producer_state.map_end_offset == 4 and not again.producer_state.producers
    again.close()
    assert snapshots(log_dir) == [4]


def test_the_snapshot_of_a_roll_holds_the_batches_written_before_it_in_the_same_append(
    log_dir: Path, clock: ManualClock
) -> None:
    size = len(batch(n=3))
    plog = open_log(log_dir, clock, segment_bytes=size + 10)
    info = plog.append_as_leader(batch(seq=0, n=3) + batch(OTHER, seq=0, n=3), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert [s.base_offset for s in plog.segments] == [0, 3]
    entries = {e.producer_id: e for e in read_snapshot(log_dir / snapshot_file_name(3))}
    assert set(entries) == {PID} and entries[PID].last_offset == 2
    assert set(state_of(plog)) == {PID, OTHER}
    plog.close()


def test_a_roll_snapshot_is_fsynced_by_the_next_flush(log_dir: Path, clock: ManualClock) -> None:
    rolled: list[int] = []
    plog = PartitionLog.open(log_dir, LogConfig(segment_bytes=len(batch()) + 10), clock=clock,
                             on_roll=lambda _log, base: rolled.append(base))  # fmt: skip
    plog.append_as_leader(batch(seq=0), leader_epoch=0)
    plog.append_as_leader(batch(seq=1), leader_epoch=0)
    assert rolled == [1] and snapshots(log_dir) == [1]
    assert list(plog.producer_state._unsynced) == [1]
    plog.flush(1)
    assert list(plog.producer_state._unsynced) == [] and plog.recovery_point == 1
    plog.close()


def test_snapshot_files_do_not_disturb_loading_or_deletion(
    tmp_path: Path, clock: ManualClock
) -> None:
    lm = LogManager(tmp_path / "data", server_defaults={"log.segment.bytes": "200"},
                    clock=clock, broker_id=1)  # fmt: skip
    plog = lm.get_or_create_log("idem", 0)
    for seq in range(6):
        plog.append_as_leader(batch(seq=seq), leader_epoch=0)
    directory = plog.dir
    (directory / (snapshot_file_name(99) + ".tmp")).write_bytes(b"cut by a crash")
    names_before = sorted(p.name for p in directory.iterdir())
    lm.close()
    assert snapshots(directory)[-1] == 6  # written with the final flush

    lm = LogManager(tmp_path / "data", server_defaults={"log.segment.bytes": "200"},
                    clock=clock, broker_id=1)  # fmt: skip
    plog = lm.get_log("idem", 0)
    assert plog is not None and not plog.offline
    assert [r.value for r in read_all(plog)] == [b"v0"] * 6
    assert not (directory / (snapshot_file_name(99) + ".tmp")).exists()
    assert {n for n in names_before if not n.endswith(".tmp")} <= {
        p.name for p in directory.iterdir()
    }
    assert plog.append_as_leader(batch(seq=5), leader_epoch=0).duplicate
    assert lm.delete_log("idem", 0)
    assert not directory.exists()
    assert not any(p.name.startswith("idem-0") for p in (tmp_path / "data").iterdir())
    lm.close()


# --- followers and truncation ------------------------------------------------------


def test_a_follower_builds_the_state_and_truncation_restores_it_as_of_that_offset(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = {"segment_bytes": 3 * len(batch())}
    leader = open_log(tmp_path / "lead-0", clock, **config)
    reference: dict[int, dict[int, tuple[int, int, int]]] = {0: {}}
    for seq in range(5):  # PID at 3 * seq, a plain batch, OTHER at 3 * seq + 2
        leader.append_as_leader(batch(seq=seq), leader_epoch=1)
        leader.append_as_leader(plain(1), leader_epoch=1)
        leader.append_as_leader(batch(OTHER, epoch=1, seq=seq), leader_epoch=1)
        reference[leader.log_end_offset] = summary(leader)

    follower = open_log(tmp_path / "follow-0", clock, **config)
    follower.append_as_follower(all_data(leader))
    assert follower.log_end_offset == leader.log_end_offset == 15
    assert state_of(follower) == state_of(leader)  # every batch applied: same cache
    assert snapshots(tmp_path / "follow-0") == [3, 6, 9, 12]

    follower.truncate_to(7)  # drops the plain batch at 7 and everything after
    assert follower.log_end_offset == 7
    assert snapshots(tmp_path / "follow-0") == [3, 6]
    # the snapshot at 6 (last batch per producer) plus a replay of [6, 7)
    assert state_of(follower) == {PID: (0, 2, 6, [(1, 1, 3), (2, 2, 6)]),
                                  OTHER: (1, 1, 5, [(1, 1, 5)])}  # fmt: skip
    # the leader's later batches replicate again on top
    follower.append_as_follower(all_data(leader, 7))
    assert summary(follower) == summary(leader)

    for offset in (12, 9, 6, 3):
        follower.truncate_to(offset)
        assert summary(follower) == reference[offset]
    follower.truncate_to(2)  # below the first snapshot: a replay from the log start
    assert state_of(follower) == {PID: (0, 0, 0, [(0, 0, 0)])}
    follower.truncate_to(0)
    assert state_of(follower) == {}
    leader.close()
    follower.close()


def test_a_follower_append_is_not_checked(
    log_dir: Path, clock: ManualClock, tmp_path: Path
) -> None:
    leader = open_log(tmp_path / "lead-0", clock)
    leader.append_as_leader(batch(epoch=5, seq=0), leader_epoch=0)
    older = open_log(tmp_path / "old-0", clock)
    older.append_as_leader(plain(1), leader_epoch=0)
    older.append_as_leader(batch(epoch=4, seq=9), leader_epoch=0)  # offset 1
    follower = open_log(log_dir, clock)
    follower.append_as_follower(all_data(leader))
    follower.append_as_follower(all_data(older, 1))  # an epoch going back: accepted
    assert state_of(follower)[PID][:3] == (4, 9, 1)
    for plog in (leader, older, follower):
        plog.close()


def test_truncate_fully_forgets_every_producer_and_snapshot(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=2 * len(batch()))
    for seq in range(5):
        plog.append_as_leader(batch(seq=seq), leader_epoch=0)
    assert snapshots(log_dir)
    plog.truncate_fully_and_start_at(100)
    assert state_of(plog) == {} and snapshots(log_dir) == []
    assert plog.append_as_leader(batch(seq=77), leader_epoch=0).first_offset == 100
    plog.close()
    again = PartitionLog.open(log_dir, LogConfig(), clock=clock, clean_shutdown=True,
                              log_start_offset=100)  # fmt: skip
    assert state_of(again) == {PID: (0, 77, 100, [(77, 77, 100)])}
    again.close()


# --- retention, expiry, compaction --------------------------------------------------


def test_retention_keeps_the_producers_and_deletes_the_snapshots_below_the_log_start(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=2 * len(batch()))
    plog.append_as_leader(batch(OTHER, seq=0), leader_epoch=0)
    for seq in range(7):
        plog.append_as_leader(batch(seq=seq), leader_epoch=0)
    assert snapshots(log_dir) == [2, 4, 6]
    before = state_of(plog)
    plog.delete_segments(plog.segments[:2], reason="test")
    assert plog.log_start_offset == 4
    assert snapshots(log_dir) == [4, 6]
    assert state_of(plog) == before  # OTHER's only batch is gone, OTHER is not
    dup = plog.append_as_leader(batch(OTHER, seq=0), leader_epoch=0)
    assert dup.duplicate and dup.first_offset == 0  # below the log start: Kafka answers it
    with pytest.raises(OutOfOrderSequenceError):
        plog.append_as_leader(batch(OTHER, seq=5), leader_epoch=0)
    assert not plog.append_as_leader(batch(OTHER, seq=1), leader_epoch=0).duplicate
    plog.close()
    # and after a restart: the snapshot at the log end holds OTHER
    again = PartitionLog.open(
        log_dir, plog.config, clock=clock, clean_shutdown=True, log_start_offset=4
    )
    assert again.log_start_offset == 4 and summary(again)[OTHER] == (0, 1, 8)
    assert again.append_as_leader(batch(OTHER, seq=1), leader_epoch=0).duplicate
    again.close()


def test_idle_producers_expire_and_are_then_accepted_with_any_sequence(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = PartitionLog.open(log_dir, LogConfig(), clock=clock, producer_id_expiration_ms=60_000)
    assert plog.producer_state.producer_id_expiration_ms == 60_000
    plog.append_as_leader(batch(seq=0), leader_epoch=0)
    clock.advance(30_000)
    plog.append_as_leader(batch(OTHER, seq=0, ts=clock.now_ms()), leader_epoch=0)
    clock.advance(29_999)
    assert plog.remove_expired_producers(clock.now_ms()) == []
    clock.advance(1)
    assert plog.remove_expired_producers(clock.now_ms()) == [PID]
    assert set(state_of(plog)) == {OTHER}
    info = plog.append_as_leader(batch(seq=42, ts=clock.now_ms()), leader_epoch=0)
    assert not info.duplicate and info.first_offset == 2
    plog.close()


def test_the_log_manager_expires_producers_every_check_interval(
    tmp_path: Path, clock: ManualClock
) -> None:
    props = {"producer.id.expiration.ms": "1000",
             "producer.id.expiration.check.interval.ms": "5000"}  # fmt: skip
    lm = LogManager(tmp_path / "data", server_defaults=props, clock=clock, broker_id=1)
    plog = lm.get_or_create_log("idem", 0)
    assert plog.producer_state.producer_id_expiration_ms == 1000
    plog.append_as_leader(batch(seq=0), leader_epoch=0)
    assert lm.run_retention(NOW + 4999) == {} and PID in plog.producer_state.producers
    lm.run_retention(NOW + 5000)  # the retention round runs the expiry round when due
    assert PID not in plog.producer_state.producers
    plog.append_as_leader(batch(seq=0, ts=NOW + 5000), leader_epoch=0)
    assert lm.maybe_remove_expired_producers(NOW + 9999) is None
    assert lm.remove_expired_producers(NOW + 6000) == {("idem", 0): 1}
    lm.close()


@pytest.mark.parametrize(
    "name", ["producer.id.expiration.ms", "producer.id.expiration.check.interval.ms"]
)
def test_the_producer_properties_are_validated(tmp_path: Path, clock: ManualClock,
                                               name: str) -> None:  # fmt: skip
    for bad in ("0", "-5", "soon", str(2**31)):
        with pytest.raises(InvalidConfigError, match=name):
            LogManager(tmp_path / "data", server_defaults={name: bad}, clock=clock)
    assert DEFAULT_PRODUCER_ID_EXPIRATION_MS == 86_400_000


def test_a_compacted_log_keeps_each_producers_last_batch_and_rebuilds(
    log_dir: Path, clock: ManualClock
) -> None:
    config = {"segment_bytes": 3 * len(batch(key=b"key-0")), "cleanup_policy": ("compact",)}
    plog = open_log(log_dir, clock, **config)
    for seq in range(3):  # PID's records are all superseded below
        plog.append_as_leader(batch(seq=seq, key=b"key-%d" % seq), leader_epoch=0)
    for seq in range(9):
        plog.append_as_leader(batch(OTHER, seq=seq, key=b"key-%d" % (seq % 3)), leader_epoch=0)
    plog.roll()
    before = state_of(plog)
    leo = plog.log_end_offset
    result = clean(plog, first_dirty=0, now_ms=NOW, high_watermark=leo)
    assert result.records_removed == 9
    assert [r.offset for r in read_all(plog)] == [9, 10, 11]
    # PID's last batch survives as an empty batch: its header carries the sequence
    headers = [h for seg in plog.segments for _p, h in seg.iter_batches()]
    kept = [(h.producer_id, h.base_offset, h.records_count) for h in headers]
    assert (PID, 2, 0) in kept
    crash(plog)
    for path in log_dir.glob("*.snapshot"):
        path.unlink()  # rebuild from the compacted log alone

    again = open_log(log_dir, clock, **config)
    after = state_of(again)
    assert after[PID][:3] == before[PID][:3] and after[OTHER][:3] == before[OTHER][:3]
    dup = again.append_as_leader(batch(seq=2, key=b"key-2"), leader_epoch=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (2, 2)
    assert not again.append_as_leader(batch(seq=3, key=b"key-3"), leader_epoch=0).duplicate
    again.close()


def test_an_empty_state_manager_is_made_when_none_is_given(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    assert isinstance(plog.producer_state, ProducerStateManager)
    assert plog.producer_state.directory == log_dir
    plog.close()


def test_compaction_keeps_no_batch_for_an_expired_producer(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = PartitionLog.open(log_dir, LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",)),
                             clock=clock, producer_id_expiration_ms=1000)  # fmt: skip
    plog.append_as_leader(batch(seq=0, key=b"a"), leader_epoch=0)
    plog.append_as_leader(batch(OTHER, seq=0, key=b"b"), leader_epoch=0)
    plog.append_as_leader(batch(-1, key=b"a"), leader_epoch=0)
    plog.append_as_leader(batch(-1, key=b"b"), leader_epoch=0)
    plog.roll()
    clock.advance(1000)
    plog.append_as_leader(batch(OTHER, seq=1, key=b"c", ts=clock.now_ms()), leader_epoch=0)
    assert plog.remove_expired_producers(clock.now_ms()) == [PID]
    clean(plog, first_dirty=0, now_ms=clock.now_ms(), high_watermark=plog.log_end_offset)
    kept = [(h.producer_id, h.base_offset, h.records_count)
            for seg in plog.segments for _p, h in seg.iter_batches()]  # fmt: skip
    # PID expired: its superseded batch is gone; OTHER's last batch is in the active
    # segment, its superseded one goes too
    assert kept == [(-1, 2, 1), (-1, 3, 1), (OTHER, 4, 1)]
    plog.close()


def test_a_refusal_names_the_partition_and_the_offset_the_batch_would_have_had(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(plain(4) + batch(epoch=1, seq=0), leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError) as exc:
        plog.append_as_leader(plain(2) + batch(epoch=1, seq=3), leader_epoch=0)
    assert exc.value.error_code == 45
    assert "at offset 7" in exc.value.message and "idem-0" in exc.value.message
    with pytest.raises(InvalidProducerEpochError) as fenced:
        plog.append_as_leader(batch(epoch=0, seq=1), leader_epoch=0)
    assert fenced.value.error_code == 47 and "idem-0" in fenced.value.message
    plog.close()
