"""Kafka's leader election and ISR rules (kafka-internals 2.3, 2.6) as pure functions.

The controller (``core.broker.controller.controller``) applies these decisions with conditional
writes; the partition leader (``core.broker.replica.partition``) uses the ISR rules. Nothing
here does I/O or reads a clock: time is passed in.

| trigger                         | new leader                                  | new ISR                 |
|---------------------------------|---------------------------------------------|-------------------------|
| leader dead / partition offline | first replica in assignment order alive+ISR | old ISR minus the dead  |
| same, no live ISR, unclean      | first alive replica in assignment order     | just the new leader     |
| same, no live ISR, clean        | none: -1, offline; ISR keeps its last member | unchanged               |
| follower dead                   | unchanged                                   | ISR minus it (not last) |
| controlled shutdown of leader   | first alive ISR replica not shutting down   | ISR minus the broker    |
| preferred election / rebalance  | first replica, if alive and in the ISR      | unchanged               |

Every change bumps ``leader_epoch``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from core.broker.metadata.store import PartitionState

NO_LEADER = -1


def elect_on_broker_change(
    state: PartitionState, replicas: Sequence[int], live: Collection[int], *,
    unclean: bool, controller_epoch: int, shutting_down: Collection[int] = (),
) -> PartitionState | None:
    """The new state of a partition after brokers died, came back or are shutting down;
    None when nothing changes. ``live`` excludes nothing: brokers in ``shutting_down``
    are alive but must not lead or stay in the ISR (unless they are the last member)."""
    usable = [r for r in replicas if r in live and r not in shutting_down]
    isr_alive = [r for r in state.isr if r in live and r not in shutting_down]
    leader_ok = state.leader in usable and state.leader in state.isr
    if leader_ok:
        new_isr = tuple(r for r in state.isr if r in isr_alive)
        if new_isr == tuple(state.isr):
            return None
        return _next(state, state.leader, new_isr, controller_epoch)
    isr_candidates = [r for r in replicas if r in isr_alive]
    if isr_candidates:
        leader = isr_candidates[0]
        return _next(state, leader, tuple(r for r in state.isr if r in isr_alive),
                     controller_epoch)
    if unclean and usable:
        return _next(state, usable[0], (usable[0],), controller_epoch)
    if state.leader == NO_LEADER:
        return None  # already offline
    # Offline: the ISR keeps its last member(s), so the replica with the data can return.
    return _next(state, NO_LEADER, tuple(state.isr), controller_epoch)


def preferred_leader(state: PartitionState, replicas: Sequence[int],
                     live: Collection[int]) -> int | None:
    """The preferred replica if it could lead now (alive and in the ISR) and does not."""
    if not replicas:
        return None
    first = replicas[0]
    if first == state.leader or first not in live or first not in state.isr:
        return None
    return first


def imbalanced_partitions(
    assignments: Mapping[tuple[str, int], Sequence[int]],
    states: Mapping[tuple[str, int], PartitionState], live: Collection[int], *,
    max_imbalance_pct: int,
) -> list[tuple[str, int]]:
    """Kafka's auto leader rebalance (``checkAndTriggerAutoLeaderRebalance``): for each
    broker, the share of the partitions it is preferred leader of that it does not lead;
    above ``max_imbalance_pct`` percent, every such partition whose preferred replica
    could lead now (``preferred_leader``) is returned, sorted."""
    preferred_of: dict[int, list[tuple[str, int]]] = {}
    for tp, replicas in assignments.items():
        if replicas:
            preferred_of.setdefault(replicas[0], []).append(tp)
    out: list[tuple[str, int]] = []
    for broker, tps in preferred_of.items():
        if broker not in live:
            continue
        not_led = [tp for tp in tps if tp in states and states[tp].leader != broker]
        if not tps or len(not_led) * 100 <= max_imbalance_pct * len(tps):
            continue
        out += [tp for tp in not_led
                if preferred_leader(states[tp], assignments[tp], live) is not None]
    return sorted(out)


def elect_preferred(state: PartitionState, replicas: Sequence[int], live: Collection[int], *,
                    controller_epoch: int) -> PartitionState | None:
    """The state with the preferred replica as leader (epoch + 1, ISR unchanged), or None
    when it already leads or cannot lead now."""
    leader = preferred_leader(state, replicas, live)
    if leader is None:
        return None
    return _next(state, leader, tuple(state.isr), controller_epoch)


def _next(state: PartitionState, leader: int, isr: tuple[int, ...],
          controller_epoch: int) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr,
                          controller_epoch=controller_epoch, version=state.version)


# --- ISR rules on the leader (kafka-internals 2.3) ----------------------------------------


def is_out_of_sync(*, follower_leo: int, leader_leo: int, last_caught_up_ms: int, now_ms: int,
                   max_lag_ms: int) -> bool:
    """Out of sync <=> not at the leader's LEO and not caught up for ``max_lag_ms``."""
    return follower_leo != leader_leo and now_ms - last_caught_up_ms > max_lag_ms


def can_join_isr(*, follower_leo: int, high_watermark: int, leader_epoch_start: int,
                 alive: bool) -> bool:
    """A non-ISR follower joins when it reached the HW and the start of the leader's
    current epoch, and its broker is alive."""
    return alive and follower_leo >= high_watermark and follower_leo >= leader_epoch_start


def next_last_caught_up_ms(*, fetch_offset: int, leader_leo: int, prev_fetch_leader_leo: int,
                           now_ms: int, prev_fetch_ms: int, last_caught_up_ms: int) -> int:
    """Kafka's ``lastCaughtUpTimeMs`` update on a follower fetch."""
    if fetch_offset >= leader_leo:
        return now_ms
    if fetch_offset >= prev_fetch_leader_leo:
        return max(last_caught_up_ms, prev_fetch_ms)
    return last_caught_up_ms
