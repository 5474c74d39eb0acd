"""REST consumer reads keep serving the other partitions when one partition's replica is
offline (KafkaStorageError), and make the skip observable: counted, logged once."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "broker"))
from _group_backend_fake import FakeGroupBackend  # noqa: E402

from core.broker.consumer.manager import ConsumerManager  # noqa: E402
from core.broker.replica.batch_cache import FetchResult  # noqa: E402
from core.broker.types import TopicPartition as TP  # noqa: E402
from core.clock import ManualClock  # noqa: E402
from core.storage.errors import KafkaStorageError  # noqa: E402


class OfflineBackend(FakeGroupBackend):
    """Partitions in ``offline`` fail every fetch as a replica on a failed disk does."""

    offline: set[TP]

    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
                    max_wait_ms: int) -> FetchResult:
        if TP(topic, partition) in getattr(self, "offline", set()):
            raise KafkaStorageError(f"the log directory of {topic}-{partition} failed")
        return await super().fetch(topic, partition, offset, max_bytes=max_bytes,
                                   max_wait_ms=max_wait_ms)


@pytest.fixture(params=["long-poll", "local"])
def backend(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OfflineBackend]:
    b = OfflineBackend(tmp_path / "logs", clock=ManualClock(), local=request.param == "local")
    b.create_topic("t", 2)
    b.offline = set()
    yield b
    b.close()


async def test_an_offline_partition_is_skipped_counted_and_logged_once(
    backend: OfflineBackend, caplog: pytest.LogCaptureFixture
) -> None:
    m = ConsumerManager(backend, clock=backend.clock)
    await m.coordinator.load_owned()
    await m.create("g", name="c", auto_offset_reset="earliest", auto_commit=False)
    await m.assign("g", "c", [TP("t", 0), TP("t", 1)])
    backend.produce("t", 0, [b"p0-a", b"p0-b"])
    backend.produce("t", 1, [b"p1-a"])
    backend.offline = {TP("t", 0)}
    caplog.set_level(logging.INFO, logger="core.broker.consumer.fetch")

    got = await m.poll("g", "c", timeout_ms=50)
    assert [(tp, r.value) for tp, r in got] == [(TP("t", 1), b"p1-a")]
    backend.produce("t", 1, [b"p1-b"])
    got = await m.poll("g", "c", timeout_ms=50)
    assert [(tp, r.value) for tp, r in got] == [(TP("t", 1), b"p1-b")]
    assert m.offline_skips.counts[TP("t", 0)] >= 2 and TP("t", 1) not in m.offline_skips.counts
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "t-0" in warnings[0].getMessage()

    # back online: its records come, from where the consumer was
    backend.offline = set()
    got = await m.poll("g", "c", timeout_ms=50)
    assert [r.value for _, r in got] == [b"p0-a", b"p0-b"]
    assert any("work again" in r.getMessage() for r in caplog.records)
