"""``GET /metrics``: the broker's metrics in Prometheus text format (docs/metrics.md).

Each app has its own ``CollectorRegistry`` (never the process-global one), so several
brokers can live in one process. Two sources feed it:

    RequestMetrics   a pure ASGI middleware: request count and latency per method and
                     route template (``/v3/clusters/{cluster_id}/topics/{topic_name}``),
                     never per concrete URL, so the label set stays small
    BrokerCollector  computed at scrape time from the broker facade: per-topic traffic
                     (``Broker.topic_stats``, plain integers kept by core), partition
                     health (under-replicated, offline), controller, ISR changes, log
                     sizes and consumer-group lag
    AuthenticationCollector  the login throttle's counters (failed and throttled
                     HTTP Basic authentications, ``api.security.login_throttle``)
    KafkaDoorCollector  Kafka-protocol requests per API and connections
                     (``api.kafka.server.KafkaServer``)

plus prometheus-client's standard process, GC and platform collectors (``process_*``,
``python_gc_*``, ``python_info``).

Names follow Kafka's JMX beans lower-cased (``kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec`` -> ``franz_server_brokertopicmetrics_messagesin_total``): counters
are totals (Prometheus derives rates), gauges are current values.

The middleware is on every request, the produce path included, so it does the least
it can: two clock reads, one dict lookup per label set (the labelled children are
cached) and no per-record work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from starlette.responses import Response

from api.security.authentication import login_throttle
from api.security.authorization import Need, requires
from api.security.login_throttle import LoginThrottle
from core.broker.security.acl import Operation, ResourceType
from core.broker.types import TopicPartition
from core.errors import FranzError

if TYPE_CHECKING:
    from core.broker.broker import Broker

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Latency buckets (seconds): sub-millisecond produce up to the longest long-poll reads.
DURATION_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)
#: How long a scrape waits for another broker's high watermark (consumer lag).
REMOTE_OFFSETS_TIMEOUT_S = 1.0
#: The ``route`` label of requests no route matched (unknown URLs).
UNMATCHED_ROUTE = "<unmatched>"


class RequestMetrics:
    """Pure ASGI middleware: ``franz_http_requests_total{method,route,status}`` and
    ``franz_http_request_duration_seconds{method,route}``. The route template comes
    from ``scope["route"]``, which FastAPI's router sets on the shared scope; the time
    runs until the app returns (for a streamed answer, until its last chunk)."""

    def __init__(self, app: ASGIApp, *, requests: Counter, duration: Histogram) -> None:
        self.app = app
        self._requests = requests
        self._duration = duration
        self._counters: dict[tuple[str, str, int], Any] = {}
        self._histograms: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # unless a response starts: an exception escaped the app

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self._observe(scope, status, time.perf_counter() - start)

    def _observe(self, scope: Scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or UNMATCHED_ROUTE
        method = scope["method"]
        key = (method, template, status)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = self._requests.labels(method, template, str(status))
        counter.inc()
        hkey = (method, template)
        histogram = self._histograms.get(hkey)
        if histogram is None:
            histogram = self._histograms[hkey] = self._duration.labels(method, template)
        histogram.observe(seconds)


class BrokerCollector(Collector):
    """Gauges and counters read from the broker when Prometheus scrapes. Everything is
    in memory and event-loop only; ``group_lags`` is filled by the scrape handler just
    before ``collect`` runs (finding a high watermark may take a call to the leader)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.group_lags: list[tuple[str, str, int, int]] = []  # group, topic, partition, lag

    def describe(self) -> Iterable[Metric]:
        return []  # names are not checked for collisions: the registry is this app's own

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_traffic()
        yield from self._replica_health()
        yield from self._controller()
        lag = GaugeMetricFamily(
            "franz_consumer_group_lag",
            "High watermark minus the group's committed offset, per partition (groups "
            "this broker coordinates)",
            labels=["group", "topic", "partition"],
        )
        for group, topic, partition, value in self.group_lags:
            lag.add_metric([group, topic, str(partition)], value)
        yield lag

    def _topic_traffic(self) -> Iterator[Metric]:
        names = {
            "messagesin": "Records appended for producers",
            "bytesin": "Bytes of record batches appended for producers",
            "messagesout": "Records returned to consumers and readers",
            "bytesout": "Bytes of record batches returned to consumers and readers",
        }
        families = {
            key: CounterMetricFamily(
                f"franz_server_brokertopicmetrics_{key}", doc, labels=["topic"]
            )
            for key, doc in names.items()
        }
        live = self.broker.cache.topics
        for topic, c in sorted(self.broker.topic_stats.topics.items()):
            if topic not in live:
                continue  # deleted: Kafka drops the topic's metrics too
            families["messagesin"].add_metric([topic], c.messages_in)
            families["bytesin"].add_metric([topic], c.bytes_in)
            families["messagesout"].add_metric([topic], c.messages_out)
            families["bytesout"].add_metric([topic], c.bytes_out)
        yield from families.values()

    def _replica_health(self) -> Iterator[Metric]:
        rm = self.broker.replica_manager
        partitions = dict(rm.partitions) if rm is not None else {}
        under = leaders = 0
        size = GaugeMetricFamily(
            "franz_log_size_bytes",
            "Bytes on disk of each partition log this broker hosts",
            labels=["topic", "partition"],
        )
        for tp, p in sorted(partitions.items()):
            size.add_metric([tp.topic, str(tp.partition)], p.log.size_in_bytes)
            if p.is_leader:
                leaders += 1
                under += len(p.isr) < len(p.replicas)
        yield size
        yield GaugeMetricFamily(
            "franz_replicamanager_underreplicatedpartitions",
            "Partitions led by this broker whose ISR is smaller than their replica set",
            value=under,
        )
        yield GaugeMetricFamily(
            "franz_replicamanager_partitioncount", "Partitions hosted by this broker",
            value=len(partitions),
        )
        yield GaugeMetricFamily(
            "franz_replicamanager_leadercount", "Partitions led by this broker", value=leaders
        )
        offline = [tp for tp, p in sorted(partitions.items()) if p.offline]
        yield GaugeMetricFamily(
            "franz_replicamanager_offlinereplicacount",
            "Replicas hosted by this broker whose log could not be loaded (they answer "
            "KAFKA_STORAGE_ERROR until the broker restarts with the directory repaired)",
            value=len(offline),
        )
        offline_family = GaugeMetricFamily(
            "franz_replica_offline",
            "1 for each replica of this broker whose log is offline",
            labels=["topic", "partition"],
        )
        for tp in offline:
            offline_family.add_metric([tp.topic, str(tp.partition)], 1)
        yield offline_family
        for name, attr, doc in (
            ("isrshrinks", "isr_shrinks", "ISR shrinks of partitions led by this broker"),
            ("isrexpands", "isr_expands", "ISR expansions of partitions led by this broker"),
        ):
            yield CounterMetricFamily(
                f"franz_replicamanager_{name}", doc, value=int(getattr(rm, attr, 0) or 0)
            )

    def _controller(self) -> Iterator[Metric]:
        b = self.broker
        active = b.controller.is_active
        offline = 0
        if active:  # as in Kafka, only the active controller reports offline partitions
            live = b.cache.brokers
            for meta in b.cache.topics.values():
                for p in meta.assignment.partitions:
                    state = meta.states.get(p)
                    offline += state is None or state.leader < 0 or state.leader not in live
        yield GaugeMetricFamily(
            "franz_controller_activecontrollercount",
            "1 on the broker that is the active controller, else 0",
            value=int(active),
        )
        yield GaugeMetricFamily(
            "franz_controller_offlinepartitionscount",
            "Partitions without a live leader (reported by the active controller)",
            value=offline,
        )


async def group_lags(broker: Broker) -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, lag) for every committed offset of the groups this
    broker coordinates. The high watermark comes from the local replica when there is
    one, else from the leader; partitions of deleted topics are left out."""
    consumers = broker.consumers
    if consumers is None:
        return []
    rm = broker.replica_manager
    ends: dict[TopicPartition, int | None] = {}
    out = []
    for group in consumers.coordinator.loaded_groups():
        for tp, committed in sorted(group.offsets.items()):
            if tp not in ends:
                ends[tp] = await _high_watermark(broker, rm, tp)
            end = ends[tp]
            if end is not None:
                out.append((group.group_id, tp.topic, tp.partition, max(0, end - committed.offset)))
    return out


async def _high_watermark(broker: Broker, rm: Any, tp: TopicPartition) -> int | None:
    """The local replica's high watermark, else the leader's (asked with a short
    timeout); None while the partition has no live leader: no sample this time."""
    local = rm.partitions.get(tp) if rm is not None else None
    if local is not None:
        return int(local.high_watermark)
    meta = broker.cache.topic(tp.topic)
    state = None if meta is None else meta.states.get(tp.partition)
    if state is None or state.leader not in broker.cache.brokers:
        return None  # deleted, or leaderless: never wait for an election in a scrape
    try:
        offsets = await asyncio.wait_for(broker.partition_offsets(tp.topic, tp.partition),
                                         REMOTE_OFFSETS_TIMEOUT_S)
    except (FranzError, TimeoutError):
        return None
    return offsets.high_watermark


class AuthenticationCollector(Collector):
    """The login throttle's counters (``api.security.login_throttle``), read at scrape
    time: failed authentications, and attempts refused with 429 before their check."""

    def __init__(self, throttle: LoginThrottle) -> None:
        self.throttle = throttle

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "franz_authentication_failures",
            "Failed authentications, HTTP Basic and Kafka SASL (unknown user, wrong password, malformed "
            "credentials)",
            value=self.throttle.failures,
        )
        yield CounterMetricFamily(
            "franz_authentication_throttled",
            "HTTP Basic attempts refused with 429 (too many failures of the principal or "
            "the client address) without checking the secret",
            value=self.throttle.throttled,
        )


class KafkaDoorCollector(Collector):
    """The Kafka listeners' requests, as Kafka's ``kafka.network:type=RequestMetrics``
    (``RequestsPerSec``, ``TotalTimeMs`` per request name) and connections, read at
    scrape time from the server ``app/server.py`` puts on ``app.state.kafka_server``
    (none when the Kafka protocol is off)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        server = getattr(self.app.state, "kafka_server", None)
        if server is None:
            return
        requests = CounterMetricFamily(
            "franz_network_requestmetrics_requests",
            "Kafka-protocol requests answered, by request (API) name", labels=["request"])
        seconds = CounterMetricFamily(
            "franz_network_requestmetrics_totaltime_seconds",
            "Time spent serving Kafka-protocol requests (decode to answer), by request name",
            labels=["request"])
        for name, (count, spent) in sorted(server.request_stats.items()):
            requests.add_metric([name], count)
            seconds.add_metric([name], spent)
        yield requests
        yield seconds
        yield GaugeMetricFamily("franz_network_kafka_connections",
                                "Open Kafka-protocol connections", value=server.connections)
        yield CounterMetricFamily("franz_network_kafka_connections_accepted",
                                  "Kafka-protocol connections accepted since start",
                                  value=server.connections_total)


class MetricsState:
    """What ``install_metrics`` puts on ``app.state.metrics``."""

    def __init__(self, broker: Broker, throttle: LoginThrottle | None = None,
                 app: FastAPI | None = None) -> None:
        self.registry = CollectorRegistry()
        self.collector = BrokerCollector(broker)
        self.registry.register(self.collector)
        if app is not None:
            self.registry.register(KafkaDoorCollector(app))
        if throttle is not None:
            self.registry.register(AuthenticationCollector(throttle))
        # the process (CPU, memory, open descriptors, start time), the interpreter's
        # garbage collector and the Python version, as any Python exporter has them
        for standard in (PROCESS_COLLECTOR, GC_COLLECTOR, PLATFORM_COLLECTOR):
            self.registry.register(standard)
        self.requests = Counter(
            "franz_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "franz_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )


router = APIRouter(tags=["Metrics"])


@router.get(
    "/metrics",
    operation_id="getMetrics",
    summary="Metrics in Prometheus text format",
    response_class=Response,
    responses={200: {"description": "Prometheus text (or OpenMetrics when asked for)",
                     "content": {"text/plain": {"schema": {"type": "string"}}}}},
)
@requires(Need(Operation.DESCRIBE, ResourceType.CLUSTER))
async def metrics(request: Request) -> Response:
    state: MetricsState = request.app.state.metrics
    state.collector.group_lags = await group_lags(request.app.state.broker)
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(state.registry), media_type=content_type)


def install_metrics(app: FastAPI) -> None:
    """Mount ``GET /metrics`` and the request middleware on ``app`` (whose
    ``app.state.broker`` is set)."""
    # Kafka-style totals only: no ``*_created`` series.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    state = MetricsState(app.state.broker, login_throttle(app), app)
    app.state.metrics = state
    app.include_router(router)
    app.add_middleware(RequestMetrics, requests=state.requests, duration=state.duration)
