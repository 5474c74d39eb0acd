"""api.errors: the domain error table and the exception handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import httpx
import orjson
import pytest
from fastapi import FastAPI, Query
from pydantic import TypeAdapter, ValidationError

from api.errors import (
    ERROR_TABLE,
    V2_MEDIA,
    ApiError,
    ErrorCode,
    install_error_handlers,
    message_for,
    spec_for,
    validation_api_error,
)
from api.v2.schemas import BINARY_PRODUCE, COMMIT
from core.broker import errors as be
from core.errors import FranzError
from core.storage import errors as se


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (be.UnknownTopicError("t"), 404, 40401),
        (be.UnknownPartitionError("p"), 404, 40402),
        (be.UnknownTopicOrPartitionError("tp"), 404, 40403),
        (be.ConsumerInstanceNotFoundError("c"), 404, 40403),
        (be.UnknownMemberIdError("m"), 404, 40403),
        (be.ConsumerAlreadyExistsError("x"), 409, 40902),
        (be.IllegalConsumerStateError("x"), 409, 40903),
        (be.InconsistentGroupProtocolError("x"), 409, 40903),
        (be.InvalidConsumerConfigError("x"), 422, 42204),
        (se.MessageTooLargeError("x"), 413, 413),
        (se.RecordBatchTooLargeError("x"), 413, 413),
        (se.InvalidTopicError("x"), 400, 40002),
        (be.TopicAlreadyExistsError("x"), 400, 40002),
        (se.InvalidConfigError("x"), 400, 40002),
        (be.InvalidPartitionsError("x"), 400, 40002),
        (be.InvalidReplicationFactorError("x"), 400, 40002),
        (se.OffsetOutOfRangeError("x"), 416, 41601),
        (be.NotLeaderOrFollowerError("x"), 500, 50003),
        (be.NotEnoughReplicasError("x"), 500, 50003),
        (be.RequestTimedOutError("x"), 500, 50003),
        (be.CoordinatorNotAvailableError("x"), 500, 50003),
        (se.KafkaStorageError("x"), 500, 50003),
        (be.IllegalGenerationError("x"), 500, 50002),
        (FranzError("x"), 500, 50002),
        (be.BrokerNotAvailableError("x"), 503, 50302),
        (be.GroupIdNotFoundError("g"), 404, 40405),
    ],
)
def test_table(exc: FranzError, status: int, code: int) -> None:
    spec = spec_for(exc)
    assert (spec.status, int(spec.code)) == (status, code)


def test_unlisted_subclass_falls_back_on_retriable_flag() -> None:
    class Flaky(FranzError):
        retriable = True

    class Broken(FranzError):
        pass

    class MoreSpecificTopic(be.UnknownTopicError):
        pass

    assert spec_for(Flaky()).code == ErrorCode.KAFKA_RETRIABLE_ERROR
    assert spec_for(Broken()).code == ErrorCode.KAFKA_ERROR
    assert spec_for(MoreSpecificTopic()).code == ErrorCode.TOPIC_NOT_FOUND


def test_codes_start_with_their_http_status_except_confluents_known_oddities() -> None:
    odd = {ErrorCode.FETCH_MIN_BYTES_OUT_OF_RANGE}  # 40001 is sent with HTTP 422
    for spec in ERROR_TABLE.values():
        code = int(spec.code)
        assert str(code).startswith(str(spec.status)) or spec.code in odd, spec


def test_message_prefers_the_exceptions_own_text() -> None:
    spec = spec_for(be.UnknownTopicError())
    assert message_for(be.UnknownTopicError(), spec) == "Topic not found."
    assert message_for(be.UnknownTopicError("Topic 'x' not found."), spec) == "Topic 'x' not found."


def _verr(adapter: TypeAdapter, body: bytes) -> ApiError:  # type: ignore[type-arg]
    with pytest.raises(ValidationError) as info:
        adapter.validate_json(body)
    return validation_api_error(info.value)


@pytest.mark.parametrize(
    ("body", "status", "code", "text"),
    [
        (b"{not json", 400, 400, "Malformed JSON"),
        (b'{"records": [{"value": "YQ==", "nope": 1}]}', 400, 400, "records[0].nope"),
        (b'{"records": [{"value": 5}]}', 400, 400, "records[0].value"),
        (b'{"records": "x"}', 400, 400, "records"),
        (b'{"records": []}', 422, 422, "records may not be empty"),
        (b"{}", 422, 422, "records may not be null"),
        (b"[1]", 400, 400, "body"),
    ],
)
def test_validation_errors(body: bytes, status: int, code: int, text: str) -> None:
    err = _verr(BINARY_PRODUCE, body)
    assert (err.status, err.code) == (status, code)
    assert text in err.message


def test_constraint_violation_is_422() -> None:
    err = _verr(COMMIT, b'{"offsets": [{"topic": "t", "partition": 0, "offset": -1}]}')
    assert (err.status, err.code) == (422, 422)
    assert "offsets[0].offset" in err.message


# --- handlers, through a real ASGI app ------------------------------------------------


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/topics/{topic}")
    async def topic(topic: str) -> dict[str, str]:
        raise be.UnknownTopicError(f"Topic '{topic}' not found.")

    @app.get("/topics/{topic}/partitions/{partition}")
    async def part(topic: str, partition: int) -> dict[str, str]:
        return {}

    @app.get("/v3/clusters/{cid}")
    async def v3(cid: str) -> dict[str, str]:
        raise be.UnknownTopicError()

    @app.get("/q")
    async def q(n: Annotated[int, Query()]) -> dict[str, int]:
        return {"n": n}

    @app.get("/api-error")
    async def api_error() -> dict[str, str]:
        raise ApiError(415, 415, "HTTP 415 Unsupported Media Type")

    @app.get("/boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("boom")

    @app.get("/bad-json")
    async def bad_json() -> dict[str, str]:
        orjson.loads(b"{")
        return {}

    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


def _check(resp, status: int, code: int, media: str = V2_MEDIA) -> dict[str, object]:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == media
    body = resp.json()
    assert body["error_code"] == code
    assert isinstance(body["message"], str) and body["message"]
    return body  # type: ignore[no-any-return]


async def test_domain_error_handler(client: httpx.AsyncClient) -> None:
    body = _check(await client.get("/topics/orders"), 404, 40401)
    assert body["message"] == "Topic 'orders' not found."


async def test_v3_paths_answer_application_json(client: httpx.AsyncClient) -> None:
    # v3 rows (api.errors.V3_ERROR_TABLE): Kafka's UNKNOWN_TOPIC_OR_PARTITION, as Confluent's v3
    body = _check(await client.get("/v3/clusters/x"), 404, 40403, media="application/json")
    assert body["message"] == "This server does not host this topic-partition."


async def test_unknown_url_and_method(client: httpx.AsyncClient) -> None:
    body = _check(await client.get("/nowhere"), 404, 404)
    assert body["message"] == "HTTP 404 Not Found"
    _check(await client.delete("/topics/orders"), 405, 405)


async def test_non_numeric_partition_is_40402(client: httpx.AsyncClient) -> None:
    _check(await client.get("/topics/t/partitions/abc"), 404, 40402)


async def test_bad_query_parameter_is_400(client: httpx.AsyncClient) -> None:
    body = _check(await client.get("/q?n=abc"), 400, 400)
    assert "n" in str(body["message"])
    _check(await client.get("/q"), 400, 400)


async def test_api_error_and_json_decode_and_unexpected(client: httpx.AsyncClient) -> None:
    _check(await client.get("/api-error"), 415, 415)
    _check(await client.get("/bad-json"), 400, 400)
    _check(await client.get("/boom"), 500, 500)
