"""``franz bench``: an asyncio HTTP/1.1 load generator against a franz server, and
against the same-shape ceiling servers (docs/cli.md "bench", benchmarks/README.md).

    franz bench produce   closed-loop v2 binary produce: --batch records of --record-size
                          bytes per POST over --connections connections (topic created
                          when missing); --idempotency-keys: each POST with an
                          Idempotency-Key of its own
    franz bench consume   closed-loop range reads (GET /topics/{t}/partitions/{p}/records)
                          of the last --records records (near the tail), or the first
                          ones (--from-beginning); --preload N produces N records first
    franz bench e2e       1-record produce -> long-polling consumer instance: latency of
                          --records samples; --load-fraction F adds a paced background
                          produce at F x the produce rate measured just before
    franz bench ceiling   starts the ceiling servers (raw orjson POST echo, GET of
                          pre-built records, tiny GET, long-poll wake-up) and measures
                          them with the same generator
    franz bench kafka     the Kafka protocol benchmark (``app.bench.kafka_protocol``,
                          also ``benchmarks/kafka_protocol_bench.py``): starts its own
                          broker and ceiling servers, no --bootstrap-server

Every run is bounded by --records and by --warmup + --duration seconds. The result is a
table (or ``--output json``) on stdout and, with ``--json FILE``, a JSON file; a
progress line is rewritten on stderr while it runs when stderr is a terminal or with
``--progress``. Exit codes: 0 done, 1 the server refused or failed during the run, 2 bad
usage or no server at the URL.

Here: topic set-up, the run and its output. The arguments are declared in
``app.commands`` (``_bench``), which names this module as the ``handler``: it is
imported only when a benchmark runs, so it imports the generator (``app.bench``) at
its top and ``franz --help`` stays fast. The runs themselves are in ``app.bench.runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any
from urllib.parse import quote, urlsplit

from app.bench import kafka_protocol
from app.bench.runs import (
    ceiling_run,
    consume_load,
    e2e_run,
    plan_stretches,
    produce_load,
    progress_enabled,
)
from app.bench.workloads import (
    BenchError,
    Target,
    machine_cpu_ticks,
    machine_notes,
    pin_self,
    run_loop,
    steal_pct,
)
from app.commands import CEILING_CASES
from app.commands.output import print_json, print_table
from app.http_client import FranzClient, RequestFailed, ServerUnreachable


def run(args: argparse.Namespace, client: FranzClient) -> int:
    """``franz bench WORKLOAD``: the run, its result on stdout (and ``--json FILE``)."""
    if args.workload == "ceiling":
        cases = [c.strip() for c in args.cases.split(",") if c.strip()]
        unknown = sorted(set(cases) - set(CEILING_CASES))
        if unknown or not cases:
            args.subparser.error(f"--cases: unknown {unknown}; known: {', '.join(CEILING_CASES)}")
        args.case_list = cases
    pinned = pin_self(args.cpu)
    workload = {"produce": _produce, "consume": _consume, "e2e": _e2e,
                "ceiling": _ceiling}[args.workload]
    ticks = machine_cpu_ticks()
    try:
        result, loop_name = workload(args, client)
    except BenchError as exc:
        raise RequestFailed(0, 0, str(exc)) from exc
    except (OSError, EOFError) as exc:  # the generator's own connections
        raise ServerUnreachable(f"lost the server during the run: {exc or type(exc).__name__}"
                                ) from exc
    result["label"] = args.label
    result["machine"] = {**machine_notes(), "generator_loop": loop_name,
                         "generator_cpu": args.cpu if pinned else None,
                         "steal_pct": steal_pct(ticks, machine_cpu_ticks())}
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if args.output == "json":
        print_json(result)
    else:
        _print_result(result)
    return 1 if result.get("record_errors") else 0


def run_standalone(args: argparse.Namespace) -> int:
    """``franz bench kafka``: ``app.bench.kafka_protocol.main`` with the options given
    (the others keep its defaults): the same run, table and ratios as
    ``benchmarks/kafka_protocol_bench.py``. Exit codes: 0 done, 1 a case failed (listed
    under "Failures") or the broker did not start, 2 bad usage."""
    if args.cases is not None:
        cases = [c.strip() for c in args.cases.split(",") if c.strip()]
        unknown = sorted(set(cases) - set(kafka_protocol.ALL_CASES))
        if unknown or not cases:
            args.subparser.error(f"--cases: unknown {unknown}; known: "
                                 f"{', '.join(kafka_protocol.ALL_CASES)}")
    argv = ["--quick"] if args.quick else []
    for name in ("rounds", "duration", "warmup", "cases", "partitions", "server_cpu",
                 "client_cpu", "json", "profile"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    for item in args.override:
        argv += ["--override", item]
    if args.keep_logs:
        argv.append("--keep-logs")
    try:
        return kafka_protocol.main(argv)
    except BenchError as exc:  # the broker or a ceiling server did not start
        raise RequestFailed(0, 0, str(exc)) from exc


def _target(client: FranzClient, pid: int | None, name: str = "franz") -> Target:
    """The generator's target: the client's server, with its TLS settings (https) and
    credentials (``--command-config``, ``FRANZ_CLIENT_*``)."""
    parts = urlsplit(client.base_url)
    https = parts.scheme == "https"
    return Target(name, parts.hostname or "127.0.0.1", parts.port or (443 if https else 80), pid,
                  ssl=client.security.ssl_context() if https else None,
                  authorization=client.security.authorization)


def _params(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {n: getattr(args, n) for n in names}


def ensure_topic(client: FranzClient, topic: str, partitions: int | None,
                 configs: list[tuple[str, str]] | None = None) -> bool:
    """Create ``topic`` when it does not exist; True when this call created it."""
    try:
        client.get_json(client.v3("topics", topic))
        return False
    except RequestFailed as exc:
        if exc.status != 404:
            raise
    body: dict[str, Any] = {"topic_name": topic}
    if partitions is not None:
        body["partitions_count"] = partitions
    if configs:
        body["configs"] = [{"name": k, "value": v} for k, v in configs]
    try:
        client.request("POST", client.v3("topics"), json=body)
    except RequestFailed as exc:
        if "already exists" not in exc.message:  # created by someone else meanwhile
            raise
        return False
    return True


# --- produce -------------------------------------------------------------------------------------


def _produce(args: argparse.Namespace, client: FranzClient) -> tuple[dict[str, Any], str]:
    if args.idempotency_keys and args.acks == "0":
        args.subparser.error("--idempotency-keys needs --acks 1 or all: with acks=0 the "
                             "server refuses an Idempotency-Key (no answer to keep)")
    created = ensure_topic(client, args.topic, args.partitions, args.config)
    target = _target(client, args.server_pid)
    path = f"/topics/{quote(args.topic, safe='')}" + ("" if args.acks == "1" else f"?acks={args.acks}")
    result, loop = run_loop(produce_load(
        target, path, records=args.records, batch=args.batch, size=args.record_size,
        connections=args.connections, warmup=args.warmup, duration=args.duration,
        progress=progress_enabled(args), keys=args.keys, headers=args.headers,
        idempotency_keys=args.idempotency_keys))
    head = {"workload": "produce", "bootstrap_server": client.base_url, "topic": args.topic,
            "topic_created": created,
            "params": _params(args, "records", "record_size", "batch", "connections", "acks",
                              "keys", "headers", "idempotency_keys", "duration", "warmup",
                              "partitions", "config")}
    return {**head, **result}, loop


# --- consume -------------------------------------------------------------------------------------


def partition_offsets(client: FranzClient, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (log start offset, high watermark)."""
    out: dict[int, tuple[int, int]] = {}
    for p in client.v3_list("topics", topic, "partitions"):
        pid = int(p["partition_id"])
        o = client.get_json(client.v3("topics", topic, "partitions", pid, "offset"))
        out[pid] = (int(o["earliest_offset"]), int(o["latest_offset"]))
    return out


def _consume(args: argparse.Namespace, client: FranzClient) -> tuple[dict[str, Any], str]:
    target = _target(client, args.server_pid)
    preload: dict[str, Any] | None = None
    loop = "asyncio"
    if args.preload > 0:
        ensure_topic(client, args.topic, args.partitions)
        preload, loop = run_loop(produce_load(
            target, f"/topics/{quote(args.topic, safe='')}", records=args.preload,
            batch=args.batch, size=args.record_size, connections=args.connections, warmup=0.0,
            duration=3600.0, progress=progress_enabled(args), label="preload"))
    try:
        offsets = partition_offsets(client, args.topic)
    except RequestFailed as exc:
        if exc.status == 404:
            exc.message = f"{exc.message} (use --preload N to write records first)"
        raise
    plan = plan_stretches(offsets, args.records, args.connections, args.batch,
                          from_beginning=args.from_beginning)
    result, loop = run_loop(consume_load(
        target, args.topic, plan, batch=args.batch, size=args.record_size, warmup=args.warmup,
        duration=args.duration, progress=progress_enabled(args)))
    head = {"workload": "consume", "bootstrap_server": client.base_url, "topic": args.topic,
            "params": _params(args, "records", "record_size", "batch", "connections",
                              "from_beginning", "preload", "duration", "warmup"),
            "partitions": {str(p): {"log_start_offset": lo, "high_watermark": hi}
                           for p, (lo, hi) in sorted(offsets.items())},
            "preload": preload}
    return {**head, **result}, loop


# --- e2e -----------------------------------------------------------------------------------------


def _e2e(args: argparse.Namespace, client: FranzClient) -> tuple[dict[str, Any], str]:
    created = ensure_topic(client, args.topic, None)
    target = _target(client, args.server_pid)
    group = f"franz-bench-{os.getpid()}-{int(time.time())}"
    result, loop = run_loop(e2e_run(
        target, args.topic, samples=args.records, gap_s=args.gap_ms / 1000,
        duration=args.duration, load_fraction=args.load_fraction, load_rate=args.load_rate,
        calibrate=args.calibrate, batch=args.batch, size=args.record_size,
        connections=args.connections, progress=progress_enabled(args), group=group))
    head = {"workload": "e2e", "bootstrap_server": client.base_url, "topic": args.topic,
            "topic_created": created,
            "params": _params(args, "records", "gap_ms", "load_fraction", "load_rate",
                              "calibrate", "batch", "record_size", "connections", "duration")}
    return {**head, **result}, loop


# --- ceiling -------------------------------------------------------------------------------------


def _ceiling(args: argparse.Namespace, _client: FranzClient) -> tuple[dict[str, Any], str]:
    cases, loop = run_loop(ceiling_run(args))
    return {"workload": "ceiling",
            "params": _params(args, "records", "record_size", "batch", "connections",
                              "duration", "warmup", "samples", "server_cpu"),
            "cases": cases}, loop


# --- output --------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _print_result(result: dict[str, Any]) -> None:
    rows = []
    cases = result["cases"] if result["workload"] == "ceiling" else {result["workload"]: result}
    for name, r in cases.items():
        lat = r.get("latency_ms") or {}
        if "rec_per_s" in r:
            rows.append([name, _fmt(r["records"]), _fmt(r["rec_per_s"]), _fmt(r["mb_per_s"], ".1f"),
                         _fmt(r["req_per_s"]), _fmt(lat.get("p50"), ".2f"),
                         _fmt(lat.get("p90"), ".2f"), _fmt(lat.get("p99"), ".2f"),
                         _fmt(lat.get("p999"), ".2f"), _fmt(lat.get("max"), ".2f"),
                         _fmt(r.get("errors"))])
        else:
            rows.append([name, f"{lat.get('samples', 0)} samples", "-", "-", "-",
                         _fmt(lat.get("p50"), ".2f"), _fmt(lat.get("p90"), ".2f"),
                         _fmt(lat.get("p99"), ".2f"), _fmt(lat.get("p999"), ".2f"),
                         _fmt(lat.get("max"), ".2f"), _fmt(r.get("lost"))])
    print_table(["CASE", "RECORDS", "RECORDS/S", "MB/S", "REQUESTS/S", "P50_MS", "P90_MS",
                 "P99_MS", "P99.9_MS", "MAX_MS", "ERRORS"], rows)
    steal = (result.get("machine") or {}).get("steal_pct")
    if steal:  # a virtual machine whose host was busy: every number above is lower
        print(f"CPU steal during the run: {steal:.1f} % of the machine's CPU time")
    bg = result.get("background")
    if bg:
        print(f"background produce: {bg['rec_per_s']:,.0f} records/s "
              f"(asked {bg['target_rec_per_s']:,.0f}, {bg['late_sends']} late sends)")
    if result.get("first_record_error"):
        print(f"{result['record_errors']} records failed, first: {result['first_record_error']}",
              file=sys.stderr)
