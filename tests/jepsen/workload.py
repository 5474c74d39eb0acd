"""The ``queue`` workload: producer processes send unique values with acks=all over
REST from the ``client`` host, some with an ``Idempotency-Key`` (retried with the same key
and body until answered, within a bound), some without (sent once); a reader reads the
partition whole now and then; at the end every partition is read whole through every
broker from ``control`` (the final reads). Everything lands in a ``History``.

How an attempt's answer is classified (``classify``):

- 200 and the record's offset: ``ok``;
- the connection could not be opened (refused, or the SYN unanswered): ``fail``, nothing
  was sent;
- a 4xx other than 408 and 409: ``fail`` (franz writes nothing then);
- anything else (a timeout or a dropped connection after the request went out, a 5xx,
  a per-record error such as Kafka's retriable ones as 50003): ``info``, the value may
  be written.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from .checker import History, Op
from .cluster import NetCluster

JSON_V2 = "application/vnd.kafka.json.v2+json"
# Below the brokers' request.timeout.ms (8 s), as an impatient client: a request stuck on
# a host that was cut off (its pooled connection silent) costs 4 s, not the whole fault;
# an answer that comes later is ``info`` (and, with an Idempotency-Key, retried).
CLIENT_TIMEOUT_S = 4.0
CONNECT_TIMEOUT_S = 1.5  # a host cut off costs a producer this long (nothing sent: ``fail``)
TIMEOUT = httpx.Timeout(CLIENT_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
SHUN_S = 3.0  # a broker that did not answer is left out by that producer this long
KEYED_BUDGET_S = 20.0  # an Idempotency-Key send is retried this long, then left ``info``
MAX_READ_REQUESTS = 2000  # per whole-partition read


def classify(resp: httpx.Response | None, exc: Exception | None) -> tuple[str, int | None, str]:
    """(``ok`` | ``fail`` | ``info``, offset, error) of one produce attempt."""
    if exc is not None:
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return "fail", None, f"{type(exc).__name__}"
        return "info", None, f"{type(exc).__name__}"
    assert resp is not None
    try:
        body = resp.json()
    except ValueError:
        body = resp.text
    if resp.status_code == 200 and isinstance(body, dict):
        rec = (body.get("offsets") or [{}])[0]
        if rec.get("error_code") is None and rec.get("offset") is not None:
            return "ok", int(rec["offset"]), ""
        return "info", None, f"200 record error {rec.get('error_code')}: {rec.get('error')}"
    if 400 <= resp.status_code < 500 and resp.status_code not in (408, 409):
        return "fail", None, f"{resp.status_code} {str(body)[:200]}"
    return "info", None, f"{resp.status_code} {str(body)[:200]}"


@dataclass
class Queue:
    cluster: NetCluster
    topic: str
    partitions: int
    history: History
    t0: float
    seed: int
    producers: int = 8
    keyed_every: int = 2  # producers 0, 2, ... send with an Idempotency-Key
    pause_s: float = 0.02
    values: itertools.count = field(default_factory=lambda: itertools.count(1))
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _add(self, op: Op) -> None:
        with self._lock:
            self.history.add(op)
            self.counts[f"{op.f}:{op.type}"] += 1

    # --- producers ----------------------------------------------------------------------

    def start(self, *, max_ops: int, seconds: float, reader_every_s: float = 2.0) -> None:
        """Producers and a reader in threads of their own until ``stop()``, ``seconds``
        or ``max_ops`` sends per producer."""
        deadline = time.monotonic() + seconds
        for i in range(self.producers):
            t = threading.Thread(target=self._producer, args=(i, max_ops, deadline),
                                 name=f"producer-{i}", daemon=True)
            self._threads.append(t)
        self._threads.append(threading.Thread(target=self._reader, args=(reader_every_s, deadline),
                                              name="reader", daemon=True))
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=KEYED_BUDGET_S + CLIENT_TIMEOUT_S + 10)
        alive = [t.name for t in self._threads if t.is_alive()]
        assert not alive, f"workload threads did not stop: {alive}"
        self._threads.clear()
        self._stop.clear()

    def _producer(self, i: int, max_ops: int, deadline: float) -> None:
        self.cluster.net.enter("client")  # this thread, and its sockets, in the client host
        rng = random.Random(self.seed * 1000 + i)
        keyed = i % self.keyed_every == 0
        shunned: dict[int, float] = {}
        with httpx.Client(timeout=TIMEOUT) as http:
            for _ in range(max_ops):
                if self._stop.is_set() or time.monotonic() > deadline:
                    return
                with self._lock:
                    value = next(self.values)
                self._add(self.send(http, rng, i, value, keyed, shunned))
                time.sleep(self.pause_s)

    def _pick(self, rng: random.Random, shunned: dict[int, float]) -> Any:
        """A random broker, leaving out for ``SHUN_S`` one that did not answer (as a
        client that refreshes its metadata would), unless all are left out."""
        now = time.monotonic()
        ok = [b for b in self.cluster.brokers if shunned.get(b.broker_id, 0) <= now]
        pool = ok or self.cluster.brokers
        return pool[rng.randrange(len(pool))]

    def send(self, http: httpx.Client, rng: random.Random, process: int, value: int,
             keyed: bool, shunned: dict[int, float]) -> Op:
        p = value % self.partitions
        b = self._pick(rng, shunned)
        op = Op(process=process, f="send", value=value, invoke=self.now(), partition=p,
                via=b.hostname, idempotent=keyed, attempts=0)
        body = {"records": [{"value": value}]}
        headers = {"Content-Type": JSON_V2}
        if keyed:
            headers["Idempotency-Key"] = uuid.uuid4().hex
        give_up = time.monotonic() + KEYED_BUDGET_S
        outcomes = []
        while True:
            op.attempts += 1
            op.via = b.hostname  # the broker of the last attempt: the one that answered
            resp, exc = None, None
            try:
                resp = http.post(f"{b.url}/topics/{self.topic}/partitions/{p}?acks=all",
                                 json=body, headers=headers)
            except httpx.HTTPError as e:
                exc = e
            typ, offset, error = classify(resp, exc)
            outcomes.append(typ)
            if typ == "ok":
                op.type, op.offset = "ok", offset
                break
            op.error = error
            if typ == "fail" or error.endswith("Timeout") or " 50003" in error:
                shunned[b.broker_id] = time.monotonic() + SHUN_S
            if not keyed or time.monotonic() > give_up or self._stop.is_set():
                op.type = "fail" if all(t == "fail" for t in outcomes) else "info"
                break
            time.sleep(0.2)  # same key, same body, maybe another broker
            b = self._pick(rng, shunned)
        op.complete = self.now()
        return op

    # --- reads --------------------------------------------------------------------------

    def _reader(self, every_s: float, deadline: float) -> None:
        self.cluster.net.enter("client")
        rng = random.Random(self.seed * 1000 + 999)
        with httpx.Client(timeout=TIMEOUT) as http:
            while not self._stop.wait(every_s) and time.monotonic() < deadline:
                b = self.cluster.brokers[rng.randrange(len(self.cluster.brokers))]
                for p in range(self.partitions):
                    self._add(self.read(http, b, p, final=False))

    def read(self, http: httpx.Client, b: Any, p: int, *, final: bool) -> Op:
        """Partition ``p`` read whole (offset 0 to the high watermark of the first answer)
        through broker ``b``; ``info`` on any error."""
        op = Op(process=99, f="read", invoke=self.now(), partition=p, via=b.hostname,
                final=final)
        offset, hw = 0, None
        try:
            for _ in range(MAX_READ_REQUESTS):
                r = http.get(f"{b.url}/topics/{self.topic}/partitions/{p}/records",
                             params={"offset": offset}, headers={"Accept": JSON_V2})
                if r.status_code != 200:
                    op.error = f"{r.status_code} {r.text[:200]}"
                    break
                if hw is None:
                    hw = int(r.headers["x-franz-high-watermark"])
                rows = r.json()
                op.records += [(int(x["offset"]), x["value"]) for x in rows]
                nxt = int(r.headers.get("x-franz-next-offset", offset))
                offset = max(nxt, op.records[-1][0] + 1 if rows else nxt)
                if offset >= hw:
                    op.type = "ok"
                    break
                if not rows and nxt <= offset:
                    op.error = f"stuck at {offset} below hw {hw}"
                    break
        except httpx.HTTPError as exc:
            op.error = f"{type(exc).__name__}: {exc}"
        op.complete = self.now()
        if op.type != "ok":
            op.records = []
        return op

    def final_reads(self) -> list[Op]:
        """Every partition read whole through every broker, from ``control``."""
        ops = []
        for b in self.cluster.brokers:
            for p in range(self.partitions):
                op = self.read(self.cluster.http, b, p, final=True)
                self._add(op)
                ops.append(op)
        return ops

    # --- serving again ------------------------------------------------------------------

    def wait_serving(self, budget_s: float) -> float:
        """Seconds until an acks=all produce to every partition succeeds through every
        broker (from ``client``; the values are part of the history)."""
        started = time.monotonic()
        pending = {(b.broker_id, p) for b in self.cluster.brokers for p in range(self.partitions)}
        with self.cluster.net.inside("client"), httpx.Client(timeout=TIMEOUT) as http:
            while pending:
                if time.monotonic() - started > budget_s:
                    raise AssertionError(f"not serving {budget_s:.0f} s after the heal: "
                                         f"(broker, partition) {sorted(pending)} still fail")
                for bid, p in sorted(pending):
                    with self._lock:
                        value = next(self.values)
                        while value % self.partitions != p:
                            value = next(self.values)
                    b = self.cluster.brokers[bid]
                    op = self._send_to(http, b, p, value)
                    self._add(op)
                    if op.type == "ok":
                        pending.discard((bid, p))
                if pending:
                    time.sleep(0.25)
        return time.monotonic() - started

    def _send_to(self, http: httpx.Client, b: Any, p: int, value: int) -> Op:
        op = Op(process=98, f="send", value=value, invoke=self.now(), partition=p,
                via=b.hostname)
        resp, exc = None, None
        try:
            resp = http.post(f"{b.url}/topics/{self.topic}/partitions/{p}?acks=all",
                             json={"records": [{"value": value}]},
                             headers={"Content-Type": JSON_V2})
        except httpx.HTTPError as e:
            exc = e
        op.type, op.offset, op.error = classify(resp, exc)
        op.complete = self.now()
        return op
