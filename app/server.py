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
import logging
import signal
import ssl
from collections.abc import Iterator

import uvicorn

from api.app import create_app
from app.assembly import build_broker
from app.http_protocol import BufferedTlsHttpProtocol, CoalescingHttpToolsProtocol
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
    broker = await build_broker(config)
    await broker.start()
    try:
        app = create_app(broker)
        servers = [_Server(_uvicorn_config(app, lsn, tls)) for lsn in listeners]
        for lsn in listeners:
            log.info("franz broker %d listening on %s", config.broker_id, lsn)
        await _serve_all(servers, listeners)
    finally:
        await broker.stop()


def _uvicorn_config(app: object, listener: Listener, tls: ssl.SSLContext | None) -> uvicorn.Config:
    protocol = BufferedTlsHttpProtocol.factory() if listener.is_tls else CoalescingHttpToolsProtocol
    uv_config = uvicorn.Config(
        app, host=listener.host, port=listener.port, log_level="warning",  # type: ignore[arg-type]
        access_log=False, http=protocol, lifespan="off", timeout_graceful_shutdown=5,
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
