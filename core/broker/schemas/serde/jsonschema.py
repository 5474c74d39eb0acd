"""JSON payloads: the compact JSON text of a value, validated against the JSON schema
(jsonschema, the schema's draft, ``$ref``s to its references) when written; not
validated when read (Confluent's default)."""

from __future__ import annotations

from typing import Any

import orjson
from jsonschema import exceptions, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from core.broker.schemas.formats import ParsedSchema
from core.broker.schemas.serde.base import DecodeError, Invalid, Payload, Read
from core.json_depth import MAX_VALUE_DEPTH, value_depth_exceeds


def encoder(parsed: ParsedSchema) -> Payload:
    model = parsed.model
    resources = Registry().with_resources(
        (uri, Resource.from_contents(doc, default_specification=DRAFT7))
        for uri, doc in model.resources.items())
    cls = validators.validator_for(model.document, default=validators.Draft7Validator)
    validator = cls(model.document, registry=resources)
    best_match, dumps = exceptions.best_match, orjson.dumps

    def payload(value: Any) -> bytes:
        try:
            error = next(validator.iter_errors(value), None)
            if error is not None:
                error = best_match(validator.iter_errors(value)) or error
        except Exception as exc:  # a $ref that does not resolve, recursion
            raise Invalid(f"cannot be validated: {str(exc)[:300]}") from None
        if error is not None:
            invalid = Invalid(error.message[:300])
            invalid.path = [f"[{p}]" if isinstance(p, int) else f".{p}"
                            for p in reversed(error.absolute_path)]
            raise invalid
        try:
            return dumps(value)
        except orjson.JSONEncodeError as exc:
            raise Invalid(str(exc)) from None

    return payload


def decoder(parsed: ParsedSchema, schema_id: int) -> Read:
    return _read


def _read(payload: memoryview) -> Any:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"the payload is not valid JSON: {exc}") from None
    if value_depth_exceeds(payload):
        raise DecodeError(f"the payload nests deeper than {MAX_VALUE_DEPTH} levels")
    return value
