"""Pure rules of partition reassignment and preferred-leader election."""

from __future__ import annotations

import pytest

from core.broker.controller.leader_election import elect_preferred, imbalanced_partitions
from core.broker.controller.reassignment import (
    Step,
    check_targets,
    encode_election,
    encode_reassignment,
    moving_replicas,
    next_step,
    parse_election,
    parse_reassignment,
)
from core.broker.errors import InvalidReplicaAssignmentError
from core.broker.metadata.store import PartitionState


def st(leader: int, isr: tuple[int, ...], epoch: int = 3, version: int = 7) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1,
                          version=version)


# --- request JSON ----------------------------------------------------------------------------


def test_reassignment_json_round_trips_in_kafkas_shape() -> None:
    data = encode_reassignment({("t", 1): (2, 0), ("t", 0): (1, 2)})
    assert data == (b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
                    b'{"topic":"t","partition":1,"replicas":[2,0]}]}')
    assert parse_reassignment(data) == {("t", 0): (1, 2), ("t", 1): (2, 0)}
    assert parse_election(encode_election([("a", 0), ("b", 3)])) == [("a", 0), ("b", 3)]


@pytest.mark.parametrize("body, fragment", [
    (b"not json", "not JSON"),
    ({"version": 1}, "partitions"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}, "non-empty"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "duplicate"),
    ({"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}, "partition number"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                     {"topic": "t", "partition": 0, "replicas": [2]}]}, "listed twice"),
])
def test_bad_reassignment_requests_are_refused_with_the_reason(body: object, fragment: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=fragment):
        parse_reassignment(body)


def test_targets_must_name_existing_partitions_and_registered_brokers() -> None:
    parts = {("t", 0): (0, 1)}
    check_targets({("t", 0): (1, 2)}, parts, [0, 1, 2])
    with pytest.raises(InvalidReplicaAssignmentError, match="does not exist"):
        check_targets({("t", 5): (1, 2)}, parts, [0, 1, 2])
    with pytest.raises(InvalidReplicaAssignmentError, match=r"brokers \[7\]"):
        check_targets({("t", 0): (1, 7)}, parts, [0, 1, 2])


# --- the steps of one partition -------------------------------------------------------------


def test_reassignment_walks_expand_wait_shrink_done() -> None:
    live = {0, 1, 2}
    plan = next_step((0, 1), (1, 2), st(0, (0, 1)), live, controller_epoch=5)
    assert (plan.step, plan.replicas, plan.adding, plan.removing) == \
        (Step.EXPAND, (1, 2, 0), (2,), (0,))
    plan = next_step((1, 2, 0), (1, 2), st(0, (0, 1)), live, controller_epoch=5)
    assert plan.step is Step.WAIT  # broker 2 not in the ISR yet
    plan = next_step((1, 2, 0), (1, 2), st(0, (0, 1, 2)), live, controller_epoch=5)
    assert plan.step is Step.SHRINK and plan.replicas == (1, 2)
    assert plan.state == PartitionState(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=5,
                                        version=7)  # leader moved into the target set
    assert next_step((1, 2), (1, 2), st(1, (1, 2)), live, controller_epoch=5).step is Step.DONE


def test_leader_in_the_target_stays_leader() -> None:
    plan = next_step((0, 1, 2), (2, 1), st(1, (0, 1, 2)), {0, 1, 2}, controller_epoch=5)
    assert plan.step is Step.SHRINK and plan.state is not None
    assert (plan.state.leader, plan.state.isr, plan.replicas) == (1, (1, 2), (2, 1))


def test_a_removed_replica_back_in_the_isr_is_dropped_again() -> None:
    plan = next_step((1, 2), (1, 2), st(1, (1, 2, 0)), {0, 1, 2}, controller_epoch=5)
    assert plan.step is Step.SHRINK and plan.state is not None and plan.state.isr == (1, 2)


def test_no_live_target_in_the_isr_waits() -> None:
    plan = next_step((0, 1, 2), (1, 2), st(0, (0, 1, 2)), {0}, controller_epoch=5)
    assert plan.step is Step.WAIT


def test_a_move_that_only_adds_waits_for_the_new_replica_to_join_the_isr() -> None:
    live = {0, 1}
    plan = next_step((0,), (0, 1), st(0, (0,)), live, controller_epoch=5)
    assert (plan.step, plan.replicas, plan.adding, plan.removing) == \
        (Step.EXPAND, (0, 1), (1,), ())
    # RAR = TRS now: the adding replica stored beside it is what keeps the move going
    plan = next_step((0, 1), (0, 1), st(0, (0,)), live, controller_epoch=5, adding=(1,))
    assert (plan.step, plan.replicas, plan.adding, plan.removing) == (Step.WAIT, (0, 1), (1,), ())
    plan = next_step((0, 1), (0, 1), st(0, (0, 1)), live, controller_epoch=5, adding=(1,))
    # in sync: the adding replicas are cleared; leader and ISR stay, so no state write
    assert (plan.step, plan.replicas, plan.adding, plan.removing, plan.state) == \
        (Step.SHRINK, (0, 1), (), (), None)
    assert next_step((0, 1), (0, 1), st(0, (0, 1)), live, controller_epoch=5).step is Step.DONE


def test_an_add_only_move_whose_leader_died_elects_one_from_the_target() -> None:
    plan = next_step((0, 1), (0, 1), st(0, (0, 1)), {1}, controller_epoch=5, adding=(1,))
    assert plan.step is Step.SHRINK and plan.state == PartitionState(
        leader=1, leader_epoch=4, isr=(0, 1), controller_epoch=5, version=7)


def test_a_move_that_only_removes_completes_at_once() -> None:
    live = {0, 1, 2}
    plan = next_step((0, 1, 2), (0, 1), st(0, (0, 1, 2)), live, controller_epoch=5)
    assert (plan.step, plan.replicas, plan.removing) == (Step.SHRINK, (0, 1), (2,))
    assert plan.state == PartitionState(leader=0, leader_epoch=4, isr=(0, 1), controller_epoch=5,
                                        version=7)
    # the removed replica led: leadership moves to the first in-sync target replica
    plan = next_step((0, 1, 2), (1, 2), st(0, (0, 1, 2)), live, controller_epoch=5)
    assert plan.step is Step.SHRINK and plan.state is not None
    assert (plan.state.leader, plan.state.isr) == (1, (1, 2))
    # a kept replica out of sync: Kafka waits for it too
    plan = next_step((0, 1, 2), (0, 1), st(0, (0, 2)), live, controller_epoch=5)
    assert (plan.step, plan.adding, plan.removing) == (Step.WAIT, (), (2,))


def test_a_cancelled_add_only_move_goes_back_to_the_original_replicas() -> None:
    live = {0, 1}
    # (0,) -> (0, 1) expanded, broker 1 still catching up; the cancel targets (0,)
    plan = next_step((0, 1), (0,), st(0, (0,)), live, controller_epoch=5, adding=(1,))
    assert (plan.step, plan.replicas, plan.removing, plan.state) == (Step.SHRINK, (0,), (1,), None)
    assert next_step((0,), (0,), st(0, (0,)), live, controller_epoch=5).step is Step.DONE


def test_a_cancelled_move_in_phase_one_goes_back_to_the_original_replicas() -> None:
    live = {0, 1, 2}
    # (0, 1) -> (1, 2): expanded to (1, 2, 0), adding 2, removing 0; cancelled back to the
    # origin replicas (the current ones but those being added)
    cur, stored = (1, 2, 0), {"adding": (2,), "removing": (0,)}
    assert moving_replicas(cur, (1, 0), (2,)) == ((), (2,))
    plan = next_step(cur, (1, 0), st(0, (0, 1)), live, controller_epoch=5, **stored)
    assert (plan.step, plan.replicas, plan.removing, plan.state) == (Step.SHRINK, (1, 0), (2,), None)
    # the adding replica had joined the ISR: it leaves it
    plan = next_step(cur, (1, 0), st(0, (0, 1, 2)), live, controller_epoch=5, **stored)
    assert plan.step is Step.SHRINK and plan.state is not None
    assert (plan.state.leader, plan.state.isr) == (0, (0, 1))
    # it had even become the leader (after a failure): leadership goes back to an origin one
    plan = next_step(cur, (1, 0), st(2, (0, 1, 2)), live, controller_epoch=5, **stored)
    assert plan.state is not None and (plan.state.leader, plan.state.isr) == (1, (0, 1))
    # an origin replica out of sync: the cancel waits for it, as the move would have
    plan = next_step(cur, (1, 0), st(1, (1, 2)), live, controller_epoch=5, **stored)
    assert (plan.step, plan.adding, plan.removing) == (Step.WAIT, (), (2,))


def test_a_move_retargeted_in_flight_keeps_counting_its_unfinished_replicas_as_adding() -> None:
    # (0,) -> (0, 1) expanded; retargeted to (0, 1, 2): 1 is still being added, and 2 too
    plan = next_step((0, 1), (0, 1, 2), st(0, (0,)), {0, 1, 2}, controller_epoch=5, adding=(1,))
    assert (plan.step, plan.replicas, plan.adding, plan.removing) == \
        (Step.EXPAND, (0, 1, 2), (1, 2), ())
    plan = next_step((0, 1, 2), (0, 1, 2), st(0, (0, 1)), {0, 1, 2}, controller_epoch=5,
                     adding=(1, 2))
    assert plan.step is Step.WAIT


# --- preferred leaders -----------------------------------------------------------------------


def test_preferred_replica_takes_leadership_back_when_alive_and_in_sync() -> None:
    new = elect_preferred(st(1, (0, 1, 2)), (0, 1, 2), {0, 1, 2}, controller_epoch=9)
    assert new is not None and (new.leader, new.leader_epoch, new.isr) == (0, 4, (0, 1, 2))
    assert elect_preferred(st(1, (1, 2)), (0, 1, 2), {0, 1, 2}, controller_epoch=9) is None
    assert elect_preferred(st(1, (0, 1)), (0, 1, 2), {1, 2}, controller_epoch=9) is None
    assert elect_preferred(st(0, (0, 1)), (0, 1, 2), {0, 1, 2}, controller_epoch=9) is None


def test_imbalance_above_the_percentage_triggers_only_that_brokers_partitions() -> None:
    assignments = {("t", p): (p % 3, (p + 1) % 3) for p in range(6)}
    states = {tp: st(r[0], r) for tp, r in assignments.items()}
    states[("t", 0)] = st(1, (0, 1))  # broker 0 leads 1 of its 2 preferred partitions: 50 %
    live = {0, 1, 2}
    assert imbalanced_partitions(assignments, states, live, max_imbalance_pct=10) == [("t", 0)]
    assert imbalanced_partitions(assignments, states, live, max_imbalance_pct=50) == []
    assert imbalanced_partitions(assignments, states, {1, 2}, max_imbalance_pct=10) == []
