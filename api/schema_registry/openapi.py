"""The registry's routes in ``/openapi.json``: ``operation(...)`` gives a route
decorator's ``responses`` and ``openapi_extra`` from short declarations, since the routes
read their parameters and bodies by hand.

- Path and query parameters by name (``PATH``, ``QUERY``): each means the same on every
  route (Confluent's descriptions, franz's bounds).
- A body: one media type, the registry's own; the description names the others taken.
- The success answer in the registry's media type and in ``application/json`` (what a
  client that accepts only that gets), with its shape and an example.
- Errors by Confluent ``error_code`` (``CODES``), grouped under their HTTP status, each
  with the ``{"error_code", "message"}`` body in the registry's media type; every
  route also declares the 500s (50001, 50002, 50003).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from api.openapi import JSON_MEDIA, ref
from api.schema_registry.errors import FORWARDING_FAILED, MEDIA, STORE_ERROR, TIMEOUT
from core.broker.schemas.model import MAX_ID, MAX_SUBJECT_CHARS

#: Confluent error code -> (what it means, an example message)
CODES: dict[int, tuple[str, str]] = {
    400: ("malformed JSON or body, or a bad query parameter", "Malformed JSON: unexpected "
          "end of data"),
    404: ("not an id", "HTTP 404 Not Found"),
    409: ("incompatible schema", 'Schema being registered is incompatible with an earlier '
          'schema for subject "orders-value", details: [...]'),
    413: ("request body too large", "Request body of 2000000 bytes exceeds 1048576"),
    415: ("unsupported Content-Type", "HTTP 415 Unsupported Media Type"),
    40401: ("subject not found", "Subject 'orders-value' not found."),
    40402: ("version not found", "Version 7 not found."),
    40403: ("schema not found", "Schema 42 not found"),
    40404: ("subject was soft deleted", "Subject 'orders-value' was soft deleted.Set "
            "permanent=true to delete permanently"),
    40405: ("subject not soft deleted first", "Subject 'orders-value' was not deleted first "
            "before being permanently deleted"),
    40406: ("version was soft deleted", "Subject 'orders-value' Version 1 was soft deleted. "
            "Set permanent=true to delete permanently"),
    40407: ("version not soft deleted first", "Subject 'orders-value' Version 1 was not "
            "deleted first before being permanently deleted"),
    40408: ("no subject-level compatibility", "Subject 'orders-value' does not have "
            "subject-level compatibility configured"),
    40409: ("no subject-level mode", "Subject 'orders-value' does not have subject-level "
            "mode configured"),
    42201: ("invalid schema", "Invalid schema: unknown type 'strin'"),
    42202: ("invalid version", "The specified version '0' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"'),
    42203: ("invalid compatibility level", "Invalid compatibility level. Valid values are "
            "none, backward, forward, full, backward_transitive, forward_transitive, and "
            "full_transitive"),
    42204: ("invalid mode", "Invalid mode. Valid values are READWRITE, READONLY, "
            "READONLY_OVERRIDE, IMPORT"),
    42205: ("operation not permitted by the mode", "Subject orders-value is in read-only "
            "mode"),
    42206: ("other schemas reference the version", "One or more references exist to the "
            "schema {magic=1,keytype=SCHEMA,subject=money-value,version=1}."),
    42207: ("IMPORT: the schema has another id", "Schema already registered with id 3 "
            "instead of input id 100"),
    42208: ("invalid subject", "The specified subject is not valid."),
    42209: ("schema text too large", "Schema is too large: 600000 characters, at most "
            "524288"),
    STORE_ERROR: ("error in the backend data store (the `_schemas` log refused the write)",
                  "Error in the backend data store: not enough in-sync replicas"),
    TIMEOUT: ("operation timed out (the write was not acknowledged in time)",
              "Operation timed out: acks=all not reached"),
    FORWARDING_FAILED: ("no leader of `_schemas-0` could be reached",
                        "Error while forwarding the request to the primary: no leader"),
}
_SERVER_ERRORS = (STORE_ERROR, TIMEOUT, FORWARDING_FAILED)
#: the errors of reading a body (``routes._body``)
BODY_ERRORS = (400, 413, 415)
#: the errors of a ``{subject}`` and a ``{version}`` in the path
SUBJECT_ERRORS = (42208,)
VERSION_ERRORS = (42202,)

_BOOLEAN = {"type": "boolean", "default": False}
_INT = {"type": "integer"}
_VERSION_TEXT = ("The version: 1 .. 2^31-1, `latest` or -1 (the latest)")

#: Path parameters, by name.
PATH: dict[str, dict[str, Any]] = {
    "subject": {"description": "The subject; a `/` in it is sent as `%2F`",
                "schema": {"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT_CHARS},
                "example": "orders-value"},
    "version": {"description": _VERSION_TEXT, "schema": {"type": "string"},
                "example": "latest"},
    "id": {"description": "The schema's id (1 .. 2^31-1): the same for every subject and "
                          "version that has the schema",
           "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID}, "example": 1},
}

#: Query parameters, by name (booleans are true when they read `true` in any case).
QUERY: dict[str, dict[str, Any]] = {
    "subjectPrefix": {"description": "Only subjects that start with this",
                      "schema": {"type": "string", "default": ""}},
    "deleted": {"description": "Include soft-deleted versions (and subjects)",
                "schema": _BOOLEAN},
    "deletedOnly": {"description": "Only soft-deleted versions (subjects with only soft-"
                                   "deleted versions); `deleted_only` is read too",
                    "schema": _BOOLEAN},
    "latestOnly": {"description": "Only the latest version of each subject; `latest_only` "
                                  "is read too", "schema": _BOOLEAN},
    "offset": {"description": "Pagination: the first item to answer (from 0)",
               "schema": {**_INT, "default": 0}},
    "limit": {"description": "Pagination: at most this many items; negative: all",
              "schema": {**_INT, "default": -1}},
    "format": {"description": "`serialized`: a PROTOBUF schema as its base64 "
                              "`FileDescriptorProto` (what Confluent's deserializers ask "
                              "for); other values and types: the text as stored",
               "schema": {"type": "string"}},
    "normalize": {"description": "Compare schemas in their normalized form (Avro: full "
                                 "names; JSON: keys sorted)", "schema": _BOOLEAN},
    "permanent": {"description": "Delete for good what was soft-deleted before",
                  "schema": _BOOLEAN},
    "defaultToGlobal": {"description": "Answer the global setting when the subject has "
                                       "none of its own", "schema": _BOOLEAN},
    "force": {"description": "Turn IMPORT on even though schemas are registered in the "
                             "scope", "schema": _BOOLEAN},
    "verbose": {"description": "Add `messages`: each incompatibility found",
                "schema": _BOOLEAN},
}

BODY_MEDIA_NOTE = ("`application/vnd.schemaregistry+json`, `application/json` and "
                   "`application/octet-stream` are taken as well.")


def array_of(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": dict(item)}


#: The text of a schema alone: JSON (an object, an array, a string or a boolean) for
#: AVRO and JSON; `.proto` source for PROTOBUF, sent with the same content type as
#: Confluent's registry does.
SCHEMA_TEXT: dict[str, Any] = {
    "description": "The schema's text as stored: Avro's JSON or a JSON Schema (JSON); "
                   "`.proto` source for PROTOBUF (not JSON, though the content type is the "
                   "registry's, as in Confluent)",
    "anyOf": [{"type": "object"}, array_of({}), {"type": "string"}, {"type": "boolean"}],
}


def parameters(path: Iterable[str] = (), query: Iterable[str] = ()) -> list[dict[str, Any]]:
    out = [{"in": "path", "name": name, "required": True, **PATH[name]} for name in path]
    out += [{"in": "query", "name": name, "required": False, **QUERY[name]} for name in query]
    return out


def body(schema: str, example: Any, description: str) -> dict[str, Any]:
    """A required JSON body of component ``schema``."""
    return {"required": True, "description": f"{description} {BODY_MEDIA_NOTE}",
            "content": {MEDIA: {"schema": ref(schema), "example": example}}}


def errors(codes: Iterable[int]) -> dict[int | str, dict[str, Any]]:
    """The error answers of ``codes`` (and the 500s), one per HTTP status."""
    by_status: dict[int, list[int]] = {}
    for code in (*codes, *_SERVER_ERRORS):
        status = code if code < 1000 else int(str(code)[:3])
        if code not in by_status.setdefault(status, []):
            by_status[status].append(code)
    out: dict[int | str, dict[str, Any]] = {}
    for status, found in sorted(by_status.items()):
        text = "; ".join(f"{code}: {CODES[code][0]}" for code in found)
        example = {"error_code": found[0], "message": CODES[found[0]][1]}
        out[status] = {"description": f"Error code {text}", "content": {
            MEDIA: {"schema": ref("ErrorBody"), "example": example}}}
    return out


def operation(
    ok: Mapping[str, Any],
    example: Any,
    *,
    path: Iterable[str] = (),
    query: Iterable[str] = (),
    request: Mapping[str, Any] | None = None,
    codes: Iterable[int] = (),
    description: str = "",
) -> dict[str, Any]:
    """``responses``, ``openapi_extra`` (and ``description``) of a route decorator:
    ``ok`` the success answer's schema (``ref(...)`` or inline), ``request`` a
    ``body(...)``, ``codes`` the Confluent error codes the route answers."""
    content = {m: {"schema": dict(ok), "example": example} for m in (MEDIA, JSON_MEDIA)}
    responses: dict[int | str, dict[str, Any]] = {
        200: {"description": "Success", "content": content}, **errors(codes)}
    extra: dict[str, Any] = {"parameters": parameters(path, query)}
    if request is not None:
        extra["requestBody"] = dict(request)
    out: dict[str, Any] = {"responses": responses, "openapi_extra": extra}
    if description:
        out["description"] = description
    return out
