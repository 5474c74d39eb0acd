"""Idempotency-Key calls to the key's coordinator: this broker's own coordinator when it
leads the key's ``__franz_idempotency`` partition, else the leader over the internal API
(``POST /internal/v1/idempotency/{op}``, served by ``serve`` there and never forwarded
again), through the router's ``call_leader``: a leader that moved or a broker that went
away is retried while leadership settles, and a call in flight to a leader that hangs is
abandoned as soon as the metadata names another one.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from core.broker.cluster.router import Router
from core.broker.errors import (
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from core.broker.idempotency.coordinator import Claim, IdempotencyCoordinator
from core.broker.metadata.cache import MetadataCache
from core.broker.types import IDEMPOTENCY_TOPIC, TopicPartition
from core.errors import InvalidRequestError

Address = tuple[str, int]
OPS = ("claim", "complete", "release")


class IdempotencyCallClient(Protocol):
    async def idempotency_call(self, address: Address, op: str, body: bytes) -> bytes: ...


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode_call(key: bytes, **args: Any) -> bytes:
    doc = {"key": _b64(key)}
    for name, value in args.items():
        doc[name] = _b64(value) if isinstance(value, bytes) else value
    return orjson.dumps(doc)


async def serve(coordinator: IdempotencyCoordinator, op: str, body: bytes) -> bytes:
    """Run a forwarded call here (``InvalidRequestError`` for a malformed one)."""
    try:
        doc = orjson.loads(body)
        key = base64.b64decode(doc["key"], validate=True)
        if op == "claim":
            claim = await coordinator.claim(
                key, base64.b64decode(doc["fingerprint"], validate=True),
                partition_count=int(doc["partition_count"]))
            return orjson.dumps({
                "producer_id": claim.producer_id, "producer_epoch": claim.producer_epoch,
                "partition_count": claim.partition_count,
                "now_ms": claim.now_ms,
                "results": None if claim.results is None else _b64(claim.results)})
        if op == "complete":
            await coordinator.complete(key, int(doc["producer_id"]),
                                       base64.b64decode(doc["results"], validate=True))
        elif op == "release":
            await coordinator.release(key, int(doc["producer_id"]))
        else:
            raise InvalidRequestError(f"unknown idempotency call {op!r}")
        return b"{}"
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as exc:
        raise InvalidRequestError(f"malformed idempotency call: {exc}") from None


class IdempotencyRouter:
    """``client`` None: a broker without peers (every call is served here)."""

    def __init__(self, coordinator: IdempotencyCoordinator, router: Router,
                 cache: MetadataCache, client: IdempotencyCallClient | None) -> None:
        self.coordinator = coordinator
        self._router = router
        self._cache = cache
        self._client = client

    async def _call(self, op: str, key: bytes, local: Callable[[], Awaitable[Any]],
                    **args: Any) -> Any:
        if self._cache.topic(IDEMPOTENCY_TOPIC) is None:
            raise CoordinatorNotAvailableError(
                f"{IDEMPOTENCY_TOPIC} does not exist yet (it is created with the cluster's "
                "consumer-offsets topic); retry")
        try:  # led here (always standalone): no routing
            return await local()
        except (NotCoordinatorError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError):
            if self._client is None:
                raise
        tp = TopicPartition(IDEMPOTENCY_TOPIC, self.coordinator.partition_for(key))
        client = self._client

        async def call(address: Address | None) -> Any:
            if address is None or client is None:
                return await local()
            return orjson.loads(await client.idempotency_call(address, op,
                                                              encode_call(key, **args)))

        return await self._router.call_leader(tp, call)

    async def claim(self, key: bytes, fingerprint: bytes, *, partition_count: int) -> Claim:
        c = self.coordinator
        doc = await self._call("claim", key, lambda: c.claim(
            key, fingerprint, partition_count=partition_count),
            fingerprint=fingerprint, partition_count=partition_count)
        if isinstance(doc, Claim):
            return doc
        results = doc["results"]
        return Claim(int(doc["producer_id"]), int(doc["producer_epoch"]),
                     int(doc["partition_count"]), int(doc["now_ms"]),
                     None if results is None else base64.b64decode(results))

    async def complete(self, key: bytes, producer_id: int, results: bytes) -> None:
        c = self.coordinator
        await self._call("complete", key, lambda: c.complete(key, producer_id, results),
                         producer_id=producer_id, results=results)

    async def release(self, key: bytes, producer_id: int) -> None:
        c = self.coordinator
        await self._call("release", key, lambda: c.release(key, producer_id),
                         producer_id=producer_id)
