"""v2 media types: parsing Content-Type, negotiating Accept (rest-api-reference §1.2).

Pattern ``application/vnd.kafka[.<format>].v2+json``. The embedded format of a produce
body comes from its Content-Type; plain ``application/json`` means the json format (a
franz extension: Confluent answers 415); avro, jsonschema and protobuf write with the
broker's Schema Registry (``SCHEMA_TYPES``). ``GET .../records`` negotiates the Accept
header against the consumer instance's format:

    Accept                                      served as
    (missing), */*, application/*               the instance's format
    application/vnd.kafka.v2+json               binary (Confluent: the binary reader is the default)
    application/vnd.kafka.<fmt>.v2+json         <fmt>
    application/json                            json (franz extension)

and a mismatch is 406 / 40601. Other endpoints answer ``application/vnd.kafka.v2+json``
unless the client accepts only ``application/json``; an Accept that allows neither
(``text/plain``) is 406 / 406.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from api.errors import V2_MEDIA, ApiError, ErrorCode
from core.broker.schemas.model import AVRO, JSON, PROTOBUF

JSON_MEDIA = "application/json"


class EmbeddedFormat(StrEnum):
    """How keys and values are carried inside v2 JSON bodies."""

    BINARY = "binary"
    JSON = "json"
    AVRO = "avro"
    JSONSCHEMA = "jsonschema"
    PROTOBUF = "protobuf"


#: Formats franz can embed: all five (the schema formats use the broker's Schema Registry).
SUPPORTED_FORMATS = frozenset(EmbeddedFormat)
#: The Schema Registry's schema type each schema format writes and reads.
SCHEMA_TYPES = {EmbeddedFormat.AVRO: AVRO, EmbeddedFormat.JSONSCHEMA: JSON,
                EmbeddedFormat.PROTOBUF: PROTOBUF}
#: What the stateless range read prefers (``range_read_format``); ``api.v2.records`` falls
#: back to a schema format the Accept names.
_RANGE_READ_FORMATS = frozenset({EmbeddedFormat.BINARY, EmbeddedFormat.JSON})

_KAFKA_V2 = re.compile(r"^application/vnd\.kafka(?:\.([a-z0-9_-]+))?\.v2\+json$")


def media_of(format: EmbeddedFormat) -> str:
    """``application/vnd.kafka.<format>.v2+json``."""
    return f"application/vnd.kafka.{format.value}.v2+json"


def bare_type(header: str) -> str:
    """The lower-cased type/subtype of a header value, parameters dropped."""
    return header.split(";", 1)[0].strip().lower()


@dataclass(frozen=True, slots=True)
class MediaType:
    """One parsed v2 media type. ``format`` is None for ``application/vnd.kafka.v2+json``."""

    kafka: bool
    format: EmbeddedFormat | None
    known: bool = True  # False: vnd.kafka.<x>.v2+json with an unknown <x>


def parse_media(value: str) -> MediaType | None:
    """A v2 Kafka media type or ``application/json``; None for anything else."""
    mt = bare_type(value)
    if mt == JSON_MEDIA:
        return MediaType(kafka=False, format=EmbeddedFormat.JSON)
    m = _KAFKA_V2.match(mt)
    if m is None:
        return None
    name = m.group(1)
    if name is None:
        return MediaType(kafka=True, format=None)
    try:
        return MediaType(kafka=True, format=EmbeddedFormat(name))
    except ValueError:
        return MediaType(kafka=True, format=None, known=False)


def _unsupported_media() -> ApiError:
    return ApiError(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, "HTTP 415 Unsupported Media Type")


def produce_format(content_type: str | None) -> EmbeddedFormat:
    """The embedded format a produce body is written in; 415 unless the Content-Type
    is one of the five embedded v2 types or plain ``application/json``."""
    if not content_type:
        raise _unsupported_media()
    media = parse_media(content_type)
    if media is None or media.format is None:
        raise _unsupported_media()
    return media.format


def check_body_type(content_type: str | None) -> None:
    """A JSON request body must be typed ``application/vnd.kafka[.<fmt>].v2+json`` or
    ``application/json``; anything else (or nothing) is 415."""
    if not content_type or parse_media(content_type) is None:
        raise _unsupported_media()


# --- Accept -----------------------------------------------------------------------------


def accept_ranges(accept: str) -> list[str]:
    """Media ranges of an Accept header in preference order (stable by q); q=0 dropped."""
    weighted: list[tuple[float, int, str]] = []
    for i, item in enumerate(accept.split(",")):
        parts = item.split(";")
        mt = parts[0].strip().lower()
        if not mt:
            continue
        q = 1.0
        for param in parts[1:]:
            key, _, val = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val.strip())
                except ValueError:
                    q = 0.0
        if q > 0:
            weighted.append((-q, i, mt))
    return [mt for _, _, mt in sorted(weighted)]


def _is_wildcard(mt: str) -> bool:
    return mt in ("*/*", "application/*", "*")


def _not_acceptable() -> ApiError:
    return ApiError(406, ErrorCode.NOT_ACCEPTABLE, "HTTP 406 Not Acceptable")


def v2_response_media(accept: str | None) -> str:
    """Media type of a v2 non-record response; 406 when the client accepts none."""
    if not accept or accept == V2_MEDIA or accept == "*/*":
        return V2_MEDIA
    json_ok = False
    for mt in accept_ranges(accept):
        if _is_wildcard(mt):
            return V2_MEDIA
        media = parse_media(mt)
        if media is None:
            continue
        if media.kafka:
            return V2_MEDIA
        json_ok = True
    if json_ok:
        return JSON_MEDIA
    raise _not_acceptable()


def _wanted_format(media: MediaType) -> EmbeddedFormat | None:
    """The format an Accept range asks for; ``vnd.kafka.v2+json`` alone means binary."""
    if media.format is not None:
        return media.format
    return EmbeddedFormat.BINARY if media.known else None


def records_format(
    accept: str | None, instance_format: EmbeddedFormat
) -> tuple[EmbeddedFormat, str]:
    """(format, response media type) for ``GET .../records`` of an instance.

    The first acceptable range that names the instance's format (or a wildcard) wins;
    if ranges name only other formats: 406 / 40601; if none is a Kafka or JSON type: 406."""
    if not accept or accept == "*/*":
        return instance_format, media_of(instance_format)
    saw_kafka = False
    for mt in accept_ranges(accept):
        if _is_wildcard(mt):
            return instance_format, media_of(instance_format)
        media = parse_media(mt)
        if media is None:
            continue
        saw_kafka = True
        if _wanted_format(media) is instance_format:
            return instance_format, (media_of(instance_format) if media.kafka else JSON_MEDIA)
    if saw_kafka:
        raise ApiError(
            406,
            ErrorCode.CONSUMER_FORMAT_MISMATCH,
            f"The requested embedded data format does not match the deserializer for this "
            f"consumer instance (format {instance_format.value})",
        )
    raise _not_acceptable()


def range_read_format(accept: str | None) -> tuple[EmbeddedFormat, str]:
    """(format, media type) for the stateless range read: binary unless the client
    asks for json (``application/vnd.kafka.json.v2+json`` or ``application/json``)."""
    if not accept or accept == "*/*":
        return EmbeddedFormat.BINARY, media_of(EmbeddedFormat.BINARY)
    saw_kafka = False
    for mt in accept_ranges(accept):
        if _is_wildcard(mt):
            return EmbeddedFormat.BINARY, media_of(EmbeddedFormat.BINARY)
        media = parse_media(mt)
        if media is None:
            continue
        saw_kafka = True
        fmt = _wanted_format(media)
        if fmt is not None and fmt in _RANGE_READ_FORMATS:
            return fmt, (media_of(fmt) if media.kafka else JSON_MEDIA)
    if saw_kafka:
        raise ApiError(
            406,
            ErrorCode.CONSUMER_FORMAT_MISMATCH,
            "The range read serves the binary, json, avro, jsonschema and protobuf embedded "
            "formats",
        )
    raise _not_acceptable()
