"""The Schema Registry's HTTP API, Confluent Schema Registry's, at the root of every
listener (docs/schema-registry.md), with Confluent's operationIds:

    GET    /schemas/types                    getSchemaTypes
    GET    /schemas                          getSchemas      ?subjectPrefix=&deleted=&latestOnly=
    GET    /schemas/ids/{id}                 getSchema       ?format=serialized (PROTOBUF)
    GET    /schemas/ids/{id}/schema          getSchemaOnly
    GET    /schemas/ids/{id}/subjects        getSubjects     ?deleted=
    GET    /schemas/ids/{id}/versions        getVersions     ?deleted=
    GET    /subjects                         list            ?subjectPrefix=&deleted=&deletedOnly=
    GET    /subjects/{s}/versions            listVersions    ?deleted=&deletedOnly=
    POST   /subjects/{s}/versions            register        ?normalize=
    GET    /subjects/{s}/versions/{v}        getSchemaByVersion  v: 1.., latest, -1
    GET    /subjects/{s}/versions/{v}/schema getSchemaOnly1
    GET    /subjects/{s}/versions/{v}/referencedby  getReferencedBy
    DELETE /subjects/{s}/versions/{v}        deleteSchemaVersion ?permanent=
    POST   /subjects/{s}                     lookUpSchemaUnderSubject ?deleted=&normalize=
    DELETE /subjects/{s}                     deleteSubject   ?permanent=
    GET, PUT, DELETE /config                 getTopLevelConfig, updateTopLevelConfig, ...
    GET, PUT, DELETE /config/{s}             getSubjectLevelConfig (?defaultToGlobal=), ...
    GET, PUT, DELETE /mode                   getTopLevelMode, updateTopLevelMode (?force=), ...
    GET, PUT, DELETE /mode/{s}               getMode, updateMode, deleteSubjectMode
    POST   /compatibility/subjects/{s}/versions/{v}  testCompatibilityBySubjectName
    POST   /compatibility/subjects/{s}/versions      testCompatibilityForSubject

(``list`` and ``getSchemaOnly1`` are the names Confluent's published document gives
them.) Requests are read by ``inputs``, answers written by ``answers``, both declared in
``/openapi.json`` by ``openapi``. A subject is one path segment; a ``/`` in it is sent as
``%2F``, as Confluent's clients do (``route``). Every call is served by the leader of
``_schemas-0`` (``Broker.schemas``).
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from api.deps import broker_of
from api.openapi import ref
from api.schema_registry import answers, inputs
from api.schema_registry.models import OPENAPI_SCHEMAS
from api.schema_registry.openapi import (
    BODY_ERRORS,
    SCHEMA_TEXT,
    SUBJECT_ERRORS,
    VERSION_ERRORS,
    array_of,
    body,
    operation,
)
from api.schema_registry.route import RegistryRoute
from api.security.authorization import Need, authenticated_only, requires
from core.broker.schemas.model import (
    DEFAULT_LEVEL,
    DEFAULT_MODE,
    SCHEMA_TYPES,
    check_subject,
    parse_version,
)
from core.broker.schemas.router import SchemaRegistryRouter
from core.broker.security.acl import Operation, ResourceType

__all__ = ["OPENAPI_SCHEMAS", "router"]

router = APIRouter(route_class=RegistryRoute, tags=["Schema Registry"])

_READ = ("Schema Registry reads: subjects and schemas are what every producer and consumer "
         "of the cluster needs (Confluent's registry without its ACL plug-in)")
_USE = ("registering, looking up and checking a schema is what serializers do (Confluent's "
        "registry without its ACL plug-in)")
_ADMIN = Need(Operation.ALTER, ResourceType.CLUSTER)  # deletes, levels and modes

SchemaId = Annotated[str, Path(alias="id")]

# examples
_SUBJECT = "orders-value"
_VERSION = {"subject": _SUBJECT, "version": 1, "id": 1, "schema": '"string"'}
_JSON_SCHEMA = {"schema": '{"type": "object", "properties": {"id": {"type": "integer"}}}',
                "schemaType": "JSON"}
_SCHEMA_BODY = body("RegisterSchemaRequest", _JSON_SCHEMA, "The schema: its text, type "
                    "(AVRO when left out) and references.")
_SUBJECT_VERSION = ("subject", "version")
_INTS = array_of({"type": "integer"})
_STRINGS = array_of({"type": "string"})


def _registry(request: Request) -> SchemaRegistryRouter:
    return broker_of(request).schemas


# --- schemas ----------------------------------------------------------------------------


@router.get("/schemas/types", summary="List the schema types", operation_id="getSchemaTypes",
            **operation(array_of({"type": "string", "enum": list(SCHEMA_TYPES)}),
                        list(SCHEMA_TYPES),
                        description="The schema types this registry takes."))
@authenticated_only(_READ)
async def schema_types(request: Request) -> Response:
    return answers.json_answer(request, list(SCHEMA_TYPES))


@router.get("/schemas", summary="List the schemas of the subjects", operation_id="getSchemas",
            **operation(array_of(ref("Schema")), [_VERSION],
                        query=("subjectPrefix", "deleted", "latestOnly", "offset", "limit"),
                        codes=(400,), description="Every version of the subjects, by subject "
                        "and version; `latestOnly`: each subject's latest."))
@authenticated_only(_READ)
async def list_schemas(request: Request) -> Response:
    found = await _registry(request).call(
        "list_schemas", prefix=request.query_params.get("subjectPrefix", ""),
        deleted=inputs.flag(request, "deleted"),
        latest_only=inputs.flag(request, "latestOnly", "latest_only"))
    return answers.json_answer(request, inputs.page(request, [answers.version_doc(v)
                                                              for v in found]))


class _ByIdOperation(TypedDict):
    path: tuple[str, ...]
    query: tuple[str, ...]
    codes: tuple[int, ...]


_BY_ID: _ByIdOperation = {"path": ("id",), "query": ("format",), "codes": (404, 40403, 42201)}


@router.get("/schemas/ids/{id}", summary="Get a schema by its id", operation_id="getSchema",
            **operation(ref("SchemaString"), {"schema": '"string"'}, **_BY_ID,
                        description="The schema registered under this id, with its type and "
                        "references."))
@authenticated_only(_READ)
async def schema_by_id(request: Request, schema_id: SchemaId) -> Response:
    found = await _registry(request).call("schema_by_id", schema_id=inputs.schema_id(schema_id),
                                          fmt=inputs.output_format(request))
    return answers.json_answer(request, answers.schema_doc(found))


@router.get("/schemas/ids/{id}/schema", summary="Get the text of a schema by its id",
            operation_id="getSchemaOnly",
            **operation(SCHEMA_TEXT, "string", **_BY_ID,
                        description="The text of the schema registered under this id, "
                        "alone."))
@authenticated_only(_READ)
async def schema_text_by_id(request: Request, schema_id: SchemaId) -> Response:
    found = await _registry(request).call("schema_by_id", schema_id=inputs.schema_id(schema_id),
                                          fmt=inputs.output_format(request))
    return answers.text_answer(request, found.schema)


@router.get("/schemas/ids/{id}/subjects", summary="List the subjects of a schema id",
            operation_id="getSubjects",
            **operation(_STRINGS, [_SUBJECT], path=("id",),
                        query=("deleted", "offset", "limit"), codes=(400, 404, 40403),
                        description="The subjects with a version of this schema."))
@authenticated_only(_READ)
async def subjects_of_id(request: Request, schema_id: SchemaId) -> Response:
    found = await _registry(request).call("id_subjects", schema_id=inputs.schema_id(schema_id),
                                          deleted=inputs.flag(request, "deleted"))
    return answers.json_answer(request, inputs.page(request, list(found)))


@router.get("/schemas/ids/{id}/versions", summary="List the subject versions of a schema id",
            operation_id="getVersions",
            **operation(array_of(ref("SubjectVersion")), [{"subject": _SUBJECT, "version": 1}],
                        path=("id",), query=("deleted", "offset", "limit"),
                        codes=(400, 404, 40403),
                        description="The subject versions that have this schema."))
@authenticated_only(_READ)
async def versions_of_id(request: Request, schema_id: SchemaId) -> Response:
    found = await _registry(request).call("id_versions", schema_id=inputs.schema_id(schema_id),
                                          deleted=inputs.flag(request, "deleted"))
    return answers.json_answer(request, inputs.page(request, [
        {"subject": v.subject, "version": v.version} for v in found]))


# --- subjects ---------------------------------------------------------------------------


@router.get("/subjects", summary="List the subjects", operation_id="list",
            **operation(_STRINGS, [_SUBJECT],
                        query=("subjectPrefix", "deleted", "deletedOnly", "offset", "limit"),
                        codes=(400,), description="The subjects with a live version "
                        "(`deleted`: soft-deleted ones too)."))
@authenticated_only(_READ)
async def list_subjects(request: Request) -> Response:
    found = await _registry(request).call(
        "subjects", prefix=request.query_params.get("subjectPrefix", ""),
        deleted=inputs.flag(request, "deleted"),
        deleted_only=inputs.flag(request, "deletedOnly", "deleted_only"))
    return answers.json_answer(request, inputs.page(request, list(found)))


_VERSION_READ = (40401, 40402, *SUBJECT_ERRORS, *VERSION_ERRORS)


@router.get("/subjects/{subject}/versions/{version}/schema",
            summary="Get the text of a version's schema", operation_id="getSchemaOnly1",
            **operation(SCHEMA_TEXT, "string", path=_SUBJECT_VERSION,
                        query=("deleted", "format"), codes=(*_VERSION_READ, 42201),
                        description="The text of the version's schema, alone."))
@authenticated_only(_READ)
async def version_schema(request: Request, subject: str, version: str) -> Response:
    found = await _registry(request).call(
        "get_version", subject=check_subject(subject), version=parse_version(version),
        deleted=inputs.flag(request, "deleted"), fmt=inputs.output_format(request))
    return answers.text_answer(request, found.schema)


@router.get("/subjects/{subject}/versions/{version}/referencedby",
            summary="List the ids of the schemas that reference a version",
            operation_id="getReferencedBy",
            **operation(_INTS, [2], path=_SUBJECT_VERSION, query=("offset", "limit"),
                        codes=(400, *_VERSION_READ),
                        description="The ids of the schemas whose references name this "
                        "version."))
@authenticated_only(_READ)
async def referenced_by(request: Request, subject: str, version: str) -> Response:
    found = await _registry(request).call("referenced_by", subject=check_subject(subject),
                                          version=parse_version(version))
    return answers.json_answer(request, inputs.page(request, list(found)))


@router.get("/subjects/{subject}/versions/{version}", summary="Get a version of a subject",
            operation_id="getSchemaByVersion",
            **operation(ref("Schema"), _VERSION, path=_SUBJECT_VERSION,
                        query=("deleted", "format"), codes=(*_VERSION_READ, 42201),
                        description="The version: its subject, number, id and schema."))
@authenticated_only(_READ)
async def get_version(request: Request, subject: str, version: str) -> Response:
    found = await _registry(request).call(
        "get_version", subject=check_subject(subject), version=parse_version(version),
        deleted=inputs.flag(request, "deleted"), fmt=inputs.output_format(request))
    return answers.json_answer(request, answers.version_doc(found))


@router.delete("/subjects/{subject}/versions/{version}",
               summary="Delete a version of a subject (soft; permanent=true after soft)",
               operation_id="deleteSchemaVersion",
               **operation({"type": "integer"}, 1, path=_SUBJECT_VERSION, query=("permanent",),
                           codes=(40401, 40402, 40406, 40407, 42202, 42205, 42206, 42208),
                           description="Soft-deletes the version (its id stays readable); "
                           "`permanent=true` then deletes it for good. Answers its number."))
@requires(_ADMIN, audited=True)
async def delete_version(request: Request, subject: str, version: str) -> Response:
    deleted = await _registry(request).call(
        "delete_version", subject=check_subject(subject), version=parse_version(version),
        permanent=inputs.flag(request, "permanent"))
    return answers.json_answer(request, deleted)


@router.get("/subjects/{subject}/versions", summary="List the versions of a subject",
            operation_id="listVersions",
            **operation(_INTS, [1, 2], path=("subject",),
                        query=("deleted", "deletedOnly", "offset", "limit"),
                        codes=(400, 40401, *SUBJECT_ERRORS),
                        description="The version numbers of the subject."))
@authenticated_only(_READ)
async def list_versions(request: Request, subject: str) -> Response:
    found = await _registry(request).call(
        "versions", subject=check_subject(subject), deleted=inputs.flag(request, "deleted"),
        deleted_only=inputs.flag(request, "deletedOnly", "deleted_only"))
    return answers.json_answer(request, inputs.page(request, list(found)))


@router.post("/subjects/{subject}/versions",
             summary="Register a schema under a subject", operation_id="register",
             **operation(ref("RegisterSchemaResponse"), {"id": 1}, path=("subject",),
                         query=("normalize",), request=_SCHEMA_BODY,
                         codes=(*BODY_ERRORS, 409, 42201, 42202, 42205, 42207, 42208, 42209),
                         description="A new version of the subject, unless a live version "
                         "has this schema already; a schema registered before (under any "
                         "subject) keeps its id. Checked against the subject's compatibility "
                         "level (409 when incompatible)."))
@authenticated_only(_USE)
async def register(request: Request, subject: str) -> Response:
    subject = check_subject(subject)
    doc = await inputs.json_body(request)
    schema = inputs.schema_input(doc)
    schema_id = await _registry(request).call(
        "register", subject=subject, schema=schema,
        normalize=inputs.flag(request, "normalize"),
        schema_id=inputs.optional_int(doc, "id"), version=inputs.optional_int(doc, "version"))
    return answers.json_answer(request, {"id": schema_id})


@router.post("/subjects/{subject}",
             summary="Look a schema up: the version of the subject that has it",
             operation_id="lookUpSchemaUnderSubject",
             **operation(ref("Schema"), _VERSION, path=("subject",),
                         query=("deleted", "normalize"), request=_SCHEMA_BODY,
                         codes=(*BODY_ERRORS, 40401, 40403, 42201, 42208, 42209),
                         description="Whether the schema is registered under the subject: "
                         "the latest version that has it."))
@authenticated_only(_USE)
async def lookup(request: Request, subject: str) -> Response:
    subject = check_subject(subject)
    schema = inputs.schema_input(await inputs.json_body(request))
    found = await _registry(request).call(
        "lookup", subject=subject, schema=schema, deleted=inputs.flag(request, "deleted"),
        normalize=inputs.flag(request, "normalize"))
    return answers.json_answer(request, answers.version_doc(found))


@router.delete("/subjects/{subject}",
               summary="Delete a subject (soft; permanent=true after soft)",
               operation_id="deleteSubject",
               **operation(_INTS, [1, 2], path=("subject",), query=("permanent",),
                           codes=(40401, 40404, 40405, 42205, 42206, 42208),
                           description="Soft-deletes every version of the subject (and its "
                           "subject-level compatibility and mode); `permanent=true` then "
                           "deletes them for good. Answers the version numbers."))
@requires(_ADMIN, audited=True)
async def delete_subject(request: Request, subject: str) -> Response:
    deleted = await _registry(request).call("delete_subject", subject=check_subject(subject),
                                            permanent=inputs.flag(request, "permanent"))
    return answers.json_answer(request, list(deleted))


# --- config -----------------------------------------------------------------------------

_LEVEL = {"compatibilityLevel": DEFAULT_LEVEL}
_LEVEL_BODY = body("ConfigUpdateRequest", {"compatibility": "FULL"}, "The level.")


@router.get("/config", summary="Get the global compatibility level",
            operation_id="getTopLevelConfig",
            **operation(ref("Config"), _LEVEL,
                        description="The level subjects without their own are checked at."))
@authenticated_only(_READ)
async def get_config(request: Request) -> Response:
    level = await _registry(request).call("get_config")
    return answers.json_answer(request, {"compatibilityLevel": level})


@router.put("/config", summary="Set the global compatibility level",
            operation_id="updateTopLevelConfig",
            **operation(ref("ConfigUpdateRequest"), {"compatibility": "FULL"},
                        request=_LEVEL_BODY, codes=(*BODY_ERRORS, 42203),
                        description="Sets the global level; answers it."))
@requires(_ADMIN, audited=True)
async def put_config(request: Request) -> Response:
    level = await _registry(request).call(
        "set_config", level=inputs.level_of(await inputs.json_body(request)))
    return answers.json_answer(request, {"compatibility": level})


@router.delete("/config", summary="Reset the global compatibility level to BACKWARD",
               operation_id="deleteTopLevelConfig",
               **operation(ref("Config"), _LEVEL,
                           description="Removes the global level set (back to BACKWARD); "
                           "answers the level it had."))
@requires(_ADMIN, audited=True)
async def delete_config(request: Request) -> Response:
    level = await _registry(request).call("delete_config")
    return answers.json_answer(request, {"compatibilityLevel": level})


@router.get("/config/{subject}", summary="Get a subject's compatibility level",
            operation_id="getSubjectLevelConfig",
            **operation(ref("Config"), _LEVEL, path=("subject",), query=("defaultToGlobal",),
                        codes=(40408, *SUBJECT_ERRORS),
                        description="The subject's own level (`defaultToGlobal=true`: the "
                        "global one when it has none)."))
@authenticated_only(_READ)
async def get_subject_config(request: Request, subject: str) -> Response:
    level = await _registry(request).call(
        "get_config", subject=check_subject(subject),
        default_to_global=inputs.flag(request, "defaultToGlobal"))
    return answers.json_answer(request, {"compatibilityLevel": level})


@router.put("/config/{subject}", summary="Set a subject's compatibility level",
            operation_id="updateSubjectLevelConfig",
            **operation(ref("ConfigUpdateRequest"), {"compatibility": "FULL"},
                        path=("subject",), request=_LEVEL_BODY,
                        codes=(*BODY_ERRORS, 42203, *SUBJECT_ERRORS),
                        description="Sets the subject's own level; answers it."))
@requires(_ADMIN, audited=True)
async def put_subject_config(request: Request, subject: str) -> Response:
    subject = check_subject(subject)
    level = await _registry(request).call(
        "set_config", subject=subject, level=inputs.level_of(await inputs.json_body(request)))
    return answers.json_answer(request, {"compatibility": level})


@router.delete("/config/{subject}", summary="Remove a subject's compatibility level",
               operation_id="deleteSubjectConfig",
               **operation(ref("Config"), _LEVEL, path=("subject",),
                           codes=(40401, 40408, *SUBJECT_ERRORS),
                           description="Removes the subject's own level (the global one "
                           "applies again); answers the level it had."))
@requires(_ADMIN, audited=True)
async def delete_subject_config(request: Request, subject: str) -> Response:
    level = await _registry(request).call("delete_config", subject=check_subject(subject))
    return answers.json_answer(request, {"compatibilityLevel": level})


# --- mode -------------------------------------------------------------------------------

_MODE = {"mode": DEFAULT_MODE}
_MODE_BODY = body("ModeUpdateRequest", {"mode": "READONLY"}, "The mode.")


@router.get("/mode", summary="Get the global mode", operation_id="getTopLevelMode",
            **operation(ref("Mode"), _MODE,
                        description="The mode of subjects without their own."))
@authenticated_only(_READ)
async def get_mode(request: Request) -> Response:
    return answers.json_answer(request, {"mode": await _registry(request).call("get_mode")})


@router.put("/mode", summary="Set the global mode (READWRITE, READONLY, IMPORT)",
            operation_id="updateTopLevelMode",
            **operation(ref("Mode"), {"mode": "READONLY"}, query=("force",),
                        request=_MODE_BODY, codes=(*BODY_ERRORS, 42204, 42205),
                        description="Sets the global mode; IMPORT needs no subject with "
                        "versions unless `force=true`. Answers it."))
@requires(_ADMIN, audited=True)
async def put_mode(request: Request) -> Response:
    mode = await _registry(request).call(
        "set_mode", mode=inputs.mode_of(await inputs.json_body(request)),
        force=inputs.flag(request, "force"))
    return answers.json_answer(request, {"mode": mode})


@router.delete("/mode", summary="Reset the global mode to READWRITE",
               operation_id="deleteTopLevelMode",
               **operation(ref("Mode"), _MODE,
                           description="Removes the global mode set (back to READWRITE); "
                           "answers the mode it had."))
@requires(_ADMIN, audited=True)
async def delete_mode(request: Request) -> Response:
    return answers.json_answer(request, {"mode": await _registry(request).call("delete_mode")})


@router.get("/mode/{subject}", summary="Get a subject's mode", operation_id="getMode",
            **operation(ref("Mode"), _MODE, path=("subject",), query=("defaultToGlobal",),
                        codes=(40409, *SUBJECT_ERRORS),
                        description="The subject's own mode (`defaultToGlobal=true`: the "
                        "global one when it has none)."))
@authenticated_only(_READ)
async def get_subject_mode(request: Request, subject: str) -> Response:
    mode = await _registry(request).call(
        "get_mode", subject=check_subject(subject),
        default_to_global=inputs.flag(request, "defaultToGlobal"))
    return answers.json_answer(request, {"mode": mode})


@router.put("/mode/{subject}", summary="Set a subject's mode", operation_id="updateMode",
            **operation(ref("Mode"), {"mode": "READONLY"}, path=("subject",), query=("force",),
                        request=_MODE_BODY, codes=(*BODY_ERRORS, 42204, 42205,
                                                   *SUBJECT_ERRORS),
                        description="Sets the subject's own mode; IMPORT needs a subject "
                        "without versions unless `force=true`. Answers it."))
@requires(_ADMIN, audited=True)
async def put_subject_mode(request: Request, subject: str) -> Response:
    subject = check_subject(subject)
    mode = await _registry(request).call(
        "set_mode", subject=subject, mode=inputs.mode_of(await inputs.json_body(request)),
        force=inputs.flag(request, "force"))
    return answers.json_answer(request, {"mode": mode})


@router.delete("/mode/{subject}", summary="Remove a subject's mode",
               operation_id="deleteSubjectMode",
               **operation(ref("Mode"), _MODE, path=("subject",),
                           codes=(40401, 40409, *SUBJECT_ERRORS),
                           description="Removes the subject's own mode (the global one "
                           "applies again); answers the mode it had."))
@requires(_ADMIN, audited=True)
async def delete_subject_mode(request: Request, subject: str) -> Response:
    mode = await _registry(request).call("delete_mode", subject=check_subject(subject))
    return answers.json_answer(request, {"mode": mode})


# --- compatibility ----------------------------------------------------------------------

_COMPATIBLE = {"is_compatible": True}
_CHECK = (*BODY_ERRORS, 42201, 42208, 42209)


@router.post("/compatibility/subjects/{subject}/versions/{version}",
             summary="Check a schema against a version of a subject",
             operation_id="testCompatibilityBySubjectName",
             **operation(ref("CompatibilityCheckResponse"), _COMPATIBLE, path=_SUBJECT_VERSION,
                         query=("verbose", "normalize"), request=_SCHEMA_BODY,
                         codes=(*_CHECK, 40401, 40402, 42202),
                         description="Whether the schema is compatible with the version, at "
                         "the subject's level (`latest` with no versions: compatible)."))
@authenticated_only(_USE)
async def check_version(request: Request, subject: str, version: str) -> Response:
    subject, number = check_subject(subject), parse_version(version)
    schema = inputs.schema_input(await inputs.json_body(request))
    result = await _registry(request).call(
        "check_compatibility", subject=subject, schema=schema, version=number,
        normalize=inputs.flag(request, "normalize"))
    return answers.json_answer(request, answers.compatibility_doc(
        result, verbose=inputs.flag(request, "verbose")))


@router.post("/compatibility/subjects/{subject}/versions",
             summary="Check a schema against the versions its subject's level names",
             operation_id="testCompatibilityForSubject",
             **operation(ref("CompatibilityCheckResponse"), _COMPATIBLE, path=("subject",),
                         query=("verbose", "normalize"), request=_SCHEMA_BODY, codes=_CHECK,
                         description="Whether the schema is compatible with the versions "
                         "the subject's level names (the latest, or all of them for the "
                         "_TRANSITIVE levels)."))
@authenticated_only(_USE)
async def check_all(request: Request, subject: str) -> Response:
    subject = check_subject(subject)
    schema = inputs.schema_input(await inputs.json_body(request))
    result = await _registry(request).call(
        "check_compatibility", subject=subject, schema=schema, version=None,
        normalize=inputs.flag(request, "normalize"))
    return answers.json_answer(request, answers.compatibility_doc(
        result, verbose=inputs.flag(request, "verbose")))
