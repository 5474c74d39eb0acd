"""What every step is handed: the cluster, the model, the seeded random source, the
counts, and whether a fault is in force (then a client operation may give up)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .cluster import Cluster
from .errors import Violation
from .http import Answer, Http
from .model import Model

DEGRADED_BUDGET_S = 25.0  # a client operation during a fault retries this long, then gives up


@dataclass
class Ctx:
    cluster: Cluster
    http: Http
    model: Model
    rng: random.Random
    log: Callable[[str], None]
    counts: Counter[str] = field(default_factory=Counter)
    degraded: bool = False  # a fault is in force: operations may give up
    pending_keyed: list[Any] = field(default_factory=list)  # Idempotency-Key requests unanswered

    def broker(self) -> Any:
        live = self.cluster.live()
        return live[self.rng.randrange(len(live))]

    def until(self, what: str, attempt: Callable[[], Answer | None]) -> Answer | None:
        """``http.until``; during a fault an operation that never got through gives up
        (None) after ``DEGRADED_BUDGET_S`` instead of being a violation."""
        if not self.degraded:
            return self.http.until(what, attempt)
        try:
            return self.http.until(what, attempt, budget_s=DEGRADED_BUDGET_S)
        except Violation as exc:
            if exc.kind != "not-healed":
                raise
            self.counts["gave-up-during-fault"] += 1
            return None
