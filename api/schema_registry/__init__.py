"""Confluent Schema Registry's HTTP API (``routes``; the request side ``inputs``, answers
``answers``, errors ``errors``, the route class ``route``, the OpenAPI declarations
``openapi`` and ``models``, the document's links ``links``); the registry itself is
``core.broker.schemas``."""

from api.schema_registry.links import LINKS
from api.schema_registry.routes import OPENAPI_SCHEMAS, router

__all__ = ["LINKS", "OPENAPI_SCHEMAS", "router"]
