"""The internal wire format of consumer-group calls forwarded to the group's coordinator.

A call is an operation of ``ConsumerManager`` (``OPS``) and its keyword arguments, sent
as a JSON object. Values are JSON as they are, except topic-partitions: a list of them
(``partitions``) travels as ``[topic, partition]`` pairs, a map keyed by them
(``offsets``, ``timestamps``) as ``[topic, partition, value]`` triples (a commit's value
is ``[offset, metadata]``).

A result is JSON (an absent result is an empty body), except that of ``poll``, which
carries the fetched batches as they are on disk:

    int32 n | n bytes JSON {"batches": [[topic, partition, size], ...],
                             "chunks": [[batch index, lo, hi], ...]} | the batches

so the caller renders them exactly as it renders batches it read itself. Both sides run
the same franz version; the format is not an external contract.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

import orjson

from core.broker.consumer.instance import ConsumerInstanceInfo, PartitionChunk, PolledRecords
from core.broker.group.group import GroupDescription, GroupState, GroupSummary, MemberDescription
from core.broker.replica.batch_cache import BatchCache, CachedBatch
from core.broker.types import TopicPartition
from core.errors import InvalidRequestError
from core.storage.batch import parse_header

_LEN = struct.Struct(">i")

#: Operations a broker serves for groups it coordinates, and whether the call names a
#: group (all but ``list_groups``, which each broker answers for its own groups).
OPS = frozenset({
    "create", "delete", "get", "subscribe", "subscription", "unsubscribe", "assign",
    "assignment", "seek", "seek_to_timestamp", "seek_to_beginning", "seek_to_end", "poll",
    "commit", "committed", "list_groups", "describe_group", "group_offsets", "reset_offsets",
    "delete_group",
})
_TP_LISTS = frozenset({"partitions"})
_TP_MAPS = frozenset({"offsets", "timestamps"})
_STR = (str,)
_OPT_STR = (str, type(None))
_OPT_INT = (int, type(None))
#: The JSON type of every argument an operation may take (topic-partition arguments are
#: checked as they are decoded); anything else is an invalid request, never a 500.
_ARG_TYPES: dict[str, tuple[type, ...]] = {
    "group": _STR, "instance": _STR, "name": _OPT_STR, "format": _STR,
    "auto_offset_reset": _STR, "auto_commit": (bool,), "fetch_min_bytes": (int,),
    "request_timeout_ms": _OPT_INT, "client_host": _STR, "topics": (list, type(None)),
    "pattern": _OPT_STR, "timeout_ms": _OPT_INT, "max_bytes": _OPT_INT,
    "owner": _STR, "principal": _OPT_STR,
}


# --- calls ---------------------------------------------------------------------------

def encode_call(op: str, kwargs: Mapping[str, Any]) -> bytes:
    out: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in _TP_LISTS and value is not None:
            value = [[tp[0], tp[1]] for tp in value]
        elif name in _TP_MAPS and value is not None:
            value = [[tp[0], tp[1], _plain(v)] for tp, v in value.items()]
        out[name] = value
    return orjson.dumps(out)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def decode_call(op: str, body: bytes) -> dict[str, Any]:
    """The keyword arguments of ``op``; InvalidRequestError for anything malformed."""
    if op not in OPS:
        raise InvalidRequestError(f"unknown group operation {op!r}")
    try:
        raw = orjson.loads(body or b"{}")
        if not isinstance(raw, dict):
            raise TypeError("the arguments are not an object")
        out: dict[str, Any] = {}
        for name, value in raw.items():
            if name in _TP_LISTS:
                if value is not None:
                    value = [TopicPartition(_str(t), _int(p)) for t, p in value]
            elif name in _TP_MAPS:
                if value is not None:
                    value = {TopicPartition(_str(t), _int(p)): _map_value(v)
                             for t, p, v in value}
            else:
                kinds = _ARG_TYPES.get(name)
                if kinds is None:
                    raise TypeError(f"unknown argument {name!r}")
                if not isinstance(value, kinds) or (int in kinds and isinstance(value, bool)
                                                    and bool not in kinds):
                    raise TypeError(f"argument {name!r} has the wrong type")
                if name == "topics" and isinstance(value, list):  # else None
                    value = [_str(t) for t in value]
            out[name] = value
        return out
    except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
        raise InvalidRequestError(f"malformed arguments of {op}: {exc}") from exc


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a topic name is not a string")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("a partition, offset or timestamp is not an integer")
    return value


def _map_value(value: Any) -> int | tuple[int, str]:
    """An offset or timestamp, or a commit's ``[offset, metadata]``."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
        return (_int(value[0]), value[1])
    return _int(value)


async def serve_call(manager: Any, op: str, body: bytes) -> bytes:
    """Run ``op`` on this broker's ``ConsumerManager``; the encoded result."""
    kwargs = decode_call(op, body)
    method: Callable[..., Any] = getattr(manager, op)
    try:
        result = method(**kwargs)
    except TypeError as exc:  # wrong or missing arguments
        raise InvalidRequestError(f"bad arguments of {op}: {exc}") from exc
    if isinstance(result, Awaitable):
        result = await result
    return encode_result(op, result)


# --- results -------------------------------------------------------------------------

def encode_result(op: str, result: Any) -> bytes:
    if result is None:
        return b""
    if op == "poll":
        return _encode_polled(result)
    return orjson.dumps(_jsonable(result))


def _jsonable(value: Any) -> Any:
    if isinstance(value, ConsumerInstanceInfo | GroupDescription | GroupSummary):
        return _jsonable(asdict(value))
    if isinstance(value, GroupState):
        return value.name
    if isinstance(value, dict):
        if value and all(isinstance(k, tuple) for k in value):  # keyed by topic-partition
            return [[k[0], k[1], _jsonable(v)] for k, v in value.items()]
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def decode_result(op: str, body: bytes, batches: BatchCache) -> Any:
    if not body:
        return {} if op in ("committed", "group_offsets") else None
    if op == "poll":
        return _decode_polled(body, batches)
    raw = orjson.loads(body)
    if op in ("create", "get"):
        return ConsumerInstanceInfo(**raw)
    if op == "assignment":
        return [TopicPartition(t, p) for t, p in raw]
    if op in ("committed", "group_offsets"):
        return {TopicPartition(t, p): _tuple(v) for t, p, v in raw}
    if op == "list_groups":
        return [GroupSummary(**{**g, "state": GroupState[g["state"]]}) for g in raw]
    if op == "describe_group":
        members = tuple(MemberDescription(**{
            **m, "topics": tuple(m["topics"]),
            "assignment": tuple(TopicPartition(t, p) for t, p in m["assignment"])})
            for m in raw["members"])
        return GroupDescription(**{**raw, "state": GroupState[raw["state"]],
                                   "members": members})
    return raw


def _encode_polled(polled: PolledRecords) -> bytes:
    index: dict[int, int] = {}
    batches: list[list[Any]] = []
    raws: list[bytes] = []
    chunks = []
    for tp, batch, lo, hi in polled.chunks:
        i = index.get(id(batch))
        if i is None:
            i = index[id(batch)] = len(batches)
            batches.append([tp[0], tp[1], len(batch.raw)])
            raws.append(batch.raw)
        chunks.append([i, lo, hi])
    header = orjson.dumps({"batches": batches, "chunks": chunks})
    return b"".join([_LEN.pack(len(header)), header, *raws])


def _decode_polled(body: bytes, cache: BatchCache) -> PolledRecords:
    (n,) = _LEN.unpack_from(body, 0)
    header = orjson.loads(body[_LEN.size:_LEN.size + n])
    pos = _LEN.size + n
    batches: list[tuple[TopicPartition, CachedBatch]] = []
    for topic, partition, size in header["batches"]:
        raw = body[pos:pos + size]
        pos += size
        batches.append((TopicPartition(topic, partition),
                        cache.batch(topic, partition, raw, 0, parse_header(raw, 0))))
    chunks: list[PartitionChunk] = [(batches[i][0], batches[i][1], lo, hi)
                                    for i, lo, hi in header["chunks"]]
    return PolledRecords(chunks)
