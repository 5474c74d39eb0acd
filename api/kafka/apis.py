"""The APIs the Kafka door answers: key, versions, handler. ApiVersions lists exactly
these ranges; a request for any other key or version never reaches a handler.

A handler is ``async def handle(ctx: RequestContext, request: dict) -> dict | None``:
the decoded request in, the response body out (None: no answer, acks=0 produce).
Versions are within what the vendored definitions allow (``protocol/messages``) and
what franz implements; each handler module names its own range beside its code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from api.kafka.protocol.schema import Versions, load

if TYPE_CHECKING:
    from api.kafka.context import RequestContext

Handler = Callable[["RequestContext", dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str  # ``Produce``: the definitions are ``ProduceRequest`` / ``ProduceResponse``
    versions: Versions
    handler: Handler
    before_authentication: bool = False  # ApiVersions, SaslHandshake, SaslAuthenticate

    @property
    def request(self) -> str:
        return f"{self.name}Request"

    @property
    def response(self) -> str:
        return f"{self.name}Response"

    def flexible(self, version: int) -> bool:
        return version in load(self.request).flexible


APIS: dict[int, Api] = {}


def api(name: str, low: int, high: int, *, before_authentication: bool = False
        ) -> Callable[[Handler], Handler]:
    """Register a handler for ``name`` versions ``low..high`` (checked against Kafka's
    definitions: a range outside them is a bug found at import)."""
    def register(fn: Handler) -> Handler:
        spec = load(f"{name}Request")
        assert spec.api_key is not None
        if low not in spec.valid or high not in spec.valid or high not in load(f"{name}Response").valid:
            raise AssertionError(f"{name} {low}-{high} is outside Kafka's {spec.valid}")
        APIS[spec.api_key] = Api(spec.api_key, name, Versions(low, high), fn,
                                 before_authentication)
        return fn
    return register


def load_handlers() -> dict[int, Api]:
    """Import every handler module (each registers its APIs) and return the table."""
    from api.kafka.handlers import (  # noqa: F401  (registration by import)
        acls,
        admin,
        cluster,
        cluster_admin,
        configs,
        fetch,
        groups,
        offsets,
        produce,
        records,
        sasl,
    )
    return APIS
