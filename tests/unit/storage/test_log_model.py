"""A stateful property test: PartitionLog against an in-memory model of its records.

Hypothesis drives appends (leader and follower, random records and codecs), reads from
random offsets, rolls, truncations, log-start moves, segment deletions, flushes, and
clean or crash-like reopens; after every step the log must agree with the model.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from core.clock import ManualClock
from core.storage import codec
from core.storage.batch import patch_leader_epoch
from core.storage.config import LogConfig
from core.storage.errors import OffsetOutOfRangeError
from core.storage.log import PartitionLog
from core.storage.records import NewRecord, build_batch, decode_records

NOW = 1_700_000_000_000
CODECS = [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD]

records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=8)),
        st.one_of(st.none(), st.binary(max_size=120)),
        st.integers(min_value=-5_000, max_value=5_000),
    ),
    min_size=1,
    max_size=6,
)


@dataclass
class Model:
    """What the log should hold: records by offset, batches, epoch entries, offsets."""

    records: dict[int, tuple[bytes | None, bytes | None, int]] = field(default_factory=dict)
    batches: list[tuple[int, int, int]] = field(default_factory=list)  # (base, last, epoch)
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    log_start: int = 0
    leo: int = 0

    def add(
        self, base: int, rows: list[tuple[bytes | None, bytes | None, int]], epoch: int
    ) -> None:
        for i, (key, value, ts) in enumerate(rows):
            self.records[base + i] = (key, value, NOW + ts)
        self.batches.append((base, base + len(rows) - 1, epoch))
        self.leo = base + len(rows)
        self.note_epoch(epoch, base)

    # the leader-epoch cache rules (KIP-101), kept deliberately plain
    def note_epoch(self, epoch: int, start: int) -> None:
        if not self.epochs or epoch > self.epochs[-1][0]:
            self.epochs = [e for e in self.epochs if e[0] < epoch and e[1] < start] + [
                (epoch, start)
            ]

    def epochs_end_at(self, end: int) -> None:
        self.epochs = [e for e in self.epochs if e[1] < end]

    def epochs_start_at(self, start: int) -> None:
        below = [e for e in self.epochs if e[1] <= start]
        if below:
            self.epochs = [(below[-1][0], start)] + [e for e in self.epochs if e[1] > start]

    def truncate(self, target: int, segment_bases: list[int]) -> None:
        if target >= self.leo:
            return
        if target < segment_bases[0]:
            self.records, self.batches, self.epochs = {}, [], []
            self.log_start = self.leo = target
            return
        self.batches = [b for b in self.batches if b[1] < target]
        kept = {o for b, last, _ in self.batches for o in range(b, last + 1)}
        self.records = {o: r for o, r in self.records.items() if o in kept}
        active_base = max(b for b in segment_bases if b <= target)
        self.leo = max(self.batches[-1][1] + 1 if self.batches else 0, active_base)
        self.log_start = min(self.log_start, self.leo)
        self.epochs_end_at(self.leo)

    def move_start(self, offset: int) -> None:
        if offset > self.log_start:
            self.log_start = offset
            self.epochs_start_at(offset)

    def reopen(self, segment_bases: list[int], recovery_point: int | None) -> None:
        """Recovery re-reads the epochs of the batches it recovers (None: clean)."""
        if recovery_point is not None:
            first = max([b for b in segment_bases if b <= recovery_point], default=segment_bases[0])
            for base, _, epoch in self.batches:
                if base >= first:
                    self.note_epoch(epoch, base)
        self.epochs_end_at(self.leo + 1)
        self.epochs_start_at(self.log_start)


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="franz-model-"))
        self.generation = 0
        self.clock = ManualClock(NOW)
        self.model = Model()
        self.epoch = 0

    @initialize(
        segment_bytes=st.sampled_from([14, 400, 1200, 1 << 20]),  # 14: Kafka's minimum
        interval=st.sampled_from([0, 100, 4096]),
        index_bytes=st.sampled_from([48, 1 << 20]),
    )
    def open_log(self, segment_bytes: int, interval: int, index_bytes: int) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                                segment_index_bytes=index_bytes)  # fmt: skip
        self.log = PartitionLog.open(self._new_dir(), self.config, clock=self.clock)

    def _new_dir(self) -> Path:
        self.generation += 1
        return self.root / f"gen{self.generation}" / "model-topic-0"

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _batch(
        self, rows: list[tuple[bytes | None, bytes | None, int]], compression: int, base: int = 0
    ) -> bytearray:
        records = [NewRecord(value=v, key=k, timestamp=NOW + ts) for k, v, ts in rows]
        return build_batch(records, now_ms=NOW, compression=compression, base_offset=base)

    # --- rules -------------------------------------------------------------------

    @rule(batches=st.lists(records_strategy, min_size=1, max_size=3), compression=st.sampled_from(CODECS),
          new_epoch=st.booleans())  # fmt: skip
    def append_as_leader(self, batches: list, compression: int, new_epoch: bool) -> None:
        self.epoch += int(new_epoch)
        data = b"".join(bytes(self._batch(rows, compression)) for rows in batches)
        # larger than segment.bytes: written in runs, an oversized batch in a segment of its own
        info = self.log.append_as_leader(data, leader_epoch=self.epoch)
        assert info.first_offset == self.model.leo
        for rows in batches:
            self.model.add(self.model.leo, rows, self.epoch)
        assert info.last_offset == self.model.leo - 1

    @rule(
        rows=records_strategy,
        gap=st.integers(min_value=0, max_value=5),
        compression=st.sampled_from(CODECS),
    )
    def append_as_follower(self, rows: list, gap: int, compression: int) -> None:
        base = self.model.leo + gap
        batch = self._batch(rows, compression, base)
        patch_leader_epoch(batch, 0, self.epoch)
        self.log.append_as_follower(batch)  # larger than segment.bytes too: a segment of its own
        self.model.add(base, rows, self.epoch)

    @rule(data=st.data(), max_bytes=st.integers(min_value=1, max_value=3000), bounded=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, bounded: bool) -> None:
        m = self.model
        offset = data.draw(st.integers(min_value=m.log_start, max_value=m.leo))
        max_offset = (
            data.draw(st.integers(min_value=m.log_start, max_value=m.leo)) if bounded else None
        )
        fetched = self.log.read(offset, max_bytes, max_offset=max_offset)
        if offset == m.leo or (max_offset is not None and offset >= max_offset):
            assert fetched.data == b""
            return
        first = next((b for b in m.batches if b[1] >= offset), None)
        if first is None:  # offset in a gap with no batch after it (a truncated follower)
            assert fetched.data == b""
            return
        if max_offset is not None and first[0] >= max_offset:
            assert fetched.data == b""
            return
        assert fetched.first_offset == first[0] and fetched.data
        assert any(last + 1 == fetched.high_offset for _, last, _ in m.batches)
        got = [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(fetched.data)]
        expected = [
            (o, *m.records[o]) for o in sorted(m.records) if first[0] <= o < fetched.high_offset
        ]
        assert got == expected
        if max_offset is not None:
            assert all(
                b[0] < max_offset for b in m.batches if first[0] <= b[0] < fetched.high_offset
            )

    @rule(data=st.data())
    def read_below_log_start_fails(self, data: st.DataObject) -> None:
        if self.model.log_start == 0:
            return
        offset = data.draw(st.integers(min_value=0, max_value=self.model.log_start - 1))
        try:
            self.log.read(offset, 100)
        except OffsetOutOfRangeError:
            return
        raise AssertionError(f"read below the log start at {offset} succeeded")

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(min_value=0, max_value=self.model.leo))
        bases = [s.base_offset for s in self.log.segments]
        self.log.truncate_to(target)
        self.model.truncate(target, bases)

    @rule(data=st.data())
    def move_log_start(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(min_value=self.model.log_start, max_value=self.model.leo))
        self.log.maybe_increment_log_start_offset(offset)
        self.model.move_start(offset)

    @precondition(lambda self: len(self.log.segments) > 1)
    @rule()
    def delete_oldest_segment(self) -> None:
        next_base = self.log.segments[1].base_offset
        self.log.delete_segments(self.log.segments[:1], reason="model")
        self.model.move_start(next_base)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.model.leo

    @rule(
        ms=st.integers(min_value=0, max_value=10_000),
        query=st.integers(min_value=-6_000, max_value=6_000),
    )
    def offset_for_timestamp(self, ms: int, query: int) -> None:
        self.clock.advance(ms)
        m = self.model
        expected = next(
            (
                (o, r[2])
                for o, r in sorted(m.records.items())
                if o >= m.log_start and r[2] >= NOW + query
            ),
            None,
        )
        assert self.log.offset_for_timestamp(NOW + query) == expected

    @rule()
    def reopen_clean(self) -> None:
        old = self.log
        old.close()
        self.model.reopen([s.base_offset for s in old.segments], None)
        self.log = PartitionLog.open(
            old.dir, self.config, clock=self.clock, recovery_point=old.recovery_point,
            log_start_offset=old.log_start_offset, clean_shutdown=True,
        )  # fmt: skip

    @rule(from_zero=st.booleans())
    def reopen_after_crash(self, from_zero: bool) -> None:
        """Copy the directory as a crash would leave it (untrimmed indexes), then recover."""
        old = self.log
        crashed = self._new_dir()
        shutil.copytree(old.dir, crashed)
        old.close()
        recovery_point = 0 if from_zero else old.recovery_point
        self.model.reopen([s.base_offset for s in old.segments], recovery_point)
        self.log = PartitionLog.open(
            crashed, self.config, clock=self.clock, log_start_offset=old.log_start_offset,
            recovery_point=recovery_point, clean_shutdown=False,
        )  # fmt: skip
        shutil.rmtree(old.dir)

    # --- invariants ----------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.model.leo
        assert self.log.log_start_offset == self.model.log_start
        assert self.log.recovery_point <= self.log.log_end_offset
        assert self.log.size_in_bytes == sum(s.log_path.stat().st_size for s in self.log.segments)
        assert self.log.leader_epoch_cache.entries == self.model.epochs


PartitionLogMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestPartitionLogModel = PartitionLogMachine.TestCase
