"""v3 produce: ``POST /v3/clusters/{c}/topics/{t}/records`` (rest-api-reference §3.5).

The body is one record, records back to back, or a JSON array of records, typed
``application/json``; it may be a long-lived chunked stream. Each record is written as
soon as it is complete, and the answer carries one report per record, in order, each
followed by ``\\r\\n``: reports stream out while the request is still coming in.

    {"partition_id": 1,                                   # optional
     "headers": [{"name": "h", "value": "<base64>"}],     # optional, value may be null
     "key":   {"type": "BINARY", "data": "<base64>"},     # optional
     "value": {"type": "JSON", "data": {"any": "json"}},  # optional; STRING: a string
     "timestamp": "2024-05-01T12:00:00.123Z"}             # optional ISO-8601, default now

    {"error_code": 200, "cluster_id", "topic_name", "partition_id", "offset",
     "timestamp": "<ISO-8601>", "key": {"type", "size"}, "value": {"type", "size"}}
    (a key or value written with a schema: {"type", "subject", "schema_id",
     "schema_version", "size"})
    {"error_code": 400, "message": "Bad Request: value.data=1 is not a base64 string."}

A key or value of type AVRO, JSONSCHEMA or PROTOBUF with ``schema`` (the schema text,
registered under the subject when new), or without a ``type`` with ``schema_id``,
``schema_version`` or none of them (the subject's latest version), is written with that
Schema Registry schema (``core.broker.schemas.encoding``); ``subject`` or
``subject_name_strategy`` (TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME) names the subject
(``core.broker.schemas.subjects``).
Its report adds ``subject``, ``schema_id`` and ``schema_version``. A batch's records
resolve each schema they name once, then are encoded together (``Batch.write_schemas``).

Records fail one by one inside HTTP 200 (Confluent): 400 a malformed record (wrong
field, type or base64; unknown field; schema fields that do not go together), 42203 a
key or value its schema refuses, 42205 an invalid schema text, 42207 a schema the
registry lacks or refuses, 404/40402 a partition the topic lacks, 413 a record over the
topic's ``max.message.bytes``, 50002/50003 a Kafka error. Malformed JSON after the first
record ends the stream with a 400 report.

Before the stream starts the whole request fails: 415 another content type, 422 / 42206
an empty body, 400 / 400 malformed JSON in the first record, 413 a record over
``max.request.size``, 404 / 404 an unknown cluster (franz checks it; self-managed
Confluent does not), 404 / 40403 an unknown topic when topics are not auto-created.
Records are written with acks=all, the Java producer's default. A body read whole may
carry an ``Idempotency-Key`` (``api.idempotency``; 409 / 422 fail the whole request); a
chunked stream with one is 400.

Limits (``api.input_limits``, docs/limits.md): a request carries at most
``MAX_RECORDS_PER_REQUEST`` (100,000) records. A body with a ``Content-Length`` (up to
``max.request.size``) is read whole first, so more records than that are refused with
422 / 42208 before any is written; a chunked stream gets a 42208 report for the record
past the limit and ends there (open a new request to go on). ``partition_id`` past
int32 is a 400 report; a ``type`` that is not a string is a 400 report naming the
field; JSON nested deeper than 64 levels is malformed JSON (400).

The hot path reads raw body chunks and checks records by hand (no pydantic).
"""

from __future__ import annotations

import binascii
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.requests import ClientDisconnect
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from api.deps import broker_of
from api.errors import V3_MEDIA, ApiError, ErrorCode, message_for, spec_for
from api.idempotency import IDEMPOTENCY_REFUSALS, idempotency_key, idempotent_request
from api.idempotency import OPENAPI_PARAMETER as IDEMPOTENCY_PARAMETER
from api.input_limits import INT32_MAX, MAX_RECORDS_PER_REQUEST
from api.security.authorization import Need, may_create_topic, requires
from api.v3.common import (
    V3Response,
    body_doc,
    check_cluster,
    empty_body_error,
    errors,
    iso_timestamp,
    require_json_type,
)
from api.v3.json_stream import BadJson, JsonValues
from api.v3.models import ProduceReport
from core.broker.broker import Broker
from core.broker.errors import UnknownPartitionError, UnknownTopicError
from core.broker.idempotency.producer import IdempotentRequest
from core.broker.schemas import encoding, subjects
from core.broker.schemas.encoding import Writer
from core.broker.schemas.model import AVRO, JSON, PROTOBUF
from core.broker.schemas.subjects import SchemaChoice, SubjectNameStrategy
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import ProduceRecord
from core.errors import FranzError

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["Records (v3)"],
    dependencies=[Depends(check_cluster)],
    default_response_class=V3Response,
)

ACKS_ALL = -1
SEPARATOR = b"\r\n"
_RECORD_FIELDS = frozenset({"partition_id", "headers", "key", "value", "timestamp"})
_DATA_FIELDS = frozenset(
    {"type", "data", "subject", "subject_name_strategy", "schema_id", "schema_version", "schema"}
)
_SCHEMA_FIELDS = _DATA_FIELDS - {"type", "data"}
#: the v3 ``type`` of each schema format -> the Schema Registry's schema type, and back
_SCHEMA_TYPES = {"AVRO": AVRO, "JSONSCHEMA": JSON, "PROTOBUF": PROTOBUF}
_DATA_TYPES = {schema_type: kind for kind, schema_type in _SCHEMA_TYPES.items()}
_STRATEGIES = ", ".join(SubjectNameStrategy)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

_EXAMPLE = {
    "partition_id": 0,
    "headers": [{"name": "trace-id", "value": "MTIz"}],
    "key": {"type": "STRING", "data": "user-1"},
    "value": {"type": "JSON", "data": {"clicks": 3}},
}
_REPORT_EXAMPLE = {
    "error_code": 200,
    "cluster_id": "fRaNz-cluster-id",
    "topic_name": "orders",
    "partition_id": 0,
    "offset": 42,
    "timestamp": "2024-05-01T12:00:00.123Z",
    "key": {"type": "STRING", "size": 6},
    "value": {"type": "JSON", "size": 12},
}


# --- one record ------------------------------------------------------------------------------


#: what a report says about a key or value: (type, stored size), and for one written
#: with a schema (type, size, subject, schema id, version)
Written = tuple[str, int] | tuple[str, int, str, int, int]


@dataclass(frozen=True, slots=True)
class SchemaData:
    """A key or value to write with the schema ``choice`` names (``Batch.write_schemas``)."""

    choice: SchemaChoice
    data: Any


@dataclass(frozen=True, slots=True)
class Parsed:
    """A checked record and what its report says about its key and value; a key or
    value still to be written with a schema is in ``key_schema`` / ``value_schema``."""

    record: ProduceRecord
    key: Written | None  # None: no key in the request
    value: Written | None
    key_schema: SchemaData | None = None
    value_schema: SchemaData | None = None


MayCreate = Callable[[str], bool] | None  # api.security.authorization.may_create_topic

def _bad(message: str) -> ApiError:
    return ApiError(400, ErrorCode.BAD_REQUEST, "Bad Request: " + message)


def _show(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # e.g. an integer past 64 bits (incremental parser)
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_fields(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = obj.keys() - allowed
    if extra:
        raise _bad(f"Unrecognized field: {where}{min(extra)}")


def _base64(data: Any, where: str) -> bytes:
    if not isinstance(data, str):
        raise _bad(f"{where}={_show(data)} is not a base64 string.")
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{where}={_show(data)} is not a valid base64 string.") from None


_TYPES = "BINARY, JSON, STRING, AVRO, JSONSCHEMA, PROTOBUF"


def _optional(raw: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = raw.get(name)
    if value is not None and (type(value) is not kind or (
            isinstance(value, int) and not -INT32_MAX - 1 <= value <= INT32_MAX)):
        what = "a 32-bit integer" if kind is int else "a string"
        raise _bad(f"{where}{name}={_show(value)} is not {what}.")
    return value


def _schema_data(raw: dict[str, Any], kind: str | None, side: str) -> SchemaData:
    """A key or value to write with a schema: its fields checked as Confluent's
    ProduceRequestData does (400 when they do not go together)."""
    where = side + "."
    subject = _optional(raw, "subject", str, where)
    schema_id = _optional(raw, "schema_id", int, where)
    version = _optional(raw, "schema_version", int, where)
    text = _optional(raw, "schema", str, where)
    strategy = raw.get("subject_name_strategy")
    if strategy is not None:
        if type(strategy) is not str or strategy not in SubjectNameStrategy.__members__:
            raise _bad(f"{where}subject_name_strategy={_show(strategy)} is not one of "
                       f"{_STRATEGIES}.")
        if subject is not None:
            raise _bad(f"{side}: only one of subject_name_strategy or subject can be used.")
    named = [n for n, v in (("schema_id", schema_id), ("schema_version", version),
                            ("schema", text)) if v is not None]
    if len(named) > 1:
        raise _bad(f"{side}: only one of schema_id, schema_version or schema can be used.")
    if kind is not None and named and named[0] != "schema":
        raise _bad(f"{side}: {named[0]} cannot be used with type {kind}: give the schema "
                   "text in schema, or leave type out.")
    if kind is not None and text is None:
        raise _bad(f"{side}: type {kind} needs schema, the schema text (without a type, "
                   "schema_id, schema_version or the subject's latest version is used).")
    if kind is None and text is not None:
        raise _bad(f"{side}: schema needs a type: AVRO, JSONSCHEMA or PROTOBUF.")
    choice = SchemaChoice(
        schema_type=_SCHEMA_TYPES[kind] if kind is not None else None, schema=text,
        schema_id=schema_id, version=version, subject=subject,
        strategy=SubjectNameStrategy(strategy or SubjectNameStrategy.TOPIC_NAME))
    return SchemaData(choice, raw.get("data"))


def _data(raw: Any, side: str) -> tuple[bytes | None, Written | None, SchemaData | None]:
    """A key or value object -> (stored bytes, report entry), or what to write with a
    schema."""
    if raw is None:
        return None, None, None
    if not isinstance(raw, dict):
        raise _bad(f"{side}={_show(raw)} is not an object with type and data.")
    _check_fields(raw, _DATA_FIELDS, side + ".")
    kind = raw.get("type")
    if kind is not None and not isinstance(kind, str):
        raise _bad(f"{side}.type={_show(kind)} is not one of {_TYPES}.")
    if kind is None or kind in _SCHEMA_TYPES:
        return None, None, _schema_data(raw, kind, side)
    if kind not in ("BINARY", "JSON", "STRING"):
        raise _bad(f"{side}.type={_show(kind)} is not one of {_TYPES}.")
    schema_fields = raw.keys() & _SCHEMA_FIELDS
    if schema_fields:
        raise _bad(f"{side}: {', '.join(sorted(schema_fields))} cannot be used with type {kind}.")
    data = raw.get("data")
    if data is None:
        return None, (kind, 0), None
    if kind == "BINARY":
        stored = _base64(data, side + ".data")
    elif kind == "STRING":
        if not isinstance(data, str):
            raise _bad(f"{side}.data={_show(data)} is not a string.")
        stored = data.encode()
    else:
        try:
            stored = orjson.dumps(data)
        except orjson.JSONEncodeError as exc:
            raise _bad(f"{side}.data cannot be stored as JSON: {exc}.") from None
    return stored, (kind, len(stored)), None


def _headers(raw: Any) -> list[tuple[str, bytes | None]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _bad(f"headers={_show(raw)} is not a list.")
    out: list[tuple[str, bytes | None]] = []
    for i, h in enumerate(raw):
        where = f"headers[{i}]"
        if not isinstance(h, dict):
            raise _bad(f"{where}={_show(h)} is not an object with name and value.")
        _check_fields(h, frozenset({"name", "value"}), where + ".")
        name, value = h.get("name"), h.get("value")
        if not isinstance(name, str):
            raise _bad(f"{where}.name={_show(name)} is not a string.")
        out.append((name, None if value is None else _base64(value, where + ".value")))
    return out


def parse_timestamp(raw: Any) -> int | None:
    """ISO-8601 (naive means UTC) -> epoch ms."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _bad(f"timestamp={_show(raw)} is not an ISO-8601 string.")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise _bad(f"timestamp={_show(raw)} is not an ISO-8601 date-time.") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ms = (when - _EPOCH) // _MS
    if ms < 0:
        raise _bad(f"timestamp={_show(raw)} is before 1970.")
    return ms


def parse_record(obj: Any, topic: str) -> Parsed:
    """One request record, checked (ApiError: the record's failure report)."""
    if not isinstance(obj, dict):
        raise _bad(f"record={_show(obj)} is not a JSON object.")
    _check_fields(obj, _RECORD_FIELDS, "")
    partition = obj.get("partition_id")
    if partition is not None:
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise _bad(f"partition_id={_show(partition)} is not an integer.")
        if partition < 0:
            raise _no_partition(topic, partition)
        if partition > INT32_MAX:
            raise _bad(f"partition_id={_show(partition)} is out of range [0, {INT32_MAX}].")
    key, key_info, key_schema = _data(obj.get("key"), "key")
    value, value_info, value_schema = _data(obj.get("value"), "value")
    record = ProduceRecord(
        value, key, _headers(obj.get("headers")), parse_timestamp(obj.get("timestamp")), partition
    )
    return Parsed(record, key_info, value_info, key_schema, value_schema)


def _no_partition(topic: str, partition: int) -> ApiError:
    return ApiError(
        404, ErrorCode.PARTITION_NOT_FOUND, f"Partition {partition} of topic '{topic}' not found."
    )


# --- a batch of records ------------------------------------------------------------------------


def _failure(error: ApiError | FranzError) -> dict[str, Any]:
    if isinstance(error, ApiError):
        return {"error_code": error.code, "message": error.message}
    spec = spec_for(error, v3=True)
    return {"error_code": int(spec.code), "message": message_for(error, spec)}


def _partition_count(broker: Broker, topic: str) -> int | None:
    try:
        return broker.topic_metadata(topic).num_partitions
    except UnknownTopicError:
        return None  # not created yet (auto-creation), or gone


@dataclass(slots=True)
class Batch:
    """Records of one read from the body, checked; the outcome per input position."""

    topic: str
    outcomes: list[Parsed | ApiError | FranzError]

    @classmethod
    def of(cls, topic: str, values: Sequence[Any]) -> Batch:
        outcomes: list[Parsed | ApiError | FranzError] = []
        for v in values:
            if isinstance(v, BadJson):
                outcomes.append(ApiError(v.status, v.code, v.message))
                continue
            try:
                outcomes.append(parse_record(v, topic))
            except ApiError as exc:
                outcomes.append(exc)
        return cls(topic, outcomes)

    def check_partitions(self, count: int | None) -> None:
        if count is None:
            return
        for i, o in enumerate(self.outcomes):
            if (
                isinstance(o, Parsed)
                and o.record.partition is not None
                and o.record.partition >= count
            ):
                self.outcomes[i] = _no_partition(self.topic, o.record.partition)

    def pending(self) -> list[int]:
        return [i for i, o in enumerate(self.outcomes) if isinstance(o, Parsed)]

    async def write_schemas(self, registry: subjects.Registry) -> None:
        """Write the keys and values that go with a schema: each schema the batch names
        resolved once, then every such key and value encoded together. A record fails
        with its first problem, Confluent's order: the key's schema, the key, the
        value's schema, the value."""
        todo = [i for i, o in enumerate(self.outcomes)
                if isinstance(o, Parsed) and (o.key_schema or o.value_schema)]
        if not todo:
            return
        writers: dict[tuple[bool, SchemaChoice], Writer | FranzError] = {}
        items: list[tuple[Writer, Any, str]] = []
        plans: list[tuple[int, list[tuple[bool, Writer | FranzError, int]]]] = []
        for i in todo:
            outcome = self.outcomes[i]
            assert isinstance(outcome, Parsed)
            plan: list[tuple[bool, Writer | FranzError, int]] = []
            for is_key, data in ((True, outcome.key_schema), (False, outcome.value_schema)):
                if data is None:
                    continue
                found = writers.get((is_key, data.choice))
                if found is None:
                    try:
                        found = await subjects.writer(registry, self.topic, data.choice,
                                                      is_key=is_key)
                    except FranzError as exc:
                        found = exc
                    writers[is_key, data.choice] = found
                plan.append((is_key, found, len(items)))
                if isinstance(found, FranzError):
                    break
                items.append((found, data.data, "key.data" if is_key else "value.data"))
            plans.append((i, plan))
        encoded = await encoding.run(len(items), encoding.encode_items, items)
        for i, plan in plans:
            self.outcomes[i] = _written(self.outcomes[i], plan, encoded)

    def record(self, i: int) -> ProduceRecord:
        outcome = self.outcomes[i]
        assert isinstance(outcome, Parsed)
        return outcome.record


def _written(outcome: Parsed | ApiError | FranzError,
             plan: list[tuple[bool, Writer | FranzError, int]],
             encoded: Sequence[bytes | None | FranzError]) -> Parsed | FranzError:
    """``outcome`` with its key and value written as ``plan`` says, or its first error."""
    assert isinstance(outcome, Parsed)
    record, key, value = outcome.record, outcome.key, outcome.value
    for is_key, w, at in plan:
        if isinstance(w, FranzError):
            return w
        stored = encoded[at]
        if isinstance(stored, FranzError):
            return stored
        written = (_DATA_TYPES[w.schema_type], len(stored) if stored else 0, w.subject,
                   w.schema_id, w.version)
        if is_key:
            record, key = replace(record, key=stored), written
        else:
            record, value = replace(record, value=stored), written
    return Parsed(record, key, value)


async def produce_batch(broker: Broker, batch: Batch, *, first: bool,
                        may_create: MayCreate = None,
                        idempotency: IdempotentRequest | None = None) -> list[dict[str, Any]]:
    """Write the batch's good records in one call; one report per input position.

    An unknown topic fails the request when it is the first batch (nothing was answered
    yet), else every record of the batch. An Idempotency-Key refusal (409, 422) fails
    the request (``idempotency`` is only given for a body read whole, one batch)."""
    await batch.write_schemas(broker.schemas)
    known = _partition_count(broker, batch.topic)
    batch.check_partitions(known)
    todo = batch.pending()
    results: Sequence[Any] = []
    if todo:
        try:
            results = await broker.produce(
                batch.topic, [batch.record(i) for i in todo], acks=ACKS_ALL,
                may_create=may_create, idempotency=idempotency,
            )
        except UnknownTopicError:
            if first:
                raise
            results = [UnknownTopicError()] * len(todo)
        except UnknownPartitionError as exc:
            created = _partition_count(broker, batch.topic)
            if known is not None or created is None:
                results = [exc] * len(todo)  # the count changed under us
            else:  # the topic was just auto-created: check against its real count
                return await produce_batch(broker, batch, first=first, may_create=may_create,
                                           idempotency=idempotency)
        except IDEMPOTENCY_REFUSALS:
            raise
        except FranzError as exc:
            results = [exc] * len(todo)
    by_index = dict(zip(todo, results, strict=True))
    return [_report(broker, batch, i, by_index.get(i)) for i in range(len(batch.outcomes))]


def _report(broker: Broker, batch: Batch, i: int, result: Any) -> dict[str, Any]:
    outcome = batch.outcomes[i]
    if not isinstance(outcome, Parsed):
        return _failure(outcome)
    if isinstance(result, FranzError):
        return _failure(result)
    if result.error is not None:
        return _failure(result.error)
    report: dict[str, Any] = {
        "error_code": 200,
        "cluster_id": broker.cluster_id,
        "topic_name": batch.topic,
        "partition_id": result.partition,
        "offset": result.offset,
        "timestamp": iso_timestamp(result.timestamp) if result.timestamp is not None else None,
    }
    if outcome.key is not None:
        report["key"] = _written_report(outcome.key)
    if outcome.value is not None:
        report["value"] = _written_report(outcome.value)
    return report


def _written_report(written: Written) -> dict[str, Any]:
    if len(written) == 2:
        return {"type": written[0], "size": written[1]}
    kind, size, subject, schema_id, version = written  # type: ignore[misc]
    return {"type": kind, "subject": subject, "schema_id": schema_id,
            "schema_version": version, "size": size}


def _lines(reports: list[dict[str, Any]]) -> bytes:
    dumps = orjson.dumps
    return b"".join(dumps(r) + SEPARATOR for r in reports)


# --- the request body, read as it comes --------------------------------------------------------


async def _chunks(request: Request) -> AsyncIterator[tuple[bytes, bool]]:
    """(chunk, is_last) as the server receives them."""
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] == "http.request":
            last = not message.get("more_body", False)
            yield message.get("body", b""), last
            if last:
                return


class _DuplexStreamingResponse(StreamingResponse):
    """Streams reports while the body is still being read. Starlette's own
    StreamingResponse listens for a disconnect in parallel (ASGI < 2.4), which would
    swallow body messages; here the body reader notices a disconnect itself."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.stream_response(send)


def _whole_length(request: Request, limit: int) -> int | None:
    """The body's ``Content-Length`` when it is a plain (not chunked) body of at most
    ``limit`` bytes: such a body is read whole before anything is written."""
    if "chunked" in request.headers.get("transfer-encoding", "").lower():
        return None
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit() or int(declared) > limit:
        return None
    return int(declared)


async def _whole(chunks: AsyncIterator[tuple[bytes, bool]]) -> bytes:
    return b"".join([chunk async for chunk, _last in chunks])


async def _first_values(
    chunks: AsyncIterator[tuple[bytes, bool]], splitter: JsonValues
) -> tuple[list[Any], bool]:
    """Read until a value is complete or the body ends: (values, body ended)."""
    async for chunk, last in chunks:
        values = splitter.feed(chunk, final=last)
        if values or last:
            return values, last
    return [], True


async def _rest(
    broker: Broker,
    topic: str,
    first: bytes,
    chunks: AsyncIterator[tuple[bytes, bool]],
    splitter: JsonValues,
    may_create: MayCreate,
) -> AsyncIterator[bytes]:
    yield first
    try:
        async for chunk, last in chunks:
            values = splitter.feed(chunk, final=last)
            if values:
                yield _lines(await produce_batch(broker, Batch.of(topic, values), first=False,
                                                 may_create=may_create))
    except ClientDisconnect:
        return


@router.post(
    "/topics/{topic_name}/records",
    operation_id="produceRecord",
    summary="Produce records (one, several back to back, or a stream)",
    description="One delivery report per record, in order, each followed by `\\r\\n`; "
    "HTTP 200 even when records fail (each report has its own `error_code`). At most "
    "100,000 records per request (422 / 42208 up front for a body with a Content-Length; "
    "a 42208 report ends a longer chunked stream); JSON nested deeper than 64 levels is "
    "400.",
    response_model=ProduceReport,
    openapi_extra={**body_doc("ProduceRecordRequest", _EXAMPLE),
                   "parameters": [IDEMPOTENCY_PARAMETER]},
    responses={
        200: {"content": {V3_MEDIA: {"example": _REPORT_EXAMPLE}}},
        **errors(400, 404, 409, 413, 415, 422),
    },
)
@requires(Need(Operation.WRITE, ResourceType.TOPIC, "topic_name"))
async def produce_records(topic_name: str, request: Request) -> Response:
    require_json_type(request)
    broker = broker_of(request)
    limit = int(broker.config["max.request.size"])
    splitter = JsonValues(max_pending=limit, max_values=MAX_RECORDS_PER_REQUEST)
    chunks = _chunks(request)
    idempotency = None
    if _whole_length(request, limit) is not None:
        body = await _whole(chunks)
        values, ended = splitter.feed(body, final=True), True
        idempotency = idempotent_request(request, body, acks=ACKS_ALL)
    else:
        if idempotency_key(request) is not None:
            raise ApiError(400, ErrorCode.BAD_REQUEST,
                           "An Idempotency-Key needs a body with a Content-Length: a chunked "
                           "stream is written as it arrives, so it cannot be answered again")
        values, ended = await _first_values(chunks, splitter)
    if not values:
        raise empty_body_error()
    if isinstance(values[0], BadJson):
        raise ApiError(values[0].status, values[0].code, values[0].message)
    last = values[-1]
    if isinstance(last, BadJson) and last.too_many:  # nothing is written yet: refuse it all
        raise ApiError(last.status, last.code, last.message)
    may_create = may_create_topic(request)
    first = _lines(await produce_batch(broker, Batch.of(topic_name, values), first=True,
                                       may_create=may_create, idempotency=idempotency))
    if ended:
        return Response(first, media_type=V3_MEDIA)
    return _DuplexStreamingResponse(
        _rest(broker, topic_name, first, chunks, splitter, may_create), media_type=V3_MEDIA
    )
