"""Schema Registry errors as HTTP: Confluent Schema Registry's status and ``error_code``
for each domain error, in its own content type (the route class, ``route``, answers
them).

    SchemaRegistryError (core.broker.schemas.errors)   the table below
    RequestTimedOutError                                500 / 50002 operation timed out
    no leader for _schemas-0, leader unreachable        500 / 50003 forwarding failed
    any other Kafka error on the way to the log         500 / 50001 backend store error
    a request problem found here (ApiProblem)           its own status and code
    unparsable path or query parameters (FastAPI)       400 / 400 (404 for path ones)

Errors a route's ACL check raises (403) and those of the framework outside the routes
(unknown paths, methods) keep the app's handlers (``api.errors``).
"""

from __future__ import annotations

import logging

import orjson
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from api.errors import spec_for
from core.broker import errors as be
from core.broker.schemas import errors as se
from core.errors import FranzError

log = logging.getLogger(__name__)

MEDIA = "application/vnd.schemaregistry.v1+json"
#: what a request body may be declared as (none declared: JSON too)
ACCEPTED_MEDIA = frozenset({MEDIA, "application/vnd.schemaregistry+json", "application/json",
                            "application/octet-stream"})

#: domain error -> (HTTP status, Confluent error_code)
ERROR_CODES: dict[type[se.SchemaRegistryError], tuple[int, int]] = {
    se.SubjectNotFoundError: (404, 40401),
    se.VersionNotFoundError: (404, 40402),
    se.SchemaNotFoundError: (404, 40403),
    se.SubjectSoftDeletedError: (404, 40404),
    se.SubjectNotSoftDeletedError: (404, 40405),
    se.VersionSoftDeletedError: (404, 40406),
    se.VersionNotSoftDeletedError: (404, 40407),
    se.SubjectCompatibilityNotConfiguredError: (404, 40408),
    se.SubjectModeNotConfiguredError: (404, 40409),
    se.IncompatibleSchemaError: (409, 409),
    se.InvalidSchemaError: (422, 42201),
    se.InvalidVersionError: (422, 42202),
    se.InvalidCompatibilityLevelError: (422, 42203),
    se.InvalidModeError: (422, 42204),
    se.OperationNotPermittedError: (422, 42205),
    se.ReferenceExistsError: (422, 42206),
    se.IdDoesNotMatchError: (422, 42207),
    se.InvalidSubjectError: (422, 42208),
    se.SchemaTooLargeError: (422, 42209),
}
STORE_ERROR = 50001
TIMEOUT = 50002
FORWARDING_FAILED = 50003
_UNAVAILABLE = (be.NotLeaderOrFollowerError, be.LeaderNotAvailableError,
                be.BrokerNotAvailableError, be.CoordinatorNotAvailableError)


class ApiProblem(Exception):
    """A request problem found by the registry's routes (content type, body shape)."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, code: int, message: str) -> Response:
    return Response(orjson.dumps({"error_code": code, "message": message}),
                    status_code=status, media_type=MEDIA)


def response_for(exc: Exception) -> Response | None:
    """The answer to ``exc``, None when the app's handlers answer it."""
    if isinstance(exc, ApiProblem):
        return error_response(exc.status, exc.code, exc.message)
    if isinstance(exc, se.SchemaRegistryError):
        for cls in type(exc).__mro__:
            found = ERROR_CODES.get(cls)
            if found is not None:
                return error_response(found[0], found[1], exc.message)
        return error_response(500, STORE_ERROR, exc.message)
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        loc = tuple(first.get("loc", ()))
        if loc and loc[0] == "path":
            return error_response(404, 404, "HTTP 404 Not Found")
        name = loc[-1] if loc else "request"
        return error_response(400, 400, f"Invalid parameter {name}: {first.get('msg', '')}")
    if isinstance(exc, FranzError):
        if isinstance(exc, be.RequestTimedOutError):
            return error_response(500, TIMEOUT, f"Operation timed out: {exc.message}")
        if isinstance(exc, _UNAVAILABLE):
            return error_response(500, FORWARDING_FAILED,
                                  f"Error while forwarding the request to the primary: "
                                  f"{exc.message}")
        if spec_for(exc).status < 500:
            return None  # refused by the ACLs (403) or the like: the app's answer
        log.warning("schema registry call failed: %r", exc)
        return error_response(500, STORE_ERROR, f"Error in the backend data store: {exc.message}")
    return None
