"""The Schema Registry's HTTP API, Confluent Schema Registry's, at the root of every
listener (docs/schema-registry.md):

    GET    /schemas/types
    GET    /schemas                                   ?subjectPrefix=&deleted=&latestOnly=
    GET    /schemas/ids/{id}                          ?format=serialized (PROTOBUF)
    GET    /schemas/ids/{id}/schema
    GET    /schemas/ids/{id}/subjects                 ?deleted=
    GET    /schemas/ids/{id}/versions                 ?deleted=
    GET    /subjects                                  ?subjectPrefix=&deleted=&deletedOnly=
    GET    /subjects/{s}/versions                     ?deleted=&deletedOnly=
    POST   /subjects/{s}/versions                     register           ?normalize=
    GET    /subjects/{s}/versions/{v}                 v: 1.., latest, -1 ?deleted=&format=
    GET    /subjects/{s}/versions/{v}/schema
    GET    /subjects/{s}/versions/{v}/referencedby
    DELETE /subjects/{s}/versions/{v}                 ?permanent=
    POST   /subjects/{s}                              is this schema registered? ?deleted=
    DELETE /subjects/{s}                              ?permanent=
    GET    /config, PUT /config, DELETE /config
    GET    /config/{s} (?defaultToGlobal=), PUT /config/{s}, DELETE /config/{s}
    GET    /mode, PUT /mode (?force=), DELETE /mode
    GET    /mode/{s} (?defaultToGlobal=), PUT /mode/{s} (?force=), DELETE /mode/{s}
    POST   /compatibility/subjects/{s}/versions/{v}   ?verbose=&normalize=
    POST   /compatibility/subjects/{s}/versions       against what the level names

Answers and errors are ``application/vnd.schemaregistry.v1+json`` (plain
``application/json`` when the client accepts only that); request bodies may be that,
``application/vnd.schemaregistry+json`` or ``application/json``. A subject may contain
``/`` (written ``%2F``, as Confluent's clients do). Boolean query parameters are true
when they read ``true`` in any case, as in Java. Every call is served by the leader of
``_schemas-0`` (``Broker.schemas``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from api.deps import broker_of
from api.schema_registry.errors import (
    ACCEPTED_MEDIA,
    MEDIA,
    ApiProblem,
    RegistryRoute,
)
from api.security.authorization import Need, authenticated_only, requires
from core.broker.schemas.errors import (
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    SchemaNotFoundError,
)
from core.broker.schemas.model import (
    AVRO,
    MAX_ID,
    SCHEMA_TYPES,
    CompatibilityResult,
    Reference,
    SchemaInput,
    SchemaVersion,
    StoredSchema,
    check_subject,
    invalid_version,
    parse_version,
)
from core.broker.schemas.router import SchemaRegistryRouter
from core.broker.security.acl import Operation, ResourceType

router = APIRouter(route_class=RegistryRoute, tags=["Schema Registry"])

_READ = ("Schema Registry reads: subjects and schemas are what every producer and consumer "
         "of the cluster needs (Confluent's registry without its ACL plug-in)")
_USE = ("registering, looking up and checking a schema is what serializers do (Confluent's "
        "registry without its ACL plug-in)")
_ADMIN = Need(Operation.ALTER, ResourceType.CLUSTER)  # deletes, levels and modes
MAX_BODY_BYTES = 1024 * 1024  # request.body.max.bytes bounds it before the route too


# --- requests -------------------------------------------------------------------------


def _registry(request: Request) -> SchemaRegistryRouter:
    return broker_of(request).schemas


def _flag(request: Request, name: str, alias: str | None = None) -> bool:
    """A boolean query parameter; ``alias``: its other spelling (Confluent's Python client
    writes ``deleted_only`` where the server documents ``deletedOnly``)."""
    value = request.query_params.get(name)
    if value is None and alias is not None:
        value = request.query_params.get(alias)
    return (value or "").strip().lower() == "true"


def _int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text, 10)
    except ValueError:
        raise ApiProblem(400, 400, f"Invalid query parameter {name}: {text!r} is not an "
                                   "integer") from None


def _subject(subject: str) -> str:
    return check_subject(subject)


def _version(text: str) -> int:
    return parse_version(text)


def _format(request: Request) -> str | None:
    fmt = request.query_params.get("format")
    return fmt.strip().lower() if fmt else None


async def _body(request: Request) -> dict[str, Any]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media not in ACCEPTED_MEDIA:
        raise ApiProblem(415, 415, "HTTP 415 Unsupported Media Type")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiProblem(413, 413, f"Request body of {len(raw)} bytes exceeds {MAX_BODY_BYTES}")
    if not raw.strip():
        raise ApiProblem(400, 400, "The request has no body")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiProblem(400, 400, f"Malformed JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ApiProblem(400, 400, "The request body is not a JSON object")
    return doc


def _schema_input(doc: dict[str, Any]) -> SchemaInput:
    schema = doc.get("schema")
    if schema is None or schema == "":
        raise InvalidSchemaError("Empty schema")
    if not isinstance(schema, str):
        raise InvalidSchemaError("schema: a schema is given as a string")
    schema_type = doc.get("schemaType")
    if schema_type is None:
        schema_type = AVRO
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise InvalidSchemaError(f"Invalid schema type {str(schema_type)[:64]}: valid types "
                                 f"are {', '.join(SCHEMA_TYPES)}")
    refs = doc.get("references")
    if refs is None:
        refs = []
    if not isinstance(refs, list):
        raise InvalidSchemaError("references: a list of {name, subject, version}")
    out = []
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or \
                not isinstance(ref.get("subject"), str):
            raise InvalidSchemaError(f"references[{i}]: a reference has a name and a subject "
                                     "(strings) and a version")
        version = ref.get("version")
        if isinstance(version, bool) or not isinstance(version, (int, str)):
            raise InvalidSchemaError(f"references[{i}].version: a version number or latest")
        try:
            number = parse_version(version)
        except Exception:
            raise InvalidSchemaError(f"references[{i}].version: {version!r} is not a valid "
                                     "version") from None
        out.append(Reference(ref["name"], ref["subject"], number))
    return SchemaInput(schema, schema_type.upper(), tuple(out))


def _optional_int(doc: dict[str, Any], name: str) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if name == "version":
            raise invalid_version(value)
        raise InvalidSchemaError(f"{name}: an integer")
    return value if value > 0 else None


# --- answers --------------------------------------------------------------------------


def _media(request: Request) -> str:
    accept = request.headers.get("accept", "")
    if accept and "application/json" in accept and "schemaregistry" not in accept and \
            "*/*" not in accept:
        return "application/json"
    return MEDIA


def _json(request: Request, doc: Any) -> Response:
    return Response(orjson.dumps(doc), media_type=_media(request))


def _references(refs: Sequence[Reference]) -> list[dict[str, Any]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs]


def _version_doc(v: SchemaVersion) -> dict[str, Any]:
    doc: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id}
    if v.schema_type != AVRO:
        doc["schemaType"] = v.schema_type
    if v.references:
        doc["references"] = _references(v.references)
    doc["schema"] = v.schema
    return doc


def _schema_doc(s: StoredSchema) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": s.schema}
    if s.schema_type != AVRO:
        doc["schemaType"] = s.schema_type
    if s.references:
        doc["references"] = _references(s.references)
    return doc


def _page(request: Request, items: list[Any]) -> list[Any]:
    offset = max(0, _int(request, "offset", 0))
    limit = _int(request, "limit", -1)
    return items[offset:] if limit < 0 else items[offset:offset + limit]


def _schema_id(text: str) -> int:
    try:
        schema_id = int(text, 10)
    except ValueError:
        raise ApiProblem(404, 404, "HTTP 404 Not Found") from None
    if not 1 <= schema_id <= MAX_ID:
        raise SchemaNotFoundError(f"Schema {text} not found")
    return schema_id


# --- schemas ----------------------------------------------------------------------------


@router.get("/schemas/types", summary="List the schema types",
            operation_id="getSchemaTypes")
@authenticated_only(_READ)
async def schema_types(request: Request) -> Response:
    return _json(request, list(SCHEMA_TYPES))


@router.get("/schemas", summary="List the schemas of the subjects",
            operation_id="getSchemas")
@authenticated_only(_READ)
async def list_schemas(request: Request) -> Response:
    found = await _registry(request).call(
        "list_schemas", prefix=request.query_params.get("subjectPrefix", ""),
        deleted=_flag(request, "deleted"),
        latest_only=_flag(request, "latestOnly", "latest_only"))
    return _json(request, _page(request, [_version_doc(v) for v in found]))


@router.get("/schemas/ids/{schema_id}", summary="Get a schema by its id",
            operation_id="getSchemaById")
@authenticated_only(_READ)
async def schema_by_id(request: Request, schema_id: str) -> Response:
    found = await _registry(request).call("schema_by_id", schema_id=_schema_id(schema_id),
                                          fmt=_format(request))
    return _json(request, _schema_doc(found))


@router.get("/schemas/ids/{schema_id}/schema", summary="Get the text of a schema by its id",
            operation_id="getSchemaOnlyById")
@authenticated_only(_READ)
async def schema_text_by_id(request: Request, schema_id: str) -> Response:
    found = await _registry(request).call("schema_by_id", schema_id=_schema_id(schema_id),
                                          fmt=_format(request))
    return Response(found.schema, media_type=_media(request))


@router.get("/schemas/ids/{schema_id}/subjects", summary="List the subjects of a schema id",
            operation_id="getSubjectsBySchemaId")
@authenticated_only(_READ)
async def subjects_of_id(request: Request, schema_id: str) -> Response:
    found = await _registry(request).call("id_subjects", schema_id=_schema_id(schema_id),
                                          deleted=_flag(request, "deleted"))
    return _json(request, _page(request, list(found)))


@router.get("/schemas/ids/{schema_id}/versions",
            summary="List the subject versions of a schema id",
            operation_id="getSubjectVersionsBySchemaId")
@authenticated_only(_READ)
async def versions_of_id(request: Request, schema_id: str) -> Response:
    found = await _registry(request).call("id_versions", schema_id=_schema_id(schema_id),
                                          deleted=_flag(request, "deleted"))
    return _json(request, _page(request, [{"subject": v.subject, "version": v.version}
                                          for v in found]))


# --- subjects ---------------------------------------------------------------------------


@router.get("/subjects", summary="List the subjects", operation_id="listSubjects")
@authenticated_only(_READ)
async def list_subjects(request: Request) -> Response:
    found = await _registry(request).call(
        "subjects", prefix=request.query_params.get("subjectPrefix", ""),
        deleted=_flag(request, "deleted"),
        deleted_only=_flag(request, "deletedOnly", "deleted_only"))
    return _json(request, _page(request, list(found)))


# more specific paths first: a subject may contain '/'
@router.get("/subjects/{subject:path}/versions/{version}/schema",
            summary="Get the text of a version's schema", operation_id="getSchemaOnly")
@authenticated_only(_READ)
async def version_schema(request: Request, subject: str, version: str) -> Response:
    found = await _registry(request).call(
        "get_version", subject=_subject(subject), version=_version(version),
        deleted=_flag(request, "deleted"), fmt=_format(request))
    return Response(found.schema, media_type=_media(request))


@router.get("/subjects/{subject:path}/versions/{version}/referencedby",
            summary="List the ids of the schemas that reference a version",
            operation_id="getReferencedBy")
@authenticated_only(_READ)
async def referenced_by(request: Request, subject: str, version: str) -> Response:
    found = await _registry(request).call("referenced_by", subject=_subject(subject),
                                          version=_version(version))
    return _json(request, _page(request, list(found)))


@router.get("/subjects/{subject:path}/versions/{version}", summary="Get a version of a subject",
            operation_id="getSchemaByVersion")
@authenticated_only(_READ)
async def get_version(request: Request, subject: str, version: str) -> Response:
    found = await _registry(request).call(
        "get_version", subject=_subject(subject), version=_version(version),
        deleted=_flag(request, "deleted"), fmt=_format(request))
    return _json(request, _version_doc(found))


@router.delete("/subjects/{subject:path}/versions/{version}",
               summary="Delete a version of a subject (soft; permanent=true after soft)",
               operation_id="deleteSchemaVersion")
@requires(_ADMIN, audited=True)
async def delete_version(request: Request, subject: str, version: str) -> Response:
    deleted = await _registry(request).call(
        "delete_version", subject=_subject(subject), version=_version(version),
        permanent=_flag(request, "permanent"))
    return _json(request, deleted)


@router.get("/subjects/{subject:path}/versions", summary="List the versions of a subject",
            operation_id="listVersions")
@authenticated_only(_READ)
async def list_versions(request: Request, subject: str) -> Response:
    found = await _registry(request).call(
        "versions", subject=_subject(subject), deleted=_flag(request, "deleted"),
        deleted_only=_flag(request, "deletedOnly", "deleted_only"))
    return _json(request, _page(request, list(found)))


@router.post("/subjects/{subject:path}/versions",
             summary="Register a schema under a subject", operation_id="register")
@authenticated_only(_USE)
async def register(request: Request, subject: str) -> Response:
    subject = _subject(subject)
    doc = await _body(request)
    schema = _schema_input(doc)
    schema_id = await _registry(request).call(
        "register", subject=subject, schema=schema, normalize=_flag(request, "normalize"),
        schema_id=_optional_int(doc, "id"), version=_optional_int(doc, "version"))
    return _json(request, {"id": schema_id})


@router.post("/subjects/{subject:path}",
             summary="Look a schema up: the version of the subject that has it",
             operation_id="lookUpSchemaUnderSubject")
@authenticated_only(_USE)
async def lookup(request: Request, subject: str) -> Response:
    subject = _subject(subject)
    schema = _schema_input(await _body(request))
    found = await _registry(request).call(
        "lookup", subject=subject, schema=schema, deleted=_flag(request, "deleted"),
        normalize=_flag(request, "normalize"))
    return _json(request, _version_doc(found))


@router.delete("/subjects/{subject:path}",
               summary="Delete a subject (soft; permanent=true after soft)",
               operation_id="deleteSubject")
@requires(_ADMIN, audited=True)
async def delete_subject(request: Request, subject: str) -> Response:
    deleted = await _registry(request).call("delete_subject", subject=_subject(subject),
                                            permanent=_flag(request, "permanent"))
    return _json(request, list(deleted))


# --- config -----------------------------------------------------------------------------


def _level_of(doc: dict[str, Any]) -> str:
    level = doc.get("compatibility", doc.get("compatibilityLevel"))
    if not isinstance(level, str):
        raise InvalidCompatibilityLevelError(
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive")
    return level


@router.get("/config", summary="Get the global compatibility level",
            operation_id="getTopLevelConfig")
@authenticated_only(_READ)
async def get_config(request: Request) -> Response:
    level = await _registry(request).call("get_config")
    return _json(request, {"compatibilityLevel": level})


@router.put("/config", summary="Set the global compatibility level",
            operation_id="updateTopLevelConfig")
@requires(_ADMIN, audited=True)
async def put_config(request: Request) -> Response:
    level = await _registry(request).call("set_config", level=_level_of(await _body(request)))
    return _json(request, {"compatibility": level})


@router.delete("/config", summary="Reset the global compatibility level to BACKWARD",
               operation_id="deleteTopLevelConfig")
@requires(_ADMIN, audited=True)
async def delete_config(request: Request) -> Response:
    level = await _registry(request).call("delete_config")
    return _json(request, {"compatibilityLevel": level})


@router.get("/config/{subject:path}", summary="Get a subject's compatibility level",
            operation_id="getSubjectLevelConfig")
@authenticated_only(_READ)
async def get_subject_config(request: Request, subject: str) -> Response:
    level = await _registry(request).call(
        "get_config", subject=_subject(subject),
        default_to_global=_flag(request, "defaultToGlobal"))
    return _json(request, {"compatibilityLevel": level})


@router.put("/config/{subject:path}", summary="Set a subject's compatibility level",
            operation_id="updateSubjectLevelConfig")
@requires(_ADMIN, audited=True)
async def put_subject_config(request: Request, subject: str) -> Response:
    subject = _subject(subject)
    level = await _registry(request).call("set_config", subject=subject,
                                          level=_level_of(await _body(request)))
    return _json(request, {"compatibility": level})


@router.delete("/config/{subject:path}", summary="Remove a subject's compatibility level",
               operation_id="deleteSubjectConfig")
@requires(_ADMIN, audited=True)
async def delete_subject_config(request: Request, subject: str) -> Response:
    level = await _registry(request).call("delete_config", subject=_subject(subject))
    return _json(request, {"compatibilityLevel": level})


# --- mode -------------------------------------------------------------------------------


def _mode_of(doc: dict[str, Any]) -> str:
    mode = doc.get("mode")
    if not isinstance(mode, str):
        raise InvalidModeError(
            "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT")
    return mode


@router.get("/mode", summary="Get the global mode", operation_id="getTopLevelMode")
@authenticated_only(_READ)
async def get_mode(request: Request) -> Response:
    return _json(request, {"mode": await _registry(request).call("get_mode")})


@router.put("/mode", summary="Set the global mode (READWRITE, READONLY, IMPORT)",
            operation_id="updateTopLevelMode")
@requires(_ADMIN, audited=True)
async def put_mode(request: Request) -> Response:
    mode = await _registry(request).call("set_mode", mode=_mode_of(await _body(request)),
                                         force=_flag(request, "force"))
    return _json(request, {"mode": mode})


@router.delete("/mode", summary="Reset the global mode to READWRITE",
               operation_id="deleteTopLevelMode")
@requires(_ADMIN, audited=True)
async def delete_mode(request: Request) -> Response:
    return _json(request, {"mode": await _registry(request).call("delete_mode")})


@router.get("/mode/{subject:path}", summary="Get a subject's mode", operation_id="getMode")
@authenticated_only(_READ)
async def get_subject_mode(request: Request, subject: str) -> Response:
    mode = await _registry(request).call(
        "get_mode", subject=_subject(subject),
        default_to_global=_flag(request, "defaultToGlobal"))
    return _json(request, {"mode": mode})


@router.put("/mode/{subject:path}", summary="Set a subject's mode", operation_id="updateMode")
@requires(_ADMIN, audited=True)
async def put_subject_mode(request: Request, subject: str) -> Response:
    subject = _subject(subject)
    mode = await _registry(request).call("set_mode", subject=subject,
                                         mode=_mode_of(await _body(request)),
                                         force=_flag(request, "force"))
    return _json(request, {"mode": mode})


@router.delete("/mode/{subject:path}", summary="Remove a subject's mode",
               operation_id="deleteSubjectMode")
@requires(_ADMIN, audited=True)
async def delete_subject_mode(request: Request, subject: str) -> Response:
    mode = await _registry(request).call("delete_mode", subject=_subject(subject))
    return _json(request, {"mode": mode})


# --- compatibility ----------------------------------------------------------------------


def _compatibility(request: Request, result: CompatibilityResult) -> Response:
    doc: dict[str, Any] = {"is_compatible": result.is_compatible}
    if _flag(request, "verbose"):
        doc["messages"] = list(result.messages)
    return _json(request, doc)


@router.post("/compatibility/subjects/{subject:path}/versions/{version}",
             summary="Check a schema against a version of a subject",
             operation_id="testCompatibilityBySubjectName")
@authenticated_only(_USE)
async def check_version(request: Request, subject: str, version: str) -> Response:
    subject, number = _subject(subject), _version(version)
    schema = _schema_input(await _body(request))
    result = await _registry(request).call(
        "check_compatibility", subject=subject, schema=schema, version=number,
        normalize=_flag(request, "normalize"))
    return _compatibility(request, result)


@router.post("/compatibility/subjects/{subject:path}/versions",
             summary="Check a schema against the versions its subject's level names",
             operation_id="testCompatibilityForSubject")
@authenticated_only(_USE)
async def check_all(request: Request, subject: str) -> Response:
    subject = _subject(subject)
    schema = _schema_input(await _body(request))
    result = await _registry(request).call(
        "check_compatibility", subject=subject, schema=schema, version=None,
        normalize=_flag(request, "normalize"))
    return _compatibility(request, result)
