"""Fetch sessions (KIP-227): a consumer fetching many partitions sends them once, then
only what changed, and is answered only what changed.

    session_id 0, epoch 0     full fetch; a new session is made (when a slot is free)
    session_id 0, epoch -1    full fetch, no session
    session_id S, epoch N > 0 incremental: the request's partitions are added or updated,
                              ``forgotten_topics_data`` removed; the answer holds the
                              partitions with records, an error, or new offsets
    session_id S, epoch 0     session S is closed and a new full one made
    session_id S, epoch -1    session S is closed; a full fetch without a session

An unknown session id answers FETCH_SESSION_ID_NOT_FOUND (70), a wrong epoch
INVALID_FETCH_SESSION_EPOCH (71); the client then starts a full fetch. Sessions are
bounded (``max.incremental.fetch.session.cache.slots``, Kafka's 1000) and a session
unused for ``min.incremental.fetch.session.eviction.ms`` (120 s) may be evicted for a new
one (least recently used first). Each belongs to the connection's principal: another
principal presenting its id gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_SESSION_PARTITIONS = 100_000


@dataclass(slots=True)
class SessionPartition:
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_sent: tuple[int, int, int] | None = None  # (hw, last stable, log start) answered


@dataclass(slots=True)
class FetchSession:
    session_id: int
    owner: str  # the principal that made it
    epoch: int = 1  # the epoch the next incremental request must carry
    partitions: dict[tuple[str, int], SessionPartition] = field(default_factory=dict)
    used_at: float = 0.0


class SessionError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class FetchSessionCache:
    def __init__(self, *, slots: int = 1000, eviction_s: float = 120.0) -> None:
        self.slots = slots
        self.eviction_s = eviction_s
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, owner: str, partitions: dict[tuple[str, int], SessionPartition]
               ) -> FetchSession | None:
        """A new session, or None when every slot is taken by a session used recently."""
        now = time.monotonic()
        if len(self._sessions) >= self.slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.used_at < self.eviction_s:
                return None
            del self._sessions[oldest_id]
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(sid, owner, partitions=partitions, used_at=now)
        self._sessions[sid] = session
        return session

    def get(self, session_id: int, owner: str, epoch: int) -> FetchSession:
        """The session for an incremental request at ``epoch``; SessionError otherwise."""
        session = self._sessions.get(session_id)
        if session is None or session.owner != owner:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        session.used_at = time.monotonic()
        self._sessions.move_to_end(session_id)
        return session

    def close(self, session_id: int, owner: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.owner == owner:
            del self._sessions[session_id]


def partitions_of(req: dict[str, Any]) -> dict[tuple[str, int], SessionPartition]:
    out: dict[tuple[str, int], SessionPartition] = {}
    for topic in req["topics"]:
        for part in topic["partitions"]:
            out[(topic["topic"], part["partition"])] = SessionPartition(
                int(part["fetch_offset"]), int(part["partition_max_bytes"]),
                int(part["current_leader_epoch"]))
    return out


def apply_incremental(session: FetchSession, req: dict[str, Any]) -> None:
    """The request's changes: partitions added or updated, forgotten ones removed."""
    for key, sp in partitions_of(req).items():
        old = session.partitions.get(key)
        if old is not None:
            sp.last_sent = old.last_sent
        session.partitions[key] = sp
    for topic in req["forgotten_topics_data"] or ():
        for p in topic["partitions"]:
            session.partitions.pop((topic["topic"], p), None)
    if len(session.partitions) > MAX_SESSION_PARTITIONS:
        raise SessionError(INVALID_FETCH_SESSION_EPOCH)
