"""Ids and offsets with their own names, so signatures say which number is which."""

from __future__ import annotations

from typing import NewType

Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)
BrokerId = NewType("BrokerId", int)
TimestampMs = NewType("TimestampMs", int)

NO_TIMESTAMP = -1
NO_EPOCH = -1
