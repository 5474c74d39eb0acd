"""Response helpers: orjson rendering and the v2 media type."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from starlette.responses import Response

from api.content_types import v2_response_media
from api.errors import V2_MEDIA


class KafkaV2Response(Response):
    """orjson-rendered ``application/vnd.kafka.v2+json``: the default response class of
    the app, so the OpenAPI document shows the right media type."""

    media_type = V2_MEDIA

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def v2_json(request: Request, content: Any, *, status: int = 200) -> Response:
    """``content`` as JSON in the media type the client accepts (406 if none)."""
    media = v2_response_media(request.headers.get("accept"))
    return Response(orjson.dumps(content), status_code=status, media_type=media)


def no_content() -> Response:
    return Response(status_code=204)


async def check_accept(request: Request) -> None:
    """Router dependency: 406 before any work when the client accepts no v2 type."""
    v2_response_media(request.headers.get("accept"))
