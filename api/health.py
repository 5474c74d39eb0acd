"""Health probes: ``GET /healthz`` (liveness) and ``GET /readyz`` (readiness).

    GET /healthz   200 {"status": "ok", "version": "0.1.0"}   the process serves HTTP;
                   the version is the installed package's (franz has no /v3/version)
    GET /readyz    200 {"status": "ready"}                    send it traffic
                   503 {"status": "not_ready",                why not, in words
                        "reasons": ["..."]}

Ready means: the broker has started (its logs are loaded, the group coordinator runs),
its metadata store answers within ``READINESS_TIMEOUT_S`` and lists it among the live
brokers (in a cluster: it is registered in ZooKeeper). ``Broker.readiness`` decides.

Both are answered before authentication and ACLs, as Kubernetes probes expect (they
carry no credentials): ``HealthMiddleware`` sits outside ``api.security``'s middleware
and serves them itself, and they reveal only the version and the reasons above. The
routes are also declared on ``router``, for the OpenAPI document and for the methods
the middleware leaves to FastAPI (a ``POST /healthz`` gets the usual 405).

While the broker starts, the listeners are already open (``app.server`` binds them
first): ``StartupGate`` answers then, ``/healthz`` as usual, ``/readyz`` 503 with the
start-up step, and every other request 503 with Confluent's error body, until
``open(app)`` hands every request to the real app.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Annotated, Literal, NotRequired

import orjson
from fastapi import APIRouter, Request
from pydantic import Field
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from typing_extensions import TypedDict

from api.errors import V2_MEDIA, V3_MEDIA, ErrorCode, error_body
from api.openapi import JSON_MEDIA, ok
from api.security.authorization import authenticated_only

if TYPE_CHECKING:
    from core.broker.broker import Broker

#: How long a readiness probe waits for the metadata store.
READINESS_TIMEOUT_S = 2.0
HEALTHZ, READYZ = "/healthz", "/readyz"


@lru_cache(maxsize=1)
def package_version() -> str:
    """The installed franz's version (``franz --version`` prints the same)."""
    try:
        return version("franz")
    except PackageNotFoundError:  # pragma: no cover - a source tree never installed
        return "0.0.0+unknown"


class Liveness(TypedDict):
    """GET /healthz: the process is alive and serves HTTP."""

    status: Annotated[Literal["ok"], Field(description="Always `ok`")]
    version: Annotated[str, Field(description="The franz version (`franz --version`)")]


class Readiness(TypedDict):
    """GET /readyz: whether the broker should get traffic, and if not, why."""

    status: Annotated[Literal["ready", "not_ready"], Field(
        description="`ready` (HTTP 200) or `not_ready` (HTTP 503)")]
    reasons: NotRequired[Annotated[list[str], Field(
        description="Why not ready, in words (only when `not_ready`)")]]


OPENAPI_SCHEMAS = {"Liveness": Liveness, "Readiness": Readiness}

_NOT_READY_EXAMPLE = {"status": "not_ready",
                      "reasons": ["the metadata store did not answer within 2 s"]}

router = APIRouter(tags=["Health"])


def _json(status: int, body: object) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON_MEDIA,
                    headers={"Cache-Control": "no-store"})


def liveness() -> Response:
    return _json(200, {"status": "ok", "version": package_version()})


def not_ready(reasons: list[str]) -> Response:
    return _json(503, {"status": "not_ready", "reasons": reasons})


async def readiness(broker: Broker) -> Response:
    try:
        reasons = await broker.readiness(timeout_s=READINESS_TIMEOUT_S)
    except Exception as exc:  # a probe answers, whatever happened: 503 with the reason
        reasons = [f"the readiness check failed: {exc!r}"]
    return not_ready(reasons) if reasons else _json(200, {"status": "ready"})


@router.get(
    HEALTHZ, operation_id="getLiveness", response_class=Response,
    summary="Liveness: the process is up",
    description="Always 200 while the process serves HTTP (also while the broker starts). "
    "No authentication. The body carries the franz version.",
    responses=ok("Liveness", {"status": "ok", "version": "0.1.0"}, media=(JSON_MEDIA,)),
)
@authenticated_only("a health probe; HealthMiddleware answers GET before authentication")
async def healthz(request: Request) -> Response:
    return liveness()


@router.get(
    READYZ, operation_id="getReadiness", response_class=Response,
    summary="Readiness: logs loaded, metadata store reachable, broker registered",
    description="200 when the broker should get traffic; 503 naming the reasons when not "
    "(starting, metadata store or ZooKeeper unreachable, not registered). No "
    "authentication.",
    responses={
        **ok("Readiness", {"status": "ready"}, media=(JSON_MEDIA,), description="Ready"),
        **ok("Readiness", _NOT_READY_EXAMPLE, status=503, media=(JSON_MEDIA,),
             description="Not ready: `reasons` says why"),
    },
)
@authenticated_only("a health probe; HealthMiddleware answers GET before authentication")
async def readyz(request: Request) -> Response:
    broker: Broker = request.app.state.broker
    return await readiness(broker)


class HealthMiddleware:
    """Serves ``GET /healthz`` and ``GET /readyz`` before the middleware inside it
    (authentication, body limits, routing); everything else goes on unchanged.
    ``routes`` are the declared routes (``scope["route"]`` for the request metrics)."""

    def __init__(self, app: ASGIApp, *, broker: Broker, routes: list[BaseRoute]) -> None:
        self.app = app
        self.broker = broker
        self.routes = {getattr(r, "path", ""): r for r in routes}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in (HEALTHZ, READYZ) or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        scope["route"] = self.routes.get(path)
        response = liveness() if path == HEALTHZ else await readiness(self.broker)
        await response(scope, receive, send)


class StartupGate:
    """The ASGI app the listeners serve from the moment they are bound, before the
    broker is ready to be called: until ``open(app)``, ``/healthz`` is 200, ``/readyz``
    503 naming ``step`` (set by whoever starts the broker), anything else 503 with
    Confluent's error body and ``Retry-After``; after it, every request goes to ``app``.
    """

    def __init__(self, *, step: str = "starting") -> None:
        self.step = step
        self._app: ASGIApp | None = None

    def open(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is not None:
            await app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no lifespan (uvicorn runs with lifespan="off"), no websockets
        await self._starting(scope)(scope, receive, send)

    def _starting(self, scope: Scope) -> Response:
        path = scope["path"]
        if path == HEALTHZ and scope["method"] == "GET":
            return liveness()
        if path == READYZ and scope["method"] == "GET":
            return not_ready([f"the broker is starting: {self.step}"])
        media = V3_MEDIA if path.startswith("/v3") else V2_MEDIA
        body = error_body(ErrorCode.BROKER_NOT_AVAILABLE,
                          f"franz is starting ({self.step}); retry shortly")
        return Response(body, status_code=503, media_type=media, headers={"Retry-After": "1"})
