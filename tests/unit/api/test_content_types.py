"""api.content_types: Content-Type parsing and Accept negotiation (rest-api-reference §1.2)."""

from __future__ import annotations

import pytest

from api.content_types import (
    SCHEMA_TYPES,
    SUPPORTED_FORMATS,
    EmbeddedFormat,
    accept_ranges,
    check_body_type,
    parse_media,
    produce_format,
    range_read_format,
    records_format,
    v2_response_media,
)
from api.errors import ApiError

B, J = EmbeddedFormat.BINARY, EmbeddedFormat.JSON
BIN_MEDIA = "application/vnd.kafka.binary.v2+json"
JSON_KAFKA = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"


def _fails(fn, *args, status: int, code: int) -> ApiError:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as info:
        fn(*args)
    assert (info.value.status, info.value.code) == (status, code)
    return info.value


@pytest.mark.parametrize(
    ("header", "fmt"),
    [
        (BIN_MEDIA, B),
        (JSON_KAFKA, J),
        ("application/vnd.kafka.avro.v2+json", EmbeddedFormat.AVRO),
        ("application/vnd.kafka.jsonschema.v2+json", EmbeddedFormat.JSONSCHEMA),
        ("application/vnd.kafka.protobuf.v2+json", EmbeddedFormat.PROTOBUF),
        ("application/json", J),
        ("Application/Vnd.Kafka.Binary.V2+Json; charset=utf-8", B),
        ("application/json; charset=UTF-8", J),
    ],
)
def test_produce_format_accepts_embedded_types_and_plain_json(
    header: str, fmt: EmbeddedFormat
) -> None:
    assert produce_format(header) is fmt


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        V2,
        "text/plain",
        "application/octet-stream",
        "application/x-www-form-urlencoded",
        "application/vnd.kafka.binary.v1+json",
        "application/vnd.kafka.xml.v2+json",
    ],
)
def test_produce_format_rejects_others_with_415(header: str | None) -> None:
    err = _fails(produce_format, header, status=415, code=415)
    assert err.message == "HTTP 415 Unsupported Media Type"


def test_every_format_is_supported_the_schema_formats_with_their_schema_type() -> None:
    assert set(EmbeddedFormat) == SUPPORTED_FORMATS
    assert SCHEMA_TYPES == {EmbeddedFormat.AVRO: "AVRO", EmbeddedFormat.JSONSCHEMA: "JSON",
                            EmbeddedFormat.PROTOBUF: "PROTOBUF"}


@pytest.mark.parametrize("header", [V2, BIN_MEDIA, JSON_KAFKA, "application/json"])
def test_body_type_ok(header: str) -> None:
    check_body_type(header)


@pytest.mark.parametrize("header", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_body_type_415(header: str | None) -> None:
    _fails(check_body_type, header, status=415, code=415)


def test_parse_media() -> None:
    assert parse_media("text/plain") is None
    m = parse_media(V2)
    assert m is not None and m.kafka and m.format is None and m.known
    m = parse_media("application/vnd.kafka.nope.v2+json")
    assert m is not None and m.kafka and not m.known


def test_accept_ranges_sorted_by_q_and_stable() -> None:
    header = "application/json; q=0.5, application/vnd.kafka.v2+json; q=0.9, text/html, x/y;q=0"
    assert accept_ranges(header) == ["text/html", V2, "application/json"]
    assert accept_ranges("a/b;q=bad, c/d") == ["c/d"]


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        (None, V2),
        ("*/*", V2),
        (V2, V2),
        ("application/*", V2),
        (BIN_MEDIA, V2),
        ("application/json", "application/json"),
        ("text/plain, application/json;q=0.1", "application/json"),
        ("application/json, */*;q=0.1", V2),
    ],
)
def test_v2_response_media(accept: str | None, media: str) -> None:
    assert v2_response_media(accept) == media


def test_v2_response_media_406() -> None:
    _fails(v2_response_media, "text/plain", status=406, code=406)


@pytest.mark.parametrize(
    ("accept", "instance", "expected"),
    [
        (None, J, (J, JSON_KAFKA)),
        ("*/*", B, (B, BIN_MEDIA)),
        ("application/*", J, (J, JSON_KAFKA)),
        (V2, B, (B, BIN_MEDIA)),  # no embedded format means binary
        (BIN_MEDIA, B, (B, BIN_MEDIA)),
        (JSON_KAFKA, J, (J, JSON_KAFKA)),
        ("application/json", J, (J, "application/json")),
        (f"{BIN_MEDIA};q=0.2, {JSON_KAFKA}", J, (J, JSON_KAFKA)),
        (f"{V2}; q=0.9, application/json; q=0.5", J, (J, "application/json")),
        (f"text/plain, {JSON_KAFKA}", J, (J, JSON_KAFKA)),
    ],
)
def test_records_format(
    accept: str | None, instance: EmbeddedFormat, expected: tuple[EmbeddedFormat, str]
) -> None:
    assert records_format(accept, instance) == expected


@pytest.mark.parametrize(
    ("accept", "instance"),
    [
        (V2, J),  # rest-api-reference §8.6
        (JSON_KAFKA, B),
        (BIN_MEDIA, J),
        ("application/json", B),
        ("application/vnd.kafka.avro.v2+json", B),
        ("application/vnd.kafka.nope.v2+json", B),
    ],
)
def test_records_format_mismatch_is_40601(accept: str, instance: EmbeddedFormat) -> None:
    _fails(records_format, accept, instance, status=406, code=40601)


def test_records_format_foreign_accept_is_406() -> None:
    _fails(records_format, "text/plain", B, status=406, code=406)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, (B, BIN_MEDIA)),
        ("*/*", (B, BIN_MEDIA)),
        (V2, (B, BIN_MEDIA)),
        (JSON_KAFKA, (J, JSON_KAFKA)),
        ("application/json", (J, "application/json")),
        (f"application/vnd.kafka.avro.v2+json, {JSON_KAFKA};q=0.5", (J, JSON_KAFKA)),
    ],
)
def test_range_read_format(accept: str | None, expected: tuple[EmbeddedFormat, str]) -> None:
    assert range_read_format(accept) == expected


def test_range_read_format_errors() -> None:
    _fails(range_read_format, "application/vnd.kafka.avro.v2+json", status=406, code=40601)
    _fails(range_read_format, "text/csv", status=406, code=406)
