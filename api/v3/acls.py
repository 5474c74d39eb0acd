"""v3 ACLs (Confluent's ``/v3/clusters/{cluster_id}/acls``): search, create, create in a
batch, delete, over Kafka's ACL model (``core.broker.security.acl``).

    GET    /acls?resource_type=&resource_name=&pattern_type=&principal=&host=&operation=&permission=
           -> 200 KafkaAclList (filters default to ANY / no filter; pattern_type MATCH:
              every pattern that applies to resource_name)
    POST   /acls          one ACL -> 201, empty body, Location: the search URL of that ACL
    POST   /acls:batch    {"data": [ACL, ...]} -> 204
    DELETE /acls?...      resource_type, pattern_type, operation, permission required
           -> 200 {"data": [the deleted ACLs]}

Searching needs DESCRIBE on the cluster, changing needs ALTER on the cluster. A broker
without an authorizer answers 400 / 40002 (Kafka's SECURITY_DISABLED), as Confluent's
does. Bad values are 400 naming the field ("resource_type cannot be ANY").
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field, TypeAdapter, with_config
from starlette.responses import Response
from typing_extensions import TypedDict

from api.errors import ApiError, ErrorCode
from api.openapi import enum_parameter, enum_schema
from api.security.authentication import client_host_of, principal_of
from api.security.authorization import Need, requires, security_of
from api.v3.common import (
    ClusterLinks,
    V3Response,
    body_doc,
    cluster_links,
    errors,
    read_body,
    v3_json,
)
from api.v3.models import (
    ACL_OPERATIONS,
    ACL_PATTERN_TYPES,
    ACL_PERMISSIONS,
    ACL_RESOURCE_TYPES,
    DeletedKafkaAcls,
    KafkaAclList,
)
from core.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

router = APIRouter(
    prefix="/v3/clusters/{cluster_id}",
    tags=["ACL (v3)"],
    dependencies=[Depends(cluster_links)],
    default_response_class=V3Response,
)

MAX_BATCH = 1000
_Text = Annotated[str, Field(max_length=1024)]


_ANY_CASE = " (any case)"


@with_config({"extra": "forbid"})
class CreateAclRequest(TypedDict):
    """One ACL to create; the enum fields are checked by hand (any case, ``_`` optional)."""

    resource_type: Annotated[_Text, enum_schema(*ACL_RESOURCE_TYPES), Field(
        description="The kind of resource" + _ANY_CASE, examples=["TOPIC"])]
    resource_name: Annotated[_Text, Field(
        description="The resource name, or its prefix (PREFIXED); `*` for every resource",
        examples=["orders"])]
    pattern_type: Annotated[_Text, enum_schema(*ACL_PATTERN_TYPES), Field(
        description="How `resource_name` matches: LITERAL or PREFIXED" + _ANY_CASE,
        examples=["LITERAL"])]
    principal: Annotated[_Text, Field(
        description="Who the rule is for, e.g. `User:alice`; `User:*` for everyone",
        examples=["User:alice"])]
    host: Annotated[_Text, Field(description="The client host it applies to; `*` for every "
                                 "host", examples=["*"])]
    operation: Annotated[_Text, enum_schema(*ACL_OPERATIONS), Field(
        description="The operation allowed or denied" + _ANY_CASE, examples=["READ"])]
    permission: Annotated[_Text, enum_schema(*ACL_PERMISSIONS), Field(
        description="ALLOW or DENY" + _ANY_CASE, examples=["ALLOW"])]


@with_config({"extra": "forbid"})
class CreateAclBatchRequest(TypedDict):
    data: Annotated[list[CreateAclRequest], Field(
        min_length=1, max_length=MAX_BATCH,
        description=f"The ACLs to create, 1 to {MAX_BATCH}")]


ACL_IN: TypeAdapter[CreateAclRequest] = TypeAdapter(CreateAclRequest)
ACL_BATCH_IN: TypeAdapter[CreateAclBatchRequest] = TypeAdapter(CreateAclBatchRequest)
#: The request bodies, for ``components/schemas``.
OPENAPI_SCHEMAS = {t.__name__: t for t in (CreateAclRequest, CreateAclBatchRequest)}
_EXAMPLE = {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
            "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}


def _bad(message: str) -> ApiError:
    return ApiError(400, ErrorCode.BAD_REQUEST, message)


def _enum(kind: Any, field: str, text: str | None, *, concrete: bool) -> Any:
    """The enum member named ``text`` (None or empty: ANY); 400 naming the field."""
    if text is None or text == "":
        if concrete:
            raise _bad(f"{field} is required")
        return kind.ANY
    try:
        value = kind.from_name(text)
    except ValueError as exc:
        raise _bad(f"{field}: {exc}") from None
    if concrete and value.name in ("ANY", "MATCH"):
        raise _bad(f"{field} cannot be {value.name}")
    return value


def _binding(raw: CreateAclRequest, where: str = "") -> AclBinding:
    try:
        pattern = ResourcePattern(
            _enum(ResourceType, f"{where}resource_type", raw["resource_type"], concrete=True),
            raw["resource_name"],
            _enum(PatternType, f"{where}pattern_type", raw["pattern_type"], concrete=True))
        entry = AccessControlEntry(
            raw["principal"], raw["host"],
            _enum(Operation, f"{where}operation", raw["operation"], concrete=True),
            _enum(Permission, f"{where}permission", raw["permission"], concrete=True))
        return AclBinding(pattern, entry)
    except ValueError as exc:
        raise ApiError(400, ErrorCode.KAFKA_BAD_REQUEST, f"{where}{exc}") from None


def _search_url(links: Any, values: dict[str, str]) -> str:
    return links.url("acls") + "?" + urlencode(values)


def _acl_values(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.pattern.resource_type.name, "resource_name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name, "principal": b.entry.principal,
            "host": b.entry.host, "operation": b.entry.operation.name,
            "permission": b.entry.permission.name}


def acl_data(links: Any, b: AclBinding) -> dict[str, Any]:
    values = _acl_values(b)
    return {"kind": "KafkaAcl", "metadata": {"self": _search_url(links, values)},
            "cluster_id": links.cluster_id, **values}


FilterQuery = Annotated[str | None, Query(max_length=1024)]
_FILTER = "ACL filter"


def _filter_parameters(*, required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The ACL filter's query parameters as documented: the enum ones with their values
    (any case; missing or empty: ANY), the others free text (missing: any)."""
    def enum(name: str, values: Any, what: str) -> dict[str, Any]:
        param = enum_parameter(name, values, f"{_FILTER}: {what}{_ANY_CASE}; ANY or "
                               "missing: every one")
        param["required"] = name in required
        return param

    def text(name: str, what: str) -> dict[str, Any]:
        return {"in": "query", "name": name, "required": False,
                "description": f"{_FILTER}: {what}; missing: any",
                "schema": {"type": "string", "maxLength": 1024}}

    return [
        enum("resource_type", [m.name for m in ResourceType], "the kind of resource"),
        text("resource_name", "the resource name"),
        enum("pattern_type", [m.name for m in PatternType],
             "how the name matches; MATCH: every pattern that applies to `resource_name`"),
        text("principal", "the principal, e.g. `User:alice`"),
        text("host", "the client host"),
        enum("operation", [m.name for m in Operation], "the operation"),
        enum("permission", [m.name for m in Permission], "ALLOW or DENY"),
    ]


def _filter(resource_type: str | None, resource_name: str | None, pattern_type: str | None,
            principal: str | None, host: str | None, operation: str | None,
            permission: str | None) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, "resource_type", resource_type, concrete=False),
        resource_name or None,
        _enum(PatternType, "pattern_type", pattern_type, concrete=False),
        principal or None, host or None,
        _enum(Operation, "operation", operation, concrete=False),
        _enum(Permission, "permission", permission, concrete=False))


@router.get(
    "/acls",
    operation_id="getKafkaAcls",
    summary="Search ACLs",
    description="Every filter is optional (ANY). `pattern_type=MATCH` finds every pattern "
    "that applies to `resource_name`.",
    response_model=KafkaAclList,
    openapi_extra={"parameters": _filter_parameters()},
    responses=errors(400, 404),
)
@requires(Need(Operation.DESCRIBE, ResourceType.CLUSTER))
async def search_acls(
    links: ClusterLinks, request: Request, resource_type: FilterQuery = None,
    resource_name: FilterQuery = None, pattern_type: FilterQuery = None,
    principal: FilterQuery = None, host: FilterQuery = None, operation: FilterQuery = None,
    permission: FilterQuery = None,
) -> Response:
    flt = _filter(resource_type, resource_name, pattern_type, principal, host, operation,
                  permission)
    found = security_of(request).acls(flt)
    return v3_json(links.collection("KafkaAclList", ("acls",), [acl_data(links, b) for b in found]))


@router.post(
    "/acls",
    status_code=201,
    operation_id="createKafkaAcls",
    summary="Create an ACL",
    response_class=Response,  # 201 without a body
    openapi_extra=body_doc("CreateAclRequest", _EXAMPLE),
    responses={201: {"description": "Created", "headers": {"Location": {
                   "description": "The search URL that finds the ACL",
                   "schema": {"type": "string"}}}},
               **errors(400, 404, 415, 422)},
)
@requires(Need(Operation.ALTER, ResourceType.CLUSTER))
async def create_acl(links: ClusterLinks, request: Request) -> Response:
    security_of(request).check_acls_enabled()  # before the body: nothing to validate
    binding = _binding(await read_body(request, ACL_IN))
    await security_of(request).create_acls(principal_of(request), [binding],
                                           host=client_host_of(request))
    return Response(status_code=201,
                    headers={"Location": _search_url(links, _acl_values(binding))})


@router.post(
    "/acls:batch",
    status_code=204,
    operation_id="batchCreateKafkaAcls",
    summary="Create ACLs",
    openapi_extra=body_doc("CreateAclBatchRequest", {"data": [_EXAMPLE]}),
    responses={204: {"description": "Created"}, **errors(400, 404, 415, 422)},
)
@requires(Need(Operation.ALTER, ResourceType.CLUSTER))
async def create_acls(links: ClusterLinks, request: Request) -> Response:
    security_of(request).check_acls_enabled()
    req = await read_body(request, ACL_BATCH_IN)
    bindings = [_binding(raw, f"data[{i}].") for i, raw in enumerate(req["data"])]
    await security_of(request).create_acls(principal_of(request), bindings,
                                           host=client_host_of(request))
    return Response(status_code=204)


@router.delete(
    "/acls",
    operation_id="deleteKafkaAcls",
    summary="Delete the ACLs matching a filter",
    description="`resource_type`, `pattern_type`, `operation` and `permission` are required "
    "(ANY allowed); the answer lists the ACLs deleted.",
    response_model=DeletedKafkaAcls,
    openapi_extra={"parameters": _filter_parameters(
        required=("resource_type", "pattern_type", "operation", "permission"))},
    responses=errors(400, 404),
)
@requires(Need(Operation.ALTER, ResourceType.CLUSTER))
async def delete_acls(
    links: ClusterLinks, request: Request, resource_type: FilterQuery = None,
    resource_name: FilterQuery = None, pattern_type: FilterQuery = None,
    principal: FilterQuery = None, host: FilterQuery = None, operation: FilterQuery = None,
    permission: FilterQuery = None,
) -> Response:
    security_of(request).check_acls_enabled()
    for name, value in (("resource_type", resource_type), ("pattern_type", pattern_type),
                        ("operation", operation), ("permission", permission)):
        if not value:
            raise _bad(f"{name} is required")
    flt = _filter(resource_type, resource_name, pattern_type, principal, host, operation,
                  permission)
    removed = await security_of(request).delete_acls(principal_of(request), flt,
                                                     host=client_host_of(request))
    return v3_json({"data": [acl_data(links, b) for b in removed]})

