"""Exactly-once writes of the franz sink (``Idempotency-Key`` per request, writer.py).

- key derivation and bodies: stable across attempts, distinct across partitions, chunks,
  micro-batches and writes; byte-identical bodies for the same rows (against the real
  server: a second producer with the same keys writes nothing);
- the retry policy of one request: connection errors resent (next URL), bounded;
- a batch write whose task fails after its first requests were written, retried by Spark
  (``local[2,4]``, in a subprocess: the session fixture's ``local[2]`` allows no task
  retry): every row once; the same with ``exactlyOnce=false`` duplicates rows;
- a streaming query (franz source -> franz sink) SIGKILLed mid-way and restarted from its
  checkpoint: every row once.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from spark_connector.client import BINARY, dumps
from spark_connector.options import FranzOptionError, writer_conf
from spark_connector.writer import (
    FranzProduceError,
    KeyScope,
    Producer,
    new_write_id,
    task_key_scope,
    topic_in_key,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]


# --- helpers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_values(franz: Any, topic: str) -> list[str]:
    """Every value of ``topic`` (all partitions), read over franz's range read."""
    parts = franz.http.get(f"/topics/{topic}/partitions")
    assert parts.status_code == 200, parts.text
    out: list[str] = []
    for p in sorted(int(x["partition"]) for x in parts.json()):
        lo, hi = franz.offsets(topic, p)
        cur = lo
        while cur < hi:
            r = franz.http.get(
                f"/topics/{topic}/partitions/{p}/records",
                params={"offset": cur, "count": hi - cur, "max_bytes": 4 << 20, "timeout": 0},
                headers={"Accept": BINARY},
            )
            assert r.status_code == 200, r.text
            records = [x for x in r.json() if x["offset"] < hi]
            out += [base64.b64decode(x["value"]).decode() for x in records]
            nxt = int(r.headers.get("x-franz-next-offset", cur))
            if records:
                nxt = max(nxt, records[-1]["offset"] + 1)
            assert nxt > cur, f"no progress reading {topic}-{p} at {cur}"
            cur = nxt
    return out


def total_records(franz: Any, topic: str) -> int:
    parts = franz.http.get(f"/topics/{topic}/partitions")
    if parts.status_code != 200:
        return 0
    return sum(
        hi - lo for lo, hi in (franz.offsets(topic, int(x["partition"])) for x in parts.json())
    )


class Recording(Producer):
    """The real producer, noting what it sends (key, body) on the way."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.sent: list[tuple[str, str, bytes]] = []

    def produce_exactly_once(
        self, topic: str, body: bytes, key: str, count: int
    ) -> list[dict[str, Any]]:
        self.sent.append((topic, key, body))
        return super().produce_exactly_once(topic, body, key, count)


COLUMNS = ["key", "value", "topic", "partition", "headers"]


def rows(n: int, topic: str | None = None) -> list[tuple[Any, ...]]:
    return [
        (
            f"k{i}" if i % 3 else None,
            f"value-{i}-é".encode(),
            topic,
            i % 2 if i % 5 else None,
            [("h", str(i).encode()), ("nul", None)] if i % 4 == 0 else None,
        )
        for i in range(n)
    ]


def produce(conf: Any, scope: KeyScope | None, data: list[Any]) -> Recording:
    p = Recording(conf, COLUMNS, scope)
    try:
        p.add_rows(data)
    finally:
        p.close()
    return p


# --- options -------------------------------------------------------------------------

URL = {"url": "http://127.0.0.1:1"}


def test_exactly_once_options() -> None:
    conf = writer_conf({**URL, "topic": "t"})
    assert conf.exactly_once and conf.idempotency_key_prefix is None
    assert (conf.max_retries, conf.retry_backoff_ms, conf.max_retry_backoff_ms) == (20, 200, 10_000)
    assert conf.retry_timeout_ms == 180_000
    assert not writer_conf({**URL, "topic": "t", "acks": "0"}).exactly_once  # automatic
    assert not writer_conf({**URL, "topic": "t", "exactlyonce": "false"}).exactly_once
    conf = writer_conf(
        {
            **URL,
            "topic": "t",
            "idempotencyKeyPrefix": " nightly-2026-11-27 ",
            "write.maxRetries": "3",
            "write.retryBackoffMs": "5",
            "write.maxRetryBackoffMs": "50",
            "write.retryTimeoutMs": "1000",
        }
    )
    assert conf.idempotency_key_prefix == "nightly-2026-11-27"
    assert (conf.max_retries, conf.retry_backoff_ms, conf.max_retry_backoff_ms) == (3, 5, 50)
    assert conf.retry_timeout_ms == 1000


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"acks": "0", "exactlyOnce": "true"}, "exactlyOnce=true needs acks=1 or acks=all"),
        ({"exactlyOnce": "maybe"}, "exactlyOnce='maybe' is not a boolean"),
        ({"idempotencyKeyPrefix": " "}, "idempotencyKeyPrefix is empty"),
        ({"idempotencyKeyPrefix": "x" * 101}, "101 characters long, at most 100"),
        ({"idempotencyKeyPrefix": "naïve"}, "must be printable ASCII"),
        (
            {"idempotencyKeyPrefix": "p", "exactlyOnce": "false"},
            "idempotencyKeyPrefix needs exactly-once writes",
        ),
        ({"write.maxRetries": "-1"}, "write.maxRetries='-1' must be >= 0"),
        (
            {"write.retryBackoffMs": "500", "write.maxRetryBackoffMs": "100"},
            "write.maxRetryBackoffMs=100 is smaller than write.retryBackoffMs=500",
        ),
        ({"idempotencyKeyPrefx": "p"}, "did you mean 'idempotencyKeyPrefix'"),
    ],
)
def test_bad_exactly_once_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(FranzOptionError, match=message):
        writer_conf({**URL, "topic": "t", **options})


# --- key derivation ------------------------------------------------------------------


def test_key_derivation() -> None:
    scope = KeyScope("spark:q1", "7", 2)
    assert scope.key("orders", 3) == "spark:q1:7:2:orders:3"
    keys = {
        scope.key("orders", 0),
        scope.key("orders", 1),  # another chunk
        scope.key("orders-b", 0),  # another topic
        KeyScope("spark:q1", "7", 3).key("orders", 0),  # another Spark partition
        KeyScope("spark:q1", "8", 2).key("orders", 0),  # another micro-batch
        KeyScope("spark:q2", "7", 2).key("orders", 0),  # another query / write
    }
    assert len(keys) == 6
    # topics that are long or have other characters are hashed; keys stay <= 255
    long = "t" * 249
    for topic in (long, "a:b", "ünï", "a b"):
        k = KeyScope("x" * 100, str(2**63 - 1), 2**31 - 1).key(topic, 2**31)
        assert len(k) <= 255 and k.isascii() and k.isprintable()
        assert topic_in_key(topic).startswith("sha256-")
    assert topic_in_key(long) != topic_in_key(long[:-1])
    assert topic_in_key("my.topic_1-x") == "my.topic_1-x"


def test_key_scope_from_the_task_context() -> None:
    """``task_key_scope`` reads Spark's own TaskContext: two attempts of one partition
    (another attempt number and task attempt id) give the same scope; partitions and
    micro-batches differ."""
    from pyspark import TaskContext

    conf = writer_conf({**URL, "topic": "t"})

    def scope(
        partition: int, attempt: int, batch: str | None, streaming: bool, c: Any = conf
    ) -> Any:
        ctx = TaskContext._getOrCreate()
        ctx._partitionId = partition
        ctx._attemptNumber = attempt
        ctx._taskAttemptId = 1000 + attempt
        ctx._stageId = 3
        ctx._localProperties = {"sql.streaming.queryId": "qid-1"}
        if batch is not None:
            ctx._localProperties["streaming.sql.batchId"] = batch
        try:
            return task_key_scope(c, streaming=streaming, write_id=new_write_id(c))

        finally:
            TaskContext._setTaskContext(None)  # type: ignore[arg-type]

    assert scope(1, 0, "4", True) == scope(1, 1, "4", True) == KeyScope("spark:qid-1", "4", 1)
    assert scope(1, 0, "4", True) != scope(2, 0, "4", True)
    assert scope(1, 0, "4", True) != scope(1, 0, "5", True)
    # a batch write: the writer's id (one per write, made on the driver), no micro-batch
    write_id = new_write_id(conf)
    assert write_id.startswith("spark:") and write_id != new_write_id(conf)
    ctx = TaskContext._getOrCreate()
    ctx._partitionId, ctx._attemptNumber, ctx._localProperties = 1, 0, {}
    try:
        first = task_key_scope(conf, streaming=False, write_id=write_id)
        ctx._attemptNumber = 1
        assert task_key_scope(conf, streaming=False, write_id=write_id) == first
    finally:
        TaskContext._setTaskContext(None)  # type: ignore[arg-type]
    assert first == KeyScope(write_id, "-", 1)
    # idempotencyKeyPrefix replaces the write id and the query id
    prefixed = writer_conf({**URL, "topic": "t", "idempotencyKeyPrefix": "job-9"})
    assert scope(1, 0, None, False, prefixed) == KeyScope("job-9", "-", 1)
    assert scope(1, 0, "4", True, prefixed) == KeyScope("job-9", "4", 1)
    # a stream task without the properties: random keys (at least once), never a shared key
    assert scope(1, 0, None, True).prefix != scope(1, 0, None, True).prefix
    assert task_key_scope(writer_conf({**URL, "topic": "t", "acks": "0"}), streaming=True) is None


def test_dumps_is_deterministic() -> None:
    doc = {"records": [{"value": "eA==", "key": 'é\u2028\x01"\\', "headers": [{"key": "k"}]}]}
    assert dumps(doc) == dumps(json.loads(dumps(doc)))
    assert dumps(doc) == json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


# --- against the real server ---------------------------------------------------------


def test_same_rows_same_keys_same_bodies_written_once(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=2)
    conf = writer_conf({"url": franz.url, "topic": topic, "batchSize": 4})
    data = rows(30)
    scope = KeyScope(f"test:{topic}", "-", 0)
    first = produce(conf, scope, data)
    assert total_records(franz, topic) == 30
    assert len(first.sent) == 8 and first.records == 30
    assert [k for _, k, _ in first.sent] == [f"test:{topic}:-:0:{topic}:{i}" for i in range(8)]

    again = produce(conf, scope, data)  # a retried attempt: the same keys and bytes
    assert again.sent == first.sent
    assert again.records == 30 and again.resends == 0
    assert total_records(franz, topic) == 30  # nothing written twice
    assert collections.Counter(read_values(franz, topic)) == collections.Counter(
        f"value-{i}-é" for i in range(30)
    )

    # another Spark partition (or micro-batch) with the same rows: other keys, written
    produce(conf, KeyScope(f"test:{topic}", "-", 1), data[:4])
    assert total_records(franz, topic) == 34

    # other rows under a used key: 422, nothing written, a clear message
    changed = [(*r[:1], b"other", *r[2:]) for r in data[:4]]
    with pytest.raises(
        FranzProduceError, match="422.*first used for another request: this task built other rows"
    ):
        produce(conf, scope, changed)
    assert total_records(franz, topic) == 34

    # at least once (exactlyOnce=false): no key, written again
    loose = writer_conf({"url": franz.url, "topic": topic, "exactlyOnce": "false"})
    p = produce(loose, None, data[:4])
    assert p.sent == [] and p.records == 4
    assert total_records(franz, topic) == 38


def test_racing_twins_write_once(franz: Any, topic: str) -> None:
    """A speculative twin: two producers send the same keys and bodies at the same time;
    both get the same answers (a request that finds its key in progress is answered 409
    and resent until the first answer is there) and every row is written once."""
    franz.create_topic(topic, partitions=3)
    conf = writer_conf(
        {"url": franz.url, "topic": topic, "batchSize": 50, "write.retryBackoffMs": 5}
    )
    # big requests (50 x 8 KB), so that the twin's often arrives while the first runs
    data = [(None, (f"value-{i}-é" + "x" * 8192).encode(), None, None, None) for i in range(400)]
    scope = KeyScope(f"twin:{topic}", "0", 0)
    results: list[Any] = []
    errors: list[BaseException] = []
    together = threading.Barrier(2)

    def run() -> None:
        p = Recording(conf, COLUMNS, scope)
        try:
            together.wait(10)
            p.add_rows(data)
            p.close()
            results.append(p)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert [r.records for r in results] == [400, 400]
    assert results[0].sent == results[1].sent
    print(f"racing twins: {sum(r.resends for r in results)} resends")
    got = [v.rstrip("x") for v in read_values(franz, topic)]
    assert sorted(got) == sorted(f"value-{i}-é" for i in range(400))


def test_connection_errors_are_resent_and_bounded(franz: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=2)
    dead = f"http://127.0.0.1:{free_port()}"
    # the first URL refuses: the request is resent (same key) to the next one
    conf = writer_conf(
        {"url": f"{dead},{franz.url}", "topic": topic, "batchSize": 10, "write.retryBackoffMs": 1}
    )
    p = produce(conf, KeyScope(f"conn:{topic}", "-", 0), rows(10))
    assert p.resends == 1 and p.records == 10
    assert total_records(franz, topic) == 10

    # nobody answers: bounded by write.maxRetries, a message naming key and attempts
    conf = writer_conf(
        {
            "url": dead,
            "topic": topic,
            "write.maxRetries": "2",
            "write.retryBackoffMs": "1",
            "write.maxRetryBackoffMs": "2",
        }
    )
    started = time.monotonic()
    with pytest.raises(FranzProduceError, match=r"no definite answer after 3 attempt\(s\)"):
        produce(conf, KeyScope(f"conn:{topic}", "-", 1), rows(3))
    # ... and by write.retryTimeoutMs
    conf = writer_conf(
        {
            "url": dead,
            "topic": topic,
            "write.retryBackoffMs": "100",
            "write.retryTimeoutMs": "300",
        }
    )
    with pytest.raises(FranzProduceError, match="write.retryTimeoutMs=300"):
        produce(conf, KeyScope(f"conn:{topic}", "-", 2), rows(3))
    assert time.monotonic() - started < 10
    assert total_records(franz, topic) == 10


def test_task_keys_in_spark(spark: Any, franz: Any) -> None:
    """In real Spark tasks: one scope per partition, the writer's id in every key."""
    conf = writer_conf({"url": franz.url, "topic": "t"})

    def keys(it: Any) -> Any:
        scope = task_key_scope(conf, streaming=False, write_id="spark:w")
        yield scope.key("t", 0)

    got = spark.sparkContext.parallelize(range(8), 4).mapPartitions(keys).collect()
    assert sorted(got) == [f"spark:w:-:{p}:t:0" for p in range(4)]


# --- Spark in a subprocess: task retries, SIGKILL --------------------------------------

#: Run by ``python <script> <json config>`` with this checkout on PYTHONPATH.
SCRIPT = r'''
import json
import sys
import time
import urllib.request

from pyspark import TaskContext
from pyspark.sql import SparkSession

from spark_connector.datasource import FranzBatchWriter, FranzDataSource

cfg = json.loads(sys.argv[1])
URL = cfg["url"]
spark = (
    SparkSession.builder.master(cfg["master"])
    .appName("franz-exactly-once")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.sql.streaming.stopTimeout", "10s")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")


def records_in(topic, partition):
    with urllib.request.urlopen(
        f"{URL}/topics/{topic}/partitions/{partition}/offsets", timeout=10
    ) as r:
        o = json.load(r)
    return o["end_offset"] - o["beginning_offset"]


class FailingOnceWriter(FranzBatchWriter):
    """The franz batch writer, except that the first attempt of Spark partition 0 fails
    after handing ``fail_at`` rows to the producer (whose requests for them are then
    answered: a request goes out, synchronously, every batchSize rows)."""

    fail_at = 0
    marker = ""

    def write(self, iterator):
        ctx = TaskContext.get()
        first = ctx.attemptNumber() == 0 and ctx.partitionId() == 0
        topic, fail_at, marker = self.conf.topic, self.fail_at, self.marker

        def rows():
            for i, row in enumerate(iterator):
                if first and i == fail_at:
                    with open(marker, "w") as f:  # what the failing attempt wrote
                        f.write(str(records_in(topic, 0)))
                    raise RuntimeError("injected failure of the first attempt")
                yield row

        return super().write(rows())


class FailingOnce(FranzDataSource):
    """``format("franz_failing_once")``: franz with ``FailingOnceWriter``."""

    @classmethod
    def name(cls):
        return "franz_failing_once"

    def writer(self, schema, overwrite):
        plain = super().writer(schema, overwrite)
        writer = FailingOnceWriter.__new__(FailingOnceWriter)
        writer.__dict__.update(plain.__dict__)
        writer.fail_at = cfg["fail_at"]
        writer.marker = cfg["markers"][plain.conf.topic]
        return writer


if cfg["mode"] == "retry":
    spark.dataSource.register(FailingOnce)
    for run in cfg["runs"]:
        # Spark partition 0 (ids below n / slices) -> franz partition 0, the rest -> 1
        df = spark.range(0, cfg["n"], 1, cfg["slices"]).selectExpr(
            "concat('v', id) AS value",
            f"CAST(id >= {cfg['n'] // cfg['slices']} AS INT) AS partition",
        )
        (
            df.write.format("franz_failing_once")
            .option("url", URL)
            .option("topic", run["topic"])
            .option("batchSize", cfg["batch_size"])
            .option("exactlyOnce", run["exactly_once"])
            .mode("append")
            .save()
        )
elif cfg["mode"] == "stream":
    q = (
        spark.readStream.format("franz")
        .option("url", URL)
        .option("subscribe", cfg["source"])
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", cfg["max_offsets_per_trigger"])
        .load()
        .selectExpr("value")
        .writeStream.format("franz")
        .option("url", URL)
        .option("topic", cfg["sink"])
        .option("batchSize", cfg["batch_size"])
        .option("exactlyOnce", cfg.get("exactly_once", "true"))
        .option("checkpointLocation", cfg["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    print("query", q.id, flush=True)
    if not q.awaitTermination(cfg["timeout"]):
        q.stop()
        sys.exit(3)
    if q.exception() is not None:
        raise q.exception()
print("done", flush=True)
spark.stop()
'''


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    return env


def start_script(tmp_path: Path, cfg: dict[str, Any], name: str) -> tuple[Any, Path]:
    script = tmp_path / "eo_job.py"
    script.write_text(SCRIPT)
    log_path = tmp_path / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(script), json.dumps(cfg)],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=spark_env(),
            start_new_session=True,  # its own process group: the JVM goes with it
        )
    return proc, log_path


def tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def kill_group(proc: Any) -> None:
    """SIGKILL the job's process group (driver, JVM; Spark's Python daemon follows when
    the JVM's pipe closes) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(30)


def wait_ok(proc: Any, log_path: Path, timeout: float) -> None:
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(
            f"the Spark job did not finish in {timeout}s:\n{tail(log_path)}"
        ) from None
    assert code == 0, f"the Spark job failed ({code}):\n{tail(log_path)}"


def test_retried_task_writes_each_row_once(franz: Any, topic: str, tmp_path: Path) -> None:
    """A batch write whose first attempt of partition 0 fails after its first requests
    were written: Spark retries it (local[2,4]); with exactly-once writes the topic holds
    every row once. The same job with exactlyOnce=false writes the first attempt's rows
    twice (so the failure really came after writes)."""
    n, slices = 300, 3
    eo, loose = topic + "-eo", topic + "-loose"
    for t in (eo, loose):
        franz.create_topic(t, partitions=2)
    cfg = {
        "mode": "retry",
        "url": franz.url,
        "master": "local[2,4]",  # 4 attempts per task
        "n": n,
        "slices": slices,
        "fail_at": 60,  # of the 100 rows of Spark partition 0: 12 requests answered
        "batch_size": 5,
        "runs": [
            {"topic": eo, "exactly_once": "true"},
            {"topic": loose, "exactly_once": "false"},
        ],
        "markers": {eo: str(tmp_path / "eo.marker"), loose: str(tmp_path / "loose.marker")},
    }
    started = time.monotonic()
    proc, log_path = start_script(tmp_path, cfg, "retry")
    try:
        wait_ok(proc, log_path, 240)
    finally:
        kill_group(proc)
    took = time.monotonic() - started

    # the failed first attempt of Spark partition 0 had 12 requests (60 rows) answered
    assert int((tmp_path / "eo.marker").read_text()) == 60
    assert int((tmp_path / "loose.marker").read_text()) == 60
    expected = collections.Counter(f"v{i}" for i in range(n))
    got = read_values(franz, eo)
    assert collections.Counter(got) == expected, (len(got), took)
    assert franz.offsets(eo, 0) == (0, 100)  # the retry's first 12 requests wrote nothing

    # at least once: the retry wrote those 60 rows again
    loose_got = collections.Counter(read_values(franz, loose))
    assert loose_got == expected + collections.Counter(f"v{i}" for i in range(60))
    print(
        f"retried task: exactly once {len(got)} records for {n} rows; at least once "
        f"{sum(loose_got.values())}; {took:.1f}s"
    )


def test_killed_stream_restarts_and_writes_each_row_once(
    franz: Any, topic: str, tmp_path: Path
) -> None:
    """franz source -> franz sink, SIGKILLed once the sink holds some but not all rows,
    restarted from its checkpoint (AvailableNow) until caught up: each value once."""
    n, per_batch = 600, 60
    src, dst = topic + "-src", topic + "-dst"
    franz.create_topic(src, partitions=3)
    franz.create_topic(dst, partitions=2)
    for p in range(3):
        franz.produce_values(src, p, [f"value-{p}-{i}" for i in range(n // 3)])
    checkpoint = tmp_path / "ckpt"
    cfg = {
        "mode": "stream",
        "url": franz.url,
        "master": "local[2]",
        "source": src,
        "sink": dst,
        "max_offsets_per_trigger": per_batch,  # 10 micro-batches
        "batch_size": 4,  # ~5 requests per task
        "checkpoint": str(checkpoint),
        "timeout": 150,
    }
    started = time.monotonic()
    proc, log1 = start_script(tmp_path, cfg, "run1")
    killed_at = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            written = total_records(franz, dst)
            # in the middle of a micro-batch's writes (each batch is 60 rows: 20 of
            # each source partition), so that batch is not committed yet
            if written >= n // 4 and written % per_batch:
                killed_at = written
                kill_group(proc)
                break
            time.sleep(0.02)
    finally:
        kill_group(proc)
    assert killed_at is not None, (
        f"the sink was never seen in the middle of a micro-batch past {n // 4} rows:\n{tail(log1)}"
    )
    assert killed_at < n, "the query finished before it could be killed"
    offsets_logged = {int(f.name) for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()}
    commits = {int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()}
    uncommitted = sorted(offsets_logged - commits)
    assert uncommitted, "no micro-batch was cut by the kill"  # the restart re-runs it

    proc2, log2 = start_script(tmp_path, cfg, "run2")
    try:
        wait_ok(proc2, log2, 150)
    finally:
        kill_group(proc2)
    took = time.monotonic() - started

    ids = [
        line.split()[1]
        for line in (log1.read_text() + log2.read_text()).splitlines()
        if line.startswith("query ")
    ]
    assert len(ids) == 2 and ids[0] == ids[1]  # the restart is the same query
    got = read_values(franz, dst)
    expected = collections.Counter(f"value-{p}-{i}" for p in range(3) for i in range(n // 3))
    dupes = {v: c for v, c in collections.Counter(got).items() if c > 1}
    assert not dupes, f"{len(dupes)} values written more than once, e.g. {list(dupes)[:5]}"
    assert collections.Counter(got) == expected
    print(
        f"killed with {killed_at}/{n} rows in the sink, uncommitted micro-batches "
        f"{uncommitted}; after the restart {len(got)} rows, each once; {took:.1f}s"
    )
