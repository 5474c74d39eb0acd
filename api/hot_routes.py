"""Hot routes answered without FastAPI's router.

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
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

_DECIMAL = re.compile(r"-?[0-9]{1,18}")
Endpoint = Callable[..., Any]


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
                 handlers: Mapping[Any, Callable[..., Any]]) -> None:
        self.app = app
        self.routes = routes
        self.handlers = handlers  # the app's exception handlers (a live mapping)

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


def _api_routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """(prefix, route) of every APIRoute. Newer FastAPI keeps an included router as one
    entry (``original_router`` and an ``include_context`` with its prefix) instead of
    copying its routes into the app's list; both layouts are walked."""
    for r in routes:
        if isinstance(r, APIRoute):
            yield prefix, r
        inner = getattr(r, "original_router", None)
        if inner is not None:
            context = getattr(r, "include_context", None)
            yield from _api_routes(inner.routes, prefix + getattr(context, "prefix", ""))


def hot_routes(app_routes: list[Any], endpoints: list[Endpoint]) -> list[HotRoute]:
    """The app's routes whose endpoint is one of ``endpoints``, in that order. Only
    routes included without a prefix: their own path regex is the path they serve."""
    by_endpoint = {r.endpoint: r for prefix, r in _api_routes(app_routes) if not prefix}
    missing = [e.__name__ for e in endpoints if e not in by_endpoint]
    if missing:
        raise ValueError(f"hot endpoints not registered with the app at its root: {missing}")
    return [HotRoute(by_endpoint[e]) for e in endpoints]
