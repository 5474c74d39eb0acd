"""Every HTTP call of the walk, classified.

An answer is one of:

- ``ok``: any status the caller then judges (2xx, or a 4xx it expects);
- ``retry``: "try again" - franz renders Kafka's retriable errors (NOT_COORDINATOR,
  LEADER_NOT_AVAILABLE, NOT_LEADER, not enough replicas, timeouts) as Confluent's
  500 / 50003, a broker still loading as 503 / 50302, an Idempotency-Key in use as
  409 / 409; retried, bounded in count and time;
- ``unavailable``: no answer (connection refused or dropped, timeout): a broker is down
  or paused; retried elsewhere, bounded;
- ``server_error``: any other 5xx - a violation, always.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import Violation
from .settings import CLIENT_TIMEOUT_S, RETRY_S

JSON_V2 = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"
RETRIABLE_CODES = frozenset({50003, 50302})


@dataclass
class Answer:
    kind: str  # ok | retry | unavailable
    status: int | None
    body: Any
    headers: dict[str, str]
    error: str = ""

    @property
    def code(self) -> int | None:
        return self.body.get("error_code") if isinstance(self.body, dict) else None

    def brief(self) -> str:
        if self.status is None:
            return f"no answer ({self.error})"
        return f"{self.status} {str(self.body)[:300]}"


class Http:
    """One connection pool; counts answers by class; raises on a server error."""

    def __init__(self) -> None:
        self.client = httpx.Client(timeout=CLIENT_TIMEOUT_S)
        self.counts: Counter[str] = Counter()
        self.requests = 0

    def close(self) -> None:
        self.client.close()

    def send(self, method: str, url: str, *, timeout: float | None = None,
             **kw: Any) -> Answer:
        self.requests += 1
        try:
            r = self.client.request(method, url, timeout=timeout or CLIENT_TIMEOUT_S, **kw)
        except httpx.HTTPError as exc:
            self.counts[f"unavailable:{type(exc).__name__}"] += 1
            return Answer("unavailable", None, None, {}, f"{type(exc).__name__}: {exc}")
        try:
            body = r.json() if r.content else None
        except ValueError:
            body = r.text
        a = Answer("ok", r.status_code, body, dict(r.headers))
        if r.status_code >= 500:
            if a.code in RETRIABLE_CODES:
                a.kind = "retry"
                self.counts[f"retry:{r.status_code}/{a.code}"] += 1
            else:
                self.counts[f"5xx:{r.status_code}/{a.code}"] += 1
                raise Violation("5xx", f"{method} {url} -> {a.brief()}")
        elif r.status_code == 409 and a.code == 409:
            a.kind = "retry"  # an Idempotency-Key request still running
            self.counts["retry:409/409"] += 1
        return a

    def until(self, what: str, attempt: Callable[[], Answer | None], *,
              budget_s: float = RETRY_S, pause_s: float = 0.3) -> Answer:
        """``attempt()`` again while it answers ``retry`` or ``unavailable`` (or None:
        the caller's own "not yet"), at most ``budget_s``; then ``not-healed``."""
        deadline = time.monotonic() + budget_s
        last: Answer | None = None
        tries = 0
        while True:
            tries += 1
            got = attempt()
            if got is not None and got.kind == "ok":
                return got
            last = got or last
            if time.monotonic() >= deadline:
                raise Violation("not-healed", f"{what}: still failing after {tries} tries in "
                                f"{budget_s:.0f} s; last: {last.brief() if last else 'none'}")
            time.sleep(pause_s)
