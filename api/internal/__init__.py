"""Broker-to-broker routes under ``/internal/v1``, hidden from the public OpenAPI
document. Wire formats: ``core.broker.replica.fetch_wire`` (replica fetch) and
``core.broker.cluster.client`` (append, fetch, offsets, controlled shutdown)."""

from api.internal.routes import router

__all__ = ["router"]
