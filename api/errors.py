"""The one place where errors become HTTP responses.

Three kinds of failure reach the client:

    FranzError (core)         domain errors -> ``ERROR_TABLE`` (class -> status, Confluent code)
    ApiError (this module)    request problems found by ``api/`` itself (content type, body)
    framework errors          unknown URL / method, path and query parameter parsing,
                              pydantic validation, JSON decoding, anything unexpected

All answer with Confluent's error body ``{"error_code": N, "message": "..."}``; on v2
paths (everything outside ``/v3``) as ``application/vnd.kafka.v2+json``, on v3 paths as
``application/json``. Handlers are registered on base classes; Starlette finds them by
walking the exception's MRO, so one handler serves a whole hierarchy.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import IntEnum, unique
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from core.broker import errors as be
from core.broker.controller.reassignment import ReassignmentInProgressError
from core.broker.schemas import errors as sche
from core.errors import FranzError, InvalidRequestError
from core.storage import errors as se

log = logging.getLogger(__name__)

V2_MEDIA = "application/vnd.kafka.v2+json"
V3_MEDIA = "application/json"


@unique
class ErrorCode(IntEnum):
    """Confluent REST Proxy ``error_code`` values used by franz (rest-api-reference §4)."""

    BAD_REQUEST = 400
    NOT_FOUND = 404
    METHOD_NOT_ALLOWED = 405
    NOT_ACCEPTABLE = 406
    PAYLOAD_TOO_LARGE = 413
    CONFLICT = 409  # an Idempotency-Key request in progress
    TOO_MANY_REQUESTS = 429  # idempotency.keys.max live Idempotency-Keys
    UNSUPPORTED_MEDIA_TYPE = 415
    UNPROCESSABLE_ENTITY = 422
    INTERNAL_SERVER_ERROR = 500
    FETCH_MIN_BYTES_OUT_OF_RANGE = 40001  # sent with HTTP 422 (Confluent, sic)
    KAFKA_BAD_REQUEST = 40002
    KAFKA_AUTHENTICATION = 40101
    KAFKA_AUTHORIZATION = 40301
    TOPIC_NOT_FOUND = 40401
    PARTITION_NOT_FOUND = 40402
    CONSUMER_INSTANCE_NOT_FOUND = 40403  # also rest-utils' "unknown topic or partition"
    LEADER_NOT_AVAILABLE = 40404
    GROUP_NOT_FOUND = 40405
    CONSUMER_FORMAT_MISMATCH = 40601
    SERIALIZATION_ERROR = 40801  # sent with HTTP 408 (Confluent)
    CONSUMER_ALREADY_SUBSCRIBED = 40901
    CONSUMER_ALREADY_EXISTS = 40902
    ILLEGAL_STATE = 40903
    OFFSET_OUT_OF_RANGE = 41601  # franz: stateless range read outside [log start, HW]
    KEY_SCHEMA_MISSING = 42201
    VALUE_SCHEMA_MISSING = 42202
    JSON_CONVERSION = 42203
    INVALID_CONSUMER_CONFIG = 42204
    INVALID_SCHEMA = 42205
    PAYLOAD_ERROR = 42206  # v3: empty body, invalid topic name
    MESSAGE_SERIALIZATION = 42207  # the Schema Registry refused or lacks the schema named
    BAD_BATCH = 42208  # v3: empty batch, duplicate ids, too many records
    KAFKA_ERROR = 50002
    KAFKA_RETRIABLE_ERROR = 50003
    BROKER_NOT_AVAILABLE = 50302


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """How one domain error class looks over HTTP. ``message`` is used when the
    exception carries no message of its own."""

    status: int
    code: ErrorCode
    message: str
    fixed_message: bool = False  # True: always ``message``, never the exception's text


_BAD = ErrorSpec(400, ErrorCode.KAFKA_BAD_REQUEST, "Bad request.")
_TOO_LARGE = ErrorSpec(413, ErrorCode.PAYLOAD_TOO_LARGE, "Record too large.")

#: The single table: domain error class -> HTTP status, Confluent error_code, default text.
#: Lookup walks the exception's MRO, so subclasses inherit their parent's row.
ERROR_TABLE: dict[type[FranzError], ErrorSpec] = {
    # topics and partitions
    be.UnknownTopicOrPartitionError: ErrorSpec(
        404, ErrorCode.CONSUMER_INSTANCE_NOT_FOUND, "Unknown topic or partition."
    ),
    be.UnknownTopicError: ErrorSpec(404, ErrorCode.TOPIC_NOT_FOUND, "Topic not found."),
    be.UnknownPartitionError: ErrorSpec(404, ErrorCode.PARTITION_NOT_FOUND, "Partition not found."),
    be.TopicAlreadyExistsError: ErrorSpec(
        400, ErrorCode.KAFKA_BAD_REQUEST, "Topic already exists."
    ),
    be.InvalidPartitionsError: _BAD,
    be.PolicyViolationError: _BAD,
    be.InvalidReplicationFactorError: _BAD,
    be.InvalidReplicaAssignmentError: _BAD,
    ReassignmentInProgressError: _BAD,
    be.InvalidRequiredAcksError: _BAD,
    be.TopicDeletionDisabledError: _BAD,
    be.OffsetMetadataTooLargeError: _BAD,
    be.GroupRecordTooLargeError: _BAD,
    be.InvalidGroupIdError: _BAD,
    be.NonEmptyGroupError: _BAD,
    InvalidRequestError: _BAD,
    se.InvalidTopicError: _BAD,
    se.InvalidConfigError: _BAD,
    se.InvalidRecordError: _BAD,
    se.InvalidTimestampError: _BAD,
    # sizes
    se.MessageTooLargeError: _TOO_LARGE,
    se.RecordBatchTooLargeError: _TOO_LARGE,
    # reads
    se.OffsetOutOfRangeError: ErrorSpec(416, ErrorCode.OFFSET_OUT_OF_RANGE, "Offset out of range."),
    se.CorruptRecordError: ErrorSpec(500, ErrorCode.KAFKA_ERROR, "Corrupt record."),
    # groups and REST consumer instances
    be.UnknownMemberIdError: ErrorSpec(
        404, ErrorCode.CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found."
    ),
    be.GroupIdNotFoundError: ErrorSpec(404, ErrorCode.GROUP_NOT_FOUND, "Consumer group not found."),
    be.ConsumerAlreadyExistsError: ErrorSpec(
        409,
        ErrorCode.CONSUMER_ALREADY_EXISTS,
        "Consumer with specified consumer ID already exists in the specified consumer group.",
    ),
    be.IllegalConsumerStateError: ErrorSpec(409, ErrorCode.ILLEGAL_STATE, "Illegal state."),
    be.GroupMaxSizeReachedError: ErrorSpec(
        409, ErrorCode.ILLEGAL_STATE, "The consumer group has reached its max size."),
    be.InconsistentGroupProtocolError: ErrorSpec(  # Kafka clients' assignors, not franz's
        409, ErrorCode.ILLEGAL_STATE, "The consumer group's members use other assignors."),
    be.NoOffsetForPartitionError: ErrorSpec(
        409, ErrorCode.ILLEGAL_STATE, "No committed offset and auto.offset.reset is none."
    ),
    be.InvalidConsumerConfigError: ErrorSpec(
        422, ErrorCode.INVALID_CONSUMER_CONFIG, "Invalid consumer configuration."
    ),
    # Idempotency-Key (api.idempotency)
    be.IdempotencyKeyInUseError: ErrorSpec(
        409, ErrorCode.CONFLICT, "A request with this Idempotency-Key is in progress."),
    be.IdempotencyKeyReusedError: ErrorSpec(
        422, ErrorCode.UNPROCESSABLE_ENTITY, "Idempotency-Key reused for another request."),
    be.IdempotencyOutcomeUnknownError: ErrorSpec(
        422, ErrorCode.UNPROCESSABLE_ENTITY, "Outcome of the Idempotency-Key unknown."),
    be.IdempotencyKeysExhaustedError: ErrorSpec(
        429, ErrorCode.TOO_MANY_REQUESTS, "Too many live Idempotency-Keys."),
    # security
    be.AuthorizationError: ErrorSpec(403, ErrorCode.KAFKA_AUTHORIZATION, "Authorization failed."),
    be.SecurityDisabledError: ErrorSpec(
        400, ErrorCode.KAFKA_BAD_REQUEST, "No Authorizer is configured on the broker."
    ),
    be.UnknownUserError: ErrorSpec(404, ErrorCode.NOT_FOUND, "User not found."),
    # availability
    be.BrokerNotAvailableError: ErrorSpec(
        503, ErrorCode.BROKER_NOT_AVAILABLE, "Broker not available."
    ),
    # producing with schemas (core.broker.schemas.encoding; the registry's own routes
    # answer in its shape: api.schema_registry.errors)
    sche.KeySchemaMissingError: ErrorSpec(
        422, ErrorCode.KEY_SCHEMA_MISSING, "Request includes keys but does not include key schema"
    ),
    sche.ValueSchemaMissingError: ErrorSpec(
        422, ErrorCode.VALUE_SCHEMA_MISSING,
        "Request includes values but does not include value schema",
    ),
    sche.SerializationError: ErrorSpec(
        422, ErrorCode.JSON_CONVERSION, "Conversion of JSON to Object failed."
    ),
    sche.RawSchemaInvalidError: ErrorSpec(422, ErrorCode.INVALID_SCHEMA, "Invalid schema."),
    sche.SchemaLookupError: ErrorSpec(
        422, ErrorCode.MESSAGE_SERIALIZATION, "Error serializing message."
    ),
    sche.SchemaChoiceError: ErrorSpec(400, ErrorCode.BAD_REQUEST, "Bad Request."),
}

_RETRIABLE = ErrorSpec(500, ErrorCode.KAFKA_RETRIABLE_ERROR, "Retriable Kafka error.")
_NON_RETRIABLE = ErrorSpec(500, ErrorCode.KAFKA_ERROR, "Kafka error.")


_V3_UNKNOWN_TOPIC_PARTITION = ErrorSpec(
    404,
    ErrorCode.CONSUMER_INSTANCE_NOT_FOUND,
    "This server does not host this topic-partition.",
    fixed_message=True,
)

#: v3 rows that differ from ``ERROR_TABLE`` (rest-api-reference §3.1): Confluent's v3
#: resources answer an unknown topic or partition with Kafka's UNKNOWN_TOPIC_OR_PARTITION
#: (40403 and Kafka's text), and an unknown group or member with a plain 404.
V3_ERROR_TABLE: dict[type[FranzError], ErrorSpec] = {
    be.UnknownTopicOrPartitionError: _V3_UNKNOWN_TOPIC_PARTITION,
    be.UnknownTopicError: _V3_UNKNOWN_TOPIC_PARTITION,
    be.UnknownPartitionError: _V3_UNKNOWN_TOPIC_PARTITION,
    be.GroupIdNotFoundError: ErrorSpec(404, ErrorCode.NOT_FOUND, "Consumer group not found."),
    be.UnknownMemberIdError: ErrorSpec(404, ErrorCode.NOT_FOUND, "Consumer not found."),
}


def spec_for(exc: FranzError, *, v3: bool = False) -> ErrorSpec:
    """The table row of the most specific class of ``exc`` (``V3_ERROR_TABLE`` first on
    v3 paths); unlisted errors are Kafka errors, 50003 when a retry may succeed, else
    50002."""
    for cls in type(exc).__mro__:
        spec = (v3 and V3_ERROR_TABLE.get(cls)) or ERROR_TABLE.get(cls)
        if spec is not None:
            return spec
    return _RETRIABLE if exc.retriable else _NON_RETRIABLE


#: An absolute file path in an error's text: a ``/`` that starts a word, then path parts.
_ABS_PATH = re.compile(r"(?<![\w.~/-])(?:/[^\s/:'\",;()\[\]]+)+/?")


def _short_path(match: re.Match[str]) -> str:
    """``/srv/franz/data/orders-0/00000000000000000000.log`` -> ``orders-0/000...0.log``:
    the partition directory and the file, never where the data dir is."""
    parts = [part for part in match.group(0).split("/") if part]
    return "/".join(parts[-2:])


def without_paths(text: str) -> str:
    """``text`` with every absolute file path cut to its last two parts (for storage
    errors the partition directory, ``<topic>-<partition>``, and the file)."""
    return _ABS_PATH.sub(_short_path, text) if "/" in text else text


def message_for(exc: FranzError, spec: ErrorSpec) -> str:
    """The exception's own text when it has one, else the table's default. Storage
    errors never show a client an absolute file path (the broker's log has them)."""
    own = exc.message
    if spec.fixed_message:
        return spec.message
    if not own or own == type(exc).__name__:
        return spec.message
    return without_paths(own) if isinstance(exc, se.StorageError) else own


class ApiError(Exception):
    """A request problem found by the HTTP layer itself (bad content type, bad body)."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_body(code: int, message: str) -> bytes:
    return orjson.dumps({"error_code": int(code), "message": message})


def is_v3(request: Request) -> bool:
    return request.url.path.startswith("/v3")


def error_response(request: Request, status: int, code: int, message: str) -> Response:
    media = V3_MEDIA if is_v3(request) else V2_MEDIA
    return Response(error_body(code, message), status_code=status, media_type=media)


# --- pydantic / JSON decoding -> Confluent statuses ------------------------------------

# Jackson-level failures (syntax, unknown field, wrong JSON type) are 400 in Confluent;
# bean-validation failures (missing, empty, out of range) are 422.
_JACKSON_LIKE = (
    "json_invalid",
    "json_type",
    "extra_forbidden",
    "model_type",
    "dict_type",
    "list_type",
    "model_attributes_type",
    "typed_dict_type",
    "literal_error",
)


def _is_400(err_type: str) -> bool:
    return err_type in _JACKSON_LIKE or err_type.endswith(("_type", "_parsing"))


def _loc_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = str(part)
        else:
            out += f".{part}"
    return out or "body"


def validation_api_error(exc: ValidationError, *, body_name: str = "") -> ApiError:
    """A pydantic error as an ApiError whose message names the field. Deserialization
    problems (syntax, unknown field, wrong type) come first, as they do in Jackson,
    which fails before bean validation runs."""
    errs = exc.errors(include_url=False, include_context=False)
    first = next((e for e in errs if _is_400(str(e["type"]))), errs[0])
    etype = str(first["type"])
    loc = tuple(first.get("loc", ()))
    where = _loc_text(((body_name,) if body_name else ()) + loc)
    if etype == "json_invalid":
        return ApiError(400, ErrorCode.BAD_REQUEST, f"Malformed JSON: {first['msg']}")
    if etype == "extra_forbidden":
        return ApiError(400, ErrorCode.BAD_REQUEST, f"Unrecognized field: {where}")
    if etype == "missing":
        return ApiError(422, ErrorCode.UNPROCESSABLE_ENTITY, f"{where} may not be null")
    if etype == "too_short":
        return ApiError(422, ErrorCode.UNPROCESSABLE_ENTITY, f"{where} may not be empty")
    status = 400 if _is_400(etype) else 422
    return ApiError(status, status, f"{where}: {first['msg']}")


# --- handlers ---------------------------------------------------------------------------


async def _franz_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, FranzError)
    spec = spec_for(exc, v3=is_v3(request))
    if spec.status >= 500:
        log.warning("%s %s failed: %r", request.method, request.url.path, exc)
    return error_response(request, spec.status, spec.code, message_for(exc, spec))


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(request, exc.status, exc.code, exc.message)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ValidationError)
    err = validation_api_error(exc)
    return error_response(request, err.status, err.code, err.message)


async def _json_decode_error(request: Request, exc: Exception) -> Response:
    return error_response(request, 400, ErrorCode.BAD_REQUEST, f"Malformed JSON: {exc}")


async def _request_validation_error(request: Request, exc: Exception) -> Response:
    """Path and query parameters FastAPI could not parse.

    A path parameter that is not a number names nothing that exists: 404 (what JAX-RS
    answers too), 40402 for a partition. A bad query parameter is a 400."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    loc = tuple(first.get("loc", ()))
    where, name = (loc[0], loc[-1]) if loc else ("", "")
    if where == "path":
        if name == "partition_id":  # v3: Kafka's UNKNOWN_TOPIC_OR_PARTITION
            spec = _V3_UNKNOWN_TOPIC_PARTITION
            return error_response(request, spec.status, spec.code, spec.message)
        if name == "partition":
            return error_response(
                request, 404, ErrorCode.PARTITION_NOT_FOUND, "Partition not found."
            )
        return error_response(request, 404, ErrorCode.NOT_FOUND, "HTTP 404 Not Found")
    if where == "query":
        msg = f"Invalid query parameter {name}: {first.get('msg', 'invalid value')}"
        return error_response(request, 400, ErrorCode.BAD_REQUEST, msg)
    err_type = str(first.get("type", ""))
    status = 400 if _is_400(err_type) else 422
    return error_response(request, status, status, f"{_loc_text(loc)}: {first.get('msg')}")


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (unknown URL, wrong method) in Confluent's body shape."""
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    message = f"HTTP {exc.status_code} {detail}"
    response = error_response(request, exc.status_code, exc.status_code, message)
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        allowed = allowed_methods(request)
        if allowed:
            response.headers["Allow"] = allowed
    return response


def allowed_methods(request: Request) -> str:
    """``Allow`` of a 405: every method some route serves at this path. Starlette names
    only the first route whose path matched (``GET`` for ``/topics/{topic}``, which
    also takes ``POST``). The table is ``app.state.path_methods``, ``(path regex,
    methods)`` per route, set by ``api.app.create_app``; empty when it is missing."""
    table = getattr(request.app.state, "path_methods", None) or ()
    path = request.scope.get("path", "")
    methods = {m for regex, route_methods in table if regex.match(path) for m in route_methods}
    return ", ".join(sorted(methods))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("%s %s: unhandled error", request.method, request.url.path, exc_info=exc)
    return error_response(request, 500, ErrorCode.INTERNAL_SERVER_ERROR, "Internal Server Error")


def install_error_handlers(app: FastAPI) -> None:
    """Register every handler above on ``app``."""
    app.add_exception_handler(FranzError, _franz_error)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ValidationError, _validation_error)
    app.add_exception_handler(orjson.JSONDecodeError, _json_decode_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(Exception, _unexpected)
