"""Run one broker with its HTTP API in this process (uvicorn, uvloop when available).

Every listener (``app.listeners``) is one uvicorn server over the same app and broker,
https ones with the context of ``app.tls``. The listeners and TLS settings are checked
before the broker is built, so a bad one stops the start with a ``ListenerConfigError``
naming the property. SIGTERM/SIGINT stop every server; when one stops (or cannot open
its socket) the others are stopped too, then the broker's orderly stop runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import resource
import signal
import ssl
from collections.abc import Iterator

import uvicorn

from api.app import create_app
from app.assembly import build_broker
from app.http_protocol import BufferedTlsHttpProtocol, CoalescingHttpToolsProtocol, ConnectionLimits
from app.listeners import Listener, ListenerConfigError, check_exposure, listeners_of
from app.process_limits import raise_open_files_limit
from app.tls import server_context
from core.broker.admin.broker_config import BrokerConfig

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn's server without its habit of re-raising SIGTERM/SIGINT once it has shut
    down: that would kill the process before the broker's own orderly stop (flush,
    checkpoints, clean-shutdown marker) runs. The signals are captured once for all the
    servers (``_exit_on_signals``): a loop keeps one handler per signal."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.contextmanager
def _exit_on_signals(servers: list[_Server]) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def handle(sig: int) -> None:
        for server in servers:
            server.handle_exit(sig, None)

    for sig in signals:
        loop.add_signal_handler(sig, handle, sig)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def serve(config: BrokerConfig) -> None:
    listeners = listeners_of(config)
    check_exposure(listeners, config)
    tls = server_context(config) if any(lsn.is_tls for lsn in listeners) else None
    open_files = raise_open_files_limit()
    log.info("open-files limit %d", open_files)
    max_connections, idle_s = _connection_settings(config, len(listeners))
    broker = await build_broker(config)
    await broker.start()
    try:
        app = create_app(broker)
        servers = [_Server(_uvicorn_config(app, lsn, tls, max_connections=max_connections,
                                           idle_s=idle_s)) for lsn in listeners]
        for lsn in listeners:
            log.info("franz broker %d listening on %s", config.broker_id, lsn)
        await _serve_all(servers, listeners)
    finally:
        await broker.stop()


#: descriptors kept out of the connections' reach: segments, indexes, checkpoints,
#: inter-broker and ZooKeeper connections (at least this, at least a quarter of the limit)
_RESERVED_DESCRIPTORS = 256


def _connection_settings(config: BrokerConfig, listener_count: int) -> tuple[int, float]:
    """(max.connections per listener, connections.max.idle.ms in seconds). A
    ``max.connections`` that the open-files limit in force cannot hold (with a quarter
    of it, at least ``_RESERVED_DESCRIPTORS``, left for the log and checkpoints) is
    lowered to what it can, with a warning: connections must never take the descriptors
    the broker writes with."""
    max_connections = int(config["max.connections"])
    idle_ms = int(config["connections.max.idle.ms"])
    if max_connections < 1:
        raise ListenerConfigError(f"max.connections={max_connections} must be at least 1")
    if idle_ms < 1:
        raise ListenerConfigError(f"connections.max.idle.ms={idle_ms} must be at least 1")
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        budget = max(1, (soft - max(_RESERVED_DESCRIPTORS, soft // 4)) // listener_count)
        if max_connections > budget:
            log.warning("max.connections=%d is more than the open-files limit (%d) leaves for "
                        "the connections of %d listener(s): at most %d per listener are "
                        "accepted; raise the limit (ulimit -n) to allow more",
                        max_connections, soft, listener_count, budget)
            max_connections = budget
    return max_connections, idle_ms / 1000


def _uvicorn_config(app: object, listener: Listener, tls: ssl.SSLContext | None, *,
                    max_connections: int | None = None, idle_s: float = 600.0) -> uvicorn.Config:
    """One listener's server: the franz protocol with the listener's connection limits
    (``app.http_protocol``), connections idle for ``idle_s`` closed."""
    limits = ConnectionLimits(max_connections)
    protocol = (BufferedTlsHttpProtocol.factory(limits) if listener.is_tls
                else functools.partial(CoalescingHttpToolsProtocol, limits=limits))
    uv_config = uvicorn.Config(
        app, host=listener.host, port=listener.port, log_level="warning",  # type: ignore[arg-type]
        access_log=False, http=protocol, lifespan="off",  # type: ignore[arg-type]  # a factory
        timeout_graceful_shutdown=5, timeout_keep_alive=idle_s,  # type: ignore[arg-type]  # seconds; a float works
    )
    uv_config.load()
    uv_config.ssl = tls if listener.is_tls else None  # ours, not one built from file names
    return uv_config


async def _serve_all(servers: list[_Server], listeners: list[Listener]) -> None:
    """Serve until a signal, or until one server ends (it could not open its socket):
    then every server stops; the first failure is raised."""
    loop = asyncio.get_running_loop()
    with _exit_on_signals(servers):
        tasks = [loop.create_task(_serve_one(s, lsn)) for s, lsn in zip(servers, listeners, strict=True)]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for server in servers:
                server.should_exit = True
            results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def _serve_one(server: _Server, listener: Listener) -> None:
    try:
        await server.serve()
    except SystemExit:  # uvicorn's way out when it cannot listen (it logged why)
        raise ListenerConfigError(f"listener {listener} could not be opened (the reason is "
                                  "logged above); change listeners, or stop what uses the "
                                  "port") from None


def run(config: BrokerConfig) -> None:
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:  # pragma: no cover - platforms without uvloop
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
