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

From Fetch v13 (KIP-516) a request names topics by id, and a session made by such a
request is keyed by (topic id, partition), as Kafka's: ``forgotten_topics_data`` names
ids too, and each partition keeps the name its id had when it was added (None for an id
no topic had; looked up again on each fetch until one has it). A session made by names
presented at v13+, or one made by ids presented below v13, is
FETCH_SESSION_TOPIC_ID_ERROR (106). A partition whose topic was deleted and created
again under the same name keeps the old id, so it is never served the new topic's
records: the fetch answers INCONSISTENT_TOPIC_ID for it (the handler checks).
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
ZERO_UUID = bytes(16)
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_SESSION_PARTITIONS = 100_000


@dataclass(slots=True)
class SessionPartition:
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    name: str | None = None  # the topic's name (None: an id no topic has, v13+)
    topic_id: bytes = ZERO_UUID  # v13+: the id the client named
    last_sent: tuple[int, int, int] | None = None  # (hw, last stable, log start) answered


@dataclass(slots=True)
class FetchSession:
    session_id: int
    owner: str  # the principal that made it
    epoch: int = 1  # the epoch the next incremental request must carry
    # keyed by (name, partition), or (topic id, partition) when ``uses_topic_ids``
    partitions: dict[tuple[Any, int], SessionPartition] = field(default_factory=dict)
    used_at: float = 0.0
    uses_topic_ids: bool = False  # made by a v13+ request: every later one must be v13+


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

    def create(self, owner: str, partitions: dict[tuple[Any, int], SessionPartition], *,
               uses_topic_ids: bool = False) -> FetchSession | None:
        """A new session, or None when every slot is taken by a session used recently."""
        now = time.monotonic()
        if len(self._sessions) >= self.slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.used_at < self.eviction_s:
                return None
            del self._sessions[oldest_id]
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(sid, owner, partitions=partitions, used_at=now,
                               uses_topic_ids=uses_topic_ids)
        self._sessions[sid] = session
        return session

    def get(self, session_id: int, owner: str, epoch: int, *, uses_topic_ids: bool = False
            ) -> FetchSession:
        """The session for an incremental request at ``epoch`` (by topic ids or not, as
        the request's version); SessionError otherwise, in Kafka's order."""
        session = self._sessions.get(session_id)
        if session is None or session.owner != owner:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            raise SessionError(FETCH_SESSION_TOPIC_ID_ERROR)
        session.used_at = time.monotonic()
        self._sessions.move_to_end(session_id)
        return session

    def close(self, session_id: int, owner: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.owner == owner:
            del self._sessions[session_id]


Resolve = Callable[[bytes], "str | None"]  # topic id -> its topic's name now, or None


def partitions_of(req: dict[str, Any], resolve: Resolve | None = None
                  ) -> dict[tuple[Any, int], SessionPartition]:
    """The request's partitions, keyed by (name, partition); with ``resolve`` (v13+) by
    (topic id, partition), each with the name its id has now."""
    out: dict[tuple[Any, int], SessionPartition] = {}
    for topic in req["topics"]:
        if resolve is None:
            key, name, topic_id = topic["topic"], topic["topic"], ZERO_UUID
        else:
            key = topic_id = bytes(topic["topic_id"])
            name = resolve(topic_id)
        for part in topic["partitions"]:
            out[(key, part["partition"])] = SessionPartition(
                int(part["fetch_offset"]), int(part["partition_max_bytes"]),
                int(part["current_leader_epoch"]), name, topic_id)
    return out


def apply_incremental(session: FetchSession, req: dict[str, Any],
                      resolve: Resolve | None = None) -> None:
    """The request's changes: partitions added or updated, forgotten ones removed. A
    partition already in the session keeps the name it was added with (Kafka's
    CachedPartition), so an id whose topic was recreated stays the old topic's."""
    for key, sp in partitions_of(req, resolve).items():
        old = session.partitions.get(key)
        if old is not None:
            sp.last_sent = old.last_sent
            if old.name is not None:
                sp.name = old.name
        session.partitions[key] = sp
    for topic in req["forgotten_topics_data"] or ():
        forgotten = topic["topic"] if resolve is None else bytes(topic["topic_id"])
        for p in topic["partitions"]:
            session.partitions.pop((forgotten, p), None)
    if len(session.partitions) > MAX_SESSION_PARTITIONS:
        raise SessionError(INVALID_FETCH_SESSION_EPOCH)
    if resolve is not None:  # ids no topic had when added: one may have it now
        for sp in session.partitions.values():
            if sp.name is None:
                sp.name = resolve(sp.topic_id)
