"""Swagger UI at ``/docs`` and ReDoc at ``/redoc``, with no CDN.

FastAPI's own pages load their JavaScript, CSS, favicon (and ReDoc's Google fonts) from
CDNs, so without internet they are blank. The same pages here point at files served by
this app under ``/docs-assets/``: the Swagger UI bundle and CSS and ReDoc's standalone
bundle shipped in the ``fastapi-offline`` wheel (MIT; Swagger UI is Apache-2.0, ReDoc
MIT), read from the installed package's ``static`` folder. The pages carry no other
external URL: ReDoc's Google fonts are off and Swagger UI's validator badge (which
would call validator.swagger.io) too.

These routes are plain Starlette routes outside the OpenAPI document, like FastAPI's
own docs routes, so they need no ACL rule (``api.security.authorization``); with
``authentication.method=BASIC`` they need credentials like every other route.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
_OAUTH2_REDIRECT_URL = DOCS_URL + "/oauth2-redirect"


def assets_dir() -> Path:
    """The folder of the installed ``fastapi_offline`` package's static files."""
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI, *, openapi_url: str) -> None:
    """``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and the assets they load. The
    app must be built with ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    title = app.title

    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} - Swagger UI",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=_OAUTH2_REDIRECT_URL,
            swagger_ui_parameters={"validatorUrl": None},
        )

    async def oauth2_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    app.add_route(DOCS_URL, swagger_ui, include_in_schema=False)
    app.add_route(_OAUTH2_REDIRECT_URL, oauth2_redirect, include_in_schema=False)
    app.add_route(REDOC_URL, redoc, include_in_schema=False)
