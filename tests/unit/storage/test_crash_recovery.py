"""Crash recovery: torn or corrupted tails must leave exactly a prefix of what was written.

A live log is copied while open (as a crash would leave it: indexes untrimmed, nothing
closed), then each trial damages a copy (cuts the active ``.log`` at a random byte, cuts
or garbles its indexes, or flips bytes inside a batch) and reopens it as after an
unclean shutdown. The records read back must be exactly the written ones up to the last
intact batch, and appends must continue at the recovered log end offset.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from core.clock import ManualClock
from core.storage import codec
from core.storage.batch import BatchHeader
from core.storage.config import LogConfig
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, build_batch, decode_records

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=256, segment_index_bytes=4096)
CODECS = [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD]
Written = dict[int, tuple[bytes | None, bytes | None]]


@pytest.fixture(scope="module")
def crash_image(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Written, int, list[tuple[int, BatchHeader]]]:
    """A log of ~200 batches over several segments, copied while still open.

    Returns the copy, the written records by offset, the recovery point of the live log
    and the (position, header) of every batch in the active segment."""
    rng = random.Random(7)
    live_dir = tmp_path_factory.mktemp("live") / "crash-0"
    clock = ManualClock(NOW)
    plog = PartitionLog.open(live_dir, CONFIG, clock=clock)
    written: Written = {}
    for i in range(200):
        n = rng.randint(1, 8)
        rows = [(None if rng.random() < 0.2 else b"key-%d" % rng.randrange(50),
                 rng.randbytes(rng.randint(0, 60))) for _ in range(n)]  # fmt: skip
        batch = build_batch([NewRecord(value=v, key=k, timestamp=NOW + i) for k, v in rows],
                            now_ms=NOW, compression=rng.choice(CODECS))  # fmt: skip
        info = plog.append_as_leader(batch, leader_epoch=i // 50)
        for j, row in enumerate(rows):
            written[info.first_offset + j] = row
    assert len(plog.segments) >= 4
    image = tmp_path_factory.mktemp("image") / "crash-0"
    shutil.copytree(live_dir, image)  # the crash: files exactly as the running log left them
    active = list(plog.active_segment.iter_batches())
    assert len(active) >= 10
    recovery_point = plog.recovery_point
    plog.close()
    return image, written, recovery_point, active


def damage_index(path: Path, rng: random.Random) -> str:
    """Cut, extend, garble or remove an index file; returns what was done."""
    mode = rng.choice(["keep", "cut", "zeros", "garbage", "splice", "missing"])
    size = path.stat().st_size
    if mode == "cut":
        os.truncate(path, rng.randrange(0, size + 1))
    elif mode == "zeros":
        os.truncate(path, size + rng.randrange(1, 4096))
    elif mode == "garbage":
        path.write_bytes(rng.randbytes(rng.randrange(0, 2048)))
    elif mode == "splice":
        data = bytearray(path.read_bytes())
        for _ in range(rng.randint(1, 10)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
    elif mode == "missing":
        path.unlink()
    return mode


def recovered_records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 4096)
        out += [(r.offset, r.key, r.value) for r in decode_records(fetched.data, min_offset=offset)]
        assert fetched.high_offset > offset
        offset = fetched.high_offset
    return out


def check_prefix(plog: PartitionLog, written: Written, end: int) -> None:
    """The log holds exactly the written records below ``end`` and accepts appends."""
    assert plog.log_end_offset == end
    assert recovered_records(plog) == [(o, *written[o]) for o in range(end)]
    assert all(start <= end for _, start in plog.leader_epoch_cache.entries)
    for seg in plog.segments:
        assert seg.log_path.stat().st_size == seg.size
    info = plog.append_as_leader(
        build_batch([NewRecord(value=b"after", key=b"k")], now_ms=NOW), leader_epoch=9
    )
    assert info.first_offset == end
    assert decode_records(plog.read(end, 1000).data)[0].value == b"after"


def copy_image(image: Path, root: Path, trial: int) -> Path:
    target = root / f"trial{trial}" / "crash-0"
    shutil.copytree(image, target)
    return target


def test_torn_tail_at_random_positions_recovers_a_prefix(
    crash_image: tuple[Path, Written, int, list[tuple[int, BatchHeader]]], tmp_path: Path
) -> None:
    image, written, recovery_point, active = crash_image
    active_base = min(h.base_offset for _, h in active)
    log_name = f"{active_base:020d}"
    active_size = max(pos + h.size for pos, h in active)
    rng = random.Random(20240611)
    positions = [0, active_size, active[1][0], active[1][0] + 1] + [
        rng.randrange(active_size) for _ in range(60)
    ]
    for trial, cut in enumerate(positions):
        directory = copy_image(image, tmp_path, trial)
        os.truncate(directory / f"{log_name}.log", cut)
        modes = [
            damage_index(directory / f"{log_name}{ext}", rng) for ext in (".index", ".timeindex")
        ]
        rp = rng.choice([0, recovery_point, active_base])
        plog = PartitionLog.open(
            directory, CONFIG, recovery_point=rp, clean_shutdown=False, clock=ManualClock(NOW)
        )
        end = max((h.next_offset for pos, h in active if pos + h.size <= cut), default=active_base)
        try:
            check_prefix(plog, written, end)
        except AssertionError as exc:
            raise AssertionError(
                f"trial {trial}: cut at {cut}, indexes {modes}, recovery point {rp}"
            ) from exc
        finally:
            plog.close()
        shutil.rmtree(directory.parent)


def test_flipped_bytes_truncate_at_the_corrupt_batch(
    crash_image: tuple[Path, Written, int, list[tuple[int, BatchHeader]]], tmp_path: Path
) -> None:
    """Bytes 0-7 (baseOffset) and 12-15 (leader epoch) lie outside the CRC by design, so
    flips land in the CRC-covered or framing bytes of one batch."""
    image, written, recovery_point, active = crash_image
    active_base = min(h.base_offset for _, h in active)
    log_name = f"{active_base:020d}.log"
    rng = random.Random(99)
    for trial in range(30):
        victim_pos, victim = active[rng.randrange(1, len(active))]
        directory = copy_image(image, tmp_path, trial)
        path = directory / log_name
        data = bytearray(path.read_bytes())
        for _ in range(rng.randint(1, 3)):
            at = victim_pos + rng.choice([*range(8, 12), *range(16, victim.size)])
            data[at] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(data))
        plog = PartitionLog.open(directory, CONFIG, recovery_point=recovery_point, clean_shutdown=False,
                                 clock=ManualClock(NOW))  # fmt: skip
        try:
            assert plog.active_segment.size == victim_pos
            check_prefix(plog, written, victim.base_offset)
        finally:
            plog.close()
        shutil.rmtree(directory.parent)


def test_corruption_in_an_older_segment_drops_every_later_segment(
    crash_image: tuple[Path, Written, int, list[tuple[int, BatchHeader]]], tmp_path: Path
) -> None:
    image, written, _, _ = crash_image
    directory = copy_image(image, tmp_path, 0)
    second = sorted(directory.glob("*.log"))[1]
    probe = PartitionLog.open(
        copy_image(image, tmp_path, 1), CONFIG, clean_shutdown=True, clock=ManualClock(NOW)
    )
    batches = list(probe.segments[1].iter_batches())
    probe.close()
    cut_pos, cut_header = batches[len(batches) // 2]
    os.truncate(second, cut_pos + 30)
    plog = PartitionLog.open(
        directory, CONFIG, recovery_point=0, clean_shutdown=False, clock=ManualClock(NOW)
    )
    try:
        assert len(plog.segments) == 2
        assert len(list(directory.glob("*.log"))) == 2
        check_prefix(plog, written, cut_header.base_offset)
    finally:
        plog.close()
