"""When a partition log should be fsynced: Kafka's ``flush.messages`` / ``flush.ms``.

Kafka's defaults never fsync on a schedule: durability comes from replication plus the
fsync that follows every segment roll and clean shutdown. A topic may opt in:

- ``flush.messages = N``: fsync once ``N`` or more messages were appended since the
  last flush;
- ``flush.ms = N``: fsync once ``N`` ms passed since the last flush (and there is
  something to flush).

A value of ``None``, a negative number or Java's ``Long.MAX_VALUE`` means "never". The
decision is pure (time passed in); ``LogManager.flush_dirty_logs`` applies it.
"""

from __future__ import annotations

from typing import Protocol

NEVER = 2**63 - 1
"""Java's Long.MAX_VALUE, Kafka's "never flush" default for both settings."""


class _FlushConfig(Protocol):
    @property
    def flush_messages(self) -> int | None: ...

    @property
    def flush_ms(self) -> int | None: ...


class FlushableLog(Protocol):
    """What the flush decision reads from a log (``PartitionLog`` satisfies it)."""

    @property
    def config(self) -> _FlushConfig: ...

    @property
    def unflushed_messages(self) -> int: ...

    @property
    def last_flush_ms(self) -> int: ...


def flush_due(log: FlushableLog, now_ms: int) -> bool:
    """True if ``log`` has unflushed messages and either flush rule says it is time."""
    unflushed = log.unflushed_messages
    if unflushed <= 0:
        return False
    by_count = _enabled(log.config.flush_messages)
    if by_count is not None and unflushed >= by_count:
        return True
    by_time = _enabled(log.config.flush_ms)
    return by_time is not None and now_ms - log.last_flush_ms >= by_time


def _enabled(value: int | None) -> int | None:
    """The threshold, or None when the setting means "never"."""
    if value is None or value < 0 or value >= NEVER:
        return None
    return value
