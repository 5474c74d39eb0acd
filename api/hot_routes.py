"""Hot routes: declared once, answered without FastAPI's router.

A hot endpoint is declared with ``@hot_route(router, method, path, query=HotQuery(Q))``,
``Q`` a TypedDict of its query parameters (constraints and descriptions in
``Annotated[..., Field(...)]``). That one declaration gives the route its validation
(``HotQuery.parse``: pydantic's rules and FastAPI's 400 answer, without FastAPI's
per-parameter cost) and its OpenAPI entry (path parameters from the endpoint's
signature, query parameters from ``Q``'s JSON schema, as FastAPI would write declared
ones), and marks it for ``hot_routes``, which serves every marked route of the app.

On this FastAPI, routing a request (middleware layers, matching every route of the
app in turn, dependency solving) costs several times what the produce and records
handlers themselves cost: a 1-record produce spent about 4 % of its server time in the
handler and over 50 % in ``Router.__call__``. The hot handlers already take only their
path parameters and the raw ``Request`` and return a ``Response``, so this pure ASGI
middleware, placed just outside the router, matches their paths itself and calls them
directly. They stay registered with FastAPI as well, for the OpenAPI document and for
whatever the fast match declines.

It declines (the request goes on to FastAPI unchanged) anything but an exact method
match, and an ``int`` path parameter that is not plain decimal, so FastAPI answers
those with its usual validation error. Exceptions are mapped by the handlers
registered with the app (``api.errors``), found as Starlette's exception middleware
finds them; the catch-all ``Exception`` handler stays with the server-error
middleware outside, as for any route.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

_DECIMAL = re.compile(r"-?[0-9]{1,18}")
Endpoint = Callable[..., Any]
Q = TypeVar("Q")
_HOT = "__franz_hot_route__"
_PATH_TYPES = {str: "string", int: "integer"}


class HotQuery(Generic[Q]):
    """The query parameters of a hot route, declared as a TypedDict ``Q``."""

    def __init__(self, declaration: type[Q]) -> None:
        self.adapter: TypeAdapter[Q] = TypeAdapter(declaration)
        self._empty: Q | None = None
        schema = self.adapter.json_schema()
        self._properties: dict[str, dict[str, Any]] = schema.get("properties", {})
        self._required = set(schema.get("required", ()))
        if not self._required:  # a query string with nothing in it is valid: answer it fast
            self._empty = self.adapter.validate_python({})

    def parse(self, request: Request) -> Q:
        """The query string validated as FastAPI validates declared ``Query`` parameters:
        the same pydantic rules (lax, the last value of a repeated name) and on failure
        the same ``RequestValidationError`` (locations ``("query", name)``), so the same
        400 answer."""
        if self._empty is not None and not request.scope.get("query_string"):
            return self._empty
        try:
            return self.adapter.validate_python(dict(request.query_params))
        except ValidationError as exc:
            errors: list[dict[str, Any]] = [
                {**e, "loc": ("query", *e["loc"])} for e in exc.errors(include_url=False)
            ]
            raise RequestValidationError(errors) from None

    def openapi(self) -> list[dict[str, Any]]:
        """The OpenAPI parameters, as FastAPI writes declared query parameters."""
        return [_parameter(name, "query", schema, required=name in self._required)
                for name, schema in self._properties.items()]


def _parameter(name: str, where: str, schema: dict[str, Any], *,
               required: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"in": where, "name": name, "required": required}
    if "description" in schema:
        doc["description"] = schema["description"]
    doc["schema"] = schema
    return doc


def _path_parameters(path: str, endpoint: Endpoint) -> list[dict[str, Any]]:
    params = inspect.signature(endpoint, eval_str=True).parameters
    out = []
    for name in re.findall(r"{(\w+)}", path):
        kind = _PATH_TYPES[params[name].annotation]
        out.append(_parameter(name, "path", {"title": name.replace("_", " ").title(),
                                             "type": kind}, required=True))
    return out


def hot_route(router: APIRouter, method: str, path: str, *, query: HotQuery[Any] | None = None,
              openapi_extra: dict[str, Any] | None = None,
              **route: Any) -> Callable[[Endpoint], Endpoint]:
    """Register ``endpoint(<path parameters>, request)`` on ``router`` as a hot route:
    documented from its declaration, served by ``HotRoutesMiddleware``."""
    def register(endpoint: Endpoint) -> Endpoint:
        parameters = (_path_parameters(path, endpoint) + (query.openapi() if query else [])
                      + list((openapi_extra or {}).get("parameters", ())))
        # the whole list, path first: api.openapi merges openapi_extra over FastAPI's
        # document, these in place of its parameters of the same name and location
        extra = {**(openapi_extra or {}), "parameters": parameters}
        router.add_api_route(path, endpoint, methods=[method], openapi_extra=extra, **route)
        setattr(endpoint, _HOT, True)
        return endpoint

    return register


class HotRoute:
    """One FastAPI route served directly: its path regex, methods, and per path
    parameter a converter (``str`` kept, ``int`` parsed; None declines)."""

    __slots__ = ("convert", "endpoint", "methods", "regex", "route")

    def __init__(self, route: APIRoute) -> None:
        self.route = route
        self.endpoint = route.endpoint
        self.methods = frozenset(route.methods or ())
        self.regex = route.path_regex
        params = inspect.signature(route.endpoint, eval_str=True).parameters
        names = set(route.param_convertors)
        if "request" not in params or set(params) - {"request"} != names:
            raise ValueError(f"{route.path}: a hot route's endpoint takes its path parameters "
                             "and `request` only")
        self.convert: dict[str, Callable[[str], Any]] = {}
        for name in names:
            kind = params[name].annotation
            if kind is str:
                self.convert[name] = str
            elif kind is int:
                self.convert[name] = _to_int
            else:
                raise ValueError(f"{route.path}: path parameter {name} is {kind!r}, "
                                 "not str or int")

    def match(self, path: str) -> dict[str, Any] | None:
        m = self.regex.match(path)
        if m is None:
            return None
        out: dict[str, Any] = {}
        for name, raw in m.groupdict().items():
            value = self.convert[name](raw)
            if value is None:
                return None
            out[name] = value
        return out


def _to_int(raw: str) -> int | None:
    return int(raw) if _DECIMAL.fullmatch(raw) else None


class HotRoutesMiddleware:
    def __init__(self, app: ASGIApp, *, routes: list[HotRoute],
                 handlers: Mapping[Any, Callable[..., Any]],
                 check: Callable[[Request, Endpoint], None] | None = None) -> None:
        self.app = app
        self.routes = routes
        self.handlers = handlers  # the app's exception handlers (a live mapping)
        # what the app's dependencies would check before the endpoint (its ACL rule)
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            for hot in self.routes:
                if method in hot.methods:
                    params = hot.match(path)
                    if params is not None:
                        await self._serve(hot, params, scope, receive, send)
                        return
        await self.app(scope, receive, send)

    async def _serve(self, hot: HotRoute, params: dict[str, Any], scope: Scope,
                     receive: Receive, send: Send) -> None:
        scope["route"] = hot.route  # as the router sets it (request metrics read it)
        scope["endpoint"] = hot.endpoint
        scope["path_params"] = params
        request = Request(scope, receive, send)
        try:
            if self.check is not None:
                self.check(request, hot.endpoint)
            response: Response = await hot.endpoint(request=request, **params)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> Callable[..., Any] | None:
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None  # the server-error middleware's, outside
            handler = self.handlers.get(cls)
            if handler is not None:
                return handler
        return None


def api_routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """(prefix, route) of every APIRoute. Newer FastAPI keeps an included router as one
    entry (``original_router`` and an ``include_context`` with its prefix) instead of
    copying its routes into the app's list; both layouts are walked."""
    for r in routes:
        if isinstance(r, APIRoute):
            yield prefix, r
        inner = getattr(r, "original_router", None)
        if inner is not None:
            context = getattr(r, "include_context", None)
            yield from api_routes(inner.routes, prefix + getattr(context, "prefix", ""))


def hot_routes(app_routes: list[Any], endpoints: list[Endpoint] | None = None
               ) -> list[HotRoute]:
    """The app's routes declared with ``hot_route`` (or, given ``endpoints``, those
    whose endpoint is one of them, in that order). Only routes included without a
    prefix: their own path regex is the path they serve."""
    found = list(api_routes(app_routes))
    if endpoints is None:
        prefixed = [r.path for prefix, r in found if prefix and getattr(r.endpoint, _HOT, False)]
        if prefixed:
            raise ValueError(f"hot routes must be included at the app's root: {prefixed}")
        return [HotRoute(r) for _prefix, r in found if getattr(r.endpoint, _HOT, False)]
    by_endpoint = {r.endpoint: r for prefix, r in found if not prefix}
    missing = [e.__name__ for e in endpoints if e not in by_endpoint]
    if missing:
        raise ValueError(f"hot endpoints not registered with the app at its root: {missing}")
    return [HotRoute(by_endpoint[e]) for e in endpoints]
