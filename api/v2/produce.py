"""v2 produce: ``POST /topics/{topic}`` and ``POST /topics/{topic}/partitions/{partition}``.

The Content-Type picks the embedded format (``api.content_types``). binary and json
are decoded here (``api.v2.embedded``). avro, jsonschema and protobuf write keys and
values with Schema Registry schemas (``core.broker.schemas.encoding``), named by
``key_schema`` / ``value_schema`` (a schema text, registered under ``<topic>-key`` /
``<topic>-value`` when new) or ``key_schema_id`` / ``value_schema_id`` (registered under
that subject); the answer carries the ids used. The request fails as a whole, nothing
written: 42201 / 42202 a key / value without its schema, 42203 a key or value its schema
refuses, 42205 an invalid schema text, 42207 a schema the registry lacks or refuses, 400
both a schema and its id. An Accept that allows no v2 answer (``text/html``) is 406 /
406 and nothing is written. The answer is always one ``offsets`` entry per input record,
in order, HTTP 200 even when some records failed (Confluent). Failed entries have null
``partition``/``offset`` and the ``error_code`` of the error's row in
``api.errors.ERROR_TABLE`` (413 record too large, 40402 unknown partition, 50003
retriable Kafka error, 50002 other Kafka error).

franz extensions (query parameters):
- ``acks`` = ``0`` | ``1`` | ``all`` (or ``-1``); default ``1``.
- ``strict=true``: if any record failed, the HTTP status is that of the first failure
  and the body also carries its ``error_code`` and ``message`` beside ``offsets``.
Records may also carry ``headers`` and ``timestamp`` (see ``api.v2.schemas``).

Limits (``api.input_limits``, docs/limits.md): at most ``MAX_RECORDS_PER_REQUEST``
(100,000) records per request, else 422 / 422 before any record is decoded; a record's
``partition`` is an int32 (422 past it), its ``timestamp`` 0..2^63-1 (422); the body
nests at most 64 levels (400).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import repeat
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from api import native_render
from api.content_types import (
    SCHEMA_TYPES,
    EmbeddedFormat,
    produce_format,
    v2_response_media,
)
from api.deps import broker_of
from api.errors import V2_MEDIA, ApiError, ErrorCode, message_for, spec_for
from api.gc_pause import cyclic_gc_paused
from api.hot_routes import HotQuery, hot_route
from api.idempotency import OPENAPI_PARAMETER as IDEMPOTENCY_PARAMETER
from api.idempotency import idempotent_request
from api.input_limits import (
    MAX_RECORDS_PER_REQUEST,
    may_exceed_record_limit,
    prefix_exceeds_record_limit,
    too_many_records,
)
from api.openapi import JSON_MEDIA, enum_schema, error_doc, errors, ok, ref
from api.responses import check_accept
from api.security.authorization import Need, may_create_topic, requires
from api.v2.body import empty_body_error, parse
from api.v2.embedded import binary_columns_fast, produce_records, schema_records
from api.v2.schemas import BINARY_PRODUCE, JSON_PRODUCE, SCHEMA_PRODUCE, SchemaProduceRequest
from core.broker.schemas import encoding, subjects
from core.broker.schemas.encoding import Writer
from core.broker.schemas.subjects import SchemaChoice
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import ProduceColumns, ProduceResults, RecordResult
from core.errors import FranzError

router = APIRouter(dependencies=[Depends(check_accept)])

_ACKS = {"0": 0, "1": 1, "-1": -1, "all": -1}

_ACKS_DOC = ("franz extension: replicas that must have the records before the answer: "
             "`0`, `1` (default) or `all` (also `-1`; any case)")
_STRICT_DOC = "franz extension: answer with the first failed record's HTTP status"


class ProduceQuery(TypedDict, total=False):
    """The query parameters of both produce routes (hot routes: ``api.hot_routes``)."""

    acks: Annotated[str | None, enum_schema("0", "1", "all", "-1"),
                    Field(description=_ACKS_DOC, examples=["all"])]
    strict: Annotated[bool, Field(description=_STRICT_DOC, json_schema_extra={"default": False})]


PRODUCE_QUERY = HotQuery(ProduceQuery)

_BINARY_EXAMPLE = {"records": [{"key": "a2V5", "value": "Y29uZmx1ZW50"}, {"value": "a2Fma2E="}]}
_JSON_EXAMPLE = {"records": [{"key": "user-1", "value": {"clicks": 3}}, {"value": [1, 2, 3]}]}
_AVRO_EXAMPLE = {
    "value_schema": '{"type": "record", "name": "User", "fields": [{"name": "name", "type": '
                    '"string"}, {"name": "age", "type": ["null", "int"], "default": null}]}',
    "records": [{"value": {"name": "ada", "age": {"int": 36}}}, {"value": {"name": "bob"}}],
}
_JSONSCHEMA_EXAMPLE = {"value_schema_id": 2, "records": [{"value": {"sku": "a1", "n": 2}}]}
_PROTOBUF_EXAMPLE = {
    "value_schema": 'syntax = "proto3"; message Order { string id = 1; int32 qty = 2; }',
    "records": [{"value": {"id": "o-1", "qty": 3}}],
}
_RESPONSE_EXAMPLE = {
    "offsets": [
        {"partition": 0, "offset": 42, "error_code": None, "error": None},
        {
            "partition": None,
            "offset": None,
            "error_code": 413,
            "error": "The record is about 1048700 bytes, larger than max.message.bytes",
        },
    ],
    "key_schema_id": None,
    "value_schema_id": None,
}

_OPENAPI_BODY = {
    "parameters": [IDEMPOTENCY_PARAMETER],
    "requestBody": {
        "required": True,
        "description": "The embedded format is the Content-Type's: binary (keys and "
        "values base64), json (`application/json` too), or avro, jsonschema, protobuf "
        "(JSON values written with Schema Registry schemas).",
        "content": {
            "application/vnd.kafka.binary.v2+json": {
                "schema": ref("BinaryProduceRequest"),
                "example": _BINARY_EXAMPLE,
            },
            "application/vnd.kafka.json.v2+json": {
                "schema": ref("JsonProduceRequest"),
                "example": _JSON_EXAMPLE,
            },
            # the json format's other name, the same schema (a generated client sends a
            # JsonProduceRequest as application/json)
            "application/json": {"schema": ref("JsonProduceRequest"), "example": _JSON_EXAMPLE},
            **{
                media: {"schema": ref("SchemaProduceRequest"), "example": example}
                for media, example in (
                    ("application/vnd.kafka.avro.v2+json", _AVRO_EXAMPLE),
                    ("application/vnd.kafka.jsonschema.v2+json", _JSONSCHEMA_EXAMPLE),
                    ("application/vnd.kafka.protobuf.v2+json", _PROTOBUF_EXAMPLE),
                )
            },
        },
    }
}

_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ok("ProduceResponse", _RESPONSE_EXAMPLE, media=(V2_MEDIA, JSON_MEDIA)),
    **errors(400, 404, 413, 415, 422, 500),
    **error_doc(409, "A request with the same Idempotency-Key is in progress; nothing is "
                "written", 409, "A request with this Idempotency-Key is in progress"),
    **error_doc(406, "Accept allows neither `application/vnd.kafka.v2+json` nor "
                "`application/json`; nothing is written", 406, "HTTP 406 Not Acceptable"),
}


def parse_acks(raw: str | None) -> int:
    if raw is None:
        return 1
    acks = _ACKS.get(raw.strip().lower())
    if acks is None:
        raise ApiError(
            400,
            ErrorCode.BAD_REQUEST,
            f"Invalid query parameter acks: {raw!r} is not one of 0, 1, all",
        )
    return acks


def _failed(error: FranzError) -> dict[str, Any]:
    spec = spec_for(error)
    return {
        "partition": None,
        "offset": None,
        "error_code": int(spec.code),
        "error": message_for(error, spec),
    }


def _offsets(results: Sequence[RecordResult]) -> list[dict[str, Any]]:
    if isinstance(results, ProduceResults) and not results.errors:  # no RecordResult objects
        parts = results.partitions
        each: Iterable[int | None] = (
            repeat(parts) if parts is None or isinstance(parts, int) else parts
        )
        return [
            {"partition": p, "offset": o, "error_code": None, "error": None}
            for p, o in zip(each, results.offsets, strict=False)
        ]
    return [
        {"partition": r.partition, "offset": r.offset, "error_code": None, "error": None}
        if r.error is None
        else _failed(r.error)
        for r in results
    ]


SchemaIds = tuple[int | None, int | None]  # the ids keys and values were written with
NO_SCHEMA_IDS: SchemaIds = (None, None)


def produce_body(results: Sequence[RecordResult], *, strict: bool,
                 schema_ids: SchemaIds = NO_SCHEMA_IDS) -> tuple[int, dict[str, Any]]:
    """(HTTP status, response body) for the broker's per-record results."""
    offsets = _offsets(results)
    body: dict[str, Any] = {"offsets": offsets, "key_schema_id": schema_ids[0],
                            "value_schema_id": schema_ids[1]}
    if strict:
        error = next((r.error for r in results if r.error is not None), None)
        if error is not None:
            spec = spec_for(error)
            body["error_code"] = int(spec.code)
            body["message"] = message_for(error, spec)
            return spec.status, body
    return 200, body


_HEAD = '{"offsets":[{"partition":%d,"offset":'
_SEP = ',"error_code":null,"error":null},{"partition":%d,"offset":'
_TAIL = ',"error_code":null,"error":null}],"key_schema_id":null,"value_schema_id":null}'
_ANSWER_TAIL = b'],"key_schema_id":null,"value_schema_id":null}'


def produce_answer(results: Sequence[RecordResult], *, strict: bool,
                   schema_ids: SchemaIds = NO_SCHEMA_IDS) -> tuple[int, bytes]:
    """``produce_body`` serialized. The common answers (no schema ids) are written
    directly, the bytes orjson writes: one partition with consecutive offsets and no
    failures is one ``str.join`` of the offsets (the text between two offsets is
    constant); several partitions without failures (a keyed request) one C call."""
    if schema_ids is not NO_SCHEMA_IDS:
        status, doc = produce_body(results, strict=strict, schema_ids=schema_ids)
        return status, orjson.dumps(doc)
    if isinstance(results, ProduceResults) and len(results) and not results.errors:
        if results.contiguous:
            p, offsets = results.partitions, results.offsets
            assert isinstance(p, int) and isinstance(offsets, range), \
                "contiguous results have one partition and a range of offsets"
            items = native_render.produce_offsets_range(p, offsets.start, len(offsets))
            if items is not None:
                return 200, b'{"offsets":[' + items + _ANSWER_TAIL
            text = _HEAD % p + (_SEP % p).join(map(str, offsets)) + _TAIL
            return 200, text.encode()
        if results.runs is not None:  # several partitions, from the runs: in C
            items = native_render.produce_offsets_runs(len(results), results.runs)
            if items is not None:
                return 200, b'{"offsets":[' + items + _ANSWER_TAIL
        parts, offsets = results.partitions, results.offsets
        if type(parts) is list and type(offsets) is list:  # several partitions: in C
            items = native_render.produce_offsets(parts, offsets)  # type: ignore[arg-type]
            if items is not None:
                return 200, b'{"offsets":[' + items + _ANSWER_TAIL
    status, body = produce_body(results, strict=strict)
    return status, orjson.dumps(body)


_NOT_PARSED = object()


def _records_of(doc: Any) -> Any:
    return doc.get("records") if type(doc) is dict else None


def check_record_count(body: bytes, doc: Any = _NOT_PARSED) -> None:
    """422 / 422 when the request holds more than MAX_RECORDS_PER_REQUEST records,
    found before anything per record is done: a body with fewer commas than the limit
    cannot hold more (one C-level count); a larger one is checked on a prefix first
    (``prefix_exceeds_record_limit``: a million tiny records are refused without being
    parsed), then parsed (orjson, or ``doc`` when the caller already did) and its
    ``records`` counted. Malformed bodies pass: validation answers them."""
    if not may_exceed_record_limit(body):
        return
    if doc is _NOT_PARSED:
        if prefix_exceeds_record_limit(body, _records_of):
            raise too_many_records()
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
    rows = _records_of(doc)
    if type(rows) is list and len(rows) > MAX_RECORDS_PER_REQUEST:
        raise too_many_records(len(rows))


def parse_produce(fmt: EmbeddedFormat, body: bytes) -> ProduceColumns:
    """The request's records as the broker's produce input.

    Fast path (binary format, body exactly ``{"records": [...]}`` whose rows are all
    ``{"value": <base64>}`` or all ``{"key": <base64>, "value": <base64>}``): read in C
    from the JSON text (``native_render.produce_columns``), else orjson and C-driven
    decoding, no pydantic. Anything else (or anything doubtful) goes
    through the TypeAdapter, so validation errors are the usual ones. Either way more
    than MAX_RECORDS_PER_REQUEST records are refused first (``check_record_count``)."""
    doc: Any = _NOT_PARSED
    if fmt is EmbeddedFormat.BINARY:
        if prefix_exceeds_record_limit(body, _records_of):
            raise too_many_records()
        columns = native_render.produce_columns(body, MAX_RECORDS_PER_REQUEST)
        if columns is not None:  # the usual body, read without a parsed document
            return ProduceColumns(*columns)
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if type(doc) is dict and len(doc) == 1:
            rows = doc.get("records")
            if type(rows) is list and rows:
                if len(rows) > MAX_RECORDS_PER_REQUEST:
                    raise too_many_records(len(rows))
                fast = binary_columns_fast(rows)
                if fast is not None:
                    return fast
    check_record_count(body, doc)
    adapter = BINARY_PRODUCE if fmt is EmbeddedFormat.BINARY else JSON_PRODUCE
    req = parse(adapter, body)
    return produce_records(fmt, req["records"])


async def _writer(request: Request, topic: str, req: SchemaProduceRequest, side: str,
                  schema_type: str) -> Writer | None:
    """The schema ``side`` (key or value) is written with: by text or by id."""
    if side == "key":  # literal keys: the TypedDict's types of the two fields
        text, schema_id = req.get("key_schema"), req.get("key_schema_id")
    else:
        text, schema_id = req.get("value_schema"), req.get("value_schema_id")
    if text is not None and schema_id is not None:
        raise ApiError(400, ErrorCode.BAD_REQUEST,
                       f"{side}_schema and {side}_schema_id cannot both be given")
    if text is None and schema_id is None:
        return None
    choice = (SchemaChoice(schema_id=schema_id) if schema_id is not None
              else SchemaChoice(schema_type=schema_type, schema=text))
    return await subjects.writer(broker_of(request).schemas, topic, choice,
                                 is_key=side == "key", schema_type=schema_type)


async def parse_schema_produce(request: Request, fmt: EmbeddedFormat, topic: str,
                               body: bytes) -> tuple[ProduceColumns, SchemaIds]:
    """A request in a schema format: its records with keys and values written with the
    schemas it names, and those schemas' ids."""
    check_record_count(body)
    req = parse(SCHEMA_PRODUCE, body)
    rows = req["records"]
    schema_type = SCHEMA_TYPES[fmt]
    key_writer = await _writer(request, topic, req, "key", schema_type)
    value_writer = await _writer(request, topic, req, "value", schema_type)
    keys = [r.get("key") for r in rows]
    values = [r.get("value") for r in rows]
    count = 2 * len(rows) - keys.count(None) - values.count(None)
    stored_keys, stored_values = await encoding.run(
        count, encoding.encode_records, key_writer, keys, value_writer, values)
    ids = (key_writer.schema_id if key_writer else None,
           value_writer.schema_id if value_writer else None)
    return schema_records(rows, stored_keys, stored_values), ids


@lru_cache(maxsize=64)
def _produce_format(content_type: str | None) -> EmbeddedFormat:
    """``produce_format``, remembered per Content-Type string (clients repeat theirs;
    failures raise and are not remembered)."""
    return produce_format(content_type)


@lru_cache(maxsize=64)
def _answer_media(accept: str | None) -> str:
    """The media type of the answer (``v2_response_media``: 406 / 406 when Accept allows
    no v2 type), remembered per Accept string as ``_produce_format`` is."""
    return v2_response_media(accept)


async def _read_body(request: Request) -> bytes:
    limit = int(broker_of(request).config["max.request.size"])
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(
            413,
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"Request body of {declared} bytes exceeds max.request.size={limit}",
        )
    body = await request.body()
    if len(body) > limit:
        raise ApiError(
            413,
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"Request body of {len(body)} bytes exceeds max.request.size={limit}",
        )
    if not body.strip():
        raise empty_body_error()
    return body


async def produce(request: Request, topic: str, partition: int | None) -> Response:
    q = PRODUCE_QUERY.parse(request)
    acks, strict = q.get("acks"), q.get("strict", False)
    fmt = _produce_format(request.headers.get("content-type"))
    # the router's check_accept does not run on a hot route: an answer the client cannot
    # take is refused here, before anything is written (Confluent: 406, nothing written)
    media = _answer_media(request.headers.get("accept"))
    body = await _read_body(request)
    schema_ids = NO_SCHEMA_IDS
    if fmt in SCHEMA_TYPES:
        records, schema_ids = await parse_schema_produce(request, fmt, topic, body)
    else:
        with cyclic_gc_paused():
            records = parse_produce(fmt, body)
    acks_value = parse_acks(acks)
    results = await broker_of(request).produce(
        topic, records, partition=partition, acks=acks_value,
        may_create=may_create_topic(request),
        idempotency=idempotent_request(request, body, acks=acks_value),
    )
    status, body = produce_answer(results, strict=strict, schema_ids=schema_ids)
    return Response(body, status_code=status, media_type=media)


@hot_route(
    router, "POST", "/topics/{topic}", query=PRODUCE_QUERY,
    operation_id="produceToTopic", tags=["Topic (v2)"],
    summary="Produce records to a topic",
    description="Partition per record: its `partition`, else the key's hash, else "
    "round-robin per request.",
    openapi_extra=_OPENAPI_BODY,
    responses=_RESPONSES,
)
@requires(Need(Operation.WRITE, ResourceType.TOPIC, "topic"))
async def produce_to_topic(topic: str, request: Request) -> Response:
    return await produce(request, topic, None)


@hot_route(
    router, "POST", "/topics/{topic}/partitions/{partition}", query=PRODUCE_QUERY,
    operation_id="produceToPartition", tags=["Partition (v2)"],
    summary="Produce records to one partition",
    description="A record's own `partition` field, when given, wins over the path.",
    openapi_extra=_OPENAPI_BODY,
    responses=_RESPONSES,
)
@requires(Need(Operation.WRITE, ResourceType.TOPIC, "topic"))
async def produce_to_partition(topic: str, partition: int, request: Request) -> Response:
    return await produce(request, topic, partition)
