"""Kafka's election and ISR rules (kafka-internals 2.3, 2.6), as tables of cases."""

from __future__ import annotations

import pytest

from core.broker.controller.leader_election import (
    can_join_isr,
    elect_on_broker_change,
    is_out_of_sync,
    next_last_caught_up_ms,
)
from core.broker.metadata.store import PartitionState
from core.broker.replica.fetch_wire import (
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResult,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


def st(leader: int, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1, version=4)


@pytest.mark.parametrize(("state", "live", "unclean", "down", "expected"), [
    (st(0, 3, (0, 1, 2)), {0, 1, 2}, False, (), None),                 # nothing to do
    (st(0, 3, (0, 1, 2)), {1, 2}, False, (), (2, 4, (1, 2))),          # first ISR in assignment order
    (st(0, 3, (0, 1, 2)), {0, 2}, False, (), (0, 4, (0, 2))),          # dead follower leaves the ISR
    (st(0, 3, (0,)), {1, 2}, False, (), (-1, 4, (0,))),                # offline, ISR kept
    (st(-1, 4, (0,)), {1, 2}, False, (), None),                        # already offline
    (st(0, 3, (0,)), {1, 2}, True, (), (2, 4, (2,))),                  # unclean: first alive replica
    (st(-1, 4, (0,)), {0, 1, 2}, False, (), (0, 5, (0,))),             # the ISR member returns
    (st(0, 3, (0, 1, 2)), {0, 1, 2}, False, {0}, (2, 4, (1, 2))),      # controlled shutdown
])
def test_elect_on_broker_change(state: PartitionState, live: set[int], unclean: bool,
                                down: set[int], expected: tuple[int, int, tuple[int, ...]] | None) -> None:
    new = elect_on_broker_change(state, (2, 0, 1), live,
                                 unclean=unclean, controller_epoch=7, shutting_down=down)
    if expected is None:
        assert new is None
    else:
        assert new is not None
        assert (new.leader, new.leader_epoch, new.isr) == expected
        assert new.controller_epoch == 7 and new.version == state.version


def test_isr_rules() -> None:
    assert not is_out_of_sync(follower_leo=10, leader_leo=10, last_caught_up_ms=0, now_ms=99_999,
                              max_lag_ms=1000)
    assert is_out_of_sync(follower_leo=9, leader_leo=10, last_caught_up_ms=0, now_ms=1001,
                          max_lag_ms=1000)
    assert not is_out_of_sync(follower_leo=9, leader_leo=10, last_caught_up_ms=500, now_ms=1001,
                              max_lag_ms=1000)
    assert can_join_isr(follower_leo=5, high_watermark=5, leader_epoch_start=3, alive=True)
    assert not can_join_isr(follower_leo=4, high_watermark=5, leader_epoch_start=3, alive=True)
    assert not can_join_isr(follower_leo=5, high_watermark=5, leader_epoch_start=6, alive=True)
    assert not can_join_isr(follower_leo=5, high_watermark=5, leader_epoch_start=3, alive=False)
    kw = {"prev_fetch_ms": 50, "last_caught_up_ms": 10, "now_ms": 100}
    assert next_last_caught_up_ms(fetch_offset=10, leader_leo=10, prev_fetch_leader_leo=8, **kw) == 100
    assert next_last_caught_up_ms(fetch_offset=9, leader_leo=10, prev_fetch_leader_leo=8, **kw) == 50
    assert next_last_caught_up_ms(fetch_offset=7, leader_leo=10, prev_fetch_leader_leo=8, **kw) == 10


def test_replica_fetch_wire_round_trip() -> None:
    req = ReplicaFetchRequest(2, 500, 1000, (ReplicaFetchPartition("t", 0, 42, 3, 2, 100),))
    assert decode_request(encode_request(req)) == req
    results = [ReplicaFetchResult("t", 0, 0, 40, 0, 45, None, b"\x00" * 17),
               ReplicaFetchResult("t", 1, 0, 40, 0, 45, (2, 30), b""),
               ReplicaFetchResult("u", 0, 74)]
    assert decode_response(encode_response(results)) == results
    with pytest.raises(ValueError):
        decode_response(encode_response(results)[:-3])
    with pytest.raises(ValueError):
        decode_request(b'{"partitions": []}')
