"""``franz bench``: an asyncio HTTP/1.1 load generator against a franz server, and
against the same-shape ceiling servers (docs/cli.md "bench", benchmarks/README.md).

    franz bench produce   closed-loop v2 binary produce: --batch records of --record-size
                          bytes per POST over --connections connections (topic created
                          when missing)
    franz bench consume   closed-loop range reads (GET /topics/{t}/partitions/{p}/records)
                          of the last --records records (near the tail), or the first
                          ones (--from-beginning); --preload N produces N records first
    franz bench e2e       1-record produce -> long-polling consumer instance: latency of
                          --records samples; --load-fraction F adds a paced background
                          produce at F x the produce rate measured just before
    franz bench ceiling   starts the ceiling servers (raw orjson POST echo, GET of
                          pre-built records, tiny GET, long-poll wake-up) and measures
                          them with the same generator

Every run is bounded by --records and by --warmup + --duration seconds. The result is a
table (or ``--output json``) on stdout and, with ``--json FILE``, a JSON file; a
progress line is rewritten on stderr while it runs when stderr is a terminal or with
``--progress``. Exit codes: 0 done, 1 the server refused or failed during the run, 2 bad
usage or no server at the URL.

Only the declarations live at module level (``franz --help`` stays fast); the generator
(``app.bench``) is imported when a benchmark runs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:
    from app.bench.workloads import LoadResult, Target
    from app.http_client import FranzClient

DEFAULT_TOPIC = "franz-bench"
CEILING_CASES = ("echo", "get", "tiny", "tiny_plain", "latency")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be within 0-1, got {value}")
    return value


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"needs KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _load_options(records: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"the topic (default {DEFAULT_TOPIC})")
    p.add_argument("--records", type=_positive, default=records, metavar="N",
                   help=f"at most N records (e2e, ceiling latency: samples) (default {records:,})")
    p.add_argument("--record-size", type=_positive, default=100, metavar="B",
                   help="value bytes per record (default 100)")
    p.add_argument("--batch", type=_positive, default=1000, metavar="R",
                   help="records per request (default 1000)")
    p.add_argument("--connections", type=_positive, default=8, metavar="C",
                   help="concurrent keep-alive connections (default 8)")
    p.add_argument("--duration", type=_positive_float, default=10.0, metavar="S",
                   help="measure for at most S seconds after the warm-up (default 10)")
    p.add_argument("--warmup", type=_non_negative_float, default=0.0, metavar="S",
                   help="unmeasured seconds first (default 0)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result here")
    p.add_argument("--progress", action="store_true",
                   help="progress line on stderr even when it is not a terminal")
    p.add_argument("--cpu", type=int, metavar="N", help="pin the generator to CPU N")
    p.add_argument("--server-pid", type=int, metavar="PID",
                   help="the server's pid, for its CPU time per request (same machine)")
    p.add_argument("--label", default="", help="stored in the JSON result")
    return p


def add_bench_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """Declare ``franz bench produce|consume|e2e|ceiling``."""
    bench = sub.add_parser("bench", help="load-generate against franz or the ceiling servers",
                           description="HTTP load generator: records/s, MB/s, requests/s "
                                       "and latency percentiles (docs/cli.md).")
    kinds = bench.add_subparsers(dest="workload", metavar="WORKLOAD", required=True)

    p = kinds.add_parser("produce", parents=[common, _load_options(1_000_000)],
                         help="closed-loop produce POSTs",
                         description="Produce --records records, --batch per POST, over "
                                     "--connections connections; creates the topic when "
                                     "missing.")
    p.add_argument("--acks", choices=("0", "1", "all"), default="1", help="default 1")
    p.add_argument("--partitions", type=_positive, help="partitions when the topic is created")
    p.add_argument("--config", type=_config_pair, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="topic config when the topic is created, e.g. flush.messages=1")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    p = kinds.add_parser("consume", parents=[common, _load_options(1_000_000)],
                         help="closed-loop range reads",
                         description="Read the last --records records of the topic (or the "
                                     "first ones with --from-beginning), --batch per GET, "
                                     "the connections sharing the partitions' stretches.")
    p.add_argument("--from-beginning", action="store_true",
                   help="read from the log start instead of near the tail")
    p.add_argument("--preload", type=int, default=0, metavar="N",
                   help="produce N records (--batch, --record-size) first; topic created "
                        "when missing")
    p.add_argument("--partitions", type=_positive, help="partitions when the topic is created")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    p = kinds.add_parser("e2e", parents=[common, _load_options(1000)],
                         help="end-to-end latency: 1-record produce -> long-polling consumer",
                         description="--records samples: POST one record to partition 0, a "
                                     "consumer instance long-polling the partition receives "
                                     "it; latency = receive - send.")
    p.add_argument("--gap-ms", type=_non_negative_float, default=2.0, metavar="MS",
                   help="pause after each sample is received (default 2)")
    p.add_argument("--load-fraction", type=_fraction, default=0.0, metavar="F",
                   help="background produce (--batch, --record-size, to TOPIC-load) at F x "
                        "the produce rate measured first (default 0: idle)")
    p.add_argument("--load-rate", type=_positive_float, metavar="REC_PER_S",
                   help="the max produce rate to take F of, instead of measuring it")
    p.add_argument("--calibrate", type=_positive_float, default=3.0, metavar="S",
                   help="seconds of the produce run that measures the max rate (default 3)")
    p.set_defaults(handler="app.commands.bench", subparser=p)

    p = kinds.add_parser("ceiling", parents=[common, _load_options(1_000_000)],
                         help="measure the same-shape ceiling servers",
                         description="Start the ceiling servers on loopback (python -m "
                                     "app.bench.ceiling) and measure them with the same "
                                     "generator: echo = raw orjson POST echo of --batch "
                                     "records; get = GET building --batch records with "
                                     "orjson; tiny / tiny_plain = GET {} in FastAPI / plain "
                                     "ASGI; latency = long-poll GET woken by a POST.")
    p.add_argument("--cases", default=",".join(CEILING_CASES),
                   help=f"comma separated, of {', '.join(CEILING_CASES)} (default all)")
    p.add_argument("--samples", type=_positive, default=500, help="latency samples (500)")
    p.add_argument("--gap-ms", type=_non_negative_float, default=2.0, metavar="MS",
                   help="pause between latency samples (default 2)")
    p.add_argument("--server-cpu", type=int, metavar="N",
                   help="pin the ceiling servers to CPU N (taskset)")
    p.add_argument("--server", metavar="URL",
                   help="use a running ceiling server (python -m app.bench.ceiling)")
    p.add_argument("--plain-server", metavar="URL",
                   help="use a running plain-ASGI ceiling server (--plain)")
    p.set_defaults(handler="app.commands.bench", subparser=p)


# --- running -------------------------------------------------------------------------------


def run(args: argparse.Namespace, client: FranzClient) -> int:
    from app.bench.workloads import (  # noqa: PLC0415
        BenchError,
        machine_cpu_ticks,
        machine_notes,
        pin_self,
        steal_pct,
    )
    from app.http_client import RequestFailed, ServerUnreachable  # noqa: PLC0415

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
        import json  # noqa: PLC0415

        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if args.output == "json":
        from app.commands.output import print_json  # noqa: PLC0415

        print_json(result)
    else:
        _print_result(result)
    return 1 if result.get("record_errors") else 0


def _progress_enabled(args: argparse.Namespace) -> bool:
    return bool(args.progress or sys.stderr.isatty())


def _target(client: FranzClient, pid: int | None, name: str = "franz") -> Target:
    from app.bench.workloads import Target  # noqa: PLC0415
    from app.http_client import ServerUnreachable  # noqa: PLC0415

    parts = urlsplit(client.base_url)
    if parts.scheme != "http":
        raise ServerUnreachable(f"franz bench speaks plain http only, not {parts.scheme}")
    return Target(name, parts.hostname or "127.0.0.1", parts.port or 80, pid)


def _params(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {n: getattr(args, n) for n in names}


def ensure_topic(client: FranzClient, topic: str, partitions: int | None,
                 configs: list[tuple[str, str]] | None = None) -> bool:
    """Create ``topic`` when it does not exist; True when this call created it."""
    from app.http_client import RequestFailed  # noqa: PLC0415

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


def _load_result(res: LoadResult, target: Target | None = None) -> dict[str, Any]:
    s = res.summary()
    keys = ("records", "records_acked", "requests", "requests_acked", "bytes", "errors",
            "seconds", "rec_per_s", "mb_per_s", "req_per_s", "client_cpu_util",
            "client_cpu_us_per_req", "server_cpu_util", "server_cpu_us_per_req")
    out = {k: s[k] for k in keys}
    if target is None or target.pid is None:  # no server CPU without its pid
        out["server_cpu_util"] = out["server_cpu_us_per_req"] = None
    out["latency_ms"] = res.latency_ms()
    return out


# --- produce -------------------------------------------------------------------------------------


async def produce_load(target: Target, path: str, *, records: int, batch: int, size: int,
                       connections: int, warmup: float, duration: float, progress: bool,
                       label: str = "produce") -> dict[str, Any]:
    """Closed-loop produce of at most ``records`` records to ``path``."""
    from app.bench.progress import ProgressLine  # noqa: PLC0415
    from app.bench.workloads import (  # noqa: PLC0415
        BenchError,
        LoadResult,
        close_all,
        closed_loop,
        open_conns,
        produce_body,
        produce_req,
    )

    full = produce_req(path, produce_body(batch, size))
    left = records
    record_errors = 0
    first_error: str | None = None
    checked = False

    def next_req(_i: int) -> Any:
        nonlocal left
        if left <= 0:
            return None
        n = min(batch, left)
        left -= n
        return full if n == batch else produce_req(path, produce_body(n, size))

    async def on_resp(_i: int, req: Any, resp: Any) -> tuple[int, int]:
        nonlocal checked, record_errors, first_error
        import orjson  # noqa: PLC0415

        body = resp[2]
        n = req.body.count(b'"value":')
        ok = body.count(b'"error_code":null')
        if not checked or ok != n:
            offsets = orjson.loads(body).get("offsets")
            if not isinstance(offsets, list) or len(offsets) != n:
                raise BenchError(f"{target.name}: unexpected produce answer {body[:300]!r}")
            bad = [o for o in offsets if o.get("error_code") is not None]
            checked = True
            ok = n - len(bad)
            if bad:
                record_errors += len(bad)
                first_error = first_error or f"error {bad[0]['error_code']}: {bad[0].get('error')}"
        return ok, len(req.body)

    conns = await open_conns(target, connections)
    res = LoadResult()
    try:
        with ProgressLine(label, lambda: (res.sent_records, res.sent_bytes), enabled=progress):
            await closed_loop(target, conns, next_req, on_resp, warmup=warmup,
                              duration=duration, max_requests=records, res=res)
    finally:
        await close_all(conns)
    out = _load_result(res, target)
    out["record_errors"] = record_errors
    out["first_record_error"] = first_error
    return out


def _produce(args: argparse.Namespace, client: FranzClient) -> tuple[dict[str, Any], str]:
    from app.bench.workloads import run_loop  # noqa: PLC0415

    created = ensure_topic(client, args.topic, args.partitions, args.config)
    target = _target(client, args.server_pid)
    path = f"/topics/{quote(args.topic, safe='')}" + ("" if args.acks == "1" else f"?acks={args.acks}")
    result, loop = run_loop(produce_load(
        target, path, records=args.records, batch=args.batch, size=args.record_size,
        connections=args.connections, warmup=args.warmup, duration=args.duration,
        progress=_progress_enabled(args)))
    head = {"workload": "produce", "bootstrap_server": client.base_url, "topic": args.topic,
            "topic_created": created,
            "params": _params(args, "records", "record_size", "batch", "connections", "acks",
                              "duration", "warmup", "partitions", "config")}
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


def plan_stretches(offsets: dict[int, tuple[int, int]], records: int, connections: int,
                   batch: int, *, from_beginning: bool) -> list[list[tuple[int, int, int]]]:
    """Per connection, the (partition, first offset, end offset) stretches it reads:
    ``records`` at most in all, taken from each partition in proportion to its size, the
    first ones (``from_beginning``) or the last ones; stretches split (at multiples of
    ``batch`` from their start) until there is one per connection where possible."""
    sizes = {p: hi - lo for p, (lo, hi) in offsets.items() if hi > lo}
    total = sum(sizes.values())
    want = min(records, total)
    stretches: list[tuple[int, int, int]] = []
    given = 0
    for i, (p, size) in enumerate(sorted(sizes.items())):
        take = want - given if i == len(sizes) - 1 else min(size, round(want * size / total))
        take = min(take, size)
        given += take
        if take <= 0:
            continue
        lo, hi = offsets[p]
        stretches.append((p, lo, lo + take) if from_beginning else (p, hi - take, hi))
    while 0 < len(stretches) < connections:
        stretches.sort(key=lambda s: s[2] - s[1])
        p, lo, hi = stretches[-1]
        half = (hi - lo) // 2 // batch * batch
        if half < batch:
            break
        stretches[-1:] = [(p, lo, lo + half), (p, lo + half, hi)]
    per_conn: list[list[tuple[int, int, int]]] = [[] for _ in range(connections)]
    for i, s in enumerate(sorted(stretches)):
        per_conn[i % connections].append(s)
    return per_conn


async def consume_load(target: Target, topic: str, plan: list[list[tuple[int, int, int]]], *,
                       batch: int, size: int, warmup: float, duration: float,
                       progress: bool) -> dict[str, Any]:
    from app.bench.http1 import BINARY, Req  # noqa: PLC0415
    from app.bench.progress import ProgressLine  # noqa: PLC0415
    from app.bench.workloads import (  # noqa: PLC0415
        BenchError,
        LoadResult,
        close_all,
        closed_loop,
        open_conns,
    )

    plan = [stretches for stretches in plan if stretches]
    t = quote(topic, safe="")
    max_bytes = batch * size
    queues = [list(s) for s in plan]  # remaining stretches per connection
    pos = [q[0][1] for q in queues]
    accept = {"Accept": BINARY}
    checked = False

    def current(i: int) -> tuple[int, int, int] | None:
        q = queues[i]
        while q and pos[i] >= q[0][2]:
            q.pop(0)
            if q:
                pos[i] = q[0][1]
        return q[0] if q else None

    def next_req(i: int) -> Any:
        s = current(i)
        if s is None:
            return None
        n = min(batch, s[2] - pos[i])
        return Req("GET", f"/topics/{t}/partitions/{s[0]}/records?offset={pos[i]}&count={n}"
                          f"&max_bytes={max_bytes}", b"", accept)

    async def on_resp(i: int, _req: Any, resp: Any) -> tuple[int, int]:
        nonlocal checked
        import orjson  # noqa: PLC0415

        body = resp[2]
        if not checked:
            rows = orjson.loads(body)
            if not isinstance(rows, list):
                raise BenchError(f"{target.name}: unexpected records answer {body[:300]!r}")
            checked = True
        n = body.count(b'"offset":')
        nxt = int(resp[1].get("x-franz-next-offset", pos[i] + n))
        if n == 0 or nxt <= pos[i]:  # nothing more in this stretch (deleted, compacted)
            s = queues[i][0] if queues[i] else None
            nxt = s[2] if s is not None else pos[i]
        pos[i] = nxt
        return n, len(body)

    if not plan:
        return {**_load_result(LoadResult()), "note": "no records to read"}
    conns = await open_conns(target, len(plan))
    res = LoadResult()
    try:
        with ProgressLine("consume", lambda: (res.sent_records, res.sent_bytes),
                          enabled=progress):
            await closed_loop(target, conns, next_req, on_resp, warmup=warmup,
                              duration=duration, max_requests=1 << 62, res=res)
    finally:
        await close_all(conns)
    return _load_result(res, target)


def _consume(args: argparse.Namespace, client: FranzClient) -> tuple[dict[str, Any], str]:
    from app.bench.workloads import run_loop  # noqa: PLC0415
    from app.http_client import RequestFailed  # noqa: PLC0415

    target = _target(client, args.server_pid)
    preload: dict[str, Any] | None = None
    loop = "asyncio"
    if args.preload > 0:
        ensure_topic(client, args.topic, args.partitions)
        preload, loop = run_loop(produce_load(
            target, f"/topics/{quote(args.topic, safe='')}", records=args.preload,
            batch=args.batch, size=args.record_size, connections=args.connections, warmup=0.0,
            duration=3600.0, progress=_progress_enabled(args), label="preload"))
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
        duration=args.duration, progress=_progress_enabled(args)))
    head = {"workload": "consume", "bootstrap_server": client.base_url, "topic": args.topic,
            "params": _params(args, "records", "record_size", "batch", "connections",
                              "from_beginning", "preload", "duration", "warmup"),
            "partitions": {str(p): {"log_start_offset": lo, "high_watermark": hi}
                           for p, (lo, hi) in sorted(offsets.items())},
            "preload": preload}
    return {**head, **result}, loop


# --- e2e -----------------------------------------------------------------------------------------


async def _new_instance(conn: Any, group: str, topic: str) -> str:
    """A binary consumer instance assigned partition 0 of ``topic``, at its end."""
    import orjson  # noqa: PLC0415

    from app.bench.http1 import V2, Req  # noqa: PLC0415
    from app.bench.workloads import BenchError  # noqa: PLC0415

    cfg = {"format": "binary", "auto.offset.reset": "latest", "auto.commit.enable": "false"}
    status, _h, body = await conn.send(Req("POST", f"/consumers/{quote(group, safe='')}",
                                           orjson.dumps(cfg),
                                           {"Content-Type": V2, "Accept": V2}))
    if status != 200:
        raise BenchError(f"create consumer: HTTP {status} {body[:300]!r}")
    base = f"/consumers/{quote(group, safe='')}/instances/{orjson.loads(body)['instance_id']}"
    parts = orjson.dumps({"partitions": [{"topic": topic, "partition": 0}]})
    for path in ("/assignments", "/positions/end"):
        status, _h, body = await conn.send(Req("POST", base + path, parts, {"Content-Type": V2}))
        if status >= 300:
            raise BenchError(f"consumer {path[1:]}: HTTP {status} {body[:300]!r}")
    return base


async def e2e_run(target: Target, topic: str, *, samples: int, gap_s: float, duration: float,
                  load_fraction: float, load_rate: float | None, calibrate: float, batch: int,
                  size: int, connections: int, progress: bool, group: str) -> dict[str, Any]:
    import asyncio  # noqa: PLC0415

    from app.bench.http1 import BINARY, V2, RawConn, Req  # noqa: PLC0415
    from app.bench.progress import ProgressLine  # noqa: PLC0415
    from app.bench.workloads import (  # noqa: PLC0415
        e2e_latency,
        paced_load,
        produce_body,
        produce_req,
    )

    t = quote(topic, safe="")
    load_path = f"/topics/{quote(topic + '-load', safe='')}"
    calibration: dict[str, Any] | None = None
    if load_fraction > 0 and load_rate is None:
        calibration = await produce_load(
            target, load_path, records=1 << 40, batch=batch, size=size,
            connections=connections, warmup=0.5, duration=calibrate, progress=progress,
            label="calibrate")
        load_rate = calibration["rec_per_s"]
    prod = await RawConn(target.host, target.port).connect()
    cons = await RawConn(target.host, target.port).connect()
    stop_flag = False
    bg_task = None
    base = None
    count = 0

    def on_sample(n: int) -> None:
        nonlocal count
        count = n

    try:
        base = await _new_instance(cons, group, topic)
        get = Req("GET", base + "/records?timeout=1000", b"", {"Accept": BINARY})
        if load_fraction > 0 and load_rate:
            req = produce_req(load_path, produce_body(batch, size))
            bg_task = asyncio.ensure_future(paced_load(
                target, req, batch, load_rate * load_fraction, lambda: stop_flag,
                max_seconds=duration + 30.0))
            await asyncio.sleep(1.0)  # let the load settle
        with ProgressLine("e2e", lambda: (count, 0), enabled=progress, unit="samples"):
            out = await e2e_latency(prod, cons, f"/topics/{t}/partitions/0", get,
                                    samples=samples, gap_s=gap_s, max_seconds=duration,
                                    on_sample=on_sample)
    finally:
        stop_flag = True
        background = await bg_task if bg_task is not None else None
        if base is not None:
            with contextlib.suppress(Exception):
                await prod.send(Req("DELETE", base, b"", {"Content-Type": V2}))
        await prod.close()
        await cons.close()
    out["latency_ms"] = {"samples": out["samples"], "p50": out["p50_ms"], "p90": out["p90_ms"],
                         "p99": out["p99_ms"], "p999": out["p999_ms"], "max": out["max_ms"],
                         "mean": out["mean_ms"]}
    out["background"] = background
    out["load_rate_max"] = load_rate if load_fraction > 0 else None
    out["calibration"] = calibration
    return out


def _e2e(args: argparse.Namespace, client: FranzClient) -> tuple[dict[str, Any], str]:
    import os  # noqa: PLC0415
    import time  # noqa: PLC0415

    from app.bench.workloads import run_loop  # noqa: PLC0415

    created = ensure_topic(client, args.topic, None)
    target = _target(client, args.server_pid)
    group = f"franz-bench-{os.getpid()}-{int(time.time())}"
    result, loop = run_loop(e2e_run(
        target, args.topic, samples=args.records, gap_s=args.gap_ms / 1000,
        duration=args.duration, load_fraction=args.load_fraction, load_rate=args.load_rate,
        calibrate=args.calibrate, batch=args.batch, size=args.record_size,
        connections=args.connections, progress=_progress_enabled(args), group=group))
    head = {"workload": "e2e", "bootstrap_server": client.base_url, "topic": args.topic,
            "topic_created": created,
            "params": _params(args, "records", "gap_ms", "load_fraction", "load_rate",
                              "calibrate", "batch", "record_size", "connections", "duration")}
    return {**head, **result}, loop


# --- ceiling -------------------------------------------------------------------------------------


async def ceiling_run(args: argparse.Namespace) -> dict[str, Any]:
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from app.bench.http1 import BINARY, V2, RawConn, Req, free_port  # noqa: PLC0415
    from app.bench.progress import ProgressLine  # noqa: PLC0415
    from app.bench.workloads import (  # noqa: PLC0415
        Budget,
        LoadResult,
        Target,
        close_all,
        closed_loop,
        e2e_latency,
        open_conns,
        spawn,
        stop,
        wait_ready,
    )

    cases: list[str] = args.case_list
    tmp = Path(tempfile.mkdtemp(prefix="franz-ceiling-"))
    procs = []
    try:
        def start(name: str, extra: list[str]) -> Any:
            port = free_port()
            log = tmp / f"{name}.log"
            proc = spawn([sys.executable, "-m", "app.bench.ceiling", "--port", str(port),
                          "--records", str(args.batch), "--size", str(args.record_size),
                          *extra], args.server_cpu, log)
            procs.append(proc)
            return Target(name, "127.0.0.1", port, proc.pid), proc, log

        def given(url: str, name: str) -> Target:
            parts = urlsplit(url if "://" in url else "http://" + url)
            return Target(name, parts.hostname or "127.0.0.1", parts.port or 80, args.server_pid)

        fastapi_t = plain_t = None
        if set(cases) - {"tiny_plain"}:
            if args.server:
                fastapi_t = given(args.server, "ceiling")
            else:
                fastapi_t, proc, log = start("ceiling", [])
                await wait_ready(fastapi_t, "/ceiling/tiny", proc, log)
        if "tiny_plain" in cases:
            if args.plain_server:
                plain_t = given(args.plain_server, "ceiling-plain")
            else:
                plain_t, proc, log = start("ceiling-plain", ["--plain"])
                await wait_ready(plain_t, "/", proc, log)

        progress = _progress_enabled(args)
        out: dict[str, Any] = {}
        echo = None
        if "echo" in cases:
            from app.bench.workloads import produce_body  # noqa: PLC0415

            echo = produce_body(args.batch, args.record_size)

        async def load(name: str, target: Target, req: Req, records: int) -> dict[str, Any]:
            per_req = max(records, 1)
            budget = Budget(-(-args.records // per_req) if records else args.records)
            conns = await open_conns(target, args.connections)
            res = LoadResult()

            async def on_resp(_i: int, _req: Req, resp: Any) -> tuple[int, int]:
                n = records
                if name == "get":
                    n = resp[2].count(b'"offset":')
                return n, len(req.body) if req.body else len(resp[2])

            try:
                with ProgressLine(f"ceiling {name}", lambda: (res.sent_records, res.sent_bytes),
                                  enabled=progress):
                    await closed_loop(target, conns, lambda _i: req, on_resp,
                                      warmup=args.warmup, duration=args.duration,
                                      max_requests=1 << 62, budget=budget, res=res)
            finally:
                await close_all(conns)
            return _load_result(res, target)

        for case in cases:
            if case == "echo":
                assert fastapi_t is not None and echo is not None
                out["echo"] = await load("echo", fastapi_t, Req(
                    "POST", "/topics/bench", echo, {"Content-Type": BINARY, "Accept": V2}),
                    args.batch)
            elif case == "get":
                assert fastapi_t is not None
                out["get"] = await load("get", fastapi_t, Req(
                    "GET", "/topics/bench/partitions/0/records", b"", {"Accept": BINARY}),
                    args.batch)
            elif case == "tiny":
                assert fastapi_t is not None
                out["tiny"] = await load("tiny", fastapi_t,
                                         Req("GET", "/ceiling/tiny", b"", {"Accept": V2}), 0)
            elif case == "tiny_plain":
                assert plain_t is not None
                out["tiny_plain"] = await load("tiny_plain", plain_t,
                                               Req("GET", "/", b"", {"Accept": V2}), 0)
            elif case == "latency":
                assert fastapi_t is not None
                prod = await RawConn(fastapi_t.host, fastapi_t.port).connect()
                cons = await RawConn(fastapi_t.host, fastapi_t.port).connect()
                try:
                    lat = await e2e_latency(
                        prod, cons, "/ceiling/poll",
                        Req("GET", "/ceiling/poll?timeout=1000", b"", {"Accept": BINARY}),
                        samples=min(args.samples, args.records), gap_s=args.gap_ms / 1000,
                        max_seconds=args.duration)
                finally:
                    await prod.close()
                    await cons.close()
                lat["latency_ms"] = {"samples": lat["samples"], "p50": lat["p50_ms"],
                                     "p90": lat["p90_ms"], "p99": lat["p99_ms"],
                                     "p999": lat["p999_ms"], "max": lat["max_ms"],
                                     "mean": lat["mean_ms"]}
                out["latency"] = lat
        return out
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _ceiling(args: argparse.Namespace, _client: FranzClient) -> tuple[dict[str, Any], str]:
    from app.bench.workloads import run_loop  # noqa: PLC0415

    cases, loop = run_loop(ceiling_run(args))
    return {"workload": "ceiling",
            "params": _params(args, "records", "record_size", "batch", "connections",
                              "duration", "warmup", "samples", "server_cpu"),
            "cases": cases}, loop


# --- output --------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _print_result(result: dict[str, Any]) -> None:
    from app.commands.output import print_table  # noqa: PLC0415

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
