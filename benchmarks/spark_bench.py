"""Spark connector throughput: a batch read of N records through PySpark beside the raw
range-read throughput over HTTP, measured in the same run against the same topic.

    python benchmarks/spark_bench.py [--records 1000000] [--partitions 4] [--rounds 3]

It starts (loopback only) a franz broker from this tree, preloads a topic (``--records``
records of ``--value-size`` bytes over ``--partitions`` partitions, binary produce in
requests of ``--produce-batch`` records), then per round:

raw_http_1    one client reading every partition in turn with the range read
              (``GET .../records?offset=&count=&max_bytes=``, the connector's request
              size) over a keep-alive ``http.client`` connection, JSON parsed (orjson) and
              values base64-decoded: the work an executor does, minus Spark and Arrow
raw_http_P    the same split over P processes (P = Spark's cores, ``--cores``), each
              reading its share of partitions: the HTTP ceiling the Spark job can reach
spark         ``spark.read.format("franz")`` (Arrow batches) of the whole topic, then
              ``sum(length(value))`` so every value reaches the JVM; ``local[P]``,
              ``minPartitions=P`` when there are fewer partitions than cores
spark_tuples  the same with ``arrow=false`` (per-row tuples), only with ``--tuples``

Reported: the median over rounds of records/s and MB/s (value bytes), and spark / raw
ratios. The first Spark job of a session (worker start) is run before timing. Bounded:
``--records`` at most 5 000 000; every read has a timeout; ``--json`` saves the numbers.
``--url`` uses a running franz instead (the topic is still created and filled).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import http.client
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
BINARY = "application/vnd.kafka.binary.v2+json"
MAX_RECORDS = 5_000_000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_franz(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = (data_dir.parent / "franz.log").open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"franz exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/", timeout=1).status_code == 200:
                return proc, url
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("franz did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def preload(
    url: str, topic: str, records: int, partitions: int, value_size: int, batch: int
) -> float:
    with httpx.Client(base_url=url, timeout=60) as http:
        cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        r = http.post(
            f"/v3/clusters/{cluster}/topics",
            json={"topic_name": topic, "partitions_count": partitions},
        )
        r.raise_for_status()
        t0 = time.perf_counter()
        per = records // partitions
        for p in range(partitions):
            n = per + (1 if p < records % partitions else 0)
            done = 0
            while done < n:
                k = min(batch, n - done)
                rows = [
                    {
                        "value": base64.b64encode(
                            f"{p}:{done + i}:".encode().ljust(value_size, b"x")
                        ).decode()
                    }
                    for i in range(k)
                ]
                resp = http.post(
                    f"/topics/{topic}/partitions/{p}",
                    content=orjson.dumps({"records": rows}),
                    headers={"Content-Type": BINARY},
                )
                resp.raise_for_status()
                done += k
        return time.perf_counter() - t0


def _read_partitions(args: tuple[str, str, list[int], int, int]) -> tuple[int, int]:
    """Range-read whole partitions as an executor does (keep-alive ``http.client``, JSON
    parsed, values base64-decoded), with nothing else: (records, value bytes)."""
    url, topic, parts, count, max_bytes = args
    a2b = binascii.a2b_base64
    n = size = 0
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=60)
    try:
        for p in parts:
            conn.request("GET", f"/topics/{topic}/partitions/{p}/offsets")
            hi = orjson.loads(conn.getresponse().read())["end_offset"]
            off = 0
            while off < hi:
                conn.request(
                    "GET",
                    f"/topics/{topic}/partitions/{p}/records?offset={off}"
                    f"&count={min(count, hi - off)}&max_bytes={max_bytes}",
                    headers={"Accept": BINARY},
                )
                r = conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise SystemExit(f"range read answered {r.status}: {body[:200]!r}")
                recs = orjson.loads(body)
                for rec in recs:
                    v = rec["value"]
                    if v is not None:
                        size += len(a2b(v))
                n += len(recs)
                off = int(r.headers["x-franz-next-offset"])
    finally:
        conn.close()
    return n, size


def raw_read(
    url: str, topic: str, partitions: int, procs: int, count: int, max_bytes: int
) -> tuple[float, int, int]:
    shares = [[p for p in range(partitions) if p % procs == i] for i in range(procs)]
    jobs = [(url, topic, s, count, max_bytes) for s in shares if s]
    t0 = time.perf_counter()
    if len(jobs) == 1:
        results = [_read_partitions(jobs[0])]
    else:
        with mp.get_context("fork").Pool(len(jobs)) as pool:
            results = pool.map(_read_partitions, jobs)
    dt = time.perf_counter() - t0
    return dt, sum(r[0] for r in results), sum(r[1] for r in results)


def spark_session(cores: int) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    sys.path.insert(0, str(ROOT))
    from spark_connector import FranzDataSource

    spark.dataSource.register(FranzDataSource)
    return spark


def spark_read(
    spark: Any, url: str, topic: str, partitions: int, cores: int, arrow: bool
) -> tuple[float, int, int]:
    r = (
        spark.read.format("franz")
        .option("url", url)
        .option("subscribe", topic)
        .option("arrow", str(arrow).lower())
    )
    if partitions < cores:
        r = r.option("minPartitions", cores)
    t0 = time.perf_counter()
    row = r.load().selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
    return time.perf_counter() - t0, int(row.n), int(row.b or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--produce-batch", type=int, default=5000)
    ap.add_argument("--cores", type=int, default=2, help="Spark local[N] and raw processes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=10_000, help="records per range read")
    ap.add_argument("--max-bytes", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--tuples", action="store_true", help="also time arrow=false")
    ap.add_argument("--url", help="use a running franz instead of starting one")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args()
    if not 1 <= a.records <= MAX_RECORDS:
        raise SystemExit(f"--records must be in 1..{MAX_RECORDS}")

    tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    proc = None
    try:
        if a.url:
            url = a.url
        else:
            proc, url = start_franz(tmp / "data")
        topic = f"spark-bench-{uuid.uuid4().hex[:8]}"
        load_s = preload(url, topic, a.records, a.partitions, a.value_size, a.produce_batch)
        print(
            f"preloaded {a.records} x {a.value_size} B over {a.partitions} partitions in "
            f"{load_s:.1f} s ({a.records / load_s:,.0f} rec/s produce)",
            flush=True,
        )

        t0 = time.perf_counter()
        spark = spark_session(a.cores)
        print(f"SparkSession local[{a.cores}] in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        spark.read.format("franz").option("url", url).option("subscribe", topic).option(
            "endingOffsets", json.dumps({topic: {str(p): 10 for p in range(a.partitions)}})
        ).load().count()
        print(f"first (warm-up) Spark job in {time.perf_counter() - t0:.1f} s", flush=True)

        cases: dict[str, list[tuple[float, int, int]]] = {}
        for rnd in range(a.rounds):
            runs = {
                "raw_http_1": lambda: raw_read(url, topic, a.partitions, 1, a.count, a.max_bytes),
                f"raw_http_{a.cores}": lambda: raw_read(
                    url, topic, a.partitions, a.cores, a.count, a.max_bytes
                ),
                "spark": lambda: spark_read(spark, url, topic, a.partitions, a.cores, True),
            }
            if a.tuples:
                runs["spark_tuples"] = lambda: spark_read(
                    spark, url, topic, a.partitions, a.cores, False
                )
            for name, fn in runs.items():
                dt, n, size = fn()
                if n != a.records:
                    raise SystemExit(f"{name} read {n} records, expected {a.records}")
                cases.setdefault(name, []).append((dt, n, size))
                print(
                    f"round {rnd + 1} {name:<14} {n / dt:>12,.0f} rec/s  "
                    f"{size / dt / 1e6:>7.1f} MB/s  ({dt:.2f} s)",
                    flush=True,
                )
        spark.stop()

        summary = {}
        for name, runs_ in cases.items():
            rates = [n / dt for dt, n, _ in runs_]
            mbs = [size / dt / 1e6 for dt, _, size in runs_]
            summary[name] = {
                "records_per_s": statistics.median(rates),
                "value_mb_per_s": statistics.median(mbs),
                "seconds": statistics.median(dt for dt, _, _ in runs_),
            }
        raw_p = summary[f"raw_http_{a.cores}"]["records_per_s"]
        raw_1 = summary["raw_http_1"]["records_per_s"]
        print(
            f"\n{a.records:,} records x {a.value_size} B, {a.partitions} partitions, "
            f"local[{a.cores}], median of {a.rounds}"
        )
        print(
            f"{'case':<14} {'records/s':>12} {'MB/s':>7} {'s':>7} {'vs raw_1':>9} "
            f"{'vs raw_' + str(a.cores):>9}"
        )
        for name, s in summary.items():
            print(
                f"{name:<14} {s['records_per_s']:>12,.0f} {s['value_mb_per_s']:>7.1f} "
                f"{s['seconds']:>7.2f} {s['records_per_s'] / raw_1:>9.2f} "
                f"{s['records_per_s'] / raw_p:>9.2f}"
            )
        if a.json:
            a.json.write_text(
                json.dumps(
                    {"args": {k: str(v) for k, v in vars(a).items()}, "summary": summary}, indent=2
                )
            )
    finally:
        if proc is not None:
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
