"""group.min.session.timeout.ms and group.max.session.timeout.ms: broker properties with
Kafka's defaults that reach the coordinator, whose JoinGroup refuses a session timeout
outside them with INVALID_SESSION_TIMEOUT (26), both ends allowed, as Kafka does. A real
Kafka client seeing the error: tests/integration/test_kafka_session_timeout_bounds.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _group_backend_fake import FakeGroupBackend

from core.broker.admin.broker_config import BrokerConfig, broker_config_entries
from core.broker.consumer.manager import ConsumerManager
from core.broker.errors import InvalidSessionTimeoutError
from core.broker.group.classic import ClassicGroups
from core.broker.group.classic_types import JoinGroupRequest
from core.clock import ManualClock


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[FakeGroupBackend]:
    b = FakeGroupBackend(tmp_path / "logs", clock=ManualClock(), local=True)
    yield b
    b.close()


def groups_of(backend: FakeGroupBackend, props: dict[str, str],
              monkeypatch: pytest.MonkeyPatch) -> tuple[ClassicGroups, list[int]]:
    """The broker's ClassicGroups for these properties; the joins that pass the checks
    end in a stub (the join barrier is test_classic_groups.py's business)."""
    manager = ConsumerManager(backend, config=BrokerConfig.from_properties(props))
    passed: list[int] = []

    async def classic_join(req: JoinGroupRequest) -> str:
        passed.append(req.session_timeout_ms)
        return "joined"

    monkeypatch.setattr(manager.coordinator, "classic_join", classic_join)
    return manager.classic, passed


def join(session_ms: int) -> JoinGroupRequest:
    return JoinGroupRequest("g", session_ms, 1000, "", "consumer", (("range", b""),))


@pytest.mark.parametrize(("props", "low", "high"), [
    ({}, 6_000, 1_800_000),  # Kafka's defaults
    ({"group.min.session.timeout.ms": "2000", "group.max.session.timeout.ms": "20000"},
     2_000, 20_000),
    ({"group.min.session.timeout.ms": "5000", "group.max.session.timeout.ms": "5000"},
     5_000, 5_000),
])
async def test_join_group_takes_the_bounds_and_refuses_outside(
        backend: FakeGroupBackend, monkeypatch: pytest.MonkeyPatch,
        props: dict[str, str], low: int, high: int) -> None:
    groups, passed = groups_of(backend, props, monkeypatch)
    assert (groups.min_session_timeout_ms, groups.max_session_timeout_ms) == (low, high)
    for ms in (low, high):
        assert await groups.join_group(join(ms)) == "joined"
    for ms in (low - 1, high + 1, 0, -1):
        with pytest.raises(InvalidSessionTimeoutError) as info:
            await groups.join_group(join(ms))
        assert info.value.error_code == 26
        assert f"{ms} ms is outside {low}..{high} ms" in str(info.value)
        assert "group.min.session.timeout.ms" in str(info.value)
    assert passed == [low, high]


def test_declared_with_kafkas_defaults() -> None:
    config = BrokerConfig.from_properties({})
    assert config["group.min.session.timeout.ms"] == 6_000
    assert config["group.max.session.timeout.ms"] == 1_800_000
    entries = {e.name: e for e in broker_config_entries(
        BrokerConfig.from_properties({"group.min.session.timeout.ms": "7000"}))}
    assert entries["group.min.session.timeout.ms"].value == "7000"
    assert entries["group.min.session.timeout.ms"].source.name == "STATIC_BROKER_CONFIG"
    assert entries["group.max.session.timeout.ms"].value == "1800000"
    assert entries["group.max.session.timeout.ms"].source.name == "DEFAULT_CONFIG"


def test_the_coordinator_refuses_bounds_the_wrong_way_round(
        backend: FakeGroupBackend) -> None:
    with pytest.raises(ValueError, match="at most group.max.session.timeout.ms"):
        ConsumerManager(backend, config=BrokerConfig.from_properties(
            {"group.min.session.timeout.ms": "30000", "group.max.session.timeout.ms": "20000"}))
