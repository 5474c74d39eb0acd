"""Run one broker with its HTTP API in this process (uvicorn, uvloop when available)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator

import uvicorn

from api.app import create_app
from app.assembly import build_broker
from app.http_protocol import CoalescingHttpToolsProtocol
from core.broker.admin.broker_config import BrokerConfig

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn's server without its habit of re-raising SIGTERM/SIGINT once it has shut
    down: that would kill the process before the broker's own orderly stop (flush,
    checkpoints, clean-shutdown marker) runs."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)


async def serve(config: BrokerConfig) -> None:
    broker = await build_broker(config)
    await broker.start()
    try:
        app = create_app(broker)
        uv_config = uvicorn.Config(
            app, host=config["host"], port=config["port"], log_level="warning",
            access_log=False, http=CoalescingHttpToolsProtocol, lifespan="off", timeout_graceful_shutdown=5,
        )
        server = _Server(uv_config)
        log.info("franz broker %d listening on http://%s:%d", config.broker_id, config["host"],
                 config["port"])
        await server.serve()
    finally:
        await broker.stop()


def run(config: BrokerConfig) -> None:
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:  # pragma: no cover - platforms without uvloop
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
