"""Confluent REST Proxy v2 routers (paths at the root), plus franz's range read."""

from __future__ import annotations

from fastapi import APIRouter

from api.v2 import brokers, consumer_records, consumers, offsets, produce, records, topics

router = APIRouter()
for _module in (brokers, topics, produce, records, consumers, offsets, consumer_records):
    router.include_router(_module.router)

__all__ = ["router"]
