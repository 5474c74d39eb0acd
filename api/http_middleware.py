"""The opt-in HTTP middleware of the front door: CORS, gzip and the access log
(docs/http.md). Each is added only when its property turns it on, so a broker with
the defaults runs exactly the request path it had without them (the produce hot path
included).

Outermost first, as ``install_http_middleware`` stacks them (added last = outermost):

    Forwarded   http.forwarded.trusted.addresses set: the client (and scheme) from a
                trusted reverse proxy's X-Forwarded-For / Forwarded header
                (``api.forwarded``), before anything reads it
    AccessLog   http.access.log=true: one line per request, the bytes actually sent
    CORS        access.control.allow.origin set: preflights answered before
                authentication (a browser sends no credentials with one), and the
                Access-Control-* headers on every answer, a 401 included
    GZip        http.gzip.min.bytes > 0: answers of at least that many bytes, when the
                client sends Accept-Encoding: gzip; request bodies are never touched

CORS follows Confluent REST Proxy (rest-utils, Jetty's CrossOriginFilter): the same
three properties, the same defaults for the empty methods and headers lists,
credentials allowed, preflights cached 30 minutes.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import GZipMiddleware

from api.access_log import AccessLogMiddleware
from api.forwarded import (
    HEADER_PROPERTY,
    X_FORWARDED_FOR,
    ForwardedHeadersMiddleware,
    trusted_networks,
)
from api.forwarded import PROPERTY as FORWARDED_PROPERTY

#: Jetty CrossOriginFilter's defaults, which Confluent's empty properties mean.
DEFAULT_METHODS = ("GET", "POST", "HEAD")
DEFAULT_HEADERS = ("X-Requested-With", "Content-Type", "Accept", "Origin")
PREFLIGHT_MAX_AGE_S = 1800
#: zlib's default level: most of level 9's ratio at a fraction of its CPU.
GZIP_LEVEL = 6


def _items(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _setting(config: Any, name: str, default: Any) -> Any:
    """A property, or its default for a stand-in broker's config without it."""
    try:
        return config[name]
    except (KeyError, TypeError):
        return default


def cors_options(config: Any) -> dict[str, Any] | None:
    """CORSMiddleware's arguments from the ``access.control.*`` properties; None: off."""
    origins = _items(str(_setting(config, "access.control.allow.origin", "")))
    if not origins:
        return None
    exact = [o for o in origins if o == "*" or "*" not in o]
    patterns = [o for o in origins if o != "*" and "*" in o]
    regex = ("|".join(".*".join(map(re.escape, p.split("*"))) for p in patterns)
             if patterns else None)
    methods = [m.upper() for m in _items(str(_setting(config, "access.control.allow.methods", "")))]
    headers = _items(str(_setting(config, "access.control.allow.headers", "")))
    return {
        "allow_origins": exact,
        "allow_origin_regex": regex,
        "allow_methods": methods or list(DEFAULT_METHODS),
        "allow_headers": headers or list(DEFAULT_HEADERS),
        "allow_credentials": True,
        "max_age": PREFLIGHT_MAX_AGE_S,
    }


def install_http_middleware(app: FastAPI, config: Any) -> None:
    """Add what the broker's ``config`` turns on; call after every other middleware."""
    gzip_min = int(_setting(config, "http.gzip.min.bytes", 0))
    if gzip_min > 0:
        app.add_middleware(GZipMiddleware, minimum_size=gzip_min, compresslevel=GZIP_LEVEL)
    cors = cors_options(config)
    if cors is not None:
        app.add_middleware(CORSMiddleware, **cors)
    if _setting(config, "http.access.log", False):
        app.add_middleware(AccessLogMiddleware)
    networks = trusted_networks(str(_setting(config, FORWARDED_PROPERTY, "")))
    if networks:  # outermost: every layer (the access log too) sees the resolved client
        app.add_middleware(ForwardedHeadersMiddleware, networks=networks, header=str(
            _setting(config, HEADER_PROPERTY, X_FORWARDED_FOR)))
