"""Confluent Schema Registry's HTTP API (``routes``), its errors (``errors``); the registry
itself is ``core.broker.schemas``."""

from api.schema_registry.routes import router

__all__ = ["router"]
