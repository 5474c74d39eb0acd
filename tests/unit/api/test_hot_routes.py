"""Hot routes matched before FastAPI's router answer exactly as the router would: same
path parameters, same error mapping, and what they decline reaches FastAPI."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from api.errors import ApiError, ErrorCode, install_error_handlers
from api.hot_routes import HotRoutesMiddleware, hot_routes

router = APIRouter()
calls: list[str] = []


@router.get("/things/{name}/parts/{part}")
async def hot_part(name: str, part: int, request: Request) -> Response:
    calls.append(request.scope["route"].path)
    if part == 13:
        raise ApiError(404, ErrorCode.PARTITION_NOT_FOUND, "Partition 13 not found.")
    if part == 99:
        raise RuntimeError("boom")
    return Response(orjson.dumps({"name": name, "part": part, "q": request.query_params.get("q")}))


@router.get("/things/{name}/parts/{part}/plain")
async def plain_part(name: str, part: int) -> dict[str, Any]:
    return {"plain": part}


@router.post("/things/{name}")
async def hot_post(name: str, request: Request) -> Response:
    return Response(orjson.dumps({"posted": name, "body": len(await request.body())}))


def _app(hot: list[Any]) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(router)
    app.add_middleware(HotRoutesMiddleware, handlers=app.exception_handlers,
                       routes=hot_routes(app.routes, hot))
    return app


async def _get(app: FastAPI, method: str, path: str, **kw: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.request(method, path, **kw)


async def test_hot_route_answers_with_converted_path_params() -> None:
    calls.clear()
    app = _app([hot_part, hot_post])
    resp = await _get(app, "GET", "/things/a%20b/parts/-3?q=x")
    assert resp.status_code == 200
    assert resp.json() == {"name": "a b", "part": -3, "q": "x"}
    assert calls == ["/things/{name}/parts/{part}"]  # scope["route"] set as the router does
    resp = await _get(app, "POST", "/things/t1", content=b"12345")
    assert resp.json() == {"posted": "t1", "body": 5}


async def test_declined_requests_reach_fastapi() -> None:
    app = _app([hot_part])
    # not a decimal: the answer FastAPI's validation gives when the route is not hot
    bad = await _get(app, "GET", "/things/a/parts/x1")
    direct = await _get(_app([hot_post]), "GET", "/things/a/parts/x1")
    assert bad.status_code == direct.status_code >= 400
    assert bad.json() == direct.json()
    # another method or a longer path: the router
    assert (await _get(app, "GET", "/things/a/parts/2/plain")).json() == {"plain": 2}
    assert (await _get(app, "DELETE", "/things/a/parts/2")).status_code == 405


async def test_errors_are_mapped_by_the_app_handlers() -> None:
    app = _app([hot_part])
    resp = await _get(app, "GET", "/things/a/parts/13")
    assert resp.status_code == 404
    assert resp.json() == {"error_code": ErrorCode.PARTITION_NOT_FOUND,
                           "message": "Partition 13 not found."}
    crash = await _get(app, "GET", "/things/a/parts/99")
    assert crash.status_code == 500
    assert crash.json()["error_code"] == 500


def test_endpoints_with_other_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="path parameters"):
        _app([plain_part])
    with pytest.raises(ValueError, match="not registered"):
        hot_routes(FastAPI().routes, [hot_part])
