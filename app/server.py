"""Run one broker with its HTTP API in this process (uvicorn, uvloop when available).

Every listener (``app.listeners``) is one uvicorn server over the same app and broker,
https ones with the context of ``app.tls``; a ``schema.registry.listeners`` one serves
that app's Schema Registry routes and health probes only
(``api.schema_registry.listener``). The listeners and TLS settings are checked,
and the listeners' sockets bound, before the broker is built, so a bad setting or a port
in use stops the start with a ``ListenerConfigError`` naming it before anything is
written to the data directory. The servers answer from then on: health probes and a 503
for everything else (``api.health.StartupGate``) until the broker has started, then the
API. One INFO line sums the start up. SIGTERM/SIGINT (once the broker has started;
before, they end the process as usual) stop every server; when one stops the others
are stopped too, then the broker's orderly stop runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import resource
import signal
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn

from api.app import create_app
from api.forwarded import HEADER_PROPERTY, forwarded_header, trusted_networks
from api.forwarded import PROPERTY as TRUSTED_PROPERTY
from api.health import StartupGate
from api.kafka.server import KafkaServer
from api.schema_registry.listener import registry_only
from api.security.authentication import login_throttle
from app.assembly import build_broker
from app.http_protocol import BufferedTlsHttpProtocol, CoalescingHttpToolsProtocol, ConnectionLimits
from app.kafka_listeners import KafkaDoor, KafkaListener, kafka_limits_of, open_kafka_door
from app.listeners import (
    Listener,
    ListenerConfigError,
    bind_listener,
    check_exposure,
    listeners_of,
    registry_listeners_of,
)
from app.process_limits import raise_open_files_limit
from app.tls import server_context
from core.broker.admin.broker_config import BrokerConfig
from core.broker.broker import Broker
from core.broker.types import is_internal_topic
from core.errors import FranzError

log = logging.getLogger(__name__)


class StartError(Exception):
    """The broker could not start; the message, one line, says why."""


class _Server(uvicorn.Server):
    """uvicorn's server without its habit of re-raising SIGTERM/SIGINT once it has shut
    down: that would kill the process before the broker's own orderly stop (flush,
    checkpoints, clean-shutdown marker) runs. The signals are captured once for all the
    servers (``_on_signals``): a loop keeps one handler per signal."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.contextmanager
def _on_signals(handle: Callable[[], None]) -> Iterator[None]:
    """``handle()`` on SIGINT or SIGTERM while inside (a loop keeps one handler per
    signal, so one for all the servers)."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, handle)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def serve(config: BrokerConfig) -> None:
    """Run the broker until SIGTERM/SIGINT. Order: every check that needs no data (the
    listeners, TLS, connection limits), then the listeners' sockets (a port in use is
    reported before the data directory is touched), then the broker behind a
    ``StartupGate`` (probes are answered while the logs load), then the API."""
    started = time.monotonic()
    listeners = listeners_of(config)
    registry = registry_listeners_of(config, listeners)
    every = [*listeners, *registry]
    check_exposure(every, config)
    tls = server_context(config) if any(lsn.is_tls for lsn in every) else None
    open_files = raise_open_files_limit()
    _check_forwarded(config)
    sockets = _bind_all(every)
    try:
        door = open_kafka_door(config, every)
        max_connections, idle_s = _connection_settings(config, len(every) + len(door.listeners))
    except ListenerConfigError:
        for sock in (s for socks in sockets for s in socks):
            sock.close()
        raise
    fresh = _is_fresh(config.data_dir)
    gate = StartupGate(step="loading logs")
    apps: list[object] = [gate] * len(listeners)
    apps += [registry_only(gate)] * len(registry)  # the registry alone
    servers = [_Server(_uvicorn_config(app, lsn, tls, max_connections=max_connections,
                                       idle_s=idle_s))
               for app, lsn in zip(apps, every, strict=True)]
    tasks = [asyncio.get_running_loop().create_task(server.serve(sockets=socks))
             for server, socks in zip(servers, sockets, strict=True)]
    broker: Broker | None = None
    kafka: KafkaServer | None = None
    try:
        broker = await _start_broker(config, gate, door)
        app = create_app(broker)
        gate.open(app)
        if door:
            kafka = KafkaServer(broker, limits=kafka_limits_of(config, max_connections=max_connections),
                                throttle=login_throttle(app))
            app.state.kafka_server = kafka  # GET /metrics reads its counters
            for sock, info, door_tls in door.listener_infos():
                await kafka.start(sock, info, ssl_context=door_tls)
        _freeze_startup_heap()
        log.info("%s", _summary(broker, listeners, registry, door.listeners, fresh=fresh,
                                open_files=open_files, seconds=time.monotonic() - started))
        await _serve_all(tasks, every)
    finally:
        if broker is not None:  # leadership moves away while followers can still fetch
            await broker.hand_off_leadership()
        if kafka is not None:
            await kafka.stop()
        door.close()
        await _stop_all(servers, tasks)
        if broker is not None:
            await broker.stop()


def _freeze_startup_heap() -> None:
    """Move what the start up left alive (modules, the app, the loaded logs: ~140,000
    objects on a fresh standalone broker, millions at 100,000 partitions) out of the
    cyclic garbage collector's reach: they live as long as the process, and each full
    collection walked them all (~90 ms, every few hundred produce requests; measured in
    docs/benchmarks.md). The start up's own cyclic garbage is collected first."""
    gc.collect()
    gc.freeze()


def _bind_all(listeners: list[Listener]) -> list[list[socket.socket]]:
    bound: list[list[socket.socket]] = []
    try:
        for lsn in listeners:
            bound.append(bind_listener(lsn))
    except ListenerConfigError:
        for sock in (s for socks in bound for s in socks):
            sock.close()
        raise
    return bound


def _is_fresh(data_dir: Path) -> bool:
    """Whether the data directory holds nothing yet (missing or empty)."""
    try:
        return not any(data_dir.iterdir())
    except FileNotFoundError:
        return True
    except OSError:  # unreadable: the broker's own open says why
        return False


async def _start_broker(config: BrokerConfig, gate: StartupGate, door: KafkaDoor) -> Broker:
    """The started broker; StartError when it cannot start (the data directory in use,
    the broker id taken, the metadata store unreachable, a storage or file error)."""
    try:
        broker = await build_broker(config, kafka_endpoints=door.endpoints)
        gate.step = "joining the cluster" if config["zookeeper.connect"] else "starting"
        await broker.start()
    except (FranzError, OSError) as exc:
        log.debug("start failed", exc_info=exc)  # the traceback, for --log-level DEBUG
        raise StartError(" ".join(str(exc).split()) or type(exc).__name__) from exc
    return broker


def _summary(broker: Broker, listeners: list[Listener], registry: list[Listener],
             kafka: list[KafkaListener], *, fresh: bool, open_files: int, seconds: float) -> str:
    """The one INFO line of a start."""
    partitions = broker.replica_manager.partitions
    internal = sum(1 for tp in partitions if is_internal_topic(tp.topic))
    where = f"{broker.config.data_dir}{' (new)' if fresh else ''}"
    also = f", the Schema Registry alone on {', '.join(map(str, registry))}" if registry else ""
    return (f"franz broker {broker.broker_id} ready in {seconds:.2f} s: {len(partitions)} "
            f"partitions ({internal} internal) in {where}, cluster {broker.cluster_id}; "
            f"listening on {', '.join(map(str, [*listeners, *kafka]))}{also}; open-files limit "
            f"{open_files}")


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


def _check_forwarded(config: BrokerConfig) -> None:
    """ListenerConfigError, naming the property, for a bad trusted-proxy setting (also
    checked by ``app.settings``; here for a config built without it)."""
    try:
        trusted_networks(str(config[TRUSTED_PROPERTY]))
        forwarded_header(str(config[HEADER_PROPERTY]))
    except ValueError as exc:
        raise ListenerConfigError(str(exc)) from None


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
        # never uvicorn's X-Forwarded-For handling (it trusts 127.0.0.1 by default, so any
        # local client could pick its host for ACLs and the audit log): api.forwarded
        # reads forwarded headers, from http.forwarded.trusted.addresses only
        proxy_headers=False, forwarded_allow_ips="",
        timeout_graceful_shutdown=5, timeout_keep_alive=idle_s,  # type: ignore[arg-type]  # seconds; a float works
    )
    uv_config.load()
    uv_config.ssl = tls if listener.is_tls else None  # ours, not one built from file names
    return uv_config


async def _serve_all(tasks: list[asyncio.Task[None]], listeners: list[Listener]) -> None:
    """Serve until a signal, or until one server ends; the first failure is raised. The
    servers go on serving after a signal: the caller stops them (``_stop_all``) once the
    broker handed its leadership off."""
    signalled = asyncio.Event()
    waiter = asyncio.get_running_loop().create_task(signalled.wait())
    try:
        with _on_signals(signalled.set):
            await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    for task, listener in zip(tasks, listeners, strict=True):
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise ListenerConfigError(f"listener {listener} failed: {task.exception()}")


async def _stop_all(servers: list[_Server], tasks: list[asyncio.Task[None]]) -> None:
    """Stop every server (each closes its sockets) and wait for them."""
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks, return_exceptions=True)


def run(config: BrokerConfig) -> None:
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:  # pragma: no cover - platforms without uvloop
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
