"""Calls from this broker to another broker's internal API, all through one lean
keep-alive HTTP/1.1 client (``core.broker.cluster.keepalive_http``).

Routes (``api/internal``, mounted under ``/internal/v1``, hidden from OpenAPI):

    POST /replica/fetch                     follower fetch (``core.broker.replica.fetch_wire``)
    POST /append?topic=&partition=&acks=&timeout_ms=
                                            body = record batches; JSON
                                            {first_offset, last_offset, log_append_time, ...}
    GET  /fetch?topic=&partition=&offset=&max_bytes=&max_wait_ms=
                                            binary: int32 n + JSON {first_offset, high_offset,
                                            log_start_offset, high_watermark, log_end_offset}
                                            + the batches
    GET  /offsets?topic=&partition=         JSON {log_start_offset, high_watermark, log_end_offset}
    POST /groups/{op}                       a consumer-group call for the coordinator
                                            (``core.broker.consumer.wire``)
    POST /idempotency/{op}                  an Idempotency-Key call for its coordinator
                                            (``core.broker.idempotency.router``)
    POST /schemas/{op}                      a Schema Registry call for the leader of
                                            ``_schemas-0`` (``core.broker.schemas.router``)
    POST /controlled_shutdown?broker_id=    JSON {remaining}: asked of the controller

A failed call answers a non-2xx status with ``{"kafka_error_code": N, "error_class":
name, "message": ...}``; it is raised here as that domain error (``FranzError.for_name``).
Transport failures (refused, reset, timeouts) become ``BrokerNotAvailableError``; a
read timeout after the request was sent becomes ``RequestTimedOutError`` (the call may
have taken effect).

Every call goes to a broker's registered address; ``scheme_of`` tells which of them serve
https, ``ssl_context`` and ``headers`` (credentials) are the keep-alive client's.
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import Callable, Mapping
from urllib.parse import urlencode

import orjson

from core.broker.cluster.keepalive_http import KeepAliveClient
from core.broker.errors import BrokerNotAvailableError
from core.broker.replica.fetch_wire import (
    ReplicaFetchRequest,
    ReplicaFetchResult,
    decode_response,
    encode_request,
)
from core.broker.types import PartitionOffsets
from core.errors import FranzError
from core.storage.log import AppendInfo, FetchData

PREFIX = "/internal/v1"
BINARY = "application/octet-stream"  # every internal body: our own framing
_LEN = struct.Struct(">i")

Address = tuple[str, int]


class HttpClusterClient:
    """Lifecycle: create, call from the event loop, ``await close()``."""

    def __init__(self, *, timeout_s: float = 30.0, ssl_context: ssl.SSLContext | None = None,
                 scheme_of: Callable[[Address], str] | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self._timeout_s = timeout_s
        self._http = KeepAliveClient(connect_timeout_s=min(5.0, timeout_s),
                                     ssl_context=ssl_context, headers=headers,
                                     scheme_of=scheme_of or (lambda _address: "http"))

    async def close(self) -> None:
        await self._http.close()

    async def _send(self, address: Address, method: str, path: str, *, body: bytes = b"",
                    params: Mapping[str, object] | None = None,
                    content_type: str = BINARY,
                    extra_timeout_s: float = 0.0) -> bytes:
        target = PREFIX + path + (f"?{urlencode(params)}" if params else "")
        status, answer = await self._http.request(
            method, address, target, body, content_type, self._timeout_s + extra_timeout_s)
        if status >= 300:
            raise _error_of_body(status, answer)
        return answer

    async def replica_fetch(self, address: Address, req: ReplicaFetchRequest) -> list[ReplicaFetchResult]:
        # the follower loop's call, on every acks=all round trip: the lean client
        status, body = await self._http.post(
            address, PREFIX + "/replica/fetch", encode_request(req), BINARY,
            self._timeout_s + req.max_wait_ms / 1000)
        if status >= 300:
            raise _error_of_body(status, body)
        try:
            return decode_response(body)
        except ValueError as exc:
            raise BrokerNotAvailableError(f"bad replica fetch response: {exc}") from exc

    async def append(self, address: Address, topic: str, partition: int, data: bytes, *,
                     acks: int, timeout_ms: int) -> AppendInfo:
        answer = await self._send(
            address, "POST", "/append", body=bytes(data),
            params={"topic": topic, "partition": partition, "acks": acks, "timeout_ms": timeout_ms},
            extra_timeout_s=timeout_ms / 1000)
        d = orjson.loads(answer)
        return AppendInfo(d["first_offset"], d["last_offset"], d.get("max_timestamp", -1),
                          d.get("log_append_time", -1), d.get("num_records", 0), d.get("size", 0),
                          d.get("log_start_offset", 0), bool(d.get("duplicate", False)))

    async def fetch(self, address: Address, topic: str, partition: int, offset: int, *,
                    max_bytes: int, max_wait_ms: int) -> tuple[FetchData, PartitionOffsets]:
        body = await self._send(
            address, "GET", "/fetch", extra_timeout_s=max_wait_ms / 1000,
            params={"topic": topic, "partition": partition, "offset": offset,
                    "max_bytes": max_bytes, "max_wait_ms": max_wait_ms})
        (n,) = _LEN.unpack_from(body, 0)
        h = orjson.loads(body[_LEN.size:_LEN.size + n])
        data = FetchData(body[_LEN.size + n:], h["first_offset"], h["high_offset"])
        return data, PartitionOffsets(h["log_start_offset"], h["high_watermark"], h["log_end_offset"])

    async def offsets(self, address: Address, topic: str, partition: int) -> PartitionOffsets:
        d = orjson.loads(await self._send(address, "GET", "/offsets",
                                          params={"topic": topic, "partition": partition}))
        return PartitionOffsets(d["log_start_offset"], d["high_watermark"], d["log_end_offset"])

    async def group_call(self, address: Address, op: str, body: bytes, *,
                         timeout_s: float) -> bytes:
        return await self._send(address, "POST", f"/groups/{op}", body=body,
                                extra_timeout_s=max(0.0, timeout_s - self._timeout_s))

    async def idempotency_call(self, address: Address, op: str, body: bytes) -> bytes:
        return await self._send(address, "POST", f"/idempotency/{op}", body=body,
                                content_type="application/json")

    async def schemas_call(self, address: Address, op: str, body: bytes) -> bytes:
        return await self._send(address, "POST", f"/schemas/{op}", body=body,
                                content_type="application/json")

    async def controlled_shutdown(self, address: Address, broker_id: int) -> int:
        answer = await self._send(address, "POST", "/controlled_shutdown",
                                  params={"broker_id": broker_id})
        return int(orjson.loads(answer)["remaining"])


def encode_fetch(data: FetchData, offsets: PartitionOffsets) -> bytes:
    """The body of ``GET /fetch`` (used by ``api/internal``)."""
    header = orjson.dumps({"first_offset": data.first_offset, "high_offset": data.high_offset,
                           "log_start_offset": offsets.log_start_offset,
                           "high_watermark": offsets.high_watermark,
                           "log_end_offset": offsets.log_end_offset})
    return b"".join([_LEN.pack(len(header)), header, bytes(data.data)])


def _error_of_body(status: int, body: bytes) -> FranzError:
    try:
        doc = orjson.loads(body)
        code, message = int(doc["kafka_error_code"]), str(doc.get("message", ""))
        name = str(doc.get("error_class", ""))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return BrokerNotAvailableError(f"internal call failed with HTTP {status}: "
                                       f"{body[:200].decode('utf-8', 'replace')}")
    return FranzError.for_name(name, code)(message)
