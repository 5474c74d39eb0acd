"""The ACLs every route requires, declared on the route and checked before it runs.

Each endpoint carries one rule, given with a decorator beside its route:

    @router.delete("/{topic_name}")
    @requires(Need(DELETE, TOPIC, "topic_name"))

``requires(*needs)``: every need must be allowed; a need names an operation, a
resource type and the path parameter holding the resource's name (none: the cluster).
``requires(..., also="...")``: the handler checks more itself, once it knows what
(topics named in a body, a consumer instance's owner, lists filtered to what the
principal may see); ``also`` says what, for the reader and the authorization matrix
test. ``authenticated_only("why")``: any authenticated principal (what Kafka lets every
client see, e.g. the broker list).

``check_route`` runs a route's rule: ``authorize_route`` is an app-wide FastAPI
dependency, and ``api.hot_routes`` calls ``check_route`` before a hot endpoint.
``missing_rules`` lists routes without a rule; ``create_app`` refuses to build an app
with one, so a new route cannot forget. Without an authorizer every check passes at the
cost of one attribute read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request

from api.security.authentication import AUDITED, client_host_of, principal_of
from core.broker.security.acl import CLUSTER_NAME, Operation, ResourceType
from core.broker.security.service import Security

F = TypeVar("F", bound=Callable[..., Any])
_RULE = "__franz_acl__"


@dataclass(frozen=True, slots=True)
class Need:
    operation: Operation
    resource_type: ResourceType
    param: str | None = None  # the path parameter naming the resource; None: the cluster


@dataclass(frozen=True, slots=True)
class AclRule:
    needs: tuple[Need, ...]
    also: str = ""  # what the handler checks itself, if anything
    why_open: str = ""  # authenticated_only: why no ACL applies
    audited: bool = False  # an admin change: its outcome goes to the audit log


def requires(*needs: Need, also: str = "", audited: bool = False) -> Callable[[F], F]:
    """``audited``: the route changes the cluster (topics, configs, groups,
    reassignments); each request's outcome is written to the audit log."""
    if not needs and not also:
        raise ValueError("requires() needs at least one Need or an `also`")
    return _mark(AclRule(needs, also=also, audited=audited))


def authenticated_only(why: str) -> Callable[[F], F]:
    return _mark(AclRule((), why_open=why))


def _mark(rule: AclRule) -> Callable[[F], F]:
    def mark(endpoint: F) -> F:
        setattr(endpoint, _RULE, rule)
        return endpoint
    return mark


def rule_of(endpoint: Callable[..., Any]) -> AclRule | None:
    rule: AclRule | None = getattr(endpoint, _RULE, None)
    return rule


def security_of(request: Request) -> Security:
    security: Security = request.app.state.broker.security
    return security


def check_route(request: Request, endpoint: Callable[..., Any]) -> None:
    """Raise AuthorizationError (403) unless the principal has every need of the rule."""
    rule: AclRule = getattr(endpoint, _RULE)
    if rule.audited:
        request.scope[AUDITED] = True  # the authentication middleware logs the outcome
    security = security_of(request)
    if not security.enabled or not rule.needs:
        return
    principal, host = principal_of(request), client_host_of(request)
    params = request.path_params
    for need in rule.needs:
        name = CLUSTER_NAME if need.param is None else str(params[need.param])
        security.require(principal, host, need.operation, need.resource_type, name)


async def authorize_route(request: Request) -> None:
    """The app-wide dependency: the matched route's rule."""
    route = request.scope.get("route")
    endpoint = getattr(route, "endpoint", None)
    if endpoint is not None:
        check_route(request, endpoint)


# --- in handlers --------------------------------------------------------------------


def require(request: Request, operation: Operation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> None:
    """A check the route's rule could not express (the name is in the body)."""
    security = security_of(request)
    if security.enabled:
        security.require(principal_of(request), client_host_of(request), operation,
                         resource_type, name)


def allowed(request: Request, operation: Operation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> bool:
    """Whether it is allowed, without refusing (nor auditing a denial)."""
    security = security_of(request)
    return not security.enabled or security.authorize(
        principal_of(request), client_host_of(request), operation, resource_type, name,
        audit_denial=False)


def may_create_topic(request: Request) -> Callable[[str], bool] | None:
    """For auto-creation on produce: CREATE on the cluster or on the topic (None: no
    authorizer, anyone may)."""
    security = security_of(request)
    if not security.enabled:
        return None
    principal, host = principal_of(request), client_host_of(request)

    def may(topic: str) -> bool:
        return any(security.authorize(principal, host, Operation.CREATE, kind, name,
                                      audit_denial=False)
                   for kind, name in ((ResourceType.CLUSTER, CLUSTER_NAME),
                                      (ResourceType.TOPIC, topic)))
    return may


def require_create_topic(request: Request, topic: str) -> None:
    """CREATE on the cluster or on ``topic`` (Kafka's CreateTopics rule)."""
    if not allowed(request, Operation.CREATE, ResourceType.CLUSTER):
        require(request, Operation.CREATE, ResourceType.TOPIC, topic)


def visible(request: Request, operation: Operation, resource_type: ResourceType,
            names: Iterable[str]) -> list[str]:
    """The names the principal may ``operation``: lists show only those."""
    security = security_of(request)
    if not security.enabled:
        return list(names)
    return security.visible(principal_of(request), client_host_of(request), operation,
                            resource_type, names)


def missing_rules(routes: Iterable[tuple[str, Any]]) -> list[str]:
    """``"METHOD path"`` of every (prefix, APIRoute) whose endpoint declares no rule."""
    return [f"{','.join(sorted(r.methods))} {prefix}{r.path}" for prefix, r in routes
            if rule_of(r.endpoint) is None]
