"""Appends of concurrent produce requests to one partition, written together.

A keyed request spreads its records over the topic's partitions: one request to an
8-partition topic is 8 appends, each a validation pass, a write(2) and index upkeep
(~45 us of the broker's one core each). Under load the event loop runs several such
requests in one iteration (7 of 8 connections' requests in the keyed benchmark), so
``AppendCoalescer`` holds the batches handed to it until the end of the iteration
(``call_soon``) and appends each partition's batches, from every request, as one
append: one validation pass, one write, one index entry. Each request then gets the
offsets of its own batches, as if appended alone, one after the other.

When the combined append fails (one request's batch is invalid: a timestamp out of
range, a duplicate of an idempotent producer's retry) nothing was written, and each
request's batches are appended alone, so every request gets its own answer.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

from core.broker.types import TopicPartition
from core.errors import FranzError
from core.storage.log import AppendInfo

_BASE_OFFSET_AND_LENGTH = struct.Struct(">qi")  # bytes 0-11 of a v2 batch header
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at 23
_MAX_TIMESTAMP = struct.Struct(">q")  # at 35
_RECORDS_COUNT = struct.Struct(">i")  # at 57
_LOG_OVERHEAD = 12  # base offset + batch length

#: one partition's append: (its data, the required acks) -> AppendInfo (or raises)
AppendNow = Callable[[TopicPartition, bytearray, int], AppendInfo]


class _Pending:
    __slots__ = ("acks", "data", "future")

    def __init__(self, data: bytearray, acks: int, future: asyncio.Future[AppendInfo]) -> None:
        self.data = data
        self.acks = acks
        self.future = future


class AppendCoalescer:
    def __init__(self, append_now: AppendNow) -> None:
        self._append_now = append_now
        self._pending: dict[TopicPartition, list[_Pending]] = {}
        self._scheduled: asyncio.Handle | None = None

    def submit(self, tp: TopicPartition, data: bytearray, acks: int
               ) -> asyncio.Future[AppendInfo]:
        """``data`` appended to ``tp`` at the end of this event-loop iteration."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendInfo] = loop.create_future()
        self._pending.setdefault(tp, []).append(_Pending(data, acks, future))
        if self._scheduled is None:
            self._scheduled = loop.call_soon(self.flush)
        return future

    def flush(self) -> None:
        """Append everything submitted (also called at stop: nothing submitted is lost)."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        pending, self._pending = self._pending, {}
        for tp, items in pending.items():
            start = 0
            while start < len(items):  # runs of the same acks
                end = start + 1
                while end < len(items) and items[end].acks == items[start].acks:
                    end += 1
                self._append_group(tp, items[start:end])
                start = end

    def _append_group(self, tp: TopicPartition, items: list[_Pending]) -> None:
        if len(items) > 1:
            combined = bytearray().join(item.data for item in items)
            try:
                info = self._append_now(tp, combined, items[0].acks)
            except FranzError:
                info = None  # nothing was written: each request's batches alone below
            except BaseException as exc:
                _fail(items, exc)
                return
            if info is not None and not info.duplicate:
                _resolve_split(items, combined, info)
                return
        for item in items:
            try:
                result = self._append_now(tp, item.data, item.acks)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
                if not item.future.done():
                    item.future.set_exception(exc)
                continue
            if not item.future.done():
                item.future.set_result(result)


def _fail(items: list[_Pending], exc: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(exc)


def _resolve_split(items: list[_Pending], combined: bytearray, info: AppendInfo) -> None:
    """Each item's share of ``info``, read from the written (patched) batch headers."""
    pos = 0
    for item in items:
        end = pos + len(item.data)
        first = _BASE_OFFSET_AND_LENGTH.unpack_from(combined, pos)[0]
        last, max_ts, records = first - 1, -1, 0
        while pos < end:
            base, length = _BASE_OFFSET_AND_LENGTH.unpack_from(combined, pos)
            last = base + _LAST_OFFSET_DELTA.unpack_from(combined, pos + 23)[0]
            max_ts = max(max_ts, _MAX_TIMESTAMP.unpack_from(combined, pos + 35)[0])
            records += _RECORDS_COUNT.unpack_from(combined, pos + 57)[0]
            pos += _LOG_OVERHEAD + length
        if not item.future.done():
            item.future.set_result(AppendInfo(
                first_offset=first, last_offset=last, max_timestamp=max_ts,
                log_append_time=info.log_append_time, num_records=records,
                size=len(item.data), log_start_offset=info.log_start_offset))
