"""Consumer-group requests answered by the group's coordinator, whichever broker got them.

A group lives on one broker: the leader of its ``__consumer_offsets`` partition
(``abs(javaHashCode(group)) % offsets.topic.num.partitions``). In a cluster, a v2
consumer request (``/consumers/{group}...``) or a v3 consumer-group request
(``/v3/clusters/{id}/consumer-groups/{group}...``) that reaches another broker is sent on
to the coordinator's public listener as it came (method, path, query, body, headers,
including ``Host``, so the ``base_uri`` of a new instance still names the broker the
client talks to) and its answer is passed back unchanged. A forwarded request carries
``X-Franz-Forwarded`` and is never forwarded again: a broker that lost the group in the
meantime answers it itself (Kafka's NOT_COORDINATOR, mapped in ``api.errors``).

While the coordinator cannot be reached (it died and the controller has not yet moved
its partitions), the request is retried against whatever broker the metadata names
next, for up to ``RETRY_S``; then this broker answers it itself.

Listing groups (``GET /v3/clusters/{id}/consumer-groups``) asks every live broker and
answers the union, since each broker knows only the groups it coordinates.

Pure ASGI middleware, installed only in cluster mode (a standalone broker coordinates
every group, so the hot consumer routes pay nothing).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Any

import httpx
import orjson

if TYPE_CHECKING:
    from fastapi import FastAPI

    from core.broker.broker import Broker

FORWARDED_HEADER = b"x-franz-forwarded"
RETRY_S = 15.0  # a little over a default failover (session timeout + election)
# Long polls (consumer records ?timeout=) may legitimately take a while to answer.
_TIMEOUT = httpx.Timeout(connect=2.0, read=330.0, write=30.0, pool=30.0)
_GROUP_PATH = re.compile(r"^/(?:consumers|v3/clusters/[^/]+/consumer-groups)/([^/]+)")
_GROUP_LIST_PATH = re.compile(r"^/v3/clusters/[^/]+/consumer-groups/?$")
_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length",
               b"te", b"upgrade", b"proxy-connection"}


def group_of_path(path: str) -> str | None:
    """The consumer group a request path is about, or None."""
    m = _GROUP_PATH.match(path)
    return m.group(1) if m else None


class GroupForwardingMiddleware:
    def __init__(self, app: Any, broker: Broker) -> None:
        self.app = app
        self.broker = broker
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        forwarded = any(k == FORWARDED_HEADER for k, _ in scope["headers"])
        if (scope["method"] == "GET" and not forwarded
                and _GROUP_LIST_PATH.match(scope["path"])):
            await self._list_everywhere(scope, receive, send)
            return
        group = group_of_path(scope["path"])
        if (group is None or self.broker.coordinator_address(group) is None
                or forwarded):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        answer = await self._forward(scope, group, body)
        if answer is None:  # no coordinator reachable in time: answer here
            await self.app(scope, _replay(body), send)
            return
        status, headers, content = answer
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def _forward(self, scope: dict[str, Any], group: str,
                       body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        headers.append((FORWARDED_HEADER, b"1"))
        target = scope["path"] + (("?" + scope["query_string"].decode("latin-1"))
                                  if scope["query_string"] else "")
        deadline = time.monotonic() + RETRY_S
        while True:
            address = self.broker.coordinator_address(group)
            if address is None:
                return None  # this broker is the coordinator now (or none is known)
            host, port = address
            try:
                resp = await self._http().request(
                    scope["method"], f"http://{host}:{port}{target}", content=body,
                    headers=headers)
            except httpx.TransportError:
                if time.monotonic() >= deadline:
                    return None
                await asyncio.sleep(0.2)  # the controller may be moving the group
                continue
            out = [(k.lower(), v) for k, v in resp.headers.raw if k.lower() not in _HOP_BY_HOP]
            return resp.status_code, out, resp.content

    async def _list_everywhere(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Every broker knows only the groups it coordinates: the list is the union of
        this broker's answer and every other live broker's (asked with the forwarded
        mark, so they answer for themselves). A broker that does not answer is left out."""
        local: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                local.update(message)
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, capture)
        body = b"".join(chunks)
        if local.get("status") != 200:
            await send(local)
            await send({"type": "http.response.body", "body": body})
            return
        merged = orjson.loads(body)
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        headers.append((FORWARDED_HEADER, b"1"))
        others = [r for b, r in self.broker.cache.brokers.items() if b != self.broker.broker_id]

        async def ask(host: str, port: int) -> list[Any]:
            try:
                r = await self._http().get(f"http://{host}:{port}{scope['path']}",
                                           headers=headers, timeout=5.0)
                return list(r.json()["data"]) if r.status_code == 200 else []
            except (httpx.HTTPError, ValueError, KeyError):
                return []

        seen = {g["consumer_group_id"] for g in merged["data"]}
        for part in await asyncio.gather(*(ask(r.host, r.port) for r in others)):
            for g in part:
                if g["consumer_group_id"] not in seen:
                    seen.add(g["consumer_group_id"])
                    merged["data"].append(g)
        merged["data"].sort(key=lambda g: g["consumer_group_id"])
        out = orjson.dumps(merged)
        start_headers = [(k, v) for k, v in local.get("headers", []) if k != b"content-length"]
        start_headers.append((b"content-length", str(len(out)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": start_headers})
        await send({"type": "http.response.body", "body": out})

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=_TIMEOUT)
        return self._client


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # like a client that stays connected
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def install_group_forwarding(app: FastAPI, broker: Broker) -> None:
    """Forward group requests to their coordinator (cluster mode only)."""
    config = getattr(broker, "config", None)  # (tests build apps over stand-in brokers)
    if config is not None and config["zookeeper.connect"]:
        app.add_middleware(GroupForwardingMiddleware, broker=broker)
