"""Fault injection: no acknowledged record is ever lost.

Three real brokers on a real ZooKeeper; topic ``faults`` with 3 partitions, replication
factor 3 and ``min.insync.replicas=2``. Four producer threads keep sending small v2
produce requests (``POST /topics/faults?acks=all``, a few records each, every record
value a unique id, unkeyed so the partition rotates per request) through a random live
broker and remember every acknowledged ``(partition, offset, id)``; an error or a
timeout counts as not acknowledged (those records may or may not be in the log).
Meanwhile, per round of the fault schedule:

1. SIGKILL the leader of a partition (not the controller), wait for the new leader,
   keep producing on two brokers, restart it, wait for the full ISR;
2. SIGKILL the controller, the same;
3. SIGKILL a follower (a broker leading nothing), the same;
4. SIGSTOP a follower until it drops out of an ISR (``replica.lag.time.max.ms``), SIGCONT,
   wait for the full ISR;
5. SIGSTOP both followers of a leader briefly (shorter than the lag limit: the ISR stays
   full), write a few acks=1 requests straight to it (a tail no follower has; acks=all
   requests wait), SIGKILL it, SIGCONT the followers: one of them leads without the
   tail; the old leader, restarted, must truncate it (diverging leader epoch);
6. SIGSTOP a leader until its ZooKeeper session expires and its partitions have new
   leaders, SIGCONT: a zombie that briefly believes it leads; wait for the full ISR.
   Writes through the other brokers must go on within 8 s of the failover (requests
   they forwarded to the hung leader move to the new one).

Then production stops, every replica catches up (same LEO, HW = LEO on all three
brokers), and the logs are read from every ISR member's data dir (decoded from its
segment files) and, as a consumer sees them, through every broker's range read. Every
acknowledged (partition, offset) must hold exactly its id, offsets are contiguous, the
three replicas are identical, nothing is in a log that no producer sent, and no record
is in a log twice: the producers never retry, so a second copy could only be made by a
broker retrying an append on their behalf (a forwarding broker whose leader died after
replicating it but before answering); those retries carry the broker's producer id and
sequences and the new leader answers them with the original offsets (issue 15).

Two of the four producers send every request with an ``Idempotency-Key`` and, on any
failure (a timeout, a dropped connection, an error answer), send it again with the same
key and body through any live broker until it is acknowledged: every one of their
records must be in the log exactly once (issue 15: 0 lost and 0 duplicates).

Counts are printed (``pytest -s``) and written to ``fault_counts.json`` in the test's
temporary directory. ``FRANZ_FAULT_ROUNDS`` (default 2) repeats the schedule.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from core.storage.records import decode_records

from .conftest import BrokerProcess, free_port, read_instance_records, running, wait_until

JSON_V2 = "application/vnd.kafka.json.v2+json"
TOPIC = "faults"
PARTITIONS = 3
LAG_MS = 3000
SESSION_MS = 6000
REQUEST_TIMEOUT_MS = 8000
OVERRIDES = [f"replica.lag.time.max.ms={LAG_MS}", f"zookeeper.session.timeout.ms={SESSION_MS}",
             f"request.timeout.ms={REQUEST_TIMEOUT_MS}", "replica.fetch.backoff.ms=200",
             "replica.socket.timeout.ms=10000", "offsets.topic.num.partitions=1",
             "min.insync.replicas=2", "log.flush.scheduler.interval.ms=200",
             "idempotency.topic.num.partitions=3", "idempotency.key.claim.timeout.ms=10000"]
PRODUCERS = 4
KEYED_PRODUCERS = 2  # of PRODUCERS: every request with an Idempotency-Key, retried until acked
KEYED_RETRY_S = 90.0  # how long a keyed producer retries one request
RECORDS_PER_REQUEST = 5
CLIENT_TIMEOUT_S = 15.0
MAX_REQUESTS_PER_PRODUCER = 20000
ROUNDS = int(os.environ.get("FRANZ_FAULT_ROUNDS", "2"))
FAILOVER_S = SESSION_MS / 1000 + 20  # a death noticed + a leader elected, with slack
REJOIN_S = 40  # a restarted broker serving, caught up and back in every ISR


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- the cluster -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    root = tmp_path_factory.mktemp("faults")
    zk = f"{zookeeper}/franz-faults-{os.getpid()}-{time.monotonic_ns()}"
    procs = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                           list(OVERRIDES)) for i in range(3)]
    with running(procs):
        yield procs


def states(zk: KazooClient) -> dict[int, dict[str, Any]]:
    out = {}
    for p in range(PARTITIONS):
        data, _ = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
        out[p] = json.loads(data)
    return out


def controller(zk: KazooClient) -> int | None:
    try:  # the znode may go between an exists() and a get(): ask once
        return int(json.loads(zk.get("/controller")[0])["brokerid"])
    except NoNodeError:
        return None


def led_by(zk: KazooClient, broker_id: int) -> list[int]:
    return [p for p, st in states(zk).items() if st["leader"] == broker_id]


def full_isr(zk: KazooClient) -> bool:
    return all(sorted(st["isr"]) == [0, 1, 2] and st["leader"] >= 0 for st in states(zk).values())


def replicas_of(b: BrokerProcess) -> dict[int, dict[str, Any]] | None:
    try:
        rows = httpx.get(f"{b.url}/internal/v1/replicas", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return None
    return {r["partition"]: r for r in rows if r["topic"] == TOPIC}


def all_in_sync(brokers: list[BrokerProcess]) -> bool:
    """Every broker hosts every partition with the same epoch and LEO, and HW = LEO."""
    views = [replicas_of(b) for b in brokers]
    if any(v is None or len(v) != PARTITIONS for v in views):
        return False
    for p in range(PARTITIONS):
        rows = [v[p] for v in views if v is not None]
        if len({(r["leader"], r["leader_epoch"], r["log_end_offset"], r["high_watermark"])
                for r in rows}) != 1 or rows[0]["high_watermark"] != rows[0]["log_end_offset"]:
            return False
        if sorted(rows[0]["isr"]) != [0, 1, 2]:
            return False
    return True


# --- the producers -----------------------------------------------------------------------


class Producers:
    """``PRODUCERS`` threads sending acks=all through random live brokers until stopped."""

    def __init__(self, brokers: list[BrokerProcess]) -> None:
        self.brokers = brokers
        self.live = {b.broker_id for b in brokers}
        self.acked: list[tuple[int, int, str]] = []  # (partition, offset, id)
        self.unacked: set[str] = set()
        self.requests = Counter[str]()
        self.keyed_sent: set[str] = set()  # ids sent with an Idempotency-Key
        self.keyed_gave_up: list[str] = []
        self.failures: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(PRODUCERS)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=KEYED_RETRY_S + CLIENT_TIMEOUT_S + 5)
        assert not any(t.is_alive() for t in self._threads), "a producer thread hangs"
        assert not self.failures, f"a producer thread failed: {self.failures[0]!r}"

    def set_live(self, broker_id: int, live: bool) -> None:
        with self._lock:
            (self.live.add if live else self.live.discard)(broker_id)

    def acked_count(self) -> int:
        return len(self.acked)

    def _run(self, k: int) -> None:
        try:
            self._produce(k)
        except BaseException as exc:
            self.failures.append(exc)
            raise

    def _produce(self, k: int) -> None:
        rng = random.Random(k)
        seq = 0
        with httpx.Client(timeout=CLIENT_TIMEOUT_S) as client:
            for _ in range(MAX_REQUESTS_PER_PRODUCER):
                if self._stop.is_set():
                    return
                with self._lock:
                    live = sorted(self.live)
                if not live:  # every broker is stopped or down for a moment
                    time.sleep(0.05)
                    continue
                b = self.brokers[rng.choice(live)]
                ids = [f"p{k}-{seq + i}" for i in range(RECORDS_PER_REQUEST)]
                seq += RECORDS_PER_REQUEST
                if k < KEYED_PRODUCERS:
                    self._send_keyed(client, rng, f"p{k}-{seq}", ids)
                else:
                    self._send(client, b, ids)
                time.sleep(0.002)

    def _send_keyed(self, client: httpx.Client, rng: random.Random, key: str,
                    ids: list[str]) -> None:
        """One request with an Idempotency-Key, sent again (same key, same body, any live
        broker) after any failure until it is acknowledged, for up to KEYED_RETRY_S."""
        body = orjson.dumps({"records": [{"value": i} for i in ids]})
        headers = {"Content-Type": JSON_V2, "Accept": JSON_V2, "Idempotency-Key": key}
        self.keyed_sent.update(ids)
        deadline = time.monotonic() + KEYED_RETRY_S
        while time.monotonic() < deadline:
            with self._lock:
                live = sorted(self.live)
            if not live:
                time.sleep(0.05)
                continue
            b = self.brokers[rng.choice(live)]
            try:
                resp = client.post(f"{b.url}/topics/{TOPIC}", params={"acks": "all"},
                                   content=body, headers=headers)
            except httpx.HTTPError as exc:
                self.requests[f"keyed {type(exc).__name__}"] += 1
                continue
            assert resp.status_code != 422, resp.text  # the same body: never "reused"
            if resp.status_code != 200:
                self.requests[f"keyed http {resp.status_code}"] += 1
                time.sleep(0.1)
                continue
            rows = resp.json()["offsets"]
            assert len(rows) == len(ids), resp.text
            if any(row["error_code"] is not None for row in rows):
                self.requests[f"keyed error {rows[0]['error_code']}"] += 1
                time.sleep(0.1)
                continue
            self.acked.extend((row["partition"], row["offset"], rid)
                              for rid, row in zip(ids, rows, strict=True))
            self.requests["keyed ok"] += 1
            return
        self.keyed_gave_up.extend(ids)
        self.unacked.update(ids)

    def _send(self, client: httpx.Client, b: BrokerProcess, ids: list[str]) -> None:
        body = orjson.dumps({"records": [{"value": i} for i in ids]})
        try:
            resp = client.post(f"{b.url}/topics/{TOPIC}", params={"acks": "all"}, content=body,
                               headers={"Content-Type": JSON_V2, "Accept": JSON_V2})
        except httpx.HTTPError as exc:
            self.requests[type(exc).__name__] += 1
            self.unacked.update(ids)
            return
        if resp.status_code != 200:
            self.requests[f"http {resp.status_code}"] += 1
            self.unacked.update(ids)
            return
        rows = resp.json()["offsets"]
        assert len(rows) == len(ids), resp.text
        failed = 0
        for rid, row in zip(ids, rows, strict=True):
            if row["error_code"] is None and row["offset"] is not None:
                self.acked.append((row["partition"], row["offset"], rid))
            else:
                failed += 1
                self.unacked.add(rid)
        self.requests["ok" if not failed else f"error {rows[0]['error_code']}"] += 1


# --- the fault schedule --------------------------------------------------------------------


class Faults:
    def __init__(self, brokers: list[BrokerProcess], zk: KazooClient, producers: Producers) -> None:
        self.brokers, self.zk, self.producers = brokers, zk, producers
        self.events: list[dict[str, Any]] = []
        self.tail_ids: set[str] = set()  # written to a leader only, just before it died

    def _down(self, victim: int) -> None:
        self.producers.set_live(victim, False)

    def _progress_while_down(self, victim: int, what: str, within_s: float = 30) -> None:
        """acks=all keeps being acknowledged with two of three brokers (min ISR 2)."""
        before = self.producers.acked_count()
        wait_until(lambda: self.producers.acked_count() >= before + 20, within_s,
                   f"acknowledged writes while broker {victim} is down ({what})")

    def _restart(self, victim: int, t_fault: float, what: str) -> None:
        t0 = time.monotonic()
        self.brokers[victim].start()
        self.producers.set_live(victim, True)
        wait_until(lambda: full_isr(self.zk), REJOIN_S, f"broker {victim} back in every ISR")
        self.events.append({"fault": what, "broker": victim,
                            "down_s": round(t0 - t_fault, 1),
                            "rejoin_s": round(time.monotonic() - t0, 1)})
        log(f"{what}: broker {victim} restarted and back in every ISR after "
            f"{time.monotonic() - t0:.1f} s")

    def kill_leader(self) -> None:
        ctl = controller(self.zk)
        sts = states(self.zk)
        p = next((p for p, st in sts.items() if st["leader"] != ctl), 0)
        victim = sts[p]["leader"]
        log(f"SIGKILL broker {victim}, leader of {TOPIC}-{p} (epoch {sts[p]['leader_epoch']})")
        self._kill_and_restart(victim, "leader killed")

    def kill_controller(self) -> None:
        wait_until(lambda: controller(self.zk) is not None, 20, "a controller")
        victim = controller(self.zk)
        assert victim is not None
        log(f"SIGKILL broker {victim}, the controller (leads {led_by(self.zk, victim)})")
        self._kill_and_restart(victim, "controller killed")
        assert controller(self.zk) is not None

    def kill_follower(self) -> None:
        victim = self._follower()
        log(f"SIGKILL broker {victim}, a follower (leads {led_by(self.zk, victim)})")
        self._kill_and_restart(victim, "follower killed")

    def _follower(self) -> int:
        """A broker leading no partition (the controller last), else a follower of p0."""
        ctl = controller(self.zk)
        sts = states(self.zk)
        idle = [b for b in range(3) if all(st["leader"] != b for st in sts.values())]
        idle.sort(key=lambda b: b == ctl)
        if idle:
            return idle[0]
        return next(r for r in sts[0]["isr"] if r != sts[0]["leader"])

    def _kill_and_restart(self, victim: int, what: str) -> None:
        self._down(victim)
        t_fault = time.monotonic()
        self.brokers[victim].kill()

        def failed_over() -> bool:
            sts = states(self.zk)
            ctl = controller(self.zk)
            return ctl is not None and ctl != victim and all(
                st["leader"] >= 0 and st["leader"] != victim and victim not in st["isr"]
                for st in sts.values())

        wait_until(failed_over, FAILOVER_S, f"the cluster to fail over from broker {victim}")
        log(f"{what}: leaders {[st['leader'] for st in states(self.zk).values()]}, "
            f"controller {controller(self.zk)} after {time.monotonic() - t_fault:.1f} s")
        self._progress_while_down(victim, what)
        self._restart(victim, t_fault, what)

    def kill_leader_with_tail(self) -> None:
        """The leader appends records no follower has (both followers SIGSTOPped for less
        than replica.lag.time.max.ms, so the ISR stays full and acks=all waits), then dies.
        A follower takes over without that tail; the old leader, restarted, must truncate
        it (diverging leader epoch) and then hold the new leader's log exactly."""
        ctl = controller(self.zk)
        sts = states(self.zk)
        led = Counter(st["leader"] for st in sts.values())
        victim = max(range(3), key=lambda b: (led[b], b != ctl))
        followers = [b for b in range(3) if b != victim]
        log(f"SIGSTOP brokers {followers}, then SIGKILL broker {victim} "
            f"(leads {led_by(self.zk, victim)}) with an unreplicated tail")
        for f in followers:
            self._down(f)
            self.brokers[f].signal(signal.SIGSTOP)
        try:
            time.sleep(0.3)
            self._write_tail(victim, [p for p, st in sts.items() if st["leader"] == victim])
            time.sleep(0.5)
            self._down(victim)
            t_fault = time.monotonic()
            self.brokers[victim].kill()
        finally:
            for f in followers:
                self.brokers[f].signal(signal.SIGCONT)
                self.producers.set_live(f, True)

        def failed_over() -> bool:
            ctl = controller(self.zk)
            return ctl is not None and ctl != victim and all(
                st["leader"] >= 0 and st["leader"] != victim for st in states(self.zk).values())

        wait_until(failed_over, FAILOVER_S, f"the cluster to fail over from broker {victim}")
        log(f"leader with tail killed: leaders {[st['leader'] for st in states(self.zk).values()]} "
            f"after {time.monotonic() - t_fault:.1f} s")
        self._progress_while_down(victim, "leader with tail killed")
        self._restart(victim, t_fault, "leader with tail killed")

    def pause_leader_past_session(self) -> None:
        """SIGSTOP a leader until ZooKeeper expires its session and the controller moves
        its partitions away, then SIGCONT: for a moment it still thinks it leads (a
        zombie); nothing it acknowledges with acks=all may be lost."""
        ctl = controller(self.zk)
        led = Counter(st["leader"] for st in states(self.zk).values())
        victim = max(range(3), key=lambda b: (b != ctl, led[b]))
        log(f"SIGSTOP broker {victim} (leads {led_by(self.zk, victim)}) past the session timeout")
        self._down(victim)
        t_fault = time.monotonic()
        self.brokers[victim].signal(signal.SIGSTOP)
        try:
            wait_until(lambda: all(st["leader"] not in (victim, -1) and victim not in st["isr"]
                                   for st in states(self.zk).values()),
                       FAILOVER_S, f"leadership to move away from paused broker {victim}")
            log(f"zombie: leaders {[st['leader'] for st in states(self.zk).values()]} after "
                f"{time.monotonic() - t_fault:.1f} s")
            # Requests other brokers forwarded to the paused leader move to the new one
            # at once (not after replica.socket.timeout.ms): writes go on within seconds.
            self._progress_while_down(victim, "leader paused", within_s=8)
        finally:
            self.brokers[victim].signal(signal.SIGCONT)
        t0 = time.monotonic()
        self.producers.set_live(victim, True)
        wait_until(lambda: full_isr(self.zk), REJOIN_S, f"resumed broker {victim} back in every ISR")
        self.events.append({"fault": "leader paused past the session", "broker": victim,
                            "down_s": round(t0 - t_fault, 1), "rejoin_s": round(time.monotonic() - t0, 1)})
        log(f"SIGCONT: broker {victim} back in every ISR after {time.monotonic() - t0:.1f} s")

    def _write_tail(self, victim: int, partitions: list[int]) -> None:
        """acks=1 writes straight to the leader while its followers are stopped: the
        first may still ride on a follower's pending long-poll answer, the rest exist on
        the leader only. Not acknowledged in the acks=all sense (never counted as acked)."""
        b = self.brokers[victim]
        with httpx.Client(timeout=5) as client:
            for p in partitions:
                for n in range(3):
                    ids = [f"tail{len(self.tail_ids)}-{i}" for i in range(RECORDS_PER_REQUEST)]
                    self.tail_ids.update(ids)
                    with contextlib.suppress(httpx.HTTPError):  # written or not: both fine
                        client.post(f"{b.url}/topics/{TOPIC}/partitions/{p}", params={"acks": "1"},
                                    content=orjson.dumps({"records": [{"value": i} for i in ids]}),
                                    headers={"Content-Type": JSON_V2, "Accept": JSON_V2})
                    time.sleep(0.05 if n == 0 else 0.0)

    def stop_follower(self) -> None:
        victim = self._follower()
        followed = [p for p, st in states(self.zk).items() if st["leader"] != victim]
        log(f"SIGSTOP broker {victim} (follows {followed})")
        self._down(victim)
        t_fault = time.monotonic()
        self.brokers[victim].signal(signal.SIGSTOP)
        try:
            wait_until(lambda: any(victim not in st["isr"] for st in states(self.zk).values()),
                       LAG_MS / 1000 + 15, f"stopped broker {victim} to leave an ISR")
            left = time.monotonic() - t_fault
            log(f"SIGSTOP: broker {victim} left the ISR after {left:.1f} s "
                f"(replica.lag.time.max.ms={LAG_MS})")
            self._progress_while_down(victim, "follower stopped")
        finally:
            self.brokers[victim].signal(signal.SIGCONT)
        t0 = time.monotonic()
        self.producers.set_live(victim, True)
        wait_until(lambda: full_isr(self.zk), REJOIN_S, f"resumed broker {victim} back in every ISR")
        self.events.append({"fault": "follower stopped", "broker": victim,
                            "left_isr_s": round(left, 1), "rejoin_s": round(time.monotonic() - t0, 1)})
        log(f"SIGCONT: broker {victim} back in every ISR after {time.monotonic() - t0:.1f} s")


# --- reading the replicas back ----------------------------------------------------------------


def disk_log(b: BrokerProcess, partition: int) -> list[tuple[int, str]]:
    """(offset, id) of every record in the replica's segment files, in file order."""
    d = b.data_dir / f"{TOPIC}-{partition}"
    data = b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
    return [(r.offset, orjson.loads(r.value)) for r in decode_records(data)]


def http_log(b: BrokerProcess, partition: int) -> list[tuple[int, str]]:
    """What a consumer reads through broker ``b`` (range reads, forwarded to the leader)."""
    out: list[tuple[int, str]] = []
    offset = 0
    with httpx.Client(timeout=30) as client:
        for _ in range(100000):
            resp = client.get(f"{b.url}/topics/{TOPIC}/partitions/{partition}/records",
                              params={"offset": offset, "count": 1000, "max_bytes": 1 << 20},
                              headers={"Accept": JSON_V2})
            assert resp.status_code == 200, resp.text
            rows = resp.json()
            if not rows:
                return out
            out += [(r["offset"], r["value"]) for r in rows]
            offset = rows[-1]["offset"] + 1
    raise AssertionError("range read did not end")


# --- a consumer group across the faults ---------------------------------------------------

GROUP = "fault-group"
V2 = "application/vnd.kafka.v2+json"


def group_instance(b: BrokerProcess, name: str) -> str:
    """A v2 consumer instance of GROUP through ``b``, manually assigned partition 0."""
    base = f"{b.url}/consumers/{GROUP}"
    r = httpx.post(base, headers={"Content-Type": V2}, timeout=30, json={
        "name": name, "format": "json", "auto.offset.reset": "earliest",
        "auto.commit.enable": "false"})
    assert r.status_code == 200, r.text
    r = httpx.post(f"{base}/instances/{name}/assignments", headers={"Content-Type": V2},
                   timeout=30, json={"partitions": [{"topic": TOPIC, "partition": 0}]})
    assert r.status_code == 204, r.text
    return f"{base}/instances/{name}"


def group_read(instance: str, want: int) -> list[dict[str, Any]]:
    return read_instance_records(instance, want, query="&max_bytes=20000")


# --- the test -------------------------------------------------------------------------------


def test_acknowledged_records_survive_kills_and_stops(brokers: list[BrokerProcess], zk: KazooClient,
                                                       tmp_path: Path) -> None:
    t_start = time.monotonic()
    cid = httpx.get(f"{brokers[0].url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    resp = httpx.post(f"{brokers[1].url}/v3/clusters/{cid}/topics", timeout=30, json={
        "topic_name": TOPIC, "partitions_count": PARTITIONS, "replication_factor": 3,
        "configs": [{"name": "min.insync.replicas", "value": "2"}]})
    assert resp.status_code in (200, 201), resp.text
    wait_until(lambda: all_in_sync(brokers), 20, "every replica of the new topic")

    producers = Producers(brokers)
    faults = Faults(brokers, zk, producers)
    producers.start()
    try:
        wait_until(lambda: producers.acked_count() >= 100, 30, "the first acknowledged writes")
        # a group reads partition 0 and commits what it fetched, before any fault
        first = group_instance(brokers[0], "before-faults")
        read_before = group_read(first, 20)
        assert len(read_before) >= 20
        r = httpx.post(f"{first}/offsets", headers={"Content-Type": V2}, timeout=30)
        assert r.status_code == 200, r.text
        committed = read_before[-1]["offset"] + 1
        for r in range(ROUNDS):
            log(f"round {r + 1}/{ROUNDS}: {producers.acked_count()} records acknowledged so far")
            faults.kill_leader()
            faults.kill_controller()
            faults.kill_follower()
            faults.stop_follower()
            faults.kill_leader_with_tail()
            faults.pause_leader_past_session()
        time.sleep(1.0)
    finally:
        producers.stop()
    log(f"producers stopped: {dict(producers.requests)}")

    wait_until(lambda: all_in_sync(brokers), 30, "all replicas in sync after the faults")
    counts = verify(brokers, producers, faults.tail_ids)
    assert counts["acked_also_at_other_offset"] == 0, f"server-made duplicates: {counts}"
    assert counts["unacked_duplicates"] == 0, f"server-made duplicates: {counts}"
    # every request with an Idempotency-Key, retried through any broker until answered:
    # every record exactly once, none lost, none twice
    assert counts["keyed_gave_up"] == 0, f"keyed requests never acknowledged: {counts}"
    assert counts["keyed_not_exactly_once"] == 0, f"keyed records lost or doubled: {counts}"
    # the group's commit survived the faults (kills and restarts of brokers): a new
    # instance, through another broker, resumes exactly there
    resumed = group_read(group_instance(brokers[2], "after-faults"), 1)
    assert resumed and resumed[0]["offset"] == committed, (resumed[:1], committed)
    counts["group_resumed_at"] = committed
    assert counts["tail_found"] < counts["tail_written"], "no leader-only tail was truncated"
    counts["truncations_logged"] = sum(
        b.log_path.read_text(errors="replace").count(": diverging at leader epoch") for b in brokers)
    counts["faults"] = faults.events
    counts["requests"] = dict(producers.requests)
    counts["seconds"] = round(time.monotonic() - t_start, 1)
    (tmp_path / "fault_counts.json").write_text(json.dumps(counts, indent=2))
    log("fault injection counts: " + json.dumps(counts))


def verify(brokers: list[BrokerProcess], producers: Producers, tail_ids: set[str]) -> dict[str, Any]:
    acked = producers.acked
    sent_unacked = producers.unacked
    acked_ids = {rid for _, _, rid in acked}
    assert len(acked_ids) == len(acked), "one id acknowledged twice"
    found = 0
    occurrences: Counter[str] = Counter()
    logs: dict[int, dict[int, str]] = {}
    for p in range(PARTITIONS):
        replicas = [disk_log(b, p) for b in brokers]
        leo = replicas_of(brokers[0])[p]["log_end_offset"]  # type: ignore[index]
        for b, rep in zip(brokers, replicas, strict=True):
            assert [o for o, _ in rep] == list(range(leo)), \
                f"{TOPIC}-{p} on broker {b.broker_id}: offsets not contiguous 0..{leo - 1}"
            assert rep == replicas[0], \
                f"{TOPIC}-{p}: broker {b.broker_id}'s log differs from broker 0's"
        for b in brokers:
            assert http_log(b, p) == replicas[0], f"{TOPIC}-{p} read through broker {b.broker_id}"
        logs[p] = dict(replicas[0])
        found += len(replicas[0])
        occurrences.update(rid for _, rid in replicas[0])
    lost = [(p, o, rid, logs[p].get(o)) for p, o, rid in acked if logs[p].get(o) != rid]
    assert not lost, f"{len(lost)} acknowledged record(s) lost or moved, e.g. {lost[:10]}"
    unknown = [rid for rid in occurrences
               if rid not in acked_ids and rid not in sent_unacked and rid not in tail_ids]
    assert not unknown, f"records no producer sent: {unknown[:10]}"
    return {
        "acked": len(acked),
        "found": found,
        "lost": len(lost),
        "acked_found_exactly_once": sum(1 for rid in acked_ids if occurrences[rid] == 1),
        "acked_also_at_other_offset": sum(occurrences[rid] - 1 for rid in acked_ids
                                          if occurrences[rid] > 1),
        "unacked_sent": len(sent_unacked),
        "unacked_found": sum(1 for rid in sent_unacked if occurrences[rid]),
        "unacked_duplicates": sum(occurrences[rid] - 1 for rid in sent_unacked
                                  if occurrences[rid] > 1),
        "tail_written": len(tail_ids),
        "tail_found": sum(1 for rid in tail_ids if occurrences[rid]),
        "log_end_offsets": [len(logs[p]) for p in range(PARTITIONS)],
        "keyed_sent": len(producers.keyed_sent),
        "keyed_gave_up": len(producers.keyed_gave_up),
        "keyed_not_exactly_once": sum(1 for rid in producers.keyed_sent if occurrences[rid] != 1),
    }
