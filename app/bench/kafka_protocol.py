"""Kafka-protocol produce and fetch beside REST and same-run ceilings, one broker process.

    python benchmarks/kafka_protocol_bench.py [--rounds 2] [--duration 5] [--json OUT]
    python benchmarks/kafka_protocol_bench.py --quick            # smoke run, ~30 s
    python benchmarks/kafka_protocol_bench.py --profile DIR      # + py-spy of the broker

Issue 31's "Benchmarks" and "Done when". One run starts, on loopback in a temporary
directory, one ``franz serve`` (HTTP and a PLAINTEXT Kafka listener, ``kafka.listeners``)
and two ceiling servers of this file, all pinned with ``taskset`` to ``--server-cpu``
(0); the generator pins itself, and so the librdkafka and kcat processes it starts, to
``--client-cpu`` (1). Records are 100 bytes, keyed (``key-<n>``, ``--keys`` distinct
keys, each batch holding only keys whose murmur2 partition is the batch's, as a keyed
client's partitioner makes them), on ``--partitions`` (8) partitions. Per round, each
franz case right after its ceiling:

produce (acks=1; records/s, MB/s of record batches, broker CPU s per million records)
  bare_append_64k    the bare append listener (below) driven by the raw generator's
                     64 KiB frames
  kafka_raw_64k      the raw generator: ProduceRequest v9 frames built once (the batches
                     by core.storage.records, the request by franz's Kafka codec), one
                     64 KiB batch for each of the 8 partitions per request (512 KiB: a
                     client's request stays under its 1 MiB max.request.size), sent
                     pipelined (``--depth``) over ``--connections`` connections
  bare_append_1m     the bare listener, 1 MiB frames
  kafka_raw_1m       the raw generator, one 1 MiB batch per request, the partitions in turn
  rdkafka            confluent-kafka's Producer (librdkafka): acks=1, linger.ms=20,
                     batch.size 1 MB, murmur2 partitioner, 1000 keys (a child process)
  rdkafka_idem       the same with enable.idempotence=true (librdkafka sets acks=all)
  kcat               ``kcat -P -K:`` of a file of key:value lines, the same settings
  rest_best          REST produce's best path (``franz bench produce``'s, benchmarks/run.py's
                     produce_1000): POST /topics/{t} of 1000 x 100-byte unkeyed records,
                     binary format, 8 connections, a 1-partition topic
  rest_keyed_8p      the same with 1000 keys on an 8-partition topic (as users key them)
fetch (a topic preloaded by the raw generator with ``--fetch-bytes`` of 64 KiB batches)
  bare_sendfile      the bare sendfile server (below): every request answered with a
                     header and os.sendfile(2) of 1 MiB of the fetch topic's segment files
  kafka_fetch_raw    FetchRequest v12 built once per partition (max_bytes = partition
                     max bytes = 1 MiB, no session), the offset patched in; one request in
                     flight per partition, each connection owning partitions; back to the
                     log start at the high watermark
  rdkafka_consume    confluent-kafka's Consumer, assigned every partition from the start
                     (max.partition.fetch.bytes 1 MiB, its default; fetch.queue.backoff.ms
                     0 and queued.min.messages 1,000,000 for throughput)
  rest_range         REST range reads of the same topic (``franz bench consume``'s path:
                     GET .../records?offset=&count=1000, 8 connections): CPU per record

The ceilings, in this file, not in franz:
  bare append listener   asyncio streams on uvloop (franz's loop), one request at a time
                         per connection: reads a Kafka-framed ProduceRequest, takes its
                         batches at the offsets the generator wrote them (--layout), checks
                         each batch's CRC-32C (the crc32c package), appends the batches to
                         a file with one writev(2) (kept, as a log keeps its data: a file
                         emptied before each case would reuse its own pages) and answers
                         an 8-byte frame
  bare sendfile server   stdlib asyncio (uvloop has no sock_sendfile), one request at a time
                         per connection: reads a frame, answers a header and os.sendfile of
                         1 MiB from the files given (walked in order, round and round)

Ratios printed (issue 31 "Done when"): kafka_raw / bare_append (>= 0.6), Kafka produce /
REST produce (>= 2), kafka_fetch_raw / bare_sendfile (>= 0.5), broker CPU per record of
kafka_fetch_raw / rest_range (<= 0.1); medians of the per-round ratios. Records/s and
MB/s count answers that arrived inside the measured window (``--warmup`` then
``--duration``); CPU from /proc/<pid>/stat over the same window. Every loop is bounded
by time and by a count (``--max-requests`` per connection, record counts for the
clients); the whole run has a deadline per case.

``--profile DIR`` adds, after the measured rounds, an unmeasured pass of kafka_raw_64k,
kafka_raw_1m and kafka_fetch_raw with ``py-spy record`` on the broker (``--nonblocking``,
raw collapsed stacks in DIR) and prints each profile's top frames (self and inclusive).
Results: docs/benchmarks.md "Kafka protocol".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the tree holding app/ (site-packages if installed)
if __name__ == "__main__":  # run as a file: its ceiling servers and librdkafka children
    if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
        del sys.path[0]  # app/bench/ itself: its modules are not top-level ones
    if str(ROOT) not in sys.path:  # import this tree's app
        sys.path.insert(0, str(ROOT))

from app.bench.http1 import free_port  # noqa: E402
from app.bench.stats import med  # noqa: E402
from app.bench.workloads import (  # noqa: E402
    BenchError,
    LoadResult,
    Target,
    machine_cpu_ticks,
    machine_notes,
    pin_self,
    proc_cpu,
    run_loop,
    spawn,
    steal_pct,
    stop,
    wait_ready,
)

RECORD_SIZE = 100
KIB = 1024
MIB = 1024 * 1024
FETCH_CHUNK = MIB  # the fetch's max_bytes and the sendfile server's answer
PRODUCE_VERSION = 9  # flexible; what librdkafka 2.x negotiates with franz (3-9)
FETCH_VERSION = 12  # franz's highest (4-12)
_SIZE = struct.Struct(">i")
_BATCH_FRAME = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")
_CRC = struct.Struct(">I")
_OFFSET = struct.Struct(">q")
HUGE = 1 << 40

PRODUCE_CASES = ("bare_append_64k", "kafka_raw_64k", "bare_append_1m", "kafka_raw_1m",
                 "rdkafka", "rdkafka_idem", "kcat", "rest_best", "rest_keyed_8p")
FETCH_CASES = ("bare_sendfile", "kafka_fetch_raw", "rdkafka_consume", "rest_range")
ALL_CASES = PRODUCE_CASES + FETCH_CASES


# --- payloads: keyed batches and Kafka frames ----------------------------------------------


def keys_by_partition(keys: int, partitions: int) -> list[list[bytes]]:
    """The keys ``key-0..key-<keys-1>`` grouped by Kafka's murmur2 partition."""
    from core.broker.produce.partitioner import partition_for_key

    out: list[list[bytes]] = [[] for _ in range(partitions)]
    for i in range(keys):
        k = f"key-{i}".encode()
        out[partition_for_key(k, partitions)].append(k)
    for p, ks in enumerate(out):
        if not ks:  # few keys over many partitions: one made up for the empty ones
            out[p] = [f"key-p{p}".encode()]
    return out


def keyed_batch(keys: list[bytes], limit: int, now_ms: int) -> tuple[bytes, int]:
    """One v2 batch of 100-byte random values keyed round-robin with ``keys``, as many
    records as fit in ``limit`` bytes: (batch, records)."""
    from core.storage.records import build_batch_from_columns

    def build(n: int) -> bytes:
        values = [os.urandom(RECORD_SIZE) for _ in range(n)]
        ks = [keys[i % len(keys)] for i in range(n)]
        return bytes(build_batch_from_columns(values, ks, None, now_ms))

    n = max(1, limit // (RECORD_SIZE + 20))
    batch = build(n)
    while len(batch) < limit - (RECORD_SIZE + 40):  # grow, then trim to the limit
        n = max(n + 1, int(n * limit / len(batch)))
        batch = build(n)
    while len(batch) > limit:
        n -= max(1, (len(batch) - limit) // (RECORD_SIZE + 10))
        batch = build(n)
    return batch, n


def kafka_frame(api_key: int, version: int, correlation_id: int, message: str,
                body: dict[str, Any]) -> bytes:
    """A size-prefixed request (header v2: every version used here is flexible)."""
    from api.kafka.protocol.codegen import encoder

    out = bytearray()
    parts: list[Any] = []
    encoder("RequestHeader", 2)({"request_api_key": api_key, "request_api_version": version,
                                 "correlation_id": correlation_id,
                                 "client_id": "kafka-protocol-bench"}, out, parts)
    encoder(message, version)(body, out, parts)
    parts.append(out)
    data = b"".join(bytes(p) for p in parts)
    return _SIZE.pack(len(data)) + data


@dataclass
class ProduceFrame:
    """One request shape, ``depth`` copies of it with correlation ids 0..depth-1."""

    variants: list[bytes]
    records: int
    batch_bytes: int
    layout: list[tuple[int, int]]  # (offset after the size prefix, length) of each batch


@dataclass
class ProduceShape:
    name: str
    batch_limit: int
    frames: list[ProduceFrame]
    records_per_batch: list[int]  # per partition

    @property
    def bytes_per_record(self) -> float:
        return (sum(f.batch_bytes for f in self.frames) / sum(f.records for f in self.frames))

    def layout_json(self) -> dict[str, list[tuple[int, int]]]:
        return {str(len(f.variants[0]) - 4): f.layout for f in self.frames}


def produce_shape(name: str, topic: str, batch_limit: int, *, partitions: int, keys: int,
                  depth: int, acks: int = 1) -> ProduceShape:
    """Frames of keyed batches of at most ``batch_limit`` bytes: each request carries one
    batch per partition while the request stays <= 1 MiB, else one batch (the
    partitions in turn)."""
    now_ms = int(time.time() * 1000)
    by_key = keys_by_partition(keys, partitions)
    batches = [keyed_batch(by_key[p], batch_limit, now_ms) for p in range(partitions)]
    per_request = max(1, min(partitions, MIB // batch_limit))
    groups = [list(range(i, min(i + per_request, partitions)))
              for i in range(0, partitions, per_request)]
    frames = []
    for group in groups:
        variants = []
        for corr in range(max(1, depth)):
            body = {"transactional_id": None, "acks": acks, "timeout_ms": 30_000,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": p, "records": batches[p][0]} for p in group]}]}
            variants.append(kafka_frame(0, PRODUCE_VERSION, corr, "ProduceRequest", body))
        layout = []
        for p in group:
            at = variants[0].find(batches[p][0])
            assert at > 0
            layout.append((at - 4, len(batches[p][0])))
        frames.append(ProduceFrame(variants, sum(batches[p][1] for p in group),
                                   sum(len(batches[p][0]) for p in group), layout))
    return ProduceShape(name, batch_limit, frames, [b[1] for b in batches])


@dataclass
class FetchTemplate:
    frame: bytearray
    offset_at: int  # where fetch_offset is in the frame
    corr_at: int = 8  # size, api key, version, then the correlation id


def fetch_template(topic: str, partition: int) -> FetchTemplate:
    marker = 0x7A5B3C1D2E0F4A6B
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": FETCH_CHUNK,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,  # no session
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": marker,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": FETCH_CHUNK}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    frame = bytearray(kafka_frame(1, FETCH_VERSION, 0, "FetchRequest", body))
    at = frame.find(_OFFSET.pack(marker))
    assert at > 0
    return FetchTemplate(frame, at)


# --- the generator's connections: pipelined frames, answers into reused buffers ------------


class FrameConn(asyncio.BufferedProtocol):
    """A Kafka connection of the generator: answers land in a staging buffer (small
    ones) or one reused buffer (large ones): no bytes object per answer. ``on_frame``
    gets a memoryview of each answer (without its size prefix), valid during the call."""

    STAGING = 1 << 16

    def __init__(self, on_frame: Callable[[memoryview], None],
                 on_error: Callable[[BaseException], None]) -> None:
        self.on_frame = on_frame
        self.on_error = on_error
        self.staging = bytearray(self.STAGING)
        self.sview = memoryview(self.staging)
        self.filled = 0
        self.big = bytearray(0)
        self.bview = memoryview(self.big)
        self.big_need = 0
        self.big_filled = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop's is no subclass)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_error(exc or ConnectionError("the server closed the connection"))

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.big_need:
            return self.bview[self.big_filled:self.big_need]
        return self.sview[self.filled:]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._updated(nbytes)
        except BaseException as exc:  # noqa: BLE001 - reported to the run, which stops
            self.on_error(exc)

    def _updated(self, nbytes: int) -> None:
        if self.big_need:
            self.big_filled += nbytes
            if self.big_filled == self.big_need:
                need, self.big_need = self.big_need, 0
                self.on_frame(self.bview[:need])
            return
        self.filled += nbytes
        pos, filled, st = 0, self.filled, self.staging
        while filled - pos >= 4:
            size = _SIZE.unpack_from(st, pos)[0]
            if size < 4 or size > 256 * MIB:
                raise BenchError(f"an answer of {size} bytes")
            end = pos + 4 + size
            if end <= filled:
                self.on_frame(self.sview[pos + 4:end])
                pos = end
                continue
            if 4 + size > self.STAGING:  # a large answer: the rest of it lands in self.big
                if len(self.big) < size:
                    self.big = bytearray(size)
                    self.bview = memoryview(self.big)
                have = filled - pos - 4
                self.bview[:have] = self.sview[pos + 4:filled]
                self.big_filled, self.big_need = have, size
                pos = filled
            break
        rest = filled - pos
        if pos and rest:
            st[:rest] = st[pos:filled]
        self.filled = rest


class Pipelined:
    """A run over several ``FrameConn``s: drivers send and account; the window and CPU
    marks are taken by timers; ``max_requests`` per connection and the time bound it."""

    def __init__(self, pid: int | None, warmup: float, duration: float, max_requests: int) -> None:
        self.pid, self.warmup, self.duration = pid, warmup, duration
        self.max_requests = max_requests
        self.res = LoadResult()
        self.t_start = self.t_end = 0.0
        self.marks: dict[str, float] = {}
        self.error: BaseException | None = None
        self.stopping = False
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()
        self.active = 0

    def mark(self, which: str) -> None:
        self.marks["s" + which] = proc_cpu(self.pid)
        self.marks["c" + which] = time.process_time()
        self.marks["t" + which] = time.perf_counter()

    def fail(self, exc: BaseException) -> None:
        if self.stopping and isinstance(exc, ConnectionError) and self.error is None:
            return
        if self.error is None:
            self.error = exc
        self.stopping = True
        if not self.done.done():
            self.done.set_result(None)

    def account(self, t0: float, t1: float, records: float, nbytes: int) -> None:
        res = self.res
        res.sent_requests += 1
        res.sent_records += int(records)
        res.sent_bytes += nbytes
        if self.t_start <= t1 <= self.t_end:  # answered inside the window
            res.requests += 1
            res.records += records  # type: ignore[assignment]  (fractions for the ceiling)
            res.bytes += nbytes
            res.latencies.append(t1 - t0)

    def may_send(self, sent: int) -> bool:
        return not self.stopping and sent < self.max_requests and time.perf_counter() < self.t_end

    def driver_done(self) -> None:
        self.active -= 1
        if self.active <= 0 and not self.done.done():
            self.done.set_result(None)

    async def run(self, host: str, port: int, drivers: list[Any]) -> LoadResult:
        transports = []
        try:
            for d in drivers:
                t, proto = await self.loop.create_connection(
                    lambda d=d: FrameConn(d.on_frame, self.fail), host, port)
                transports.append(t)
                d.transport = t
            now = time.perf_counter()
            self.t_start, self.t_end = now + self.warmup, now + self.warmup + self.duration
            h0 = self.loop.call_later(self.warmup, self.mark, "0")
            h1 = self.loop.call_later(self.warmup + self.duration, self.mark, "1")
            self.active = len(drivers)
            for d in drivers:
                d.start()
            grace = self.warmup + self.duration + 60
            try:
                await asyncio.wait_for(asyncio.shield(self.done), grace)
            except TimeoutError:
                raise BenchError(f"the run did not end within {grace:.0f} s") from None
            h0.cancel()
            h1.cancel()
        finally:
            self.stopping = True
            for t in transports:
                t.close()
        if self.error is not None:
            raise self.error
        if "t0" not in self.marks:
            raise BenchError("the run ended before the warm-up did: raise --max-requests")
        if "t1" not in self.marks:  # ended early by the request bound
            self.mark("1")
        res = self.res
        res.seconds = self.marks["t1"] - self.marks["t0"]
        res.server_cpu = self.marks["s1"] - self.marks["s0"]
        res.client_cpu = self.marks["c1"] - self.marks["c0"]
        return res


class ProduceDriver:
    """Keeps ``depth`` ProduceRequests in flight on one connection; checks every answer
    (franz: each partition's error code; the bare listener: the correlation id)."""

    def __init__(self, run: Pipelined, shape: ProduceShape, depth: int, first: int,
                 franz: bool) -> None:
        from api.kafka.protocol.codegen import decoder

        self.run, self.shape, self.depth, self.franz = run, shape, depth, franz
        self.k = first  # the next frame (the connections start at different partitions)
        self.sent = 0
        self.inflight: deque[tuple[float, int, int]] = deque()
        self.transport: asyncio.Transport | None = None
        self.decode = decoder("ProduceResponse", PRODUCE_VERSION)

    def start(self) -> None:
        for _ in range(self.depth):
            self.send()
        if not self.inflight:
            self.run.driver_done()

    def send(self) -> None:
        if not self.run.may_send(self.sent):
            return
        frames = self.shape.frames
        idx = self.k % len(frames)
        corr = self.sent % len(frames[idx].variants)
        assert self.transport is not None
        self.inflight.append((time.perf_counter(), idx, corr))
        self.transport.write(frames[idx].variants[corr])
        self.sent += 1
        self.k += 1

    def on_frame(self, view: memoryview) -> None:
        t1 = time.perf_counter()
        t0, idx, corr = self.inflight.popleft()
        if _SIZE.unpack_from(view, 0)[0] != corr:
            raise BenchError(f"answer {_SIZE.unpack_from(view, 0)[0]} for request {corr}")
        if self.franz:
            answer, _ = self.decode(view, 5)  # correlation id, empty tagged fields
            for topic in answer["responses"]:
                for p in topic["partition_responses"]:
                    if p["error_code"]:
                        raise BenchError(f"produce to {topic['name']}-{p['index']}: error "
                                         f"{p['error_code']} {p['error_message']}")
        frame = self.shape.frames[idx]
        self.run.account(t0, t1, frame.records, frame.batch_bytes)
        self.send()
        if not self.inflight:
            self.run.driver_done()


class FetchDriver:
    """One FetchRequest in flight per partition this connection owns; the next offset
    from the answer's last batch, the log start again at the high watermark."""

    def __init__(self, run: Pipelined, topic: str, partitions: list[int], franz: bool,
                 bytes_per_record: float) -> None:
        from api.kafka.protocol.codegen import decoder

        self.run, self.partitions, self.franz = run, partitions, franz
        self.bytes_per_record = bytes_per_record
        self.templates = {p: fetch_template(topic, p) for p in partitions}
        self.offsets = dict.fromkeys(partitions, 0)
        self.checked: set[int] = set()
        self.sent = 0
        self.inflight: deque[tuple[float, int]] = deque()
        self.transport: asyncio.Transport | None = None
        self.decode = decoder("FetchResponse", FETCH_VERSION)

    def start(self) -> None:
        for p in self.partitions:
            self.send(p)
        if not self.inflight:
            self.run.driver_done()

    def send(self, p: int) -> None:
        if not self.run.may_send(self.sent):
            return
        t = self.templates[p]
        _OFFSET.pack_into(t.frame, t.offset_at, self.offsets[p])
        _SIZE.pack_into(t.frame, t.corr_at, p)
        assert self.transport is not None
        self.inflight.append((time.perf_counter(), p))
        self.transport.write(bytes(t.frame))
        self.sent += 1

    def on_frame(self, view: memoryview) -> None:
        t1 = time.perf_counter()
        t0, p = self.inflight.popleft()
        if _SIZE.unpack_from(view, 0)[0] != p:
            raise BenchError(f"fetch answer {_SIZE.unpack_from(view, 0)[0]} for partition {p}")
        if self.franz:
            answer, _ = self.decode(view, 5)
            part = answer["responses"][0]["partitions"][0]
            if answer["error_code"] or part["error_code"]:
                raise BenchError(f"fetch of partition {p}: error {answer['error_code']}/"
                                 f"{part['error_code']}")
            records = part["records"]
            n, nbytes, nxt = _walk_batches(records, p in self.checked)
            self.checked.add(p)
            # at the high watermark: the log start again (asking there would long-poll)
            hw = part["high_watermark"]
            self.offsets[p] = nxt if n and nxt < hw else max(0, part["log_start_offset"])
        else:
            nbytes = len(view) - 4
            n = nbytes / self.bytes_per_record
        self.run.account(t0, t1, n, nbytes)
        self.send(p)
        if not self.inflight:
            self.run.driver_done()


def _walk_batches(records: Any, checked: bool) -> tuple[int, int, int]:
    """(records, bytes, next offset) of the whole batches in a fetch answer's records;
    the first batch's CRC-32C is checked once per partition."""
    if records is None:
        return 0, 0, 0
    n = pos = nxt = 0
    size = len(records)
    while pos + 61 <= size:
        base, length = _BATCH_FRAME.unpack_from(records, pos)
        end = pos + 12 + length
        if end > size:
            break
        if not checked:
            import crc32c

            if crc32c.crc32c(records[pos + 21:end]) != _CRC.unpack_from(records, pos + 17)[0]:
                raise BenchError(f"a fetched batch at offset {base} fails its CRC")
            checked = True
        n += _SIZE.unpack_from(records, pos + 57)[0]
        nxt = base + _LAST_DELTA.unpack_from(records, pos + 23)[0] + 1
        pos = end
    return n, pos, nxt


def summarize(res: LoadResult, **extra: Any) -> dict[str, Any]:
    s = res.summary()
    out = {k: s[k] for k in ("records", "requests", "bytes", "seconds", "rec_per_s", "mb_per_s",
                             "req_per_s", "server_cpu_util", "client_cpu_util")}
    out["records"] = int(out["records"])
    out["cpu_s_per_m_records"] = (1e6 * res.server_cpu / res.records) if res.records else None
    lat = sorted(res.latencies)
    out["latency_ms_p50"] = 1e3 * lat[len(lat) // 2] if lat else None
    out.update(extra)
    return out


async def produce_run(host: str, port: int, pid: int | None, shape: ProduceShape, *,
                      franz: bool, connections: int, depth: int, warmup: float,
                      duration: float, max_requests: int) -> dict[str, Any]:
    run = Pipelined(pid, warmup, duration, max_requests)
    drivers = [ProduceDriver(run, shape, depth, i, franz) for i in range(connections)]
    res = await run.run(host, port, drivers)
    return summarize(res, connections=connections, depth=depth)


async def fetch_run(host: str, port: int, pid: int | None, topic: str, partitions: int, *,
                    franz: bool, connections: int, bytes_per_record: float, warmup: float,
                    duration: float, max_requests: int) -> dict[str, Any]:
    run = Pipelined(pid, warmup, duration, max_requests)
    owned = [[p for p in range(partitions) if p % connections == c] for c in range(connections)]
    drivers = [FetchDriver(run, topic, ps, franz, bytes_per_record) for ps in owned if ps]
    res = await run.run(host, port, drivers)
    return summarize(res, connections=len(drivers), in_flight=partitions)


# --- the ceilings (processes of this file) -------------------------------------------------


async def _bare_append_server(port: int, layout_file: Path, out_file: Path, ready: Path) -> None:
    import crc32c

    layouts = {int(k): v for k, v in json.loads(layout_file.read_text()).items()}
    fd = os.open(out_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    written = active = 0
    crc_of = crc32c.crc32c
    unpack_crc = struct.Struct(">I").unpack_from

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal written, active
        # The file keeps what earlier cases wrote, as a log keeps its data: emptying it
        # would hand this listener back the very pages it just wrote, which on a VM that
        # returns free memory to its host costs 4-8x less to write than the fresh
        # memory franz's growing segments take (docs/benchmarks.md, "Page cache").
        active += 1
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                batches = layouts.get(size)
                if batches is None:
                    return  # not one of the generator's frames
                view = memoryview(frame)
                parts = []
                for at, length in batches:
                    if crc_of(view[at + 21:at + length]) != unpack_crc(view, at + 17)[0]:
                        return  # a bad CRC: nothing written, the connection closed
                    parts.append(view[at:at + length])
                written += os.writev(fd, parts)
                if written > 16 << 30:  # bounded, should the run write that much
                    os.ftruncate(fd, 0)
                    written = 0
                writer.write(b"\x00\x00\x00\x04" + frame[4:8])  # the correlation id
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            active -= 1
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port, limit=1 << 16)
    ready.write_text("ok")
    async with server:
        await server.serve_forever()


async def _sendfile_server(port: int, files: list[Path], ready: Path) -> None:
    loop = asyncio.get_running_loop()
    handles = [open(f, "rb") for f in files if f.stat().st_size >= FETCH_CHUNK]  # noqa: SIM115
    if not handles:
        raise SystemExit("sendfile server: no file of 1 MiB or more")
    sizes = [os.fstat(h.fileno()).st_size for h in handles]
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(128)
    lsock.setblocking(False)

    async def recv_exact(sock: socket.socket, buf: memoryview) -> bool:
        got = 0
        while got < len(buf):
            n = await loop.sock_recv_into(sock, buf[got:])
            if n == 0:
                return False
            got += n
        return True

    async def serve(sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = bytearray(4)
        body = bytearray(64 * KIB)
        fi, pos = 0, 0
        try:
            while True:
                if not await recv_exact(sock, memoryview(head)):
                    return
                size = _SIZE.unpack(head)[0]
                if size > len(body):
                    return
                if not await recv_exact(sock, memoryview(body)[:size]):
                    return
                if pos + FETCH_CHUNK > sizes[fi]:
                    fi, pos = (fi + 1) % len(handles), 0
                await loop.sock_sendall(sock, _SIZE.pack(4 + FETCH_CHUNK) + bytes(body[4:8]))
                await loop.sock_sendfile(sock, handles[fi], pos, FETCH_CHUNK, fallback=False)
                pos += FETCH_CHUNK
        except (ConnectionError, OSError):
            return
        finally:
            sock.close()

    ready.write_text("ok")
    tasks = set()
    while True:
        conn, _ = await loop.sock_accept(lsock)
        conn.setblocking(False)
        task = asyncio.ensure_future(serve(conn))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def serve_main(args: argparse.Namespace) -> int:
    ready = Path(args.ready)
    if args.serve == "bare-append":
        run_loop(_bare_append_server(args.port, Path(args.layout), Path(args.out), ready))
    else:
        asyncio.run(_sendfile_server(args.port, [Path(f) for f in args.files], ready))
    return 0


# --- librdkafka (child processes of this file) ---------------------------------------------


def child_main(args: argparse.Namespace) -> int:
    """``--child rdkafka-produce|rdkafka-consume PARAMS_JSON``: one librdkafka run, its
    result as JSON on stdout."""
    p = json.loads(args.params)
    out = _rdkafka_produce(p) if args.child == "rdkafka-produce" else _rdkafka_consume(p)
    print(json.dumps(out))
    return 0


def _rdkafka_produce(p: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    conf = {"bootstrap.servers": p["bootstrap"], "acks": p["acks"], "linger.ms": 20,
            "batch.size": 1_000_000, "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
            "compression.type": "none", "partitioner": "murmur2_random",
            "enable.idempotence": p["idempotent"], "delivery.report.only.error": True,
            "on_delivery": on_delivery, "client.id": "kafka-protocol-bench"}
    if p["idempotent"]:
        conf.pop("acks")  # librdkafka sets acks=all itself and refuses another
    prod = Producer(conf)
    keys = [f"key-{i}".encode() for i in range(p["keys"])]
    values = [os.urandom(RECORD_SIZE) for _ in range(len(keys))]
    pairs = list(zip(values, keys, strict=True))
    topic, produce, poll = p["topic"], prod.produce, prod.poll
    pid = p.get("server_pid")
    max_records = p["max_records"]
    t_begin = time.perf_counter()
    t_start, t_end = t_begin + p["warmup"], t_begin + p["warmup"] + p["duration"]
    produced = 0
    marks: dict[str, float] = {}

    def mark(which: str) -> None:
        poll(0)
        marks["d" + which] = produced - len(prod)
        marks["s" + which] = proc_cpu(pid)
        marks["c" + which] = time.process_time()
        marks["t" + which] = time.perf_counter()

    while produced < max_records:
        now = time.perf_counter()
        if now >= t_end:
            break
        if "t0" not in marks and now >= t_start:
            mark("0")
        for value, key in pairs:
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:
                    poll(0.001)
        produced += len(pairs)
        poll(0)
    if "t0" not in marks:
        raise SystemExit("rdkafka produce: the warm-up did not end")
    mark("1")
    left = prod.flush(60)
    secs = marks["t1"] - marks["t0"]
    delivered = marks["d1"] - marks["d0"]
    if errors:
        raise KafkaException(f"delivery failed: {errors}")
    return {"records": int(delivered), "seconds": secs, "rec_per_s": delivered / secs,
            "server_cpu": marks["s1"] - marks["s0"], "client_cpu": marks["c1"] - marks["c0"],
            "produced": produced, "unflushed": left}


def _rdkafka_consume(p: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": p["bootstrap"], "group.id": p["group"],
                     "enable.auto.commit": False, "enable.partition.eof": False,
                     "auto.offset.reset": "earliest", "client.id": "kafka-protocol-bench",
                     # for throughput: librdkafka 2.x otherwise stops fetching a partition
                     # for fetch.queue.backoff.ms (1 s) whenever its queue holds
                     # queued.min.messages (100,000): 2.6 x fewer records/s here
                     "fetch.queue.backoff.ms": 0, "queued.min.messages": 1_000_000})
    parts = [TopicPartition(p["topic"], i, OFFSET_BEGINNING) for i in range(p["partitions"])]
    cons.assign(parts)
    pid = p.get("server_pid")
    total, per_pass = 0, p["topic_records"]
    t_begin = time.perf_counter()
    t_start, t_end = t_begin + p["warmup"], t_begin + p["warmup"] + p["duration"]
    marks: dict[str, float] = {}
    this_pass = 0
    idle_since: float | None = None
    checked = False

    def mark(which: str) -> None:
        marks["n" + which] = total
        marks["s" + which] = proc_cpu(pid)
        marks["c" + which] = time.process_time()
        marks["t" + which] = time.perf_counter()

    while total < p["max_records"]:
        now = time.perf_counter()
        if now >= t_end:
            break
        if "t0" not in marks and now >= t_start:
            mark("0")
        msgs = cons.consume(num_messages=10_000, timeout=0.2)
        if msgs:
            last = msgs[-1]
            if last.error() is not None:
                raise SystemExit(f"rdkafka consume: {last.error()}")
            if not checked:
                first = msgs[0]
                if len(first.value()) != RECORD_SIZE or not first.key().startswith(b"key-"):
                    raise SystemExit(f"rdkafka consume: unexpected record {first.key()!r}")
                checked = True
            total += len(msgs)
            this_pass += len(msgs)
            idle_since = None
        else:
            idle_since = idle_since or now
        if this_pass >= per_pass or (idle_since is not None and now - idle_since > 0.5):
            cons.assign(parts)  # the end of the topic: read it again from the start
            this_pass, idle_since = 0, None
    if "t0" not in marks:
        raise SystemExit("rdkafka consume: the warm-up did not end")
    mark("1")
    cons.close()
    n = marks["n1"] - marks["n0"]
    secs = marks["t1"] - marks["t0"]
    return {"records": int(n), "seconds": secs, "rec_per_s": n / secs,
            "server_cpu": marks["s1"] - marks["s0"], "client_cpu": marks["c1"] - marks["c0"]}


# --- the run -------------------------------------------------------------------------------


@dataclass
class Servers:
    franz: Target
    kafka_port: int
    data_dir: Path
    bare_append: Target
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    sendfile: Target | None = None


class KafkaBench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="franz-kafka-bench-"))
        self.servers: Servers | None = None
        self.shapes: dict[str, ProduceShape] = {}
        self.fetch_topic = "kb-fetch"
        self.fetch_records = 0
        self.fetch_bytes_per_record = 0.0
        self.kcat_file: Path | None = None
        self.kcat_n = 0
        self.client: Any = None

    # --- servers ----------------------------------------------------------------------

    def start(self) -> None:
        from app.http_client import FranzClient

        a = self.args
        port, kport = free_port(), free_port()
        data = self.tmp / "data"
        cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
               str(port), "--data-dir", str(data), "--log-level", "WARNING",
               "--override", f"kafka.listeners=PLAINTEXT://127.0.0.1:{kport}",
               "--override", f"num.partitions={a.partitions}"]
        for o in a.override:
            cmd += ["--override", o]
        procs = [spawn(cmd, a.server_cpu, self.tmp / "franz.log", cwd=ROOT)]
        franz = Target("franz", "127.0.0.1", port, procs[0].pid)
        # the generator's frames, for the bare listener's layout
        for name, limit in (("64k", 64 * KIB), ("1m", MIB)):
            self.shapes[name] = produce_shape(name, f"kb-raw-{name}", limit,
                                              partitions=a.partitions, keys=a.keys,
                                              depth=a.depth)
        layout: dict[str, Any] = {}
        for s in self.shapes.values():
            layout.update(s.layout_json())
        (self.tmp / "layout.json").write_text(json.dumps(layout))
        bport = free_port()
        procs.append(self._ceiling_proc("bare-append", bport, [
            "--layout", str(self.tmp / "layout.json"), "--out", str(self.tmp / "append.log")]))
        bare = Target("bare_append", "127.0.0.1", bport, procs[-1].pid)
        self.servers = Servers(franz, kport, data, bare, procs)
        run_loop(wait_ready(franz, "/topics", procs[0], self.tmp / "franz.log"))
        self._wait_file(self.tmp / "bare-append.ready", procs[1], "bare-append")
        self.client = FranzClient(f"http://127.0.0.1:{port}")

    def _ceiling_proc(self, kind: str, port: int, extra: list[str]) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", kind, "--port",
               str(port), "--ready", str(self.tmp / f"{kind}.ready"), *extra]
        return spawn(cmd, self.args.server_cpu, self.tmp / f"{kind}.log", cwd=ROOT)

    def _wait_file(self, path: Path, proc: subprocess.Popen[bytes], name: str) -> None:
        deadline = time.monotonic() + 30
        while not path.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (self.tmp / f"{name}.log").read_text(errors="replace")[-2000:]
                raise BenchError(f"{name} did not start: {log}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.servers is not None:
            for proc in reversed(self.servers.procs):
                stop(proc)
        if not self.args.keep_logs:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"logs and data kept in {self.tmp}")

    # --- topics -----------------------------------------------------------------------

    def topic(self, name: str, partitions: int) -> None:
        from app.commands.bench import ensure_topic

        ensure_topic(self.client, name, partitions)
        self._wait_leaders(name, partitions)

    def _wait_leaders(self, name: str, partitions: int) -> None:
        """Until the Kafka listener's Metadata names a leader for every partition."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = self.client.v3_list("topics", name, "partitions")
            if len(parts) == partitions and all(p.get("leader") for p in parts):
                return
            time.sleep(0.1)
        raise BenchError(f"topic {name}: partitions without a leader")

    def warm_free_pages(self, gib: float) -> None:
        """Unmeasured, before a produce case: write ``gib`` GiB to a scratch file and
        delete it, so every case (franz's and the ceilings') writes its log into memory
        the kernel has just freed. On a VM that hands free memory back to its host, a
        page-cache write into such memory costs about 0.2 CPU s per GB and one into
        memory the host took back 1.5-2.9 (measured here): without this, whichever case
        happened to follow a deletion looked several times faster."""
        scratch = self.tmp / "warm-pages"
        chunk = bytes(MIB)
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for _ in range(int(gib * 1024)):
                os.write(fd, chunk)
        finally:
            os.close(fd)
            scratch.unlink()

    def settle(self, topic: str | None) -> None:
        """Unmeasured, after a produce case (as benchmarks/run.py): delete its topic and
        write back what is left dirty, so the next case starts on a settled disk."""
        if topic is not None:
            from app.http_client import RequestFailed

            with contextlib.suppress(RequestFailed):
                self.client.request("DELETE", self.client.v3("topics", topic))
        if not self.args.quick:
            os.sync()

    # --- cases ------------------------------------------------------------------------

    def window(self) -> dict[str, Any]:
        a = self.args
        return {"warmup": a.warmup, "duration": a.duration, "max_requests": a.max_requests}

    def produce_raw(self, shape: str, *, bare: bool) -> dict[str, Any]:
        a, s = self.args, self.servers
        assert s is not None
        sh = self.shapes[shape]
        topic = f"kb-raw-{shape}"
        if not bare:
            self.topic(topic, a.partitions)
        host, port, pid = ("127.0.0.1", s.bare_append.port, s.bare_append.pid) if bare \
            else ("127.0.0.1", s.kafka_port, s.franz.pid)
        out, _ = run_loop(produce_run(host, port, pid, sh, franz=not bare,
                                      connections=a.connections, depth=a.depth, **self.window()))
        out.update(batch_bytes=sh.batch_limit, records_per_batch=sh.records_per_batch[0],
                   frames=len(sh.frames), request_bytes=len(sh.frames[0].variants[0]))
        self.settle(None if bare else topic)
        return out

    def rdkafka_produce(self, idempotent: bool) -> dict[str, Any]:
        a, s = self.args, self.servers
        assert s is not None
        topic = "kb-rdkafka-idem" if idempotent else "kb-rdkafka"
        self.topic(topic, a.partitions)
        params = {"bootstrap": f"127.0.0.1:{s.kafka_port}", "topic": topic,
                  "acks": "all" if idempotent else "1", "idempotent": idempotent,
                  "keys": a.keys, "server_pid": s.franz.pid, "warmup": a.warmup,
                  "duration": a.duration, "max_records": a.max_client_records}
        r = self._child("rdkafka-produce", params, a.warmup + a.duration + 120)
        self.settle(topic)
        return self._client_result(r, bytes_per_record=self.shapes["64k"].bytes_per_record,
                                   acks="all" if idempotent else "1")

    def _child(self, kind: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, json.dumps(params)]
        try:
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                               check=False)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{kind}: timed out after {timeout:.0f} s") from None
        if r.returncode != 0:
            raise BenchError(f"{kind}: exit {r.returncode}: {r.stderr.strip()[-1500:]}")
        result: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
        return result

    @staticmethod
    def _client_result(r: dict[str, Any], *, bytes_per_record: float,
                       **extra: Any) -> dict[str, Any]:
        secs = r["seconds"] or 1e-9
        n = r["records"]
        return {"records": n, "seconds": round(secs, 3), "rec_per_s": n / secs,
                "mb_per_s": n * bytes_per_record / secs / 1e6,
                "server_cpu_util": r["server_cpu"] / secs,
                "client_cpu_util": r["client_cpu"] / secs,
                "cpu_s_per_m_records": 1e6 * r["server_cpu"] / n if n else None,
                "mb_note": "records x the batches' bytes per record", **extra}

    def kcat_produce(self) -> dict[str, Any] | None:
        a, s = self.args, self.servers
        assert s is not None
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        if kcat is None:
            return None
        n = a.kcat_records
        if self.kcat_file is None:
            self.kcat_file = self.tmp / "kcat-input.txt"
            with open(self.kcat_file, "wb") as f:
                lines = [b"key-%d:%s\n" % (i, os.urandom(RECORD_SIZE // 2).hex().encode())
                         for i in range(a.keys)]
                block = b"".join(lines)
                for _ in range(n // a.keys):
                    f.write(block)
                n = (n // a.keys) * a.keys
            self.kcat_n = n
        topic = "kb-kcat"
        self.topic(topic, a.partitions)
        cmd = [kcat, "-P", "-q", "-b", f"127.0.0.1:{s.kafka_port}", "-t", topic, "-K", ":",
               "-l", str(self.kcat_file), "-X", "acks=1", "-X", "linger.ms=20",
               "-X", "batch.size=1000000", "-X", "batch.num.messages=100000",
               "-X", "queue.buffering.max.messages=2000000",
               "-X", "queue.buffering.max.kbytes=2000000", "-X", "partitioner=murmur2_random"]
        s0, t0 = proc_cpu(s.franz.pid), time.perf_counter()
        c0 = os.times()
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=a.duration * 6 + 60, check=False)
        except subprocess.TimeoutExpired:
            raise BenchError("kcat -P timed out") from None
        t1, s1, c1 = time.perf_counter(), proc_cpu(s.franz.pid), os.times()
        if r.returncode != 0:
            raise BenchError(f"kcat -P: exit {r.returncode}: {r.stderr.decode()[-500:]}")
        got = self._topic_records(topic)
        self.settle(topic)
        secs = t1 - t0
        child = (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)
        return {"records": got, "seconds": round(secs, 3), "rec_per_s": got / secs,
                "mb_per_s": got * self.shapes["64k"].bytes_per_record / secs / 1e6,
                "server_cpu_util": (s1 - s0) / secs, "client_cpu_util": child / secs,
                "cpu_s_per_m_records": 1e6 * (s1 - s0) / got if got else None,
                "sent": self.kcat_n, "note": "one kcat run, start to exit (no warm-up)"}

    def _topic_records(self, topic: str) -> int:
        from app.commands.bench import partition_offsets

        return sum(hi - lo for lo, hi in partition_offsets(self.client, topic).values())

    def rest_produce(self, keyed: bool) -> dict[str, Any]:
        from app.bench.runs import produce_load

        a, s = self.args, self.servers
        assert s is not None
        topic, parts = ("kb-rest-keyed8", a.partitions) if keyed else ("kb-rest", 1)
        self.topic(topic, parts)
        out, _ = run_loop(produce_load(
            s.franz, f"/topics/{topic}", records=HUGE, batch=1000, size=RECORD_SIZE,
            connections=a.rest_connections, warmup=a.warmup, duration=a.duration,
            progress=False, keys=a.keys if keyed else 0))
        self.settle(topic)
        if out["errors"] or out["record_errors"]:
            raise BenchError(f"REST produce: {out['errors']} errors, {out['first_record_error']}")
        n = out["records"]
        cpu = out["server_cpu_us_per_req"] and out["server_cpu_us_per_req"] * out["requests"] / 1e6
        return {"records": n, "seconds": out["seconds"], "rec_per_s": out["rec_per_s"],
                "mb_per_s": out["mb_per_s"], "server_cpu_util": out["server_cpu_util"],
                "client_cpu_util": out["client_cpu_util"],
                "cpu_s_per_m_records": 1e6 * cpu / n if n and cpu else None,
                "mb_note": "JSON request bodies (base64 values)"}

    # --- fetch ------------------------------------------------------------------------

    def preload(self) -> None:
        """The fetch topic: the raw generator's 64 KiB keyed batches, --fetch-bytes of them."""
        a, s = self.args, self.servers
        assert s is not None
        t = time.perf_counter()
        sh = produce_shape("fetch", self.fetch_topic, 64 * KIB, partitions=a.partitions,
                           keys=a.keys, depth=a.depth)
        self.topic(self.fetch_topic, a.partitions)
        per_req = sh.frames[0].batch_bytes
        requests = max(a.connections, a.fetch_bytes // per_req)
        run_loop(produce_run("127.0.0.1", s.kafka_port, s.franz.pid, sh, franz=True,
                             connections=a.connections, depth=a.depth, warmup=0.0,
                             duration=600.0, max_requests=-(-requests // a.connections)))
        self.fetch_records = self._topic_records(self.fetch_topic)
        self.fetch_bytes_per_record = sh.bytes_per_record
        if not a.quick:
            os.sync()
        files = sorted((s.data_dir).glob(f"{self.fetch_topic}-*/*.log"))
        port = free_port()
        proc = self._ceiling_proc("sendfile", port, ["--files", *map(str, files)])
        s.procs.append(proc)
        s.sendfile = Target("bare_sendfile", "127.0.0.1", port, proc.pid)
        self._wait_file(self.tmp / "sendfile.ready", proc, "sendfile")
        print(f"preloaded {self.fetch_records:,} records "
              f"({self.fetch_records * sh.bytes_per_record / MIB:,.0f} MiB) into "
              f"{self.fetch_topic} "
              f"in {time.perf_counter() - t:.1f} s", flush=True)

    def fetch_raw(self, *, bare: bool) -> dict[str, Any]:
        a, s = self.args, self.servers
        assert s is not None
        if bare:
            assert s.sendfile is not None
            host, port, pid = "127.0.0.1", s.sendfile.port, s.sendfile.pid
        else:
            host, port, pid = "127.0.0.1", s.kafka_port, s.franz.pid
        out, _ = run_loop(fetch_run(host, port, pid, self.fetch_topic, a.partitions,
                                    franz=not bare, connections=a.connections,
                                    bytes_per_record=self.fetch_bytes_per_record, **self.window()))
        if bare:
            out["records_note"] = "bytes / the fetch topic's bytes per record"
        return out

    def rdkafka_consume(self) -> dict[str, Any]:
        a, s = self.args, self.servers
        assert s is not None
        params = {"bootstrap": f"127.0.0.1:{s.kafka_port}", "topic": self.fetch_topic,
                  "partitions": a.partitions, "group": f"kb-{os.getpid()}-{time.time_ns()}",
                  "server_pid": s.franz.pid, "warmup": a.warmup, "duration": a.duration,
                  "max_records": a.max_client_records, "topic_records": self.fetch_records}
        r = self._child("rdkafka-consume", params, a.warmup + a.duration + 120)
        return self._client_result(r, bytes_per_record=self.fetch_bytes_per_record)

    def rest_range(self) -> dict[str, Any]:
        from app.bench.runs import consume_load, plan_stretches
        from app.commands.bench import partition_offsets

        a, s = self.args, self.servers
        assert s is not None
        offsets = partition_offsets(self.client, self.fetch_topic)
        plan = plan_stretches(offsets, HUGE, a.rest_connections, 1000, from_beginning=True)
        out, _ = run_loop(consume_load(s.franz, self.fetch_topic, plan, batch=1000,
                                       size=RECORD_SIZE, warmup=min(a.warmup, 0.5),
                                       duration=a.duration, progress=False))
        if out["errors"]:
            raise BenchError(f"REST range reads: {out['errors']} errors")
        n = out["records"]
        cpu = (out["server_cpu_us_per_req"] or 0) * out["requests"] / 1e6
        return {"records": n, "seconds": out["seconds"], "rec_per_s": out["rec_per_s"],
                "mb_per_s": out["mb_per_s"], "server_cpu_util": out["server_cpu_util"],
                "client_cpu_util": out["client_cpu_util"],
                "cpu_s_per_m_records": 1e6 * cpu / n if n and cpu else None,
                "mb_note": "JSON answers (base64 values)"}

    # --- rounds -----------------------------------------------------------------------

    def case(self, name: str) -> dict[str, Any] | None:
        if name == "bare_append_64k":
            return self.produce_raw("64k", bare=True)
        if name == "kafka_raw_64k":
            return self.produce_raw("64k", bare=False)
        if name == "bare_append_1m":
            return self.produce_raw("1m", bare=True)
        if name == "kafka_raw_1m":
            return self.produce_raw("1m", bare=False)
        if name == "rdkafka":
            return self.rdkafka_produce(False)
        if name == "rdkafka_idem":
            return self.rdkafka_produce(True)
        if name == "kcat":
            return self.kcat_produce()
        if name == "rest_best":
            return self.rest_produce(False)
        if name == "rest_keyed_8p":
            return self.rest_produce(True)
        if name == "bare_sendfile":
            return self.fetch_raw(bare=True)
        if name == "kafka_fetch_raw":
            return self.fetch_raw(bare=False)
        if name == "rdkafka_consume":
            return self.rdkafka_consume()
        if name == "rest_range":
            return self.rest_range()
        raise AssertionError(name)

    def rounds(self, cases: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        a = self.args
        rounds: list[dict[str, Any]] = []
        failures: list[str] = []
        preloaded = False
        for r in range(a.rounds):
            print(f"round {r + 1}/{a.rounds}", flush=True)
            out: dict[str, Any] = {}
            for name in cases:
                if name in FETCH_CASES and not preloaded:
                    self.preload()
                    preloaded = True
                if name in PRODUCE_CASES and a.warm_pages_gib > 0:
                    self.warm_free_pages(a.warm_pages_gib)
                t = time.perf_counter()
                try:
                    res = self.case(name)
                except (BenchError, OSError, EOFError) as exc:
                    failures.append(f"round {r + 1} {name}: {exc}")
                    print(f"  {name:16s} FAILED: {exc}", flush=True)
                    continue
                if res is None:
                    print(f"  {name:16s} not run (not installed)", flush=True)
                    continue
                out[name] = res
                print(f"  {name:16s} {res['rec_per_s']:>12,.0f} rec/s {res['mb_per_s']:>8,.1f} MB/s"
                      f"  broker CPU {_fmt(res.get('cpu_s_per_m_records'), ',.3f')} s/M records"
                      f"  ({time.perf_counter() - t:.1f} s)", flush=True)
            rounds.append(out)
        return rounds, failures

    def profile(self, directory: Path) -> dict[str, Any]:
        """An unmeasured pass of the Kafka cases with py-spy on the broker."""
        spy = shutil.which("py-spy")
        if spy is None:
            print("py-spy not installed (pip install py-spy): no profile", flush=True)
            return {}
        s = self.servers
        assert s is not None
        directory.mkdir(parents=True, exist_ok=True)
        out: dict[str, Any] = {}
        for name in ("kafka_raw_64k", "kafka_raw_1m", "kafka_fetch_raw"):
            if name == "kafka_fetch_raw" and s.sendfile is None:
                self.preload()
            if name.startswith("kafka_raw_"):  # the topic made before the profile starts
                self.topic(f"kb-raw-{name.rsplit('_', 1)[1]}", self.args.partitions)
            raw = directory / f"{name}.txt"
            secs = max(2, int(self.args.warmup + self.args.duration))
            cmd = [spy, "record", "--pid", str(s.franz.pid), "--rate", "250", "--duration",
                   str(secs), "--format", "raw", "--nolineno", "--output", str(raw)]
            cmd += ["--native"] if self.args.profile_native else ["--nonblocking"]
            spy_proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(0.3)
            try:
                self.case(name)
            finally:
                try:
                    _o, err = spy_proc.communicate(timeout=secs + 30)
                except subprocess.TimeoutExpired:
                    spy_proc.kill()
                    err = b"timed out"
            if not raw.exists():
                print(f"py-spy {name}: no profile ({err.decode(errors='replace')[-300:]})")
                continue
            out[name] = top_frames(raw)
            print_profile(name, out[name], raw)
        return out


# --- profiles --------------------------------------------------------------------------------


IDLE_LEAVES = ("select (selectors.py)", "_worker (concurrent/futures", "wait (threading.py)")
IDLE_FRAMES = ("PyThread_acquire_lock_timed", "epoll_wait", "epoll_pwait")  # --native stacks


def top_frames(raw: Path, n: int = 15) -> dict[str, Any]:
    """Self and inclusive sample shares of a py-spy raw (collapsed) profile, idle leaves
    (the event loop's wait in epoll, thread-pool waits) apart."""
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = idle = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        c = int(count)
        frames = [f.strip() for f in stack.split(";") if f.strip()]
        if frames and frames[0].startswith("process "):
            frames = frames[1:]
        if frames and frames[0].startswith("thread "):
            frames = frames[1:]
        if not frames:
            continue
        leaf = frames[-1]
        if any(w in leaf for w in IDLE_LEAVES) or any(w in f for f in frames for w in IDLE_FRAMES):
            idle += c
            continue
        total += c
        self_c[leaf] += c
        for f in set(frames):
            incl[f] += c
    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(100 * c / total, 1)) for f, c in counter.most_common(n)] if total else []
    return {"samples": total, "idle_samples": idle, "self": share(self_c),
            "inclusive": share(incl)}


def print_profile(name: str, prof: dict[str, Any], raw: Path) -> None:
    print(f"\nprofile {name}: {prof['samples']} busy samples ({prof['idle_samples']} idle), "
          f"{raw}")
    print("  self %   frame")
    for f, pc in prof["self"]:
        print(f"  {pc:6.1f}   {f}")
    print("  incl %   frame")
    for f, pc in prof["inclusive"]:
        print(f"  {pc:6.1f}   {f}")


# --- summary -------------------------------------------------------------------------------


def _fmt(v: Any, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


RATIOS = (  # name, numerator, denominator, key, target, higher is better
    # "per CPU s": records (bytes) per second of broker CPU, what each would do with a core
    # of its own: the steadier figure when other work shares the broker's core
    ("Kafka produce raw 64 KiB / bare append 64 KiB", "kafka_raw_64k", "bare_append_64k",
     "rec_per_s", 0.6, True),
    ("  the same, per CPU s", "kafka_raw_64k", "bare_append_64k", "rec_per_cpu_s", 0.6, True),
    ("Kafka produce raw 1 MiB / bare append 1 MiB", "kafka_raw_1m", "bare_append_1m",
     "rec_per_s", 0.6, True),
    ("  the same, per CPU s", "kafka_raw_1m", "bare_append_1m", "rec_per_cpu_s", 0.6, True),
    ("Kafka produce raw 64 KiB / REST produce best path", "kafka_raw_64k", "rest_best",
     "rec_per_s", 2.0, True),
    ("  the same, per CPU s", "kafka_raw_64k", "rest_best", "rec_per_cpu_s", 2.0, True),
    ("Kafka produce raw 1 MiB / REST produce best path", "kafka_raw_1m", "rest_best",
     "rec_per_s", 2.0, True),
    ("  the same, per CPU s", "kafka_raw_1m", "rest_best", "rec_per_cpu_s", 2.0, True),
    ("Kafka produce librdkafka / REST produce best path", "rdkafka", "rest_best", "rec_per_s",
     2.0, True),
    ("  the same, per CPU s", "rdkafka", "rest_best", "rec_per_cpu_s", 2.0, True),
    ("Kafka produce raw 64 KiB / REST produce keyed 8p", "kafka_raw_64k", "rest_keyed_8p",
     "rec_per_s", None, True),
    ("  the same, per CPU s", "kafka_raw_64k", "rest_keyed_8p", "rec_per_cpu_s", None, True),
    ("Kafka fetch raw / bare sendfile (MB/s)", "kafka_fetch_raw", "bare_sendfile", "mb_per_s",
     0.5, True),
    ("  the same, per CPU s", "kafka_fetch_raw", "bare_sendfile", "mb_per_cpu_s", 0.5, True),
    ("CPU per record: Kafka fetch raw / REST range read", "kafka_fetch_raw", "rest_range",
     "cpu_s_per_m_records", 0.1, False),
    ("CPU per record: librdkafka consume / REST range read", "rdkafka_consume", "rest_range",
     "cpu_s_per_m_records", None, False),
)


def _per_cpu(row: dict[str, Any]) -> None:
    """Throughput per second of broker CPU: what a core of its own would do at best,
    the steadier figure when other work shares the broker's core."""
    util = row.get("server_cpu_util")
    if util:
        row["rec_per_cpu_s"] = row["rec_per_s"] / util
        row["mb_per_cpu_s"] = row["mb_per_s"] / util


def summarize_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    for r in rounds:
        for row in r.values():
            _per_cpu(row)
    cases: dict[str, Any] = {}
    names = [n for n in ALL_CASES if any(n in r for r in rounds)]
    for n in names:
        rows = [r[n] for r in rounds if n in r]
        cases[n] = {k: med([row.get(k) for row in rows]) for k in
                    ("rec_per_s", "mb_per_s", "server_cpu_util", "client_cpu_util",
                     "cpu_s_per_m_records", "rec_per_cpu_s", "mb_per_cpu_s")}
        cases[n]["rounds"] = len(rows)
    ratios = []
    for label, num, den, key, target, higher in RATIOS:
        per = [r[num][key] / r[den][key] for r in rounds
               if num in r and den in r and r[num].get(key) and r[den].get(key)]
        value = med(per)
        met = None if value is None or target is None else (value >= target if higher
                                                            else value <= target)
        ratios.append({"ratio": label, "value": value, "per_round": [round(x, 3) for x in per],
                       "target": target, "higher_is_better": higher, "met": met})
    return {"cases": cases, "ratios": ratios}


def print_summary(summary: dict[str, Any]) -> None:
    print("\ncase                 records/s      MB/s  broker CPU  broker CPU s   MB per broker"
          "  client CPU")
    print("                                               util  per M records  CPU second"
          "     util")
    for n, c in summary["cases"].items():
        print(f"{n:16s} {_fmt(c['rec_per_s']):>13} {_fmt(c['mb_per_s'], ',.1f'):>9} "
              f"{_fmt(c['server_cpu_util'], '.2f'):>10} "
              f"{_fmt(c['cpu_s_per_m_records'], ',.3f'):>14}"
              f" {_fmt(c['mb_per_cpu_s'], ',.0f'):>13}   {_fmt(c['client_cpu_util'], '.2f'):>6}")
    print("\nratio (median of the rounds' ratios)                  value  target         "
          "per round")
    for r in summary["ratios"]:
        t = "" if r["target"] is None else ((">= " if r["higher_is_better"] else "<= ")
                                            + format(r["target"], "g"))
        met = "" if r["met"] is None else ("met" if r["met"] else "MISSED")
        print(f"{r['ratio']:52s} {_fmt(r['value'], '.3f'):>6}  {t:7s} {met:6s} "
              f"{', '.join(format(x, '.2f') for x in r['per_round'])}")


# --- command line ------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 round, 0.3 + 1 s per case, a 128 MiB fetch topic, no "
                    "write-back between cases")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per case")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--warm-pages-gib", type=float, default=4.0,
                    help="GiB written and deleted before each produce case, so each writes "
                    "into freshly freed memory (0: off; see warm_free_pages)")
    ap.add_argument("--cases", default=",".join(ALL_CASES))
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--connections", type=int, default=8, help="raw generator's connections")
    ap.add_argument("--depth", type=int, default=2, help="raw produce requests in flight per "
                    "connection")
    ap.add_argument("--rest-connections", type=int, default=8)
    ap.add_argument("--max-requests", type=int, default=1_000_000, help="per connection and case")
    ap.add_argument("--max-client-records", type=int, default=100_000_000,
                    help="librdkafka: records per case at most")
    ap.add_argument("--kcat-records", type=int, default=3_000_000)
    ap.add_argument("--fetch-bytes", type=int, default=1536 * MIB)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for franz serve (repeatable)")
    ap.add_argument("--json", type=Path, help="write rounds, summary and machine notes here")
    ap.add_argument("--profile", type=Path, metavar="DIR",
                    help="after the rounds, py-spy the broker during the Kafka cases")
    ap.add_argument("--profile-native", action="store_true",
                    help="py-spy --native (C frames too; pauses the broker at each sample)")
    ap.add_argument("--keep-logs", action="store_true")
    # internal: this file as a ceiling server or a librdkafka child
    ap.add_argument("--serve", choices=("bare-append", "sendfile"), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    ap.add_argument("--layout", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=("rdkafka-produce", "rdkafka-consume"),
                    help=argparse.SUPPRESS)
    ap.add_argument("params", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup, args.duration = 1, 0.3, 1.0
        args.warm_pages_gib = 0.0
        args.fetch_bytes = min(args.fetch_bytes, 128 * MIB)
        args.kcat_records = min(args.kcat_records, 200_000)
    return args


def tree_notes() -> dict[str, Any]:
    """The commit measured and the files of the broker changed beside it (other work in
    the same working tree is measured too)."""
    def git(*cmd: str) -> str:
        try:
            return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    changed = [line[3:] for line in git("status", "--porcelain", "--", "api", "core",
                                        "app").splitlines() if len(line) > 3]
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or None, "changed": changed}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        return serve_main(args)
    if args.child:
        return child_main(args)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(cases) - set(ALL_CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {', '.join(ALL_CASES)}")
    pinned = pin_self(args.client_cpu)
    notes = {**machine_notes(), "server_cpu": args.server_cpu,
             "client_cpu": args.client_cpu if pinned else None, **tree_notes()}
    print(f"machine: {notes.get('cpu')}, {notes['cpus']} CPUs, load "
          f"{', '.join(f'{x:.1f}' for x in notes.get('loadavg_at_start', ()))}; broker and "
          f"ceilings on CPU {args.server_cpu}, generator and clients on CPU "
          f"{args.client_cpu if pinned else '(not pinned)'}; commit {notes['commit']}"
          + (f" with {len(notes['changed'])} changed files in api/, core/, app/"
             if notes["changed"] else ""), flush=True)
    bench = KafkaBench(args)
    ticks = machine_cpu_ticks()
    t0 = time.monotonic()
    try:
        bench.start()
        rounds, failures = bench.rounds(cases)
        profile = bench.profile(args.profile) if args.profile else None
    finally:
        bench.stop()
    notes["steal_pct"] = steal_pct(ticks, machine_cpu_ticks())
    notes["seconds"] = round(time.monotonic() - t0, 1)
    summary = summarize_rounds(rounds)
    print_summary(summary)
    print(f"\n{len(rounds)} round(s) in {notes['seconds']:.0f} s; CPU steal "
          f"{_fmt(notes['steal_pct'], '.1f')} %")
    if failures:
        print("\nFailures:")
        for f in failures:
            print(f"  {f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": notes, "params": {
            k: v for k, v in vars(args).items() if k not in ("json", "profile") and
            not k.startswith(("serve", "child", "params", "port", "ready", "layout", "out",
                              "files"))}, "rounds": rounds, "summary": summary,
            "profile": profile, "failures": failures}, indent=1, default=str) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
