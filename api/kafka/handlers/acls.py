"""DescribeAcls, CreateAcls, DeleteAcls: the same ACLs and checks as the REST API's
(``core.broker.security``): describing needs DESCRIBE on the cluster, changing needs
ALTER on the cluster; a broker without an authorizer answers SECURITY_DISABLED."""

from __future__ import annotations

from typing import Any

from api.kafka import errors
from api.kafka.apis import api
from api.kafka.context import RequestContext
from core.broker.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.errors import FranzError

# Kafka's wire numbers (AclOperation, ResourceType, PatternType, AclPermissionType)
RESOURCE_TYPES = {1: ResourceType.ANY, 2: ResourceType.TOPIC, 3: ResourceType.GROUP,
                  4: ResourceType.CLUSTER, 5: ResourceType.TRANSACTIONAL_ID}
PATTERN_TYPES = {1: PatternType.ANY, 2: PatternType.MATCH, 3: PatternType.LITERAL,
                 4: PatternType.PREFIXED}
OPERATIONS = {1: Operation.ANY, 2: Operation.ALL, 3: Operation.READ, 4: Operation.WRITE,
              5: Operation.CREATE, 6: Operation.DELETE, 7: Operation.ALTER, 8: Operation.DESCRIBE,
              9: Operation.CLUSTER_ACTION, 10: Operation.DESCRIBE_CONFIGS,
              11: Operation.ALTER_CONFIGS, 12: Operation.IDEMPOTENT_WRITE}
PERMISSIONS = {1: Permission.ANY, 2: Permission.DENY, 3: Permission.ALLOW}
MAX_ACLS = 10_000


class _Bad(ValueError):
    pass


def _enum(table: dict[int, Any], code: int, what: str) -> Any:
    try:
        return table[code]
    except KeyError:
        raise _Bad(f"unknown {what} {code}") from None


def _code(table: dict[int, Any], value: Any) -> int:
    return next(k for k, v in table.items() if v is value)


def _filter(f: dict[str, Any]) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_enum(RESOURCE_TYPES, f["resource_type_filter"], "resource type"),
        name=f["resource_name_filter"],
        pattern_type=_enum(PATTERN_TYPES, f["pattern_type_filter"], "pattern type"),
        principal=f["principal_filter"], host=f["host_filter"],
        operation=_enum(OPERATIONS, f["operation"], "operation"),
        permission=_enum(PERMISSIONS, f["permission_type"], "permission"))


def _binding_fields(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": _code(RESOURCE_TYPES, b.pattern.resource_type),
            "resource_name": b.pattern.name,
            "pattern_type": _code(PATTERN_TYPES, b.pattern.pattern_type),
            "principal": b.entry.principal, "host": b.entry.host,
            "operation": _code(OPERATIONS, b.entry.operation),
            "permission_type": _code(PERMISSIONS, b.entry.permission)}


@api("DescribeAcls", 0, 3)
async def describe_acls(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    def fail(code: int, message: str | None = None) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "resources": []}
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return fail(errors.CLUSTER_AUTHORIZATION_FAILED)
    try:
        flt = _filter(req)
        found = ctx.broker.security.acls(flt)
    except _Bad as exc:
        return fail(errors.INVALID_REQUEST, str(exc))
    except FranzError as exc:
        return fail(errors.code_of(exc), errors.message_of(exc))
    by_pattern: dict[ResourcePattern, list[dict[str, Any]]] = {}
    for b in found[:MAX_ACLS]:
        f = _binding_fields(b)
        by_pattern.setdefault(b.pattern, []).append(
            {k: f[k] for k in ("principal", "host", "operation", "permission_type")})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": [
        {"resource_type": _code(RESOURCE_TYPES, p.resource_type), "resource_name": p.name,
         "pattern_type": _code(PATTERN_TYPES, p.pattern_type), "acls": acls}
        for p, acls in sorted(by_pattern.items())]}


@api("CreateAcls", 0, 3)
async def create_acls(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    creations = req["creations"][:MAX_ACLS]
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "results": [
            {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
            for _ in creations]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            pattern_type = PatternType.LITERAL if ctx.version == 0 else \
                _enum(PATTERN_TYPES, c["resource_pattern_type"], "pattern type")
            valid.append(AclBinding(
                ResourcePattern(_enum(RESOURCE_TYPES, c["resource_type"], "resource type"),
                                c["resource_name"], pattern_type),
                AccessControlEntry(c["principal"], c["host"],
                                   _enum(OPERATIONS, c["operation"], "operation"),
                                   _enum(PERMISSIONS, c["permission_type"], "permission"))))
            results.append({"error_code": 0, "error_message": None})
        except ValueError as exc:  # _Bad, and the model's own checks
            results.append({"error_code": errors.INVALID_REQUEST, "error_message": str(exc)})
    if valid:
        try:
            await ctx.broker.security.create_acls(ctx.session.principal, valid,
                                                  host=ctx.session.host)
        except FranzError as exc:
            for r in results:
                if r["error_code"] == 0:
                    r.update(error_code=errors.code_of(exc), error_message=errors.message_of(exc))
    return {"throttle_time_ms": 0, "results": results}


@api("DeleteAcls", 0, 3)
async def delete_acls(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    filters = req["filters"][:MAX_ACLS]
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
             "matching_acls": []} for _ in filters]}
    out = []
    for f in filters:
        try:
            removed = await ctx.broker.security.delete_acls(
                ctx.session.principal, _filter(f), host=ctx.session.host)
        except _Bad as exc:
            out.append({"error_code": errors.INVALID_REQUEST, "error_message": str(exc),
                        "matching_acls": []})
            continue
        except FranzError as exc:
            out.append({"error_code": errors.code_of(exc), "error_message": errors.message_of(exc),
                        "matching_acls": []})
            continue
        out.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, **_binding_fields(b)} for b in removed]})
    return {"throttle_time_ms": 0, "filter_results": out}
