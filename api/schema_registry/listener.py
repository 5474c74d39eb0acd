"""What a ``schema.registry.listeners`` listener serves: the Schema Registry's routes and
the health probes of the app it wraps, nothing else (``registry_only``).

The wrapped app is the broker's whole app (or the start-up gate in front of it), so the
registry is answered there exactly as on the main listeners: the same authentication,
ACLs, TLS settings of the server, body limits, metrics and access log. Any other path is
404 / 404 in the registry's error shape, as Confluent's registry answers an unknown one.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from api.health import HEALTHZ, READYZ
from api.schema_registry.errors import error_response
from api.schema_registry.routes import router

#: the first path segment of every registry route: schemas, subjects, config, mode, ...
PREFIXES = frozenset("/" + route.path.split("/")[1] for route in router.routes
                     if hasattr(route, "path"))
_PROBES = frozenset({HEALTHZ, READYZ})


def serves(path: str) -> bool:
    """Whether a registry listener serves ``path``."""
    if path in _PROBES:
        return True
    slash = path.find("/", 1)
    return (path if slash < 0 else path[:slash]) in PREFIXES


def registry_only(app: ASGIApp) -> ASGIApp:
    """``app`` restricted to the registry's paths and the health probes."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not serves(scope["path"]):
            await error_response(404, 404, "HTTP 404 Not Found")(scope, receive, send)
            return
        await app(scope, receive, send)

    return serve
