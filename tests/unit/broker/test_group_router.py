"""Consumer-group calls reach the group's coordinator over the internal API's wire format
(``core.broker.consumer.router`` and ``wire``): two real ConsumerManagers, each over its
own fake backend, and a loopback client that serves a call on the other manager through
the same encode/serve/decode a broker's internal route uses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _group_backend_fake import FakeGroupBackend

from core.broker.consumer import router as router_module
from core.broker.consumer.manager import ConsumerManager
from core.broker.consumer.router import GroupRouter
from core.broker.consumer.wire import decode_call, decode_result, encode_call, serve_call
from core.broker.errors import (
    BrokerNotAvailableError,
    ConsumerAlreadyExistsError,
    ConsumerInstanceNotFoundError,
    GroupAuthorizationFailedError,
    IllegalConsumerStateError,
    NotCoordinatorError,
)
from core.broker.metadata.cache import MetadataCache, TopicMetadata
from core.broker.metadata.store import BrokerRegistration, PartitionState, TopicAssignment
from core.broker.replica.batch_cache import BatchCache
from core.broker.types import OFFSETS_TOPIC
from core.broker.types import TopicPartition as TP
from core.clock import ManualClock
from core.errors import FranzError, InvalidRequestError
from core.storage.config import LogConfig

ME, OTHER = 1, 2
OFFSETS_PARTITIONS = 3

ANON = "User:ANONYMOUS"  # the principal of every call here (no authentication)


class LoopbackClient:
    """The coordinator's internal route in-process: the body goes through ``serve_call``
    on its manager; domain errors come back as the route and client turn them (the exact
    class, by name). ``down`` answers BROKER_NOT_AVAILABLE that many times first."""

    def __init__(self, managers: dict[tuple[str, int], ConsumerManager]) -> None:
        self.managers = managers
        self.calls: list[tuple[tuple[str, int], str]] = []
        self.down = 0
        self.not_coordinator = 0

    async def group_call(self, address: tuple[str, int], op: str, body: bytes, *,
                         timeout_s: float) -> bytes:
        self.calls.append((address, op))
        if self.down:
            self.down -= 1
            raise BrokerNotAvailableError("connection refused")
        if self.not_coordinator:
            self.not_coordinator -= 1
            raise NotCoordinatorError("moved")
        try:
            return await serve_call(self.managers[address], op, body)
        except FranzError as exc:  # as the internal route and HttpClusterClient do
            raise FranzError.for_name(type(exc).__name__, exc.error_code)(exc.message) from None


def _cache(coordinator: int) -> MetadataCache:
    """Every ``__consumer_offsets`` partition led by ``coordinator``."""
    cache = MetadataCache()
    cache.set_brokers({b: BrokerRegistration(b, f"h{b}", 9000 + b) for b in (ME, OTHER)})
    parts = {p: (coordinator,) for p in range(OFFSETS_PARTITIONS)}
    states = {p: PartitionState(coordinator, 0, (coordinator,), 0) for p in parts}
    cache.put_topic(OFFSETS_TOPIC, TopicMetadata(TopicAssignment(OFFSETS_TOPIC, "id", parts), states, {},
                                                 LogConfig.from_overrides({})))
    return cache


@pytest.fixture
def backends(tmp_path: Path) -> Iterator[tuple[FakeGroupBackend, FakeGroupBackend]]:
    clock = ManualClock()
    here = FakeGroupBackend(tmp_path / "here", clock=clock, offsets_partitions=OFFSETS_PARTITIONS)
    there = FakeGroupBackend(tmp_path / "there", clock=clock,
                             offsets_partitions=OFFSETS_PARTITIONS)
    for b in (here, there):
        b.create_topic("t", 2)
    yield here, there
    here.close()
    there.close()


async def _manager(backend: FakeGroupBackend) -> ConsumerManager:
    m = ConsumerManager(backend, clock=backend.clock)  # type: ignore[arg-type]
    await m.coordinator.load_owned()
    return m


@pytest.fixture
async def setup(backends: tuple[FakeGroupBackend, FakeGroupBackend]
                ) -> tuple[GroupRouter, ConsumerManager, ConsumerManager, LoopbackClient]:
    here, there = backends
    local, remote = await _manager(here), await _manager(there)
    client = LoopbackClient({("h2", 9002): remote})
    router = GroupRouter(ME, local, _cache(OTHER), BatchCache(), client)
    return router, local, remote, client


async def test_calls_run_on_the_coordinator_and_come_back_typed(setup) -> None:  # noqa: ANN001
    router, local, remote, client = setup
    info = await router.create("g", name="c1", format="binary", auto_offset_reset="earliest",
                               auto_commit=False)
    assert info.instance_id == "c1" and info.auto_offset_reset == "earliest"
    assert remote.get("g", "c1") == info  # the instance lives on the coordinator
    with pytest.raises(ConsumerInstanceNotFoundError):
        local.get("g", "c1")
    assert await router.get("g", "c1", principal=ANON) == info
    await router.assign("g", "c1", [TP("t", 0), TP("t", 1)], principal=ANON)
    assert await router.assignment("g", "c1", principal=ANON) == [TP("t", 0), TP("t", 1)]
    await router.seek("g", "c1", {TP("t", 1): 0}, principal=ANON)
    await router.commit("g", "c1", {TP("t", 0): (5, "meta")}, principal=ANON)
    assert await router.committed("g", "c1", [TP("t", 0)], principal=ANON) == {TP("t", 0): (5, "meta")}
    assert await router.group_offsets("g") == {TP("t", 0): 5}
    desc = await router.describe_group("g")
    assert desc.group_id == "g" and [m.member_id for m in desc.members] == ["c1"]
    assert desc.members[0].assignment == (TP("t", 0), TP("t", 1))
    assert {op for _a, op in client.calls} >= {"create", "get", "assign", "commit"}


async def test_poll_brings_the_batches_back(setup, backends) -> None:  # noqa: ANN001
    router, _local, _remote, _client = setup
    _here, there = backends
    there.produce("t", 0, [b"a", b"b", b"c"])
    there.produce("t", 1, [b"x"])
    await router.create("g", name="c", auto_offset_reset="earliest")
    await router.subscribe("g", "c", topics=["t"], principal=ANON)
    polled = await router.poll("g", "c", timeout_ms=1000, principal=ANON)
    assert sorted((tp.partition, r.value) for tp, r in polled) == [
        (0, b"a"), (0, b"b"), (0, b"c"), (1, b"x")]
    assert polled.count == 4 and all(len(c) == 4 for c in polled.chunks)
    assert await router.subscription("g", "c", principal=ANON) == ["t"]
    again = await router.poll("g", "c", timeout_ms=1, principal=ANON)
    assert again.count == 0  # positions moved on the coordinator


async def test_domain_errors_keep_their_class(setup) -> None:  # noqa: ANN001
    router, _local, _remote, _client = setup
    await router.create("g", name="c1")
    with pytest.raises(ConsumerAlreadyExistsError):  # same Kafka code family, exact class
        await router.create("g", name="c1")
    await router.subscribe("g", "c1", topics=["t"], principal=ANON)
    with pytest.raises(IllegalConsumerStateError):
        await router.assign("g", "c1", [TP("t", 0)], principal=ANON)
    with pytest.raises(ConsumerInstanceNotFoundError):
        await router.delete("g", "nobody", principal=ANON)


async def test_an_unreachable_coordinator_is_retried_then_answered_here(
        setup, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    router, local, remote, client = setup
    monkeypatch.setattr(router_module, "RETRY_S", 0.01)
    client.down = 2
    info = await router.create("g", name="c1")  # third try reaches it
    assert remote.get("g", "c1") == info
    monkeypatch.setattr(router_module, "PATIENCE_S", 0.05)
    client.down = 10_000
    await router.create("g2", name="c2")  # gave up: answered by this broker
    assert local.get("g2", "c2").instance_id == "c2"


async def test_not_coordinator_is_retried_then_returned(
        setup, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    router, _local, remote, client = setup
    monkeypatch.setattr(router_module, "RETRY_S", 0.01)
    client.not_coordinator = 1
    await router.create("g", name="c1")
    assert remote.get("g", "c1").instance_id == "c1"
    monkeypatch.setattr(router_module, "PATIENCE_S", 0.05)
    client.not_coordinator = 10_000
    with pytest.raises(NotCoordinatorError):
        await router.delete("g", "c1", principal=ANON)


async def test_groups_coordinated_here_never_leave(backends) -> None:  # noqa: ANN001
    here, _there = backends
    local = await _manager(here)
    client = LoopbackClient({})
    router = GroupRouter(ME, local, _cache(ME), BatchCache(), client)
    await router.create("g", name="c1")
    assert local.get("g", "c1").instance_id == "c1" and client.calls == []
    standalone = GroupRouter(ME, local, MetadataCache(), BatchCache(), None)
    assert (await standalone.get("g", "c1", principal=ANON)).instance_id == "c1"


async def test_list_groups_is_the_union_of_every_broker(setup) -> None:  # noqa: ANN001
    router, local, remote, _client = setup
    await local.create("here-only", name="a")
    await remote.create("there-only", name="b")
    assert [g.group_id for g in await router.list_groups()] == ["here-only", "there-only"]


def test_call_arguments_round_trip() -> None:
    args = {"group": "g", "instance": "i", "partitions": [TP("t", 1), TP("u", 0)],
            "offsets": {TP("t", 1): (7, "m")}, "timestamps": None, "topics": ["a"]}
    assert decode_call("commit", encode_call("commit", args)) == args
    assert decode_call("seek", encode_call("seek", {"offsets": {TP("t", 0): 3}})) == {
        "offsets": {TP("t", 0): 3}}


@pytest.mark.parametrize("op,body", [
    ("drop_everything", b"{}"), ("seek", b"not json"), ("seek", b"[1, 2]"),
    ("seek", b'{"offsets": [["t"]]}'), ("assign", b'{"partitions": [["t", "x"]]}'),
    ("get", b'{"group": 5, "instance": [1]}'), ("poll", b'{"group": "g", "timeout_ms": "x"}'),
    ("seek", b'{"offsets": [["t", 0, "x"]]}'), ("commit", b'{"offsets": [[1, 0, [5, 7]]]}'),
    ("subscribe", b'{"topics": [1, 2]}'), ("create", b'{"auto_commit": 1}'),
    ("poll", b'{"max_bytes": true}'), ("delete", b'{"group": "g", "surprise": 1}'),
])
def test_malformed_calls_are_invalid_requests(op: str, body: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        decode_call(op, body)


async def test_a_call_with_wrong_arguments_is_an_invalid_request(setup) -> None:  # noqa: ANN001
    _router, _local, remote, _client = setup
    with pytest.raises(InvalidRequestError):
        await serve_call(remote, "delete", b'{"group": "g", "nobody": 1}')


def test_empty_results() -> None:
    cache = BatchCache()
    assert decode_result("delete", b"", cache) is None
    assert decode_result("committed", b"", cache) == {}


async def test_an_instance_serves_only_the_principal_that_created_it(setup) -> None:  # noqa: ANN001
    router, _local, _remote, _client = setup
    await router.create("g", name="mine", owner="User:alice")
    assert (await router.get("g", "mine", principal="User:alice")).owner == "User:alice"
    for call in (router.get("g", "mine", principal="User:bob"),
                 router.assignment("g", "mine", principal="User:bob"),
                 router.commit("g", "mine", principal="User:bob"),
                 router.delete("g", "mine", principal="User:bob")):
        with pytest.raises(GroupAuthorizationFailedError):
            await call
    await router.get("g", "mine", principal="User:alice")  # still there: nothing was done
