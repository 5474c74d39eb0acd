"""The cluster the life test runs, its topics, and the walk's knobs."""

from __future__ import annotations

import os
from dataclasses import dataclass

SESSION_MS = 4000  # zookeeper.session.timeout.ms: a SIGSTOP past it expires the session
LAG_MS = 2000  # replica.lag.time.max.ms
OFFSETS_PARTITIONS = 3

BROKER_OVERRIDES = [
    f"zookeeper.session.timeout.ms={SESSION_MS}",
    f"replica.lag.time.max.ms={LAG_MS}",
    "replica.fetch.backoff.ms=200",
    "replica.socket.timeout.ms=10000",
    "request.timeout.ms=8000",
    "min.insync.replicas=2",
    "log.flush.scheduler.interval.ms=200",
    f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    # __consumer_offsets compacts for real: tiny segments, an eager cleaner
    "offsets.topic.segment.bytes=2048",
    "log.cleaner.backoff.ms=100",
    "log.cleaner.min.cleanable.ratio=0.01",
    "log.retention.check.interval.ms=1000",
    "idempotency.topic.num.partitions=3",
    "idempotency.key.claim.timeout.ms=10000",
    # an acknowledged member stays until deleted: nothing expires within a run
    "consumer.instance.timeout.ms=86400000",
    "auto.create.topics.enable=false",
]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    kind: str  # "data" (delete, kept whole), "compact", "retain" (small retention.bytes)
    configs: tuple[tuple[str, str], ...] = ()


DATA = TopicSpec("life-data", 3, "data")
COMPACT = TopicSpec("life-compact", 2, "compact", (
    ("cleanup.policy", "compact"), ("segment.bytes", "1024"),
    ("min.cleanable.dirty.ratio", "0.01"), ("min.compaction.lag.ms", "0")))
RETAIN = TopicSpec("life-retain", 2, "retain", (
    ("retention.bytes", "500"), ("segment.bytes", "300")))
TOPICS = (DATA, COMPACT, RETAIN)
INTERNAL_TOPICS = ("__consumer_offsets", "__franz_idempotency")

COMPACT_KEYS = 8  # keys k0..k7 on the compacted topic: most writes supersede one
GROUPS_WANTED = 2  # consumer groups, on different __consumer_offsets partitions
MAX_MEMBERS = 4  # instances per group at most

HEAL_S = 90.0  # a step's faults undone, the cluster must be whole again within this
RETRY_S = 60.0  # how long one client operation retries "try again" answers
CLIENT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class WalkKnobs:
    seed: int
    steps: int | None  # None: until ``seconds``
    seconds: float | None  # None: until ``steps``
    faults: tuple[str, ...] | None = None  # only these fault kinds (None: all)


def knobs(*, seed: int, steps: int | None, seconds: float | None) -> WalkKnobs:
    """``FRANZ_LIFE_SEED``, ``FRANZ_LIFE_STEPS`` and ``FRANZ_LIFE_SECONDS`` override
    the caller's values (an empty variable is no override); ``FRANZ_LIFE_FAULTS``
    (comma-separated kinds) keeps only those faults, to look at one bug at a time."""
    env = os.environ
    if env.get("FRANZ_LIFE_SEED"):
        seed = int(env["FRANZ_LIFE_SEED"])
    if env.get("FRANZ_LIFE_STEPS"):
        steps = int(env["FRANZ_LIFE_STEPS"])
        if not env.get("FRANZ_LIFE_SECONDS"):
            seconds = None
    if env.get("FRANZ_LIFE_SECONDS"):
        seconds = float(env["FRANZ_LIFE_SECONDS"])
        if not env.get("FRANZ_LIFE_STEPS"):
            steps = None
    if steps is None and seconds is None:
        raise ValueError("the walk needs a number of steps or of seconds")
    faults = tuple(f.strip() for f in env.get("FRANZ_LIFE_FAULTS", "").split(",") if f.strip())
    return WalkKnobs(seed, steps, seconds, faults or None)
