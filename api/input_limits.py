"""Limits on what one request may ask for (docs/limits.md, "Input validation").

Every number a client sends is held to the range of the Kafka field it ends up in
(offsets and timestamps are int64, partition ids int32), so an out-of-range value is a
4xx naming the field instead of an encoder failing deep down (a 500). The ranges are
pydantic constraints (``Annotated`` types below): they ride on the validation the
routes already do, in pydantic's Rust core, with no per-record Python work.

Also here: the record count of one produce request and the nesting depth of JSON
bodies, both checked on the raw bytes before per-record work starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field
from pydantic_core import from_json

from api.errors import ApiError, ErrorCode
from core.json_depth import json_depth_exceeds as depth_exceeds

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
#: Largest offset a client may name (seek, commit, reset): a v2 commit stores
#: ``offset + 1``, which must still fit Kafka's int64.
MAX_OFFSET = 2**63 - 2
#: Records in one produce request (v2 and v3).
MAX_RECORDS_PER_REQUEST = 100_000
#: Nesting depth of a JSON request body (the outermost object or array is level 1).
MAX_JSON_DEPTH = 64

#: An offset a client names: 0 .. 2^63-2.
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]
#: A partition id in a request body: int32. Negative ids name no partition (404, as
#: before); ids past int32 cannot exist and are refused (422).
PartitionId = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
#: Epoch milliseconds: 0 .. 2^63-1 (Kafka's int64 timestamp, -1 being "none").
Timestamp = Annotated[int, Field(ge=0, le=INT64_MAX)]
#: A count, size or wait in a request: int32, as Kafka's own are.
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]


# --- records per produce request ---------------------------------------------------------


def too_many_records(count: int | None = None, *, code: int = ErrorCode.UNPROCESSABLE_ENTITY
                     ) -> ApiError:
    """422: the request carries more than MAX_RECORDS_PER_REQUEST records."""
    got = f" (got {count})" if count is not None else ""
    return ApiError(
        422, code,
        f"records: at most {MAX_RECORDS_PER_REQUEST} records per produce request{got}; "
        "split the request",
    )


def may_exceed_record_limit(body: bytes) -> bool:
    """False when ``body`` certainly holds at most MAX_RECORDS_PER_REQUEST records (it
    has fewer commas than that: one C-level count); True means: count them."""
    return body.count(b",") >= MAX_RECORDS_PER_REQUEST


def prefix_exceeds_record_limit(body: bytes, rows_of: Callable[[Any], Any]) -> bool:
    """True when a prefix of ``body`` already holds more than MAX_RECORDS_PER_REQUEST
    records (``rows_of(document)``: the records list of a parsed document, or None).

    A request with a million tiny records must not be parsed whole (hundreds of ms of
    parsing and garbage collection on the event loop) just to be refused. A body of
    1 MiB or more has its first 16 KiB parsed as partial JSON
    (``pydantic_core.from_json(allow_partial=True)``) to learn the size of a record;
    when the body could hold more than the limit of such records, a prefix long enough
    for a little more than the limit is parsed and its complete records counted. A
    smaller body costs nothing here (parsing it whole is cheap). False means "not
    shown": the caller counts the whole body (records of very uneven sizes, or not
    that many)."""
    if len(body) < _LARGE:
        return False
    seen = _complete_rows(body[:_SAMPLE], rows_of)
    if seen < 1:
        return False
    cut = _SAMPLE * (MAX_RECORDS_PER_REQUEST + 2) * 11 // (10 * seen) + 4096
    return cut < len(body) and _complete_rows(body[:cut], rows_of) > MAX_RECORDS_PER_REQUEST


_LARGE = 1 << 20
_SAMPLE = 1 << 14


def _complete_rows(prefix: bytes, rows_of: Callable[[Any], Any]) -> int:
    """Records of a body's prefix that are whole (the last one may be cut short)."""
    try:
        rows = rows_of(from_json(prefix, allow_partial=True))
    except ValueError:
        return 0
    return len(rows) - 1 if type(rows) is list else 0


# --- JSON nesting depth ------------------------------------------------------------------

def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON text ``body`` nests deeper than ``limit`` (brackets inside
    strings do not count; ``core.json_depth``)."""
    return depth_exceeds(body, limit)


def too_deep() -> ApiError:
    return ApiError(
        400, ErrorCode.BAD_REQUEST,
        f"Malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels",
    )


def check_json_depth(body: bytes) -> None:
    """400 / 400 when ``body`` nests deeper than MAX_JSON_DEPTH."""
    if json_depth_exceeds(body):
        raise too_deep()


# --- waits -------------------------------------------------------------------------------

#: ``consumer.request.timeout.max.ms``'s declared default.
DEFAULT_WAIT_CEILING_MS = 300_000


def wait_ceiling_ms(config: Any) -> int:
    """The broker's ``consumer.request.timeout.max.ms``: no request waits longer."""
    try:
        return int(config["consumer.request.timeout.max.ms"])
    except (KeyError, TypeError, ValueError):
        return DEFAULT_WAIT_CEILING_MS


def check_timeout_param(timeout: int, config: Any, name: str = "timeout") -> int:
    """``timeout`` (ms, already 0..2^31-1) when within the ceiling; 400 / 400 otherwise,
    as FastAPI answers an out-of-range query parameter."""
    ceiling = wait_ceiling_ms(config)
    if timeout > ceiling:
        raise ApiError(
            400, ErrorCode.BAD_REQUEST,
            f"Invalid query parameter {name}: Input should be less than or equal to "
            f"{ceiling} (consumer.request.timeout.max.ms)",
        )
    return timeout
