"""Kafka's default (rack-unaware) replica assignment, as a pure function.

For partition p the first replica is broker ``(p + start) % n``; the others follow at
a shift that grows every n partitions, so no two replicas of a partition share a
broker and leaders and followers spread evenly (Kafka ``AdminUtils.assignReplicasToBrokers``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from core.broker.errors import InvalidPartitionsError, InvalidReplicationFactorError


def assign_replicas(
    brokers: Sequence[int], partitions: int, replication_factor: int, *,
    first_partition: int = 0, start_index: int | None = None, shift: int | None = None,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    if partitions < 1:
        raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"Replication factor must be larger than 0, got {replication_factor}")
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}")
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index
    next_shift = rng.randrange(n) if shift is None else shift
    out: dict[int, tuple[int, ...]] = {}
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (next_shift + j) % (n - 1)) % n])
        out[p] = tuple(replicas)
    return out
