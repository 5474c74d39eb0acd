"""Three-broker cluster benchmark: replicated produce throughput and leader failover time.

    python benchmarks/cluster_bench.py [--rounds 3] [--duration 4] [--trials 3] [--json out.json]
    python benchmarks/cluster_bench.py --quick        # a smoke run, about a minute

Starts, on loopback only and in a temporary directory, a ZooKeeper (Debian's
``zookeeper`` package, as the cluster tests do) and three ``franz broker`` processes,
then measures in the same run:

produce   POST /topics/{t}/partitions/0, 1000 x 100-byte records per request (binary
          format), ``--connections`` keep-alive connections to the partition's leader,
          closed loop for ``--duration`` s after ``--warmup`` s; topic ``rf1``
          (replication factor 1, acks=1) and topic ``rf3`` (replication factor 3,
          min.insync.replicas=2, acks=all) alternate within each round (interleaved, so
          both see the same machine noise). Reported: medians over ``--rounds`` and the
          median of the per-round rf3/rf1 ratios (target >= 0.5).
failover  a client produces 10-record acks=all requests to one partition (RF=3) through
          a broker that does not lead it; its leader (never the controller) is killed
          with SIGKILL; the time from the SIGKILL to the first acknowledged write on the
          new leader, per trial (``--trials``) and the median, with its parts as seen in
          ZooKeeper (registration gone = session expired, new leader in the state znode).
          The killed broker is restarted and rejoins the ISR between trials.
          ``--fault stop``: SIGSTOP instead (a hung leader whose connections stay open,
          like a paused or partitioned machine), SIGCONT after the trial.

Every loop is bounded by time and request count. The load generator is the raw
HTTP/1.1 client of ``benchmarks/http_bench.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_bench import (  # noqa: E402  (beside this file, not a package)
    V2,
    RawConn,
    Req,
    Target,
    closed_loop,
    free_port,
    machine_notes,
    produce_body,
    produce_req,
    spawn,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
JARS = Path("/usr/share/java")
ZK_CLASSPATH = f"/etc/zookeeper/conf:{JARS}/*"
ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
JSON = "application/json"


# --- processes ---------------------------------------------------------------------------


class Cluster:
    """ZooKeeper + three brokers in ``tmp``; ``close()`` stops them all."""

    def __init__(self, tmp: Path, session_ms: int, lag_ms: int) -> None:
        self.tmp = tmp
        self.session_ms = session_ms
        self.overrides = [f"zookeeper.session.timeout.ms={session_ms}",
                          f"replica.lag.time.max.ms={lag_ms}", "replica.fetch.backoff.ms=200",
                          "offsets.topic.num.partitions=1", "log.flush.scheduler.interval.ms=1000"]
        self.zk_proc: subprocess.Popen[bytes] | None = None
        self.zk_hosts = ""
        self.ports = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None, None, None]
        self.kazoo: Any = None

    def start_zookeeper(self) -> None:
        java = shutil.which("java")
        if java is None or not any(JARS.glob("zookeeper*.jar")):
            raise SystemExit("needs java and Debian's zookeeper package (apt-get install zookeeper)")
        port = free_port()
        (self.tmp / "zk-data").mkdir()
        cfg = self.tmp / "zoo.cfg"
        cfg.write_text("\n".join(["tickTime=500", f"dataDir={self.tmp / 'zk-data'}",
                                  f"clientPort={port}", "clientPortAddress=127.0.0.1",
                                  "admin.enableServer=false", ""]))
        self.zk_proc = spawn([java, "-cp", ZK_CLASSPATH, ZK_MAIN, str(cfg)], None,
                             self.tmp / "zookeeper.log", cwd=self.tmp)
        self.zk_hosts = f"127.0.0.1:{port}"
        from kazoo.client import KazooClient  # noqa: PLC0415
        from kazoo.handlers.threading import KazooTimeoutError  # noqa: PLC0415

        deadline = time.monotonic() + 60
        while True:
            if self.zk_proc.poll() is not None:
                raise RuntimeError("ZooKeeper exited; see zookeeper.log (--keep-logs)")
            client = KazooClient(hosts=f"{self.zk_hosts}", timeout=5.0)
            try:
                client.start(timeout=1.0)
                break
            except KazooTimeoutError:
                if time.monotonic() > deadline:
                    raise RuntimeError("ZooKeeper not serving after 60 s") from None
        client.ensure_path("/franz-bench")
        self.kazoo = client  # chroot-less: paths below are prefixed

    @property
    def zk_connect(self) -> str:
        return f"{self.zk_hosts}/franz-bench"

    def target(self, i: int) -> Target:
        proc = self.procs[i]
        return Target(f"broker-{i}", "127.0.0.1", self.ports[i], None if proc is None else proc.pid)

    async def start_broker(self, i: int) -> None:
        cmd = [sys.executable, "-m", "app.cli", "broker", "--broker-id", str(i),
               "--zookeeper", self.zk_connect, "--host", "127.0.0.1", "--port", str(self.ports[i]),
               "--data-dir", str(self.tmp / f"data-{i}"), "--log-level", "WARNING"]
        for o in self.overrides:
            cmd += ["--override", o]
        log = self.tmp / f"broker-{i}.log"
        with log.open("ab") as f:
            self.procs[i] = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                             start_new_session=True)
        await wait_ready(self.target(i), "/v3/clusters", self.procs[i], log)

    def signal(self, i: int, sig: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        proc.send_signal(sig)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        proc.kill()
        proc.wait(10)

    def zget(self, path: str) -> dict[str, Any] | None:
        full = f"/franz-bench{path}"
        if not self.kazoo.exists(full):
            return None
        return dict(json.loads(self.kazoo.get(full)[0]))

    def state(self, topic: str, p: int) -> dict[str, Any]:
        st = self.zget(f"/brokers/topics/{topic}/partitions/{p}/state")
        assert st is not None
        return st

    def controller(self) -> int | None:
        c = self.zget("/controller")
        return None if c is None else int(c["brokerid"])

    def close(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            if proc is not None:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        if self.kazoo is not None:
            with contextlib.suppress(Exception):
                self.kazoo.stop()
                self.kazoo.close()
        if self.zk_proc is not None:
            self.zk_proc.kill()
            self.zk_proc.wait(10)


async def call(t: Target, req: Req) -> tuple[int, bytes]:
    conn = await RawConn(t.host, t.port).connect()
    try:
        status, _h, body = await asyncio.wait_for(conn.send(req), 60)
        return status, body
    finally:
        await conn.close()


async def create_topic(c: Cluster, name: str, *, partitions: int, rf: int,
                       configs: dict[str, str] | None = None) -> None:
    t = c.target(0)
    _s, body = await call(t, Req("GET", "/v3/clusters", b"", {"Accept": JSON}))
    cid = orjson.loads(body)["data"][0]["cluster_id"]
    doc = {"topic_name": name, "partitions_count": partitions, "replication_factor": rf,
           "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
    status, body = await call(t, Req("POST", f"/v3/clusters/{cid}/topics", orjson.dumps(doc),
                                     {"Content-Type": JSON, "Accept": JSON}))
    if status not in (200, 201):
        raise RuntimeError(f"create {name}: {status} {body[:300]!r}")
    await until(lambda: all(_leader_known(c, name, p) for p in range(partitions)), 30,
                f"leaders of {name}")


def _leader_known(c: Cluster, topic: str, p: int) -> bool:
    st = c.zget(f"/brokers/topics/{topic}/partitions/{p}/state")
    return st is not None and st["leader"] >= 0


async def until(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


# --- produce throughput ------------------------------------------------------------------------


async def produce_case(c: Cluster, topic: str, acks: str, args: argparse.Namespace,
                       body: bytes) -> dict[str, Any]:
    leader = c.state(topic, 0)["leader"]
    target = c.target(leader)
    req = produce_req(f"/topics/{topic}/partitions/0?acks={acks}", body)
    conns = [await RawConn(target.host, target.port).connect() for _ in range(args.connections)]
    failed = 0

    async def on_resp(_i: int, r: Req, resp: Any) -> tuple[int, int]:
        nonlocal failed
        rows = orjson.loads(resp[2])["offsets"]
        bad = sum(1 for row in rows if row["error_code"] is not None)
        failed += bad
        return len(rows) - bad, len(r.body)

    try:
        res = await closed_loop(target, conns, lambda _i: req, on_resp, warmup=args.warmup,
                                duration=args.duration, max_requests=args.max_requests)
    finally:
        for conn in conns:
            await conn.close()
    out = res.summary()
    out["record_errors"] = failed
    out["leader"] = leader
    return out


async def throughput(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    await create_topic(c, "rf1", partitions=1, rf=1)
    await create_topic(c, "rf3", partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    body = produce_body(args.records, args.value_size)
    rounds = []
    for r in range(args.rounds):
        order = [("rf1", "1"), ("rf3", "all")]
        if r % 2:
            order.reverse()  # neither case always runs first
        row = {}
        for topic, acks in order:
            row[f"{topic}_acks{acks}"] = await produce_case(c, topic, acks, args, body)
        row["ratio"] = row["rf3_acksall"]["rec_per_s"] / max(row["rf1_acks1"]["rec_per_s"], 1e-9)
        print(f"  round {r + 1}: rf1 acks=1 {row['rf1_acks1']['rec_per_s']:,.0f} rec/s, "
              f"rf3 acks=all {row['rf3_acksall']['rec_per_s']:,.0f} rec/s, "
              f"ratio {row['ratio']:.2f}", flush=True)
        rounds.append(row)

    def med(case: str, key: str) -> float:
        return statistics.median(r[case][key] for r in rounds)

    summary = {case: {k: med(case, k) for k in ("rec_per_s", "mb_per_s", "req_latency_ms_p50",
                                                 "req_latency_ms_p99", "server_cpu_us_per_req")
                      if all(r[case][k] is not None for r in rounds)}
               for case in ("rf1_acks1", "rf3_acksall")}
    summary["ratio_median"] = statistics.median(r["ratio"] for r in rounds)
    return {"rounds": rounds, "summary": summary}


# --- failover ------------------------------------------------------------------------------------


class ZkWatch(threading.Thread):
    """Polls ZooKeeper every 10 ms for when the victim's registration goes and when the
    partition state names a new leader (times on the monotonic clock)."""

    def __init__(self, c: Cluster, victim: int, topic: str, p: int, epoch: int) -> None:
        super().__init__(daemon=True)
        self.c, self.victim, self.topic, self.p, self.epoch = c, victim, topic, p, epoch
        self.gone: float | None = None
        self.elected: float | None = None
        self.new_leader: int | None = None
        self.stop_flag = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while not self.stop_flag.is_set() and time.monotonic() < deadline:
            now = time.monotonic()
            if self.gone is None and not self.c.kazoo.exists(f"/franz-bench/brokers/ids/{self.victim}"):
                self.gone = now
            if self.elected is None:
                st = self.c.state(self.topic, self.p)
                if st["leader_epoch"] > self.epoch and st["leader"] >= 0:
                    self.elected, self.new_leader = now, st["leader"]
            if self.gone is not None and self.elected is not None:
                return
            time.sleep(0.01)


async def failover_trial(c: Cluster, n: int, args: argparse.Namespace) -> dict[str, Any]:
    topic = f"failover{n}"
    await create_topic(c, topic, partitions=3, rf=3, configs={"min.insync.replicas": "2"})
    await until(lambda: all(sorted(c.state(topic, p)["isr"]) == [0, 1, 2] for p in range(3)), 30,
                f"full ISRs of {topic}")
    ctl = c.controller()
    p = next(p for p in range(3) if c.state(topic, p)["leader"] != ctl)
    st = c.state(topic, p)
    victim = st["leader"]
    via = next(b for b in (0, 1, 2) if b != victim)
    req = Req("POST", f"/topics/{topic}/partitions/{p}?acks=all", produce_body(10, 100),
              {"Content-Type": "application/vnd.kafka.binary.v2+json", "Accept": V2})
    acks: list[float] = []  # receive times of acknowledged writes
    errors = 0
    stop = asyncio.Event()

    async def client() -> None:
        nonlocal errors
        conn: RawConn | None = None
        for _ in range(100_000):
            if stop.is_set():
                break
            try:
                if conn is None:
                    conn = await RawConn(c.target(via).host, c.target(via).port).connect()
                status, _h, body = await asyncio.wait_for(conn.send(req), 40)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                errors += 1
                if conn is not None:
                    await conn.close()
                conn = None
                await asyncio.sleep(0.05)
                continue
            if status == 200 and all(r["error_code"] is None for r in orjson.loads(body)["offsets"]):
                acks.append(time.monotonic())
            else:
                errors += 1
        if conn is not None:
            await conn.close()

    task = asyncio.ensure_future(client())
    try:
        await until(lambda: len(acks) >= 20, 30, "acknowledged writes before the kill")
        watch = ZkWatch(c, victim, topic, p, st["leader_epoch"])
        t_kill = time.monotonic()
        if args.fault == "stop":
            c.signal(victim, signal.SIGSTOP)
        else:
            c.kill(victim)
        watch.start()
        # An answer already on its way when the leader died can land just after the kill;
        # the successor cannot answer before the session expires, so skip the first 0.5 s.
        await until(lambda: any(t > t_kill + 0.5 for t in acks), args.session_ms / 1000 + 30,
                    "the first acknowledged write after the kill")
        first = next(t for t in acks if t > t_kill + 0.5)
    finally:
        stop.set()
        if args.fault == "stop":
            c.signal(victim, signal.SIGCONT)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 45)
    watch.join(5)
    watch.stop_flag.set()
    row = {
        "victim": victim, "via": via, "controller": ctl, "new_leader": watch.new_leader,
        "kill_to_first_ack_s": round(first - t_kill, 3),
        "kill_to_registration_gone_s": None if watch.gone is None else round(watch.gone - t_kill, 3),
        "kill_to_new_leader_in_zk_s": None if watch.elected is None else round(watch.elected - t_kill, 3),
        "client_errors": errors,
    }
    print(f"  trial {n}: SIG{args.fault.upper()} broker {victim} (leader of {topic}-{p}) -> first ack via broker "
          f"{via} after {row['kill_to_first_ack_s']:.2f} s (session gone "
          f"{row['kill_to_registration_gone_s']} s, new leader {watch.new_leader} in ZooKeeper "
          f"{row['kill_to_new_leader_in_zk_s']} s)", flush=True)
    t0 = time.monotonic()
    if args.fault == "kill":
        await c.start_broker(victim)
    await until(lambda: all(sorted(c.state(topic, q)["isr"]) == [0, 1, 2] for q in range(3)), 60,
                f"broker {victim} back in the ISR")
    row["restart_to_full_isr_s"] = round(time.monotonic() - t0, 2)
    return row


async def failover(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    trials = [await failover_trial(c, n, args) for n in range(1, args.trials + 1)]
    return {"fault": args.fault, "trials": trials, "summary": {
        k: statistics.median(t[k] for t in trials if t[k] is not None)
        for k in ("kill_to_first_ack_s", "kill_to_registration_gone_s", "kill_to_new_leader_in_zk_s")
        if any(t[k] is not None for t in trials)}}


# --- main -----------------------------------------------------------------------------------------


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="franz-cluster-bench-"))
    c = Cluster(tmp, args.session_ms, args.lag_ms)
    try:
        c.start_zookeeper()
        for i in range(3):
            await c.start_broker(i)
        out: dict[str, Any] = {}
        if not args.skip_throughput:
            print(f"produce: {args.records} x {args.value_size} B per POST, {args.connections} "
                  f"connections, {args.rounds} round(s) of {args.duration} s", flush=True)
            out["produce"] = await throughput(c, args)
        if args.trials:
            print(f"failover by SIG{args.fault.upper()}: zookeeper.session.timeout.ms="
                  f"{args.session_ms}, {args.trials} trial(s)", flush=True)
            out["failover"] = await failover(c, args)
        return out
    finally:
        c.close()
        if args.keep_logs:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def print_summary(result: dict[str, Any]) -> None:
    if "produce" in result:
        s = result["produce"]["summary"]
        print("\nproduce (medians)")
        for case in ("rf1_acks1", "rf3_acksall"):
            row = s[case]
            print(f"  {case:12s} {row['rec_per_s']:>12,.0f} rec/s {row['mb_per_s']:8.1f} MB/s  "
                  f"p50 {row.get('req_latency_ms_p50', float('nan')):7.1f} ms  "
                  f"p99 {row.get('req_latency_ms_p99', float('nan')):7.1f} ms")
        print(f"  rf3 acks=all / rf1 acks=1 = {s['ratio_median']:.2f} (median of per-round ratios; "
              "target >= 0.5)")
    if "failover" in result:
        f = result["failover"]
        print(f"\nfailover (SIG{f['fault'].upper()} of a leader -> first acknowledged write on "
              "its successor)")
        print("  per trial: " + ", ".join(f"{t['kill_to_first_ack_s']:.2f} s" for t in f["trials"]))
        print("  median: " + ", ".join(f"{k} {v:.2f} s" for k, v in f["summary"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=4.0, help="measured seconds per case")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--max-requests", type=int, default=100_000, help="per connection and case")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--records", type=int, default=1000, help="records per produce request")
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--trials", type=int, default=None,
                    help="failover trials (0: none; default 3, --quick 1)")
    ap.add_argument("--session-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--lag-ms", type=int, default=3000, help="replica.lag.time.max.ms")
    ap.add_argument("--fault", choices=("kill", "stop"), default="kill",
                    help="failover by SIGKILL (connections refused at once) or SIGSTOP (a "
                         "hung leader: connections stay open; SIGCONT after the trial)")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="1 round of 2 s, 1 failover trial (unless --trials)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 2.0, 0.5
    if args.trials is None:
        args.trials = 1 if args.quick else 3
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # "connection refused" while ZK starts
    notes = machine_notes()
    result = asyncio.run(amain(args))
    print_summary(result)
    result["machine"] = notes
    result["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
