"""Backend-independent rules of the metadata store, shared by ``embedded_store`` and
``zk_store`` so both backends accept and refuse the same writes.

Pure functions only: they decide, the stores apply. Nothing here touches a database or
ZooKeeper.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence

from core.broker.errors import InvalidPartitionsError, InvalidReplicaAssignmentError
from core.broker.metadata.store import PartitionState


def new_cluster_id() -> str:
    """A random UUID as 22 characters of URL-safe base64, never starting with '-'
    (Kafka's ``Uuid.randomUuid`` rule, so the id is never mistaken for a CLI flag)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def partitions_to_add(
    name: str, current: Mapping[int, tuple[int, ...]], wanted: Mapping[int, Sequence[int]]
) -> dict[int, tuple[int, ...]]:
    """The partitions of ``wanted`` that topic ``name`` (now ``current``) lacks, with their
    replicas. Existing partitions must appear in ``wanted`` with unchanged replicas:
    ``InvalidPartitionsError`` if one is missing, ``InvalidReplicaAssignmentError`` if
    one's replicas differ."""
    missing = sorted(set(current) - set(wanted))
    if missing:
        raise InvalidPartitionsError(
            f"Topic '{name}': partitions cannot be removed (missing {missing})")
    changed = sorted(p for p, r in current.items() if tuple(wanted[p]) != r)
    if changed:
        raise InvalidReplicaAssignmentError(
            f"Topic '{name}': replicas of existing partitions {changed} cannot change here")
    return {p: tuple(r) for p, r in wanted.items() if p not in current}


def check_states_within(
    states: Mapping[int, PartitionState], partitions: Mapping[int, object], *, what: str
) -> None:
    """``ValueError`` if ``states`` names a partition that ``partitions`` (the ones being
    created by ``what``) does not."""
    stray = sorted(set(states) - set(partitions))
    if stray:
        raise ValueError(f"{what}: states for partitions {stray} not being created")
