"""The route class of the registry's routes (``RegistryRoute``).

Errors are answered in the registry's shape (``errors.response_for``).

Paths are matched segment by segment as the client wrote them, as Confluent's registry
does: a ``{subject}`` is one segment, and a ``/`` inside a subject is sent as ``%2F``
(Confluent's clients quote it so). The server decodes ``%2F`` before routing, which
would make ``/subjects/a%2Fb/versions`` and ``/subjects/a/b/versions`` the same path;
so a route matches against the path rebuilt from the raw one (``segment_path``: each
segment decoded, then its ``%`` and ``/`` escaped again), and its path parameters are
decoded after the match. A subject can then never be taken for more of the path
(``POST /subjects/a/versions/1`` is no lookup of subject ``a/versions/1``), and each
path's methods are exactly those its template documents.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import unquote

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Scope

from api.schema_registry.errors import response_for


def _escape(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


def segment_path(scope: Scope) -> str:
    """The request's path, each segment decoded with its ``%`` and ``/`` escaped again
    (the decoded path, ``%`` escaped, when the raw one is not there or not ASCII)."""
    raw = scope.get("raw_path")
    if isinstance(raw, bytes) and not scope.get("root_path"):
        try:
            text = raw.split(b"?", 1)[0].decode("ascii")
        except UnicodeDecodeError:
            pass
        else:
            return "/".join(_escape(unquote(segment)) for segment in text.split("/"))
    return str(scope["path"]).replace("%", "%25")


class RegistryRoute(APIRoute):
    """A route of the Schema Registry: errors in its shape, paths by raw segments."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] != "http" or (isinstance(raw, bytes) and b"%" not in raw):
            return super().matches(scope)  # nothing escaped: the path is the raw one
        path = segment_path(scope)
        match, child = super().matches({**scope, "path": path})
        if match is not Match.NONE:
            params: dict[str, Any] = child.get("path_params", {})
            child["path_params"] = {k: unquote(v) if isinstance(v, str) else v
                                    for k, v in params.items()}
            child["path"] = path  # a 405's Allow is computed from it (api.errors)
        return match, child

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                response = response_for(exc)
                if response is None:
                    raise
                return response

        return answer
