"""Kafka protocol codecs on the hot APIs, in-process, in the same run: franz's generated
codec (api/kafka/protocol/codegen.py), kafka-python 3.x's ``kafka.protocol`` and kio.

    python benchmarks/kafka_codec_bench.py [--rounds 5] [--min-time 0.2] [--json FILE]
    python benchmarks/kafka_codec_bench.py --quick      # 1 round x 0.05 s per measure

Cases (one message each, built once as a franz dict, encoded by franz, and given to the
other codecs as their own decode of those bytes, so all three handle the same message):

produce_3x64k     ProduceRequest v9: one topic, 3 partitions, a 64 KiB records blob each
produce_100x1k    ProduceRequest v9: one topic, 100 partitions x 1 KiB
fetch_v12         FetchResponse v12: one topic (by name), 100 partitions x 1 KiB
fetch_v13         FetchResponse v13: the same by topic id
metadata_v12      MetadataResponse v12: 3 brokers, 100 topics x 6 partitions, RF 3
heartbeat_req     HeartbeatRequest v4
heartbeat_resp    HeartbeatResponse v4

decode: bytes -> message (franz is given a memoryview, as the server does: records come
back as views of it; kafka-python turns its input into a memoryview itself; kio reads
bytes). encode: message -> bytes (franz's ``encode``, kafka-python's ``encode(version=)``,
kio's ``entity_writer`` into a BytesIO). Each measure repeats the call until it has
taken ``--min-time`` (the garbage collector off, as ``timeit`` does); per round every
codec is measured right after the others; the summary is the median of the rounds:
microseconds per operation, operations per second, and the other codecs' time as a
multiple of franz's. A codec that is not installed is left out.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any directory: import this tree's api
    sys.path.insert(0, str(ROOT))

from api.kafka.protocol import codegen  # noqa: E402

KiB = 1 << 10
CODECS = ("franz", "kafka-python", "kio")


# --- the messages --------------------------------------------------------------------


def _blob(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def _produce(partitions: int, size: int) -> dict[str, Any]:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "bench", "partition_data": [
            {"index": i, "records": _blob(size, i)} for i in range(partitions)]}]}


def _fetch(by_id: bool) -> dict[str, Any]:
    topic = {"topic_id": bytes(range(16))} if by_id else {"topic": "bench"}
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 12345, "responses": [
        {**topic, "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 1_000_000 + i,
             "last_stable_offset": 1_000_000 + i, "log_start_offset": 0,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": _blob(KiB, i)} for i in range(100)]}]}


def _metadata() -> dict[str, Any]:
    brokers = [{"node_id": b, "host": f"broker-{b}.example", "port": 9092, "rack": None}
               for b in (1, 2, 3)]
    topics = [{"error_code": 0, "name": f"topic-{t:03d}", "topic_id": t.to_bytes(16, "big"),
               "is_internal": False, "topic_authorized_operations": -(1 << 31), "partitions": [
                   {"error_code": 0, "partition_index": p, "leader_id": 1 + (t + p) % 3,
                    "leader_epoch": 7, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3],
                    "offline_replicas": []} for p in range(6)]} for t in range(100)]
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": "franz-bench-cluster",
            "controller_id": 1, "topics": topics}


CASES: dict[str, tuple[str, int, Callable[[], dict[str, Any]]]] = {
    "produce_3x64k": ("ProduceRequest", 9, lambda: _produce(3, 64 * KiB)),
    "produce_100x1k": ("ProduceRequest", 9, lambda: _produce(100, KiB)),
    "fetch_v12": ("FetchResponse", 12, lambda: _fetch(False)),
    "fetch_v13": ("FetchResponse", 13, lambda: _fetch(True)),
    "metadata_v12": ("MetadataResponse", 12, _metadata),
    "heartbeat_req": ("HeartbeatRequest", 4, lambda: {
        "group_id": "bench-group", "generation_id": 5,
        "member_id": "consumer-1-0d2a4d59-7b8e-4f35-a0a3-5c0e8c1f4b21",
        "group_instance_id": None}),
    "heartbeat_resp": ("HeartbeatResponse", 4, lambda: {"throttle_time_ms": 0, "error_code": 0}),
}


# --- the codecs: (decode, encode) callables of one message ----------------------------

Ops = tuple[Callable[[], Any], Callable[[], Any]]


def _franz(name: str, version: int, obj: dict[str, Any], data: bytes) -> Ops:
    dec = codegen.decoder(name, version)
    view = memoryview(data)
    message, _ = dec(view, 0)
    assert codegen.encode(name, version, message) == data
    return (lambda: dec(view, 0)), (lambda: codegen.encode(name, version, message))


def _kafka_python_class(name: str) -> Any:
    import importlib
    import pkgutil

    from kafka.protocol.api_message import ApiMessage

    for pkg in ("admin", "consumer", "metadata", "producer"):
        mod = importlib.import_module(f"kafka.protocol.{pkg}")
        for info in pkgutil.iter_modules(mod.__path__):
            importlib.import_module(f"kafka.protocol.{pkg}.{info.name}")

    def walk(c: type) -> Any:
        for s in c.__subclasses__():
            if getattr(s, "_class_version", None) is None and getattr(s, "name", None) == name:
                return s
            found = walk(s)
            if found is not None:
                return found
        return None

    return walk(ApiMessage)


def _kafka_python(name: str, version: int, obj: dict[str, Any], data: bytes) -> Ops:
    cls = _kafka_python_class(name)
    message = cls.decode(data, version=version)
    for slot in ("_header", "_min_version", "_max_version"):
        if not hasattr(message, slot):  # set by __init__, which its decoder skips
            setattr(message, slot, None)
    assert message.encode(version=version) == data
    return (lambda: cls.decode(data, version=version)), (lambda: message.encode(version=version))


def _kio(name: str, version: int, obj: dict[str, Any], data: bytes) -> Ops:
    import importlib
    import re

    from kio.schema.index import schema_name_map
    from kio.serial import entity_reader, entity_writer
    from kio.static.constants import EntityType

    kind = EntityType.request if name.endswith("Request") else EntityType.response
    stem = re.sub(r"(?<!^)(?=[A-Z])", "_", name.removesuffix(kind.name.title())).lower()
    module, _, attr = schema_name_map[stem][version][kind].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    read, write = entity_reader(cls), entity_writer(cls)
    message, size = read(data, 0)
    assert size == len(data)

    def encode() -> bytes:
        buf = io.BytesIO()
        write(buf, message)
        return buf.getvalue()

    assert encode() == data
    return (lambda: read(data, 0)), encode


MAKERS = {"franz": _franz, "kafka-python": _kafka_python, "kio": _kio}


def _available() -> list[str]:
    found = ["franz"]
    try:
        import kafka.protocol.api_message  # noqa: F401
        found.append("kafka-python")
    except ImportError:
        print("kafka-python 3.x not installed: left out", file=sys.stderr)
    try:
        import kio.serial  # noqa: F401
        found.append("kio")
    except ImportError:
        print("kio not installed: left out", file=sys.stderr)
    return found


# --- measuring -----------------------------------------------------------------------


def _per_op(fn: Callable[[], Any], min_time: float) -> float:
    """Seconds per call, over a loop long enough to take ``min_time``."""
    n = 1
    gc.disable()
    try:
        while True:
            t = time.perf_counter()
            for _ in range(n):
                fn()
            elapsed = time.perf_counter() - t
            if elapsed >= min_time:
                return elapsed / n
            n = max(n * 2, int(n * min_time / max(elapsed, 1e-9) * 1.1))
    finally:
        gc.enable()


def run(rounds: int, min_time: float, cases: list[str]) -> dict[str, Any]:
    codecs = _available()
    ops: dict[tuple[str, str], Ops] = {}
    sizes: dict[str, int] = {}
    for case in cases:
        name, version, build = CASES[case]
        obj = build()
        data = codegen.encode(name, version, obj)
        sizes[case] = len(data)
        for codec in codecs:
            ops[case, codec] = MAKERS[codec](name, version, obj, data)
    samples: dict[tuple[str, str, str], list[float]] = {}
    for r in range(rounds):
        for case in cases:
            for op_index, op in enumerate(("decode", "encode")):
                for codec in codecs:
                    s = _per_op(ops[case, codec][op_index], min_time)
                    samples.setdefault((case, op, codec), []).append(s)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    median = {k: statistics.median(v) for k, v in samples.items()}
    return {"codecs": codecs, "sizes": sizes, "rounds": rounds, "min_time": min_time,
            "us_per_op": {f"{c}|{op}|{codec}": s * 1e6 for (c, op, codec), s in median.items()},
            "machine": f"{platform.python_implementation()} {platform.python_version()}, "
                       f"{platform.machine()}, {os.cpu_count()} CPUs"}


def _fmt_ops(us: float) -> str:
    per_s = 1e6 / us
    return f"{per_s / 1e6:.2f} M/s" if per_s >= 1e6 else f"{per_s / 1e3:.1f} k/s"


def report(result: dict[str, Any], cases: list[str]) -> str:
    codecs = result["codecs"]
    us = result["us_per_op"]
    head = "| case | op | " + " | ".join(codecs) + " |"
    lines = [f"median of {result['rounds']} rounds, {result['machine']}; "
             "us/op (ops/s); others as a multiple of franz's time", "",
             head, "|" + "---|" * (len(codecs) + 2)]
    for case in cases:
        name, version, _ = CASES[case]
        label = f"{case} ({name} v{version}, {result['sizes'][case]:,} B)"
        for op in ("decode", "encode"):
            base = us[f"{case}|{op}|franz"]
            cells = []
            for codec in codecs:
                t = us[f"{case}|{op}|{codec}"]
                cell = f"{t:,.1f} us ({_fmt_ops(t)})"
                if codec != "franz":
                    cell += f" x{t / base:.1f}"
                cells.append(cell)
            lines.append(f"| {label} | {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, help="rounds (default 5; --quick 1)")
    ap.add_argument("--min-time", type=float, help="seconds per measure (0.2; --quick 0.05)")
    ap.add_argument("--quick", action="store_true", help="1 round x 0.05 s: a smoke run")
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of " + ", ".join(CASES))
    ap.add_argument("--json", help="write the results to this file")
    a = ap.parse_args()
    rounds = a.rounds or (1 if a.quick else 5)
    min_time = a.min_time or (0.05 if a.quick else 0.2)
    cases = [c for c in a.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases: {', '.join(sorted(unknown))}")
    result = run(rounds, min_time, cases)
    print(report(result, cases))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
