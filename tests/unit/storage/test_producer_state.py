"""Idempotent-producer state: Kafka's sequence and epoch rules (KIP-98, KIP-360), the
5-batch duplicate cache, expiry, snapshot files byte for byte, truncation and rebuilding
from the log. Real files under tmp_path; time passed in as ``now_ms``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from core.storage.batch import CONTROL_BIT, BatchHeader
from core.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    StorageError,
)
from core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    TRANSIENT_PRODUCER_ID_FLOOR,
    AppendOrigin,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)

MAX_SEQ = 2**31 - 1
T0 = 1_700_000_000_000


def header(pid: int, epoch: int, seq: int, count: int = 1, *, offset: int = 0,
           ts: int = T0, attributes: int = 0) -> BatchHeader:
    """A batch header as the log sees it (base offset assigned)."""
    return BatchHeader(offset, 100, 0, 2, 0, attributes, count - 1, ts, ts, pid, epoch,
                       seq, count)


class Log:
    """The caller's side of the contract, without segments: check, append, update."""

    def __init__(self, state: ProducerStateManager, start: int = 0) -> None:
        self.state = state
        self.end = start
        self.written: list[BatchHeader] = []

    def produce(self, pid: int, epoch: int, seq: int, count: int = 1, *, ts: int = T0,
                attributes: int = 0) -> tuple[int, int]:
        """(first offset, last offset) answered to the client."""
        h = header(pid, epoch, seq, count, offset=self.end, ts=ts, attributes=attributes)
        dup = self.state.check(h)
        if dup is not None:
            return dup.first_offset, dup.last_offset
        self.written.append(h)
        self.state.update(h)
        self.end = h.next_offset
        self.state.update_map_end_offset(self.end)
        return h.base_offset, h.last_offset


@pytest.fixture
def state(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path)


@pytest.fixture
def log(state: ProducerStateManager) -> Log:
    return Log(state)


# --- the rules for client batches ----------------------------------------------------


def test_a_batch_without_producer_id_is_neither_checked_nor_recorded(log: Log) -> None:
    assert log.produce(-1, -1, -1, 3) == (0, 2)
    assert log.produce(-1, -1, -1, 3) == (3, 5)  # the same "sequence" again: no duplicate
    assert log.state.producers == {}
    assert log.state.map_end_offset == 6


def test_an_unknown_producer_is_accepted_with_any_sequence_and_epoch(log: Log) -> None:
    # KIP-360: without state the broker no longer answers UNKNOWN_PRODUCER_ID.
    assert log.produce(7, 3, 42, 2) == (0, 1)
    entry = log.state.last_entry(7)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, entry.last_offset) == (3, 42, 43, 1)
    assert log.produce(7, 3, 44) == (2, 2)


def test_consecutive_batches_are_accepted_and_cached(log: Log) -> None:
    for i in range(7):
        log.produce(1, 0, i * 10, 10)
    entry = log.state.last_entry(1)
    assert entry is not None
    assert [b.first_seq for b in entry.batches] == [20, 30, 40, 50, 60]  # the last five
    assert entry.batches[-1] == BatchMetadata(60, 69, 69, 9, T0)
    assert entry.batches[-1].first_offset == 60
    assert entry.coordinator_epoch == -1 and entry.last_timestamp == T0


@pytest.mark.parametrize("back", [0, 1, 2, 3, 4])
def test_a_duplicate_of_each_cached_batch_is_answered_with_its_original_offsets(
    log: Log, back: int
) -> None:
    log.produce(-1, -1, -1, 5)  # offsets of the producer's batches start at 5
    answers = [log.produce(1, 0, i * 3, 3) for i in range(5)]
    end = log.end
    i = 4 - back
    assert log.produce(1, 0, i * 3, 3) == answers[i]
    assert log.end == end and len(log.written) == 6  # nothing appended
    assert log.produce(1, 0, 15, 3) == (end, end + 2)  # and the next one still fits


def test_a_retry_older_than_the_five_cached_batches_is_out_of_order(log: Log) -> None:
    for i in range(6):
        log.produce(1, 0, i)
    with pytest.raises(OutOfOrderSequenceError) as exc:
        log.produce(1, 0, 0)
    assert exc.value.error_code == 45


@pytest.mark.parametrize(("seq", "count"), [(6, 1), (4, 1), (0, 1), (3, 1), (2, 3), (4, 2)])
def test_a_sequence_that_does_not_follow_the_last_is_out_of_order(
    log: Log, seq: int, count: int
) -> None:
    log.produce(1, 0, 0, 3)
    log.produce(1, 0, 3, 2)  # last sequence 4
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 0, seq, count)  # a gap, a replay not matching a cached range exactly


def test_the_sequence_wraps_after_int32_max(log: Log) -> None:
    log.produce(1, 0, MAX_SEQ - 1, 2)  # ends at 2^31-1
    assert log.state.last_entry(1).last_seq == MAX_SEQ  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 0, MAX_SEQ, 1)
    log.produce(1, 0, 0, 1)
    log.produce(1, 0, 1, 1)


def test_a_batch_spanning_the_wrap_ends_at_the_wrapped_sequence(log: Log) -> None:
    first, last = log.produce(1, 0, MAX_SEQ - 1, 4)  # MAX-1, MAX, 0, 1
    assert log.state.last_entry(1).last_seq == 1  # type: ignore[union-attr]
    assert log.produce(1, 0, MAX_SEQ - 1, 4) == (first, last)  # its duplicate is found
    log.produce(1, 0, 2, 1)


def test_an_older_epoch_is_fenced(log: Log) -> None:
    log.produce(1, 5, 0, 2)
    with pytest.raises(InvalidProducerEpochError) as exc:
        log.produce(1, 4, 2)
    assert exc.value.error_code == 47
    with pytest.raises(InvalidProducerEpochError):
        log.produce(1, 4, 0, 2)  # a retry from the fenced epoch is not a duplicate


def test_a_new_epoch_must_start_at_sequence_zero(log: Log) -> None:
    log.produce(1, 0, 0, 3)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 1, 3)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 1, 5)
    assert log.produce(1, 1, 0, 2) == (3, 4)
    entry = log.state.last_entry(1)
    assert entry is not None
    assert entry.producer_epoch == 1 and [b.first_seq for b in entry.batches] == [0]
    # The old epoch's batches are gone from the cache and that epoch is now fenced.
    with pytest.raises(InvalidProducerEpochError):
        log.produce(1, 0, 0, 3)


def test_a_new_epoch_with_any_sequence_is_accepted_when_no_epoch_is_known(
    state: ProducerStateManager,
) -> None:
    state.update(header(1, -1, -1, offset=0))  # state without an epoch
    assert state.check(header(1, 0, 9, offset=1)) is None


def test_check_changes_nothing(state: ProducerStateManager) -> None:
    state.update(header(1, 0, 0, 3))
    before = state.last_entry(1).copy()  # type: ignore[union-attr]
    assert state.check(header(1, 0, 3, 2, offset=3)) is None
    assert state.check(header(2, 0, 0, offset=3)) is None
    assert state.last_entry(1) == before and set(state.producers) == {1}


def test_check_batches_checks_each_batch_against_the_earlier_ones(
    state: ProducerStateManager,
) -> None:
    state.update(header(1, 0, 0, 5))
    second = header(1, 0, 8, 2, offset=8)
    first = header(1, 0, 5, 3, offset=5)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(second)  # alone it does not follow the stored state
    assert state.check_batches([first, header(-1, -1, -1, offset=7), second]) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check_batches([first, header(1, 0, 9, offset=8)])
    with pytest.raises(InvalidProducerEpochError):
        state.check_batches([header(1, 1, 0, offset=5), header(1, 0, 1, offset=6)])
    dup = state.check_batches([header(1, 0, 0, 5, offset=5)])
    assert dup is not None and (dup.first_offset, dup.last_offset) == (0, 4)
    assert state.last_entry(1).last_seq == 4  # type: ignore[union-attr]


def test_check_batches_of_an_unknown_producer_accepts_any_sequences(
    state: ProducerStateManager,
) -> None:
    # Kafka checks sequences only against a known epoch; without state all pass.
    assert state.check_batches([header(1, 0, 7, offset=0), header(1, 0, 3, offset=1)]) is None


def test_replicated_batches_skip_the_checks(state: ProducerStateManager) -> None:
    state.update(header(1, 3, 0, 2))
    gap = header(1, 3, 10, offset=2)
    assert state.check(gap, AppendOrigin.REPLICATION) is None
    assert state.check_batches([gap], AppendOrigin.REPLICATION) is None
    state.update(gap)
    state.update(header(1, 2, 0, offset=3))  # an older epoch from the leader: taken, logged
    entry = state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 2 and entry.last_offset == 3


def test_a_control_batch_sets_the_epoch_and_timestamp_but_caches_no_batch(
    state: ProducerStateManager,
) -> None:
    state.update(header(1, 0, 0, 2))
    state.update(header(1, 1, -1, offset=2, ts=T0 + 5, attributes=CONTROL_BIT))
    entry = state.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.is_empty, entry.last_timestamp) == (1, True, T0 + 5)
    assert (entry.last_seq, entry.last_offset, entry.last_offset_delta) == (-1, -1, 0)
    assert state.check(header(1, 1, 0, offset=3)) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(1, 1, 1, offset=3))


def test_errors_are_storage_errors_with_kafkas_codes() -> None:
    assert issubclass(OutOfOrderSequenceError, StorageError)
    assert issubclass(InvalidProducerEpochError, StorageError)
    assert issubclass(CorruptSnapshotError, StorageError)
    assert (OutOfOrderSequenceError.error_code, InvalidProducerEpochError.error_code) == (45, 47)
    assert CorruptSnapshotError.error_code == -1


# --- expiry --------------------------------------------------------------------------


def test_producers_expire_after_producer_id_expiration_ms(log: Log) -> None:
    assert DEFAULT_PRODUCER_ID_EXPIRATION_MS == 86_400_000
    log.produce(1, 0, 0, ts=T0)
    log.produce(2, 0, 0, ts=T0 + 1000)
    assert log.state.remove_expired(T0 + 86_400_000 - 1) == []
    assert log.state.remove_expired(T0 + 86_400_000) == [1]  # Kafka: now - last >= expiration
    assert set(log.state.producers) == {2}
    log.produce(2, 0, 1, ts=T0 + 2000)  # a new batch refreshes the timestamp
    assert log.state.remove_expired(T0 + 86_400_000 + 1500) == []
    # An expired producer is unknown again: any sequence is accepted.
    end = log.end
    assert log.produce(1, 0, 77) == (end, end)


def test_the_expiration_is_configurable(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, producer_id_expiration_ms=10)
    state.update(header(1, 0, 0, ts=100))
    assert state.remove_expired(109) == [] and state.remove_expired(110) == [1]


TRANSIENT = TRANSIENT_PRODUCER_ID_FLOOR + 12345


def test_transient_producer_ids_expire_sooner(tmp_path: Path) -> None:
    """One producer id per Idempotency-Key request: they go after
    transient_expiration_ms, the long-lived ones after producer_id_expiration_ms."""
    state = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000,
                                 transient_expiration_ms=10)
    state.update(header(1, 0, 0, ts=100))
    state.update(header(TRANSIENT, 3, 0, ts=100))
    assert state.remove_expired(109) == []
    assert state.remove_expired(110) == [TRANSIENT]
    assert set(state.producers) == {1}


def test_roll_snapshots_leave_transient_ids_out_and_the_last_keeps_them(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update(header(1, 0, 0, offset=0))
    state.update(header(TRANSIENT, 0, 0, offset=1))
    roll = state.take_snapshot(2, transient=False)  # a segment roll's
    assert roll is not None
    assert [e.producer_id for e in decode_snapshot(roll.read_bytes())] == [1]
    state.update(header(TRANSIENT + 1, 0, 0, offset=2))
    last = state.take_snapshot(3)  # a clean shutdown's
    assert last is not None
    assert [e.producer_id for e in decode_snapshot(last.read_bytes())] == [
        1, TRANSIENT, TRANSIENT + 1]


# --- snapshots -----------------------------------------------------------------------

ENTRY = struct.Struct(">qhiqiqiq")


def crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected 0x82F63B78), independent of the codec."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_the_reference_crc_is_crc32c() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283  # the standard check value


def test_a_snapshot_file_has_kafkas_name_and_layout(log: Log, tmp_path: Path) -> None:
    log.produce(9, 2, 100, 4, ts=T0 + 9)  # offsets 0..3
    log.produce(-1, -1, -1, 2)
    log.produce(3, 0, 0, 1, ts=T0 + 3)  # offset 6
    log.produce(3, 0, 1, 3, ts=T0 + 4)  # offsets 7..9
    path = log.state.take_snapshot()
    assert path == tmp_path / "00000000000000000010.snapshot"
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no .tmp left

    data = path.read_bytes()
    assert len(data) == 2 + 4 + 4 + 2 * 46
    assert struct.unpack_from(">h", data, 0) == (1,)  # version
    assert struct.unpack_from(">I", data, 2) == (crc32c_reference(data[6:]),)
    assert struct.unpack_from(">i", data, 6) == (2,)  # count
    entries = sorted(ENTRY.unpack_from(data, 10 + i * 46) for i in range(2))
    # ProducerId, Epoch, LastSequence, LastOffset, OffsetDelta, Timestamp,
    # CoordinatorEpoch, CurrentTxnFirstOffset
    assert entries == [
        (3, 0, 3, 9, 2, T0 + 4, -1, -1),
        (9, 2, 103, 3, 3, T0 + 9, -1, -1),
    ]


def test_a_snapshot_round_trips_the_last_batch_of_each_producer(
    log: Log, tmp_path: Path
) -> None:
    for i in range(3):
        log.produce(1, 4, i * 2, 2, ts=T0 + i)
    log.produce(2, 0, MAX_SEQ, 2)  # wraps: last sequence 0
    log.state.take_snapshot()

    loaded = ProducerStateManager(tmp_path)
    assert loaded.snapshot_offsets == [log.end]
    assert loaded.truncate_and_reload(0, log.end, now_ms=T0) == log.end
    assert loaded.map_end_offset == log.end
    one = loaded.last_entry(1)
    assert one == ProducerStateEntry(1, 4, -1, T0 + 2, [BatchMetadata(4, 5, 5, 1, T0 + 2)])
    two = loaded.last_entry(2)
    assert two is not None and (two.first_seq, two.last_seq) == (MAX_SEQ, 0)
    # Only the last batch survives a reload: it is still a duplicate, an older one is not.
    replay = Log(loaded, log.end)
    assert replay.produce(1, 4, 4, 2) == (4, 5)
    with pytest.raises(OutOfOrderSequenceError):
        replay.produce(1, 4, 2, 2)
    assert replay.produce(1, 4, 6, 1) == (log.end, log.end)


def test_a_snapshot_written_by_kafka_is_read() -> None:
    body = struct.pack(">i", 2) + ENTRY.pack(5, 1, 41, 900, 9, T0, 7, -1) + ENTRY.pack(
        6, 0, -1, -1, 0, T0 + 1, -1, -1)  # an entry without a batch
    data = struct.pack(">hI", 1, crc32c_reference(body)) + body
    five, six = decode_snapshot(data)
    assert five == ProducerStateEntry(5, 1, 7, T0, [BatchMetadata(32, 41, 900, 9, T0)])
    assert six == ProducerStateEntry(6, 0, -1, T0 + 1)
    assert encode_snapshot([five, six]) == data


def test_expired_producers_are_not_loaded_from_a_snapshot(log: Log, tmp_path: Path) -> None:
    log.produce(1, 0, 0, ts=T0)
    log.produce(2, 0, 0, ts=T0 + 10)
    log.state.take_snapshot()
    loaded = ProducerStateManager(tmp_path)
    loaded.truncate_and_reload(0, log.end, now_ms=T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    assert set(loaded.producers) == {2}


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # cut short
        lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:],  # a flipped bit
        lambda d: b"\x00\x02" + d[2:],  # unknown version
        lambda d: d[:4],  # shorter than the header
        lambda d: b"",
    ],
)
def test_a_corrupt_snapshot_is_refused(damage) -> None:  # type: ignore[no-untyped-def]
    data = encode_snapshot([ProducerStateEntry(1, 0, -1, T0, [BatchMetadata(0, 0, 0, 0, T0)])])
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(data))


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(log: Log, tmp_path: Path) -> None:
    log.produce(1, 0, 0)
    older = log.state.take_snapshot()
    log.produce(1, 0, 1)
    newer = log.state.take_snapshot()
    assert older is not None and newer is not None
    raw = bytearray(newer.read_bytes())
    raw[-1] ^= 0xFF
    newer.write_bytes(raw)

    loaded = ProducerStateManager(tmp_path)
    assert loaded.truncate_and_reload(0, 2, now_ms=T0) == 1  # replay from the older one
    assert not newer.exists() and older.exists()
    assert loaded.snapshot_offsets == [1]
    assert loaded.last_entry(1).last_seq == 0  # type: ignore[union-attr]
    older.write_bytes(b"garbage")
    again = ProducerStateManager(tmp_path)
    assert again.truncate_and_reload(0, 2, now_ms=T0) == 0  # none left: from the log start
    assert again.producers == {} and again.snapshot_offsets == [] and not older.exists()


def test_opening_deletes_a_leftover_temp_file_and_ignores_other_files(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000005.snapshot.tmp").write_bytes(b"half")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n0\n")
    state = ProducerStateManager(tmp_path)
    assert state.snapshot_offsets == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.log", "leader-epoch-checkpoint"]


def test_no_snapshot_is_taken_twice_at_the_same_offset(log: Log) -> None:
    assert log.state.take_snapshot() is None  # nothing since offset 0
    log.produce(1, 0, 0)
    assert log.state.take_snapshot() is not None
    assert log.state.take_snapshot() is None
    path = log.state.take_snapshot(5)  # a roll to a segment based further on
    assert path is not None and path.name == snapshot_file_name(5)
    assert log.state.snapshot_offsets == [1, 5] and log.state.map_end_offset == 5


# --- truncation ----------------------------------------------------------------------


def snapshots_at(tmp_path: Path, offsets: list[int]) -> tuple[Log, dict[int, dict[int, int]]]:
    """A log whose producer 1 writes one batch per offset, snapshotted at ``offsets``;
    also the producer's last sequence as of each snapshot."""
    log = Log(ProducerStateManager(tmp_path))
    seen: dict[int, dict[int, int]] = {}
    for seq in range(max(offsets)):
        log.produce(1, 0, seq)
        if log.end in offsets:
            log.state.take_snapshot()
            seen[log.end] = {1: seq}
    return log, seen


def test_truncate_and_reload_drops_snapshots_out_of_range_and_loads_the_latest(
    tmp_path: Path,
) -> None:
    log, seen = snapshots_at(tmp_path, [10, 20, 30])
    state = log.state
    start = state.truncate_and_reload(10, 25, now_ms=T0)
    # Above the end (30) and, as Kafka, at or below the log start (10) are deleted.
    assert state.snapshot_offsets == [20]
    assert sorted(p.name for p in tmp_path.iterdir()) == [snapshot_file_name(20)]
    assert start == state.map_end_offset == 20
    assert state.last_entry(1).last_seq == seen[20][1]  # type: ignore[union-attr]
    state.load_batches(log.written[20:25])
    assert state.map_end_offset == 25 and state.last_entry(1).last_seq == 24  # type: ignore[union-attr]


def test_truncate_and_reload_without_a_snapshot_starts_empty_at_the_log_start(
    tmp_path: Path,
) -> None:
    log, _ = snapshots_at(tmp_path, [10])
    assert log.state.truncate_and_reload(0, 5, now_ms=T0) == 0
    assert log.state.producers == {} and log.state.snapshot_offsets == []


def test_truncate_and_reload_keeps_the_state_when_it_already_ends_there(tmp_path: Path) -> None:
    log, _ = snapshots_at(tmp_path, [10, 20])
    log.produce(1, 0, 20)  # state at 21, beyond the last snapshot
    assert log.state.truncate_and_reload(15, 21, now_ms=T0) == 21
    assert log.state.last_entry(1).last_seq == 20  # type: ignore[union-attr]
    assert log.state.snapshot_offsets == [20]


def test_truncate_head_can_evict_producers_and_removes_snapshots_below_the_log_start(
    tmp_path: Path,
) -> None:
    log, _ = snapshots_at(tmp_path, [3, 6, 9])
    log.produce(2, 0, 0)  # offset 9
    state = log.state
    state.truncate_head(9, evict_producers=True)
    assert set(state.producers) == {2}  # producer 1's last offset is 8
    assert state.snapshot_offsets == [9]
    assert [p.name for p in tmp_path.iterdir()] == [snapshot_file_name(9)]
    state.truncate_head(20, evict_producers=True)  # beyond the end: the state moves up
    assert state.producers == {} and state.map_end_offset == 20
    assert state.snapshot_offsets == [] and state.take_snapshot() is None


def test_truncate_head_keeps_producers_as_kafka_2_4_and_later(tmp_path: Path) -> None:
    log, _ = snapshots_at(tmp_path, [3, 6])
    log.state.truncate_head(6)
    assert set(log.state.producers) == {1} and log.state.snapshot_offsets == [6]


def test_delete_snapshots_before(tmp_path: Path) -> None:
    log, _ = snapshots_at(tmp_path, [2, 4, 6])
    log.state.delete_snapshots_before(5)
    assert log.state.snapshot_offsets == [6] and log.state.oldest_snapshot_offset == 6


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log, _ = snapshots_at(tmp_path, [2, 4])
    log.state.truncate_fully_and_start_at(100)
    assert log.state.producers == {} and log.state.snapshot_offsets == []
    assert log.state.map_end_offset == 100 and list(tmp_path.iterdir()) == []
    assert log.state.take_snapshot() == tmp_path / snapshot_file_name(100)


# --- rebuilding ----------------------------------------------------------------------


def busy(log: Log) -> Log:
    """Appends of several producers: interleaved, a wrap, a duplicate, an epoch bump."""
    for i in range(4):
        log.produce(1, 0, i * 2, 2, ts=T0 + i)
        log.produce(-1, -1, -1, 3)
        log.produce(2, 7, MAX_SEQ - 3 + i, 1, ts=T0 + 10 + i)
    log.produce(2, 7, 0, 2, ts=T0 + 14)
    log.produce(1, 0, 8, 2, ts=T0 + 20)
    log.produce(1, 0, 4, 2)  # a duplicate: answered, not written
    log.produce(1, 1, 0, 5, ts=T0 + 21)  # a new epoch
    for i in range(7):
        log.produce(3, 0, i, 1, ts=T0 + 30 + i)
    return log


def test_replaying_the_log_rebuilds_the_live_state(tmp_path: Path) -> None:
    live = busy(Log(ProducerStateManager(tmp_path / "live")))
    rebuilt = ProducerStateManager(tmp_path / "rebuilt")
    assert rebuilt.truncate_and_reload(0, live.end, now_ms=T0) == 0
    rebuilt.load_batches(live.written)
    assert dict(rebuilt.producers) == dict(live.state.producers)
    assert set(rebuilt.producers) == {1, 2, 3}
    assert rebuilt.map_end_offset == live.end


def test_snapshot_plus_replay_rebuilds_the_live_state(tmp_path: Path) -> None:
    live = Log(ProducerStateManager(tmp_path))
    for i in range(6):
        live.produce(4, 0, i, ts=T0 + i)
        live.produce(5, 0, i, ts=T0 + i)
    live.state.take_snapshot()
    mid = live.end
    busy(live)
    live.produce(4, 0, 6, ts=T0 + 50)

    loaded = ProducerStateManager(tmp_path)
    start = loaded.truncate_and_reload(0, live.end, now_ms=T0)
    assert start == mid
    loaded.load_batches(h for h in live.written if h.base_offset >= start)
    assert loaded.map_end_offset == live.end
    assert set(loaded.producers) == set(live.state.producers) == {1, 2, 3, 4, 5}
    for pid, entry in live.state.producers.items():
        got = loaded.producers[pid]
        assert (got.producer_epoch, got.last_timestamp, got.batches[-1]) == (
            entry.producer_epoch, entry.last_timestamp, entry.batches[-1])
    # Producers that wrote after the snapshot only have all their cached batches back;
    # producer 5 keeps the one batch a snapshot holds.
    for pid in (1, 2, 3):
        assert loaded.producers[pid] == live.state.producers[pid]
    assert len(loaded.producers[5].batches) == 1 and len(live.state.producers[5].batches) == 5
