"""PartitionLog on real files: append/read, rolling, validation, truncation, deletion,
reopening, timestamps, compaction swaps."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import codec, native
from core.storage.batch import CONTROL_BIT, BuiltBatch, compute_crc, parse_header
from core.storage.config import LogConfig
from core.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    NonMonotonicAppendError,
    OffsetOutOfRangeError,
)
from core.storage.log import PartitionLog
from core.storage.log_loader import parse_topic_partition
from core.storage.records import NewRecord, Record, build_batch, build_batch_at, decode_records
from core.storage.segment import CLEANED_SUFFIX, LogSegment

NOW = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-3"


def make_batch(n: int, *, tag: str = "v", key: bytes | None = b"k", ts: int | None = NOW,
               compression: int = codec.NONE, value_size: int = 0) -> bytearray:  # fmt: skip
    pad = b"x" * value_size
    records = [NewRecord(value=f"{tag}{i}".encode() + pad, key=key, timestamp=ts) for i in range(n)]
    return build_batch(records, now_ms=NOW, compression=compression)


def open_log(directory: Path, clock: ManualClock, **overrides: object) -> PartitionLog:
    return PartitionLog.open(directory, LogConfig(**overrides), clock=clock)  # type: ignore[arg-type]


def read_all(plog: PartitionLog, start: int | None = None) -> list[Record]:
    offset = plog.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20)
        out += decode_records(fetched.data, min_offset=offset)
        assert fetched.high_offset > offset
        offset = fetched.high_offset
    return out


def values(plog: PartitionLog) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in read_all(plog)]


def recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return buf


def test_partition_directory_name_is_parsed_at_the_last_dash() -> None:
    assert parse_topic_partition("my-topic-name-12") == ("my-topic-name", 12)
    with pytest.raises(ValueError):
        parse_topic_partition("nopartition")


def test_empty_log(log_dir: Path, clock: ManualClock) -> None:
    plog = PartitionLog.open(log_dir, LogConfig(), clock=clock, log_start_offset=0)
    assert (plog.topic, plog.partition) == ("orders", 3)
    assert plog.log_end_offset == 0 and len(plog.segments) == 1
    assert plog.read(0, 100).data == b""
    plog.close()


@pytest.mark.parametrize(
    "compression", [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD]
)
def test_round_trip_with_every_compression(
    log_dir: Path, clock: ManualClock, compression: int
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=1500)
    expected = []
    for i in range(30):
        info = plog.append_as_leader(
            make_batch(7, tag=f"b{i}-", compression=compression, value_size=50), leader_epoch=3
        )
        assert (info.first_offset, info.last_offset, info.num_records) == (7 * i, 7 * i + 6, 7)
        expected += [(7 * i + j, f"b{i}-{j}".encode() + b"x" * 50) for j in range(7)]
    assert len(plog.segments) > 1
    assert values(plog) == expected
    plog.close()
    plog = PartitionLog.open(
        log_dir, LogConfig(segment_bytes=1500), clock=clock, clean_shutdown=True
    )
    assert values(plog) == expected
    fetched = plog.read(100, 1)
    first = parse_header(fetched.data)
    assert first.base_offset <= 100 <= first.last_offset and len(fetched.data) == first.size
    assert first.compression == compression and first.partition_leader_epoch == 3
    plog.close()


def test_offsets_are_contiguous_across_many_appends(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_bytes=3000, index_interval_bytes=256)
    expected_next = 0
    for i in range(300):
        n = 1 + i % 5
        info = plog.append_as_leader(make_batch(n, tag=f"{i:02d}."), leader_epoch=0)
        assert info.first_offset == expected_next and info.last_offset == expected_next + n - 1
        expected_next += n
    assert plog.log_end_offset == expected_next
    records = read_all(plog)
    assert [r.offset for r in records] == list(range(expected_next))
    assert plog.size_in_bytes == sum(s.size for s in plog.segments)
    assert plog.size_in_bytes == sum(os.path.getsize(s.log_path) for s in plog.segments)
    for start in range(0, expected_next, 37):  # every start offset finds its batch
        assert decode_records(plog.read(start, 1).data, min_offset=start)[0].offset == start
    plog.close()


def test_roll_by_segment_bytes(log_dir: Path, clock: ManualClock) -> None:
    size = len(make_batch(3))
    plog = open_log(log_dir, clock, segment_bytes=size * 4)
    for _ in range(10):
        plog.append_as_leader(make_batch(3), leader_epoch=0)
    assert [s.base_offset for s in plog.segments] == [0, 12, 24]
    assert all(s.size <= size * 4 for s in plog.segments)
    assert plog.segments[0].log_path.name == "00000000000000000000.log"
    assert (log_dir / "00000000000000000012.log").exists()
    assert plog.recovery_point == 24  # a roll flushes what it closes
    inactive = plog.segments[0]
    assert os.path.getsize(inactive.offset_index.path) == inactive.offset_index.entries * 8
    plog.close()


def test_roll_by_segment_ms_uses_record_timestamps(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_ms=1000)
    plog.append_as_leader(make_batch(1, ts=NOW), leader_epoch=0)
    plog.append_as_leader(make_batch(1, ts=NOW + 1000), leader_epoch=0)
    assert len(plog.segments) == 1
    clock.advance(10_000)  # wall-clock time does not matter when records have timestamps
    plog.append_as_leader(make_batch(1, ts=NOW + 900), leader_epoch=0)
    assert len(plog.segments) == 1
    plog.append_as_leader(make_batch(1, ts=NOW + 1001), leader_epoch=0)
    assert [s.base_offset for s in plog.segments] == [0, 3]
    plog.close()


def test_roll_by_wall_clock_without_timestamps(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_ms=1000)
    plog.append_as_leader(make_batch(1, ts=-1), leader_epoch=0)
    clock.advance(999)
    plog.append_as_leader(make_batch(1, ts=-1), leader_epoch=0)
    assert len(plog.segments) == 1
    clock.advance(2)
    plog.append_as_leader(make_batch(1, ts=-1), leader_epoch=0)
    assert len(plog.segments) == 2
    plog.close()


def test_roll_jitter_is_below_segment_jitter_ms(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_jitter_ms=50)
    for _ in range(20):
        plog.append_as_leader(make_batch(1), leader_epoch=0)
        plog.roll()
    assert all(0 <= s.roll_jitter_ms < 50 for s in plog.segments[1:])
    plog.close()


def test_roll_when_an_index_is_full(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_index_bytes=8 * 3, index_interval_bytes=0)
    for i in range(12):
        plog.append_as_leader(make_batch(2, ts=NOW + i), leader_epoch=0)
    assert len(plog.segments) > 2
    assert all(s.offset_index.entries <= 3 for s in plog.segments)
    assert [r.offset for r in read_all(plog)] == list(range(24))
    plog.close()


def test_min_one_batch_with_tiny_max_bytes(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    first = make_batch(5, value_size=100)
    plog.append_as_leader(bytes(first), leader_epoch=0)
    plog.append_as_leader(make_batch(5), leader_epoch=0)
    fetched = plog.read(2, 1)
    assert len(fetched.data) == len(first)
    assert (fetched.first_offset, fetched.high_offset) == (0, 5)
    none = plog.read(2, 1, min_one_batch=False)
    assert none.data == b"" and (none.first_offset, none.high_offset) == (2, 2)
    plog.close()


def test_read_at_leo_and_out_of_range(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(4), leader_epoch=0)
    assert plog.read(4, 1000).data == b""
    assert plog.read(4, 1000).first_offset == 4
    with pytest.raises(OffsetOutOfRangeError, match="log end 4"):
        plog.read(5, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 1000)
    plog.close()


def test_max_offset_is_an_exclusive_bound_on_base_offsets(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    for _ in range(4):
        plog.append_as_leader(make_batch(3), leader_epoch=0)
    assert [r.offset for r in decode_records(plog.read(0, 1 << 20, max_offset=6).data)] == list(
        range(6)
    )
    assert plog.read(0, 1 << 20, max_offset=7).high_offset == 9  # the batch [6, 8] starts below 7
    assert plog.read(6, 1 << 20, max_offset=6).data == b""
    assert plog.read(7, 1 << 20, max_offset=6).data == b""
    plog.close()


def test_read_continues_into_the_next_segment(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(3), leader_epoch=0)
    plog.roll()
    plog.append_as_follower(build_batch([NewRecord(value=b"later")], now_ms=NOW, base_offset=10))
    assert [s.base_offset for s in plog.segments] == [0, 3]
    fetched = plog.read(3, 1000)  # nothing at 3..9 (a gap): the next batch is at 10
    assert fetched.first_offset == 10 and fetched.high_offset == 11
    plog.close()


def payload(*batches: bytearray) -> bytes:
    return b"".join(bytes(b) for b in batches)


def assert_nothing_written(plog: PartitionLog, leo: int, size: int) -> None:
    assert plog.log_end_offset == leo and plog.size_in_bytes == size
    assert os.path.getsize(plog.active_segment.log_path) == plog.active_segment.size


def test_invalid_batches_are_rejected_and_nothing_is_written(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, max_message_bytes=2000, segment_bytes=5000)
    plog.append_as_leader(make_batch(2), leader_epoch=0)
    leo, size = plog.log_end_offset, plog.size_in_bytes
    good = make_batch(3)

    bad_crc = make_batch(3)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        plog.append_as_leader(payload(good, bad_crc), leader_epoch=0)

    big = make_batch(3, value_size=1000)
    with pytest.raises(MessageTooLargeError, match=rf"{len(big)} bytes.*2000"):
        plog.append_as_leader(payload(good, big), leader_epoch=0)

    wrong_count = make_batch(3)
    struct.pack_into(">i", wrong_count, 23, 5)
    with pytest.raises(InvalidRecordError, match="lastOffsetDelta 5 but 3 records"):
        plog.append_as_leader(payload(good, recrc(wrong_count)), leader_epoch=0)

    control = make_batch(1)
    struct.pack_into(">h", control, 21, parse_header(control).attributes | CONTROL_BIT)
    with pytest.raises(InvalidRecordError, match="control"):
        plog.append_as_leader(payload(good, recrc(control)), leader_epoch=0)

    with pytest.raises(CorruptRecordError, match="trailing"):
        plog.append_as_leader(payload(good) + b"\x00" * 10, leader_epoch=0)

    with pytest.raises(InvalidTimestampError):
        strict = LogConfig(
            message_timestamp_after_max_ms=1000, message_timestamp_before_max_ms=1000
        )
        plog.update_config(strict)
        plog.append_as_leader(payload(good, make_batch(1, ts=NOW + 5000)), leader_epoch=0)
    with pytest.raises(InvalidTimestampError):
        plog.append_as_leader(payload(good, make_batch(1, ts=NOW - 5000)), leader_epoch=0)
    plog.append_as_leader(make_batch(1, ts=-1), leader_epoch=0)  # no timestamp: not checked
    leo, size = plog.log_end_offset, plog.size_in_bytes

    plog.update_config(LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(InvalidRecordError, match="without a key"):
        plog.append_as_leader(payload(good, make_batch(2, key=None)), leader_epoch=0)
    with pytest.raises(InvalidRecordError, match="without a key"):
        plog.append_as_leader(make_batch(2, key=None, compression=codec.ZSTD), leader_epoch=0)
    assert_nothing_written(plog, leo, size)
    plog.append_as_leader(make_batch(2, compression=codec.LZ4), leader_epoch=0)
    assert plog.log_end_offset == leo + 2
    plog.close()


def _built(n: int, *, ts: int | None = NOW, key: bytes | None = b"k", size: int = 10
           ) -> bytearray:
    """A batch as the produce path builds it (``native.encode_batch``: a BuiltBatch)."""
    built = build_batch_at([b"v" * size] * n, [key] * n, None, [ts] * n, NOW, range(n),
                           max_bytes=1 << 20)
    assert type(built) is BuiltBatch
    return built


@pytest.mark.skipif(not native.AVAILABLE, reason="C extension not built")
def test_a_batch_built_here_is_still_held_to_the_topic_config(
    log_dir: Path, clock: ManualClock
) -> None:
    """The produce path's own batches skip the integrity checks (CRC, counts), never
    what the topic's configuration refuses."""
    plog = open_log(log_dir, clock, max_message_bytes=2000)
    plog.append_as_leader(_built(3), leader_epoch=0)
    leo, size = plog.log_end_offset, plog.size_in_bytes
    with pytest.raises(MessageTooLargeError, match="2000"):
        plog.append_as_leader(_built(3, size=1000), leader_epoch=0)
    plog.update_config(LogConfig(message_timestamp_after_max_ms=1000))
    with pytest.raises(InvalidTimestampError):
        plog.append_as_leader(_built(1, ts=NOW + 5000), leader_epoch=0)
    plog.update_config(LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(InvalidRecordError, match="without a key"):
        plog.append_as_leader(_built(2, key=None), leader_epoch=0)
    assert_nothing_written(plog, leo, size)
    # the same bytes as a plain buffer are checked in full: a damaged copy is refused
    damaged = bytearray(_built(2))
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        plog.append_as_leader(damaged, leader_epoch=0)
    plog.append_as_leader(_built(2), leader_epoch=0)
    assert [v for _, v in values(plog)][-2:] == [b"v" * 10] * 2
    plog.close()


def test_empty_append_writes_nothing(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    info = plog.append_as_leader(b"", leader_epoch=0)
    assert info.num_records == 0 and plog.log_end_offset == 0
    plog.close()


def test_log_append_time(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, message_timestamp_type="LogAppendTime")
    clock.advance(5000)
    info = plog.append_as_leader(make_batch(3, ts=NOW - 10**9), leader_epoch=0)
    assert info.log_append_time == NOW + 5000 and info.max_timestamp == NOW + 5000
    assert [r.timestamp for r in read_all(plog)] == [NOW + 5000] * 3
    assert plog.offset_for_timestamp(NOW + 4000) == (0, NOW + 5000)
    plog.close()


def test_leader_epochs_are_stamped_and_cached(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(2), leader_epoch=1)
    plog.append_as_leader(make_batch(2), leader_epoch=1)
    plog.append_as_leader(make_batch(2), leader_epoch=4)
    assert plog.leader_epoch_cache.entries == [(1, 0), (4, 4)]
    assert parse_header(plog.read(4, 1).data).partition_leader_epoch == 4
    assert plog.leader_epoch_cache.end_offset_for(1, plog.log_end_offset) == (1, 4)
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 4\n"
    plog.truncate_to(3)
    assert plog.leader_epoch_cache.entries == [(1, 0)]
    plog.close()


def test_follower_append(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    first = build_batch([NewRecord(value=b"a"), NewRecord(value=b"b")], now_ms=NOW, base_offset=0)
    struct.pack_into(">i", first, 12, 2)
    gap = build_batch([NewRecord(value=b"c")], now_ms=NOW, base_offset=7)  # compacted gap
    struct.pack_into(">i", gap, 12, 5)
    info = plog.append_as_follower(payload(first, gap))
    assert (info.first_offset, info.last_offset, plog.log_end_offset) == (0, 7, 8)
    assert plog.leader_epoch_cache.entries == [(2, 0), (5, 7)]
    assert values(plog) == [(0, b"a"), (1, b"b"), (7, b"c")]
    stale = build_batch([NewRecord(value=b"d")], now_ms=NOW, base_offset=5)
    with pytest.raises(NonMonotonicAppendError, match="offset 5"):
        plog.append_as_follower(stale)
    out_of_order = payload(build_batch([NewRecord(value=b"e")], now_ms=NOW, base_offset=9), stale)
    with pytest.raises(NonMonotonicAppendError):
        plog.append_as_follower(out_of_order)
    corrupt = build_batch([NewRecord(value=b"f")], now_ms=NOW, base_offset=8)
    corrupt[-2] ^= 1
    with pytest.raises(CorruptRecordError):
        plog.append_as_follower(corrupt)
    assert plog.log_end_offset == 8
    plog.close()


def test_follower_append_larger_than_a_segment_is_split(log_dir: Path, clock: ManualClock) -> None:
    one = len(make_batch(2, tag="00."))
    plog = open_log(log_dir, clock, segment_bytes=one * 3)
    data = bytearray()
    for i in range(10):
        b = make_batch(2, tag=f"{i:02d}.")
        struct.pack_into(">q", b, 0, 2 * i)
        data += b
    plog.append_as_follower(data)
    assert plog.log_end_offset == 20 and len(plog.segments) == 4
    assert [r.offset for r in read_all(plog)] == list(range(20))
    plog.close()


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_batches_larger_than_segment_bytes_get_segments_of_their_own(
    log_dir: Path, clock: ManualClock, clean_shutdown: bool
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=14)  # Kafka's minimum: below any batch
    for i in range(3):
        info = plog.append_as_leader(make_batch(2, tag=f"{i}."), leader_epoch=0)
        assert (info.first_offset, info.num_records) == (2 * i, 2)
    assert [s.base_offset for s in plog.segments] == [0, 2, 4]
    assert all(s.size == len(make_batch(2, tag="0.")) for s in plog.segments)
    expected = [(o, f"{o // 2}.{o % 2}".encode()) for o in range(6)]
    assert values(plog) == expected
    plog.flush()
    plog.close()
    again = PartitionLog.open(log_dir, LogConfig(segment_bytes=14), clock=clock,
                              clean_shutdown=clean_shutdown)  # fmt: skip
    assert again.log_end_offset == 6 and values(again) == expected
    again.append_as_leader(make_batch(1, tag="after."), leader_epoch=0)
    assert values(again)[-1] == (6, b"after.0")
    again.close()


def test_leader_append_larger_than_a_segment_is_split(log_dir: Path, clock: ManualClock) -> None:
    one = len(make_batch(2, tag="00."))
    plog = open_log(log_dir, clock, segment_bytes=one * 3)
    plog.append_as_leader(make_batch(2, tag="aa."), leader_epoch=0)
    data = payload(*[make_batch(2, tag=f"{i:02d}.") for i in range(7)])
    info = plog.append_as_leader(data, leader_epoch=0)  # 7 batches: 2 + 3 + 2 segments
    assert (info.first_offset, info.last_offset, info.num_records) == (2, 15, 14)
    assert [s.base_offset for s in plog.segments] == [0, 2, 8, 14]
    assert [r.offset for r in read_all(plog)] == list(range(16))
    assert read_all(plog)[-1].value == b"06.1"
    plog.close()


def test_follower_append_of_a_batch_larger_than_a_segment(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock, segment_bytes=14)
    data = bytearray()
    for i in range(3):
        b = make_batch(2, tag=f"{i}.")
        struct.pack_into(">q", b, 0, 2 * i)
        data += b
    plog.append_as_follower(data)
    assert plog.log_end_offset == 6 and [s.base_offset for s in plog.segments] == [0, 2, 4]
    assert [r.offset for r in read_all(plog)] == list(range(6))
    plog.close()


def test_truncate_to(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_bytes=len(make_batch(3, tag="00.")) * 3)
    for i in range(10):
        plog.append_as_leader(make_batch(3, tag=f"{i:02d}."), leader_epoch=0)
    plog.flush()
    assert plog.recovery_point == 30
    plog.truncate_to(14)  # mid-batch: the batch [12, 14] goes whole
    assert plog.log_end_offset == 12 and plog.recovery_point == 12
    assert [s.base_offset for s in plog.segments] == [0, 9]
    assert not (log_dir / f"{18:020d}.log").exists()
    assert plog.size_in_bytes == sum(s.size for s in plog.segments)
    assert [r.offset for r in read_all(plog)] == list(range(12))
    info = plog.append_as_leader(make_batch(3, tag="new"), leader_epoch=0)
    assert info.first_offset == 12
    assert read_all(plog)[-1].value == b"new2"
    plog.truncate_to(100)  # above the LEO: nothing happens
    assert plog.log_end_offset == 15
    plog.close()


def test_truncate_fully_and_start_at(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(5), leader_epoch=2)
    plog.truncate_fully_and_start_at(1000)
    assert (plog.log_start_offset, plog.log_end_offset, plog.recovery_point) == (1000, 1000, 1000)
    assert plog.leader_epoch_cache.entries == []
    assert sorted(p.name for p in log_dir.glob("*.log")) == [f"{1000:020d}.log"]
    assert plog.append_as_leader(make_batch(1), leader_epoch=3).first_offset == 1000
    plog.close()


def test_delete_segments_moves_log_start(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_bytes=len(make_batch(3)) * 2)
    for _ in range(6):
        plog.append_as_leader(make_batch(3), leader_epoch=0)
    assert [s.base_offset for s in plog.segments] == [0, 6, 12]
    plog.delete_segments(plog.segments[:1], reason="retention")
    assert plog.log_start_offset == 6 and [s.base_offset for s in plog.segments] == [6, 12]
    assert not (log_dir / f"{0:020d}.log").exists()
    assert not list(log_dir.glob("*.deleted"))
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(5, 100)
    assert plog.read(6, 100).first_offset == 6
    plog.delete_segments(list(plog.segments), reason="retention")  # all of them: roll first
    assert [s.base_offset for s in plog.segments] == [18]
    assert (plog.log_start_offset, plog.log_end_offset, plog.size_in_bytes) == (18, 18, 0)
    assert plog.append_as_leader(make_batch(1), leader_epoch=0).first_offset == 18
    plog.close()


def test_maybe_increment_log_start_offset(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(5), leader_epoch=1)
    plog.append_as_leader(make_batch(5), leader_epoch=2)
    plog.maybe_increment_log_start_offset(7)
    assert plog.log_start_offset == 7
    assert plog.leader_epoch_cache.entries == [(2, 7)]
    plog.maybe_increment_log_start_offset(3)
    assert plog.log_start_offset == 7
    with pytest.raises(OffsetOutOfRangeError):
        plog.maybe_increment_log_start_offset(11)
    assert plog.read(7, 1).first_offset == 5
    plog.close()


def test_reopen_after_clean_close(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    plog = PartitionLog.open(log_dir, config, clock=clock)
    for i in range(40):
        plog.append_as_leader(make_batch(2, tag=f"{i:02d}.", ts=NOW + i), leader_epoch=7)
    before = values(plog)
    leo, sizes = plog.log_end_offset, [s.size for s in plog.segments]
    plog.close()
    for seg in plog.segments:
        assert os.path.getsize(seg.offset_index.path) == seg.offset_index.entries * 8
        assert os.path.getsize(seg.time_index.path) == seg.time_index.entries * 12
    again = PartitionLog.open(log_dir, config, clock=clock, clean_shutdown=True, recovery_point=0)
    assert again.log_end_offset == leo and again.recovery_point == leo
    assert [s.size for s in again.segments] == sizes
    assert values(again) == before
    assert again.leader_epoch_cache.entries == [(7, 0)]
    assert again.offset_for_timestamp(NOW + 20) == (40, NOW + 20)
    info = again.append_as_leader(make_batch(1), leader_epoch=7)
    assert info.first_offset == leo
    again.close()


def test_clean_open_rebuilds_missing_or_corrupt_indexes(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    plog = PartitionLog.open(log_dir, config, clock=clock)
    for i in range(40):
        plog.append_as_leader(make_batch(2, tag=f"{i:02d}."), leader_epoch=0)
    before = values(plog)
    first, second = plog.segments[0], plog.segments[1]
    entries = [first.offset_index.entry(i) for i in range(first.offset_index.entries)]
    plog.close()
    first.offset_index.path.unlink()
    second.offset_index.path.write_bytes(os.urandom(37))
    again = PartitionLog.open(log_dir, config, clock=clock, clean_shutdown=True)
    assert values(again) == before
    seg = again.segments[0]
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == entries
    again.close()


def test_offset_for_timestamp(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock, segment_bytes=250, index_interval_bytes=0)
    stamps = [10, 30, 20, 50, 40, 60, 60, 90]
    for ts in stamps:
        plog.append_as_leader(make_batch(1, ts=NOW + ts), leader_epoch=0)
    assert len(plog.segments) > 2
    assert plog.offset_for_timestamp(-2) == (0, -1)
    assert plog.offset_for_timestamp(-1) == (8, -1)
    assert plog.offset_for_timestamp(-3) == (7, NOW + 90)
    for target in (0, 10, 15, 25, 31, 45, 55, 60, 61, 90):
        expected = next((i, NOW + ts) for i, ts in enumerate(stamps) if ts >= target)
        assert plog.offset_for_timestamp(NOW + target) == expected, target
    assert plog.offset_for_timestamp(NOW + 91) is None
    plog.delete_segments(plog.segments[:1], reason="test")
    start = plog.log_start_offset
    assert plog.offset_for_timestamp(NOW)[0] == start  # type: ignore[index]
    plog.close()


def test_flush_tracks_recovery_point_and_time(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(4), leader_epoch=0)
    assert plog.unflushed_messages == 4 and plog.recovery_point == 0
    clock.advance(100)
    plog.flush()
    assert plog.unflushed_messages == 0 and plog.recovery_point == 4
    assert plog.last_flush_ms == NOW + 100
    plog.update_config(LogConfig(flush_messages=3))
    plog.append_as_leader(make_batch(2), leader_epoch=0)
    assert plog.recovery_point == 4
    plog.append_as_leader(make_batch(2), leader_epoch=0)
    assert plog.recovery_point == 8  # flush.messages reached: flushed inline
    plog.close()


def test_on_roll_callback_replaces_the_synchronous_flush(log_dir: Path, clock: ManualClock) -> None:
    rolled: list[int] = []
    plog = PartitionLog.open(
        log_dir, LogConfig(), clock=clock, on_roll=lambda lg, base: rolled.append(base)
    )
    plog.append_as_leader(make_batch(3), leader_epoch=0)
    plog.roll()
    assert rolled == [3] and plog.recovery_point == 0
    plog.close()


def cleaned_copy(
    plog: PartitionLog, clock: ManualClock, old: list[LogSegment], keep_every: int
) -> LogSegment:
    """A stand-in for the compactor: copy every ``keep_every``-th batch to ``.cleaned``."""
    new = LogSegment.open(
        plog.dir, old[0].base_offset, plog.config, clock=clock, suffix=CLEANED_SUFFIX
    )
    n = 0
    for seg in old:
        for pos, h in seg.iter_batches():
            if n % keep_every == 0:
                new.append(seg.read_batch(pos, h), first_offset=h.base_offset, last_offset=h.last_offset,
                           max_timestamp=h.max_timestamp, max_timestamp_offset=h.last_offset)  # fmt: skip
            n += 1
    return new


def test_replace_segments(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=len(make_batch(2, tag="00.")) * 3, cleanup_policy=("compact",))
    plog = PartitionLog.open(log_dir, config, clock=clock)
    for i in range(12):
        plog.append_as_leader(make_batch(2, tag=f"{i:02d}."), leader_epoch=0)
    old = plog.segments[:2]
    new = cleaned_copy(plog, clock, old, keep_every=2)
    plog.replace_segments([new], old)
    assert [s.base_offset for s in plog.segments] == [0, 12, 18]
    assert plog.segments[0] is new and new.suffix == ""
    expected = [o for o in range(24) if o >= 12 or (o // 2) % 2 == 0]
    assert [r.offset for r in read_all(plog)] == expected
    assert (
        sorted(
            p.name
            for p in log_dir.iterdir()
            if "." in p.name and p.suffix not in (".log", ".index", ".timeindex", ".snapshot")
        )
        == []
    )
    assert plog.size_in_bytes == sum(s.size for s in plog.segments)
    plog.close()
    again = PartitionLog.open(log_dir, config, clock=clock, clean_shutdown=True)
    assert [r.offset for r in read_all(again)] == expected
    again.close()


def test_open_completes_an_interrupted_swap_and_removes_leftovers(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=len(make_batch(2, tag="00.")) * 3)
    plog = PartitionLog.open(log_dir, config, clock=clock)
    for i in range(12):
        plog.append_as_leader(make_batch(2, tag=f"{i:02d}."), leader_epoch=0)
    new = cleaned_copy(plog, clock, plog.segments[:2], keep_every=3)
    new.close()
    plog.close()
    # crash after the .cleaned -> .swap rename, before the old segments were deleted
    new.rename_suffix(CLEANED_SUFFIX, ".swap")
    (log_dir / f"{99:020d}.log.cleaned").write_bytes(b"partial")
    (log_dir / f"{98:020d}.log.deleted").write_bytes(b"old")
    (log_dir / f"{97:020d}.index").write_bytes(b"orphan!!")
    again = PartitionLog.open(log_dir, config, clock=clock, clean_shutdown=False)
    assert [s.base_offset for s in again.segments] == [0, 12, 18]
    expected = [o for o in range(24) if o >= 12 or (o // 2) % 3 == 0]
    assert [r.offset for r in read_all(again)] == expected
    leftovers = [
        p.name for p in log_dir.iterdir() if p.name.endswith((".swap", ".cleaned", ".deleted"))
    ]
    assert leftovers == [] and not (log_dir / f"{97:020d}.index").exists()
    again.close()


def test_corrupt_epoch_checkpoint_is_rebuilt_from_the_log(
    log_dir: Path, clock: ManualClock
) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(2), leader_epoch=3)
    plog.append_as_leader(make_batch(2), leader_epoch=5)
    plog.close()
    (log_dir / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n")
    again = PartitionLog.open(log_dir, LogConfig(), clock=clock, clean_shutdown=True)
    assert again.leader_epoch_cache.entries == [(3, 0), (5, 2)]
    again.close()


def test_delete_removes_the_directory(log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    plog.append_as_leader(make_batch(2), leader_epoch=0)
    plog.delete()
    assert not log_dir.exists()


def test_a_data_sync_makes_appends_durable_and_leaves_the_recovery_point(
        log_dir: Path, clock: ManualClock) -> None:
    """``flush.messages``'s group commit (ReplicaManager): fdatasync of the planned
    segments, then ``mark_synced``; the indexes and recovery point follow with ``flush``."""
    plog = open_log(log_dir, clock, flush_messages=1, segment_bytes=4096)
    plog.append_as_leader(make_batch(3), leader_epoch=0, flush_inline=False)
    assert plog.sync_due and plog.durable_offset == 0
    plan = plog.data_sync_plan()
    assert plan is not None
    target, segments = plan
    assert target == 3 and segments == [plog.active_segment]
    with segments[0].pin_file() as fd:
        os.fdatasync(fd)
    plog.mark_synced(target)
    assert not plog.sync_due and plog.durable_offset == 3 and plog.recovery_point == 0
    while len(plog.segments) == 1:  # a roll flushes the old segment and the directory
        plog.append_as_leader(make_batch(5, value_size=500), leader_epoch=0, flush_inline=False)
    assert plog.recovery_point == plog.active_segment.base_offset
    plan = plog.data_sync_plan()
    assert plan is not None and plan[1] == [plog.active_segment]
    plog.mark_synced(plan[0])
    assert plog.durable_offset == plog.log_end_offset > plog.recovery_point
    plog.truncate_to(3)  # a batch boundary
    assert plog.durable_offset == plog.log_end_offset == 3
    plog.truncate_fully_and_start_at(50)  # a new file whose entry only a flush makes durable
    plog.append_as_leader(make_batch(1), leader_epoch=0, flush_inline=False)
    assert plog.sync_due and plog.data_sync_plan() is None
    plog.flush()
    assert plog.durable_offset == plog.recovery_point == plog.log_end_offset == 51
    plog.close()


def test_a_count_limited_read_stops_at_the_batch_that_holds_the_records(
        log_dir: Path, clock: ManualClock) -> None:
    plog = open_log(log_dir, clock)
    for tag in "abc":
        plog.append_as_leader(make_batch(10, tag=tag, value_size=100), leader_epoch=0)
    whole = plog.read(3, 1 << 20)
    assert [r.offset for r in decode_records(whole.data)][-1] == 29  # three batches
    one = plog.read(3, 1 << 20, max_records=1)
    assert [r.offset for r in decode_records(one.data)] == list(range(10))  # its batch only
    assert one.high_offset == 10
    seven = plog.read(3, 1 << 20, max_records=7)  # offsets 3..9: still the first batch
    assert len(seven.data) == len(one.data)
    more = plog.read(3, 1 << 20, max_records=8)  # needs the next batch: read on as before
    assert more.data == whole.data
    assert plog.read(3, 1, max_records=8).data == one.data  # max_bytes still caps it
    plog.close()
