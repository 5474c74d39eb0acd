"""``create_app(broker)``: the FastAPI application of one broker.

Routers: v2 at the root (``api.v2``), v3 under ``/v3`` (``api.v3``), the Schema Registry
at the root (``api.schema_registry``; ``schema.registry.listeners`` serve it alone,
``api.schema_registry.listener``). Error handlers:
``api.errors``. The hot routes (produce, records) are matched before FastAPI's router
(``api.hot_routes``). Opt-in CORS, gzip and access log, outermost
(``api.http_middleware``). Metrics: ``GET /metrics`` and a request-metrics middleware
(``api.metrics``). Health probes: ``GET /healthz`` and ``GET /readyz``, answered before
authentication (``api.health``). OpenAPI at ``/openapi.json``, Swagger UI at ``/docs`` and ReDoc at ``/redoc`` from
packaged assets (``api.docs``);
request and response shapes come from ``api.v2.schemas`` and ``api.v3.models``. Internal
(broker-to-broker) routers must be included with ``include_in_schema=False``. The
broker is started and stopped by the caller (``app.server``); the app only reads it
from ``app.state.broker``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI
from starlette.routing import compile_path

from api import health, internal, schema_registry, v2, v3
from api.docs import install_docs
from api.errors import install_error_handlers
from api.fastapi_options import NO_OPENTELEMETRY
from api.health import HealthMiddleware, package_version
from api.hot_routes import HotRoutesMiddleware, api_routes, hot_routes
from api.http_middleware import install_http_middleware
from api.metrics import install_metrics
from api.openapi import TAGS, install_openapi
from api.openapi_links import LINKS
from api.render_cache import RenderCache
from api.request_limits import RequestLimitsMiddleware, body_limits
from api.responses import KafkaV2Response
from api.security.authentication import AuthenticationMiddleware
from api.security.authorization import authorize_route, check_route, missing_rules
from api.v2.schemas import OPENAPI_SCHEMAS

if TYPE_CHECKING:
    from core.broker.broker import Broker

DESCRIPTION = """\
A Kafka-style broker whose clients speak HTTP. The v2 API is compatible with Confluent
REST Proxy v2 (content types `application/vnd.kafka[.binary|.json].v2+json`, error body
`{"error_code": N, "message": "..."}`).

franz extensions: consumed records carry `timestamp`, `timestamp_type` and `headers`;
long-poll reads answer as soon as data is there; unknown topics fail at once with
404 / 40401; plain `application/json` means the json embedded format; produce takes
`acks` and `strict` query parameters and per-record `headers` and `timestamp`; the
stateless range read `GET /topics/{topic}/partitions/{partition}/records`.
"""


def create_app(broker: Broker) -> FastAPI:
    """The HTTP API over a started ``broker``."""
    app = FastAPI(
        title="franz",
        version=package_version(),
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        openapi_tags=TAGS,  # Confluent's names: "Topic (v3)", "Consumer (v2)", ...
        docs_url=None,  # api.docs: the same pages on packaged assets, no CDN
        redoc_url=None,
        default_response_class=KafkaV2Response,
        dependencies=[Depends(authorize_route)],  # every route's ACL rule (api.security)
        **NO_OPENTELEMETRY,
    )
    app.state.broker = broker
    app.state.render_cache = RenderCache()  # binary renderings of fetched batches
    install_error_handlers(app)
    app.include_router(v2.router)
    app.include_router(v3.router)
    app.include_router(health.router)  # /healthz, /readyz
    app.include_router(schema_registry.router)  # docs/schema-registry.md
    app.include_router(internal.router, include_in_schema=False)  # /internal/v1
    # innermost middleware: produce, records and follower fetches skip FastAPI's router
    # (api.hot_routes)
    # a 405's Allow names every method of the path (api.errors.allowed_methods)
    app.state.path_methods = [
        (compile_path(prefix + route.path)[0], frozenset(route.methods or ()))
        for prefix, route in api_routes(app.routes)
    ]
    unruled = missing_rules(api_routes(app.routes))
    if unruled:
        raise RuntimeError(f"routes without an ACL rule (api.security.authorization): {unruled}")
    app.add_middleware(HotRoutesMiddleware, handlers=app.exception_handlers,
                       routes=hot_routes(app.routes), check=check_route)
    # every request gets its principal before any route runs (401 when it cannot)
    app.add_middleware(AuthenticationMiddleware)
    # body size limits, before authentication and any route (api.request_limits)
    app.add_middleware(RequestLimitsMiddleware, **body_limits(broker))
    # health probes before authentication and body limits (api.health)
    app.add_middleware(HealthMiddleware, broker=broker, routes=[
        route for _prefix, route in api_routes(app.routes) if route.endpoint in (
            health.healthz, health.readyz)])
    install_metrics(app)  # GET /metrics and the request-metrics middleware
    # outermost, each only when its property is on: gzip, CORS, access log (docs/http.md)
    install_http_middleware(app, getattr(broker, "config", None))
    install_docs(app, openapi_url="/openapi.json")
    install_openapi(app, {**OPENAPI_SCHEMAS, **v3.OPENAPI_SCHEMAS, **health.OPENAPI_SCHEMAS,
                          **schema_registry.OPENAPI_SCHEMAS}, [*LINKS, *schema_registry.LINKS])
    return app
