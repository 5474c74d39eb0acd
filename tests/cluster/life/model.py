"""What the walk was told: the model the checker holds the cluster to.

- per partition, every acknowledged record: offset -> (key, value); values are unique
  across the run, so "exactly once" is "the value appears at that offset and nowhere
  else";
- every value ever sent (acknowledged or not) with its topic and key: an unacknowledged
  one may be in the log (once), a value never sent must not be;
- Idempotency-Key requests: the request and its first full answer, for exact retries;
- per group: the committed offsets (the highest acknowledged commit; a commit without an
  answer leaves two possible values until a read settles it) and the members (created
  and not deleted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]


@dataclass
class KeyedRequest:
    key: str
    topic: str
    body: bytes
    answer: list[tuple[int, int]]  # (partition, offset) per record, the first full answer


@dataclass
class Group:
    name: str
    members: set[str] = field(default_factory=set)
    committed: dict[TP, int] = field(default_factory=dict)  # next offset to read
    maybe: dict[TP, set[int]] = field(default_factory=dict)  # unanswered commits
    seen_max: dict[TP, int] = field(default_factory=dict)  # highest value ever read back
    uncertain: set[str] = field(default_factory=set)  # created or deleted without an answer
    next_member: int = 0


@dataclass
class Model:
    acked: dict[TP, dict[int, tuple[str | None, str]]] = field(default_factory=dict)
    sent: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # value -> (topic, key)
    where: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # acked value -> place
    keyed: list[KeyedRequest] = field(default_factory=list)
    groups: dict[str, Group] = field(default_factory=dict)
    next_value: int = 0
    next_key_request: int = 0

    def new_value(self, topic: str, key: str | None) -> str:
        self.next_value += 1
        v = f"v{self.next_value}"
        self.sent[v] = (topic, key)
        return v

    def ack(self, topic: str, partition: int, offset: int, key: str | None, value: str) -> None:
        seen = self.acked.setdefault((topic, partition), {})
        old = seen.get(offset)
        if old is not None and old[1] != value:
            from .errors import Violation
            raise Violation("offset-reused", f"{topic}-{partition}@{offset} acknowledged for "
                            f"{old[1]} and again for {value}")
        placed = self.where.get(value)
        if placed is not None and placed != (topic, partition, offset):
            from .errors import Violation
            raise Violation("acked-twice", f"{value} acknowledged at {placed} and at "
                            f"{(topic, partition, offset)}")
        seen[offset] = (key, value)
        self.where[value] = (topic, partition, offset)

    def latest_by_key(self, tp: TP) -> dict[str, tuple[int, str]]:
        out: dict[str, tuple[int, str]] = {}
        for off, (k, v) in sorted(self.acked.get(tp, {}).items()):
            if k is not None:
                out[k] = (off, v)
        return out

    def commit_acked(self, group: str, tp: TP, value: int) -> None:
        g = self.groups[group]
        g.committed[tp] = value
        g.maybe.pop(tp, None)

    def commit_unknown(self, group: str, tp: TP, value: int) -> None:
        self.groups[group].maybe.setdefault(tp, set()).add(value)

    def summary(self) -> dict[str, Any]:
        return {
            "acked_records": sum(len(v) for v in self.acked.values()),
            "values_sent": len(self.sent),
            "keyed_requests": len(self.keyed),
            "groups": {g.name: {"members": sorted(g.members),
                                "committed": {f"{t}-{p}": o for (t, p), o in
                                              sorted(g.committed.items())}}
                       for g in self.groups.values()},
        }
