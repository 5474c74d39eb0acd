"""The Schema Registry routes' error answers (api.schema_registry): every domain error's
Confluent status and code, the store errors (50001, 50002, 50003) a real server seldom
shows, and what is left to the app's handlers."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.schema_registry import router
from api.schema_registry.errors import ERROR_CODES, MEDIA, response_for
from core.broker import errors as be
from core.broker.schemas import errors as se
from core.errors import FranzError


class FakeRegistry:
    def __init__(self) -> None:
        self.error: Exception | None = None
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, op: str, **args: Any) -> Any:
        self.calls.append((op, args))
        if self.error is not None:
            raise self.error
        return []


class FakeBroker:
    def __init__(self) -> None:
        self.schemas = FakeRegistry()


@pytest.fixture
def app() -> tuple[TestClient, FakeRegistry]:
    api = FastAPI()
    broker = FakeBroker()
    api.state.broker = broker
    api.include_router(router)
    return TestClient(api), broker.schemas


def test_every_domain_error_has_its_code() -> None:
    classes = {cls for cls in vars(se).values()
               if isinstance(cls, type) and issubclass(cls, se.SchemaRegistryError)
               and cls is not se.SchemaRegistryError}
    assert classes == set(ERROR_CODES)
    codes = [code for _status, code in ERROR_CODES.values()]
    assert len(codes) == len(set(codes))
    for cls, (status, code) in ERROR_CODES.items():
        assert str(code).startswith(str(status)), cls
        response = response_for(cls("why"))
        assert response is not None and response.status_code == status
        assert response.media_type == MEDIA


@pytest.mark.parametrize(("error", "code"), [
    (be.RequestTimedOutError("acks"), 50002),
    (be.NotLeaderOrFollowerError("moved"), 50003),
    (be.CoordinatorNotAvailableError("no _schemas yet"), 50003),
    (be.BrokerNotAvailableError("gone"), 50003),
    (be.NotEnoughReplicasError("isr"), 50001),
    (FranzError("disk"), 50001),
])
def test_store_errors(app: tuple[TestClient, FakeRegistry], error: Exception, code: int) -> None:
    client, registry = app
    registry.error = error
    resp = client.get("/subjects")
    assert resp.status_code == 500
    assert resp.headers["content-type"] == MEDIA
    assert resp.json()["error_code"] == code and resp.json()["message"]


def test_refusals_stay_the_apps(app: tuple[TestClient, FakeRegistry]) -> None:
    assert response_for(be.AuthorizationError("no")) is None  # 403 from api.errors
    assert response_for(ValueError("a bug")) is None  # 500 from api.errors


def test_queries_reach_the_registry(app: tuple[TestClient, FakeRegistry]) -> None:
    client, registry = app
    assert client.get("/subjects", params={"deleted": "TRUE", "subjectPrefix": "a"}).json() == []
    assert registry.calls[-1] == ("subjects", {"prefix": "a", "deleted": True,
                                               "deleted_only": False})
    client.get("/subjects/a%2Fb/versions", params={"deleted": "False"})
    assert registry.calls[-1] == ("versions", {"subject": "a/b", "deleted": False,
                                               "deleted_only": False})
