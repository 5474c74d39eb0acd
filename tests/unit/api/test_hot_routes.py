"""Hot routes matched before FastAPI's router answer exactly as the router would: same
path parameters, same error mapping, and what they decline reaches FastAPI."""

from __future__ import annotations

from typing import Annotated, Any, Required

import httpx
import orjson
import pytest
from fastapi import APIRouter, FastAPI, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from api.errors import ApiError, ErrorCode, install_error_handlers
from api.hot_routes import HotQuery, HotRoutesMiddleware, hot_route, hot_routes
from api.openapi import install_openapi

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


# --- one declaration: validation and OpenAPI from the same TypedDict ---------------------

class _WindowQuery(TypedDict, total=False):
    start: Required[Annotated[int, Field(ge=0, description="first item")]]
    limit: Annotated[int | None, Field(ge=1, le=50, description="items at most")]


declared = APIRouter()


@hot_route(declared, "GET", "/shelves/{shelf}/items/{slot}", query=HotQuery(_WindowQuery),
           summary="items of a shelf")
async def shelf_items(shelf: str, slot: int, request: Request) -> Response:
    q = WINDOW.parse(request)
    return Response(orjson.dumps({"shelf": shelf, "slot": slot, **q}))


WINDOW = HotQuery(_WindowQuery)


def _declared_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(declared)
    install_openapi(app, {})  # as create_app: declared parameters replace FastAPI's
    app.add_middleware(HotRoutesMiddleware, handlers=app.exception_handlers,
                       routes=hot_routes(app.routes))
    return app


def test_openapi_parameters_come_from_the_declaration() -> None:
    params = _declared_app().openapi()["paths"]["/shelves/{shelf}/items/{slot}"]["get"][
        "parameters"]
    assert [(p["name"], p["in"], p["required"]) for p in params] == [
        ("shelf", "path", True), ("slot", "path", True),
        ("start", "query", True), ("limit", "query", False)]
    assert params[1]["schema"]["type"] == "integer"
    limit = params[3]
    assert limit["description"] == "items at most"
    assert {"type": "integer", "minimum": 1, "maximum": 50} in limit["schema"]["anyOf"]


async def test_the_declaration_validates_the_served_request() -> None:
    app = _declared_app()
    assert [r.route.path for r in hot_routes(app.routes)] == ["/shelves/{shelf}/items/{slot}"]
    ok = await _get(app, "GET", "/shelves/a/items/3?start=2&limit=5")
    assert ok.json() == {"shelf": "a", "slot": 3, "start": 2, "limit": 5}
    for query, field in (("start=-1", "start"), ("start=1&limit=51", "limit"), ("", "start")):
        bad = await _get(app, "GET", f"/shelves/a/items/3?{query}")
        assert bad.status_code == 400, query
        assert field in bad.json()["message"], bad.json()


def test_a_hot_route_under_a_prefix_is_refused() -> None:
    app = FastAPI()
    app.include_router(declared, prefix="/v9")
    with pytest.raises(ValueError, match="root"):
        hot_routes(app.routes)


def test_every_hot_route_of_franz_documents_exactly_its_declared_query() -> None:
    """No drift possible: each hot route's OpenAPI query parameters are its HotQuery's."""
    from api.app import create_app  # noqa: PLC0415  (the whole franz app, for this test only)
    from api.v2 import consumer_records, produce, records  # noqa: PLC0415

    class _NoBroker:
        config = {"zookeeper.connect": ""}

    app = create_app(_NoBroker())  # type: ignore[arg-type]
    doc = app.openapi()["paths"]
    declared_queries = {
        "/topics/{topic}": produce.PRODUCE_QUERY,
        "/topics/{topic}/partitions/{partition}": produce.PRODUCE_QUERY,
        "/topics/{topic}/partitions/{partition}/records": records.RANGE_QUERY,
        "/consumers/{group}/instances/{instance}/records": consumer_records.RECORDS_QUERY,
    }
    hot = {r.route.path for r in hot_routes(app.routes)}
    assert hot == {*declared_queries, "/internal/v1/replica/fetch"}
    for path, q in declared_queries.items():
        op = doc[path]["get" if path.endswith("/records") else "post"]
        documented = [p for p in op["parameters"] if p["in"] == "query"]
        assert documented == q.openapi()
        assert {p["name"] for p in documented} == set(q.adapter.json_schema()["properties"])
