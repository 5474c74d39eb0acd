"""The Schema Registry on three real ``franz broker`` processes and a real ZooKeeper.

The registry lives in ``_schemas`` (one partition, compacted, RF 3 here) and is served
by the leader of ``_schemas-0``; every broker forwards calls there. One cluster per
module, tests in file order (each leaves all three brokers running):

1. broker 0 alone: ``_schemas`` is not created before three brokers are alive
   (``offsets.topic.replication.factor``), so every registry call, and a v2 avro produce,
   is a prompt 500 / 50003 (retriable) in the registry's content type; then 1 and 2 start.
2. ``_schemas``: RF 3, full ISR, ``cleanup.policy=compact``, one partition.
3. different schemas registered concurrently through all three brokers get distinct
   ids; one schema registered under three subjects at once through the three brokers
   gets one id; every broker answers the same id and text for each.
4. SIGKILL of the leader of ``_schemas-0``: calls made during the failover end within a
   bounded time, each with 200 or a clean 5xx with a Confluent error code; after it every
   route answers through both survivors (subjects, ids, a new version, compatibility,
   config), nothing registered before is lost, a v2 avro produce with
   ``value_schema_id`` and an avro consumer instance work through a survivor; the
   killed broker restarts, is made the leader again (preferred election) and serves
   the same ids from its own log, and hands out no id twice.
5. no leader at all: both followers die (the ISR shrinks to the leader), then the leader;
   a former follower restarted alone cannot lead (no unclean election), so registry
   calls through it answer 500 / 50003 after the router's bounded wait (10 s); the old
   leader's return brings every subject back.

Small timeouts make failover quick (``zookeeper.session.timeout.ms=4000``,
``replica.lag.time.max.ms=2000``), as in ``test_cluster.py``. Needs java and the
zookeeper jars (the ``zookeeper`` fixture skips otherwise).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from .conftest import BrokerProcess, free_port, wait_until

pytestmark = pytest.mark.timeout(240)

SESSION_MS = 4000
OVERRIDES = ["replica.lag.time.max.ms=2000", f"zookeeper.session.timeout.ms={SESSION_MS}",
             "replica.fetch.backoff.ms=200", "offsets.topic.num.partitions=1",
             "min.insync.replicas=2", "log.flush.scheduler.interval.ms=200"]
SR = "application/vnd.schemaregistry.v1+json"
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
V2 = "application/vnd.kafka.v2+json"
RETRIABLE = {50001, 50002, 50003}  # store error, timeout, no leader / forwarding failed
#: a call to the registry waits at most ROUTE_PATIENCE_S (10 s) for a leader
#: (core/broker/cluster/router.py); this is how long a test lets one call take
CALL_BOUND_S = 20.0
TOPIC = "orders"

ORDER_V1 = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "long"},
        {"name": "price", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "state", "type": {"type": "enum", "name": "State",
                                   "symbols": ["NEW", "PAID", "SHIPPED"]}},
    ]})
# BACKWARD-compatible: one more field with a default
ORDER_V2 = json.dumps({**json.loads(ORDER_V1), "fields": [
    *json.loads(ORDER_V1)["fields"], {"name": "channel", "type": "string", "default": "web"}]})
# incompatible with both: qty's type changes from long to string
ORDER_BAD = json.dumps({**json.loads(ORDER_V1), "fields": [
    {**f, "type": "string"} if f["name"] == "qty" else f for f in json.loads(ORDER_V1)["fields"]]})


def record_schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "cluster",
                       "fields": [{"name": "n", "type": "long"}]})


# --- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def brokers(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    """Three brokers, not started: the first test starts them (broker 0 alone first);
    ``cluster`` starts whichever is not running. All stopped at the end."""
    root = tmp_path_factory.mktemp("schema-cluster")
    zk = f"{zookeeper}/franz-sr-{os.getpid()}-{time.monotonic_ns()}"
    procs = [BrokerProcess(i, free_port(), root / f"data-{i}", zk, root / f"broker-{i}.log",
                           overrides=OVERRIDES) for i in range(3)]
    try:
        yield procs
    finally:
        for b in procs:
            b.stop()


@pytest.fixture
def cluster(brokers: list[BrokerProcess], zk: KazooClient) -> list[BrokerProcess]:
    """All three running and ``_schemas-0`` led, with its full ISR."""
    for b in brokers:
        if not b.running:
            b.start()
    wait_until(lambda: (s := schemas_state(zk)) is not None and s["leader"] >= 0
               and len(s["isr"]) == 3, 30, "_schemas-0 with a leader and three in-sync replicas")
    serving(brokers)
    return brokers


def serving(brokers: list[BrokerProcess]) -> None:
    """Until each of ``brokers`` answers a registry read (its metadata knows the leader)."""
    for b in brokers:
        wait_until(lambda b=b: call(b, "GET", "/subjects").status_code == 200, CALL_BOUND_S,
                   f"the registry answering through broker {b.broker_id}", every_s=0.2)


def call(b: BrokerProcess, method: str, path: str, body: Any = None, *,
         timeout: float = CALL_BOUND_S + 10, **params: Any) -> httpx.Response:
    headers = {"Accept": SR}
    content = None
    if body is not None:
        headers["Content-Type"] = SR
        content = json.dumps(body)
    return httpx.request(method, b.url + path, headers=headers, content=content,
                         params=params, timeout=timeout)


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, f"{resp.request.method} {resp.request.url}: " \
                                    f"{resp.status_code} {resp.text}"
    return resp.json()


def register(b: BrokerProcess, subject: str, schema: str) -> int:
    return int(ok(call(b, "POST", f"/subjects/{subject}/versions", {"schema": schema}))["id"])


def assert_retriable(resp: httpx.Response) -> None:
    """A clean, retriable 5xx in the registry's shape: a Confluent 5-digit error code."""
    assert 500 <= resp.status_code < 600, f"{resp.status_code} {resp.text}"
    assert resp.headers["content-type"].startswith(SR), resp.headers
    body = resp.json()
    assert body["error_code"] in RETRIABLE and body["message"], body


def schemas_state(zk: KazooClient) -> dict[str, Any] | None:
    path = "/brokers/topics/_schemas/partitions/0/state"
    if zk.exists(path) is None:
        return None
    return dict(json.loads(zk.get(path)[0]))


def cluster_id(b: BrokerProcess) -> str:
    return str(httpx.get(f"{b.url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"])


def produce_avro(b: BrokerProcess, schema_id: int, values: list[dict[str, Any]]) -> list[int]:
    resp = httpx.post(f"{b.url}/topics/{TOPIC}/partitions/0", params={"acks": "all"},
                      timeout=CALL_BOUND_S + 10, headers={"Content-Type": AVRO_V2, "Accept": V2},
                      json={"value_schema_id": schema_id, "records": [{"value": v} for v in values]})
    body = ok(resp)
    assert body["value_schema_id"] == schema_id, body
    assert all(o["error_code"] is None for o in body["offsets"]), body
    return [int(o["offset"]) for o in body["offsets"]]


def avro_range_read(b: BrokerProcess) -> list[Any]:
    resp = httpx.get(f"{b.url}/topics/{TOPIC}/partitions/0/records", timeout=30,
                     params={"offset": 0, "count": 1000}, headers={"Accept": AVRO_V2})
    return [r["value"] for r in ok(resp)]


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t0 = time.monotonic()
    try:
        out = fn(*args)
    except httpx.HTTPError as exc:  # a hang past the client's timeout lands here
        out = exc
    return time.monotonic() - t0, out


def order(i: int, *, v2: bool = False) -> dict[str, Any]:
    """Avro's JSON encoding of an Order (a union value other than null is wrapped)."""
    value: dict[str, Any] = {"id": f"o-{i}", "qty": i, "price": i + 0.5, "paid": i % 2 == 0,
                             "note": None if i % 3 else {"string": f"note {i}"},
                             "state": ["NEW", "PAID", "SHIPPED"][i % 3]}
    if v2:
        value["channel"] = "app"
    return value


# --- tests ----------------------------------------------------------------------------------


def test_no_schemas_topic_yet_is_a_prompt_retriable_50003(brokers: list[BrokerProcess],
                                                          zk: KazooClient) -> None:
    first = brokers[0]
    first.start()
    # alone, the controller does not create _schemas (it waits for 3 live brokers)
    assert schemas_state(zk) is None
    probes = [("GET", "/subjects", None), ("GET", "/schemas/ids/1", None),
              ("POST", "/subjects/early-value/versions", {"schema": ORDER_V1}),
              ("POST", "/compatibility/subjects/early-value/versions/latest", {"schema": ORDER_V1}),
              ("GET", "/config", None)]
    for method, path, body in probes:
        elapsed, resp = timed(lambda m=method, p=path, b=body: call(first, m, p, b, timeout=15))
        assert isinstance(resp, httpx.Response), f"{method} {path}: {resp!r}"
        assert_retriable(resp)
        assert resp.json()["error_code"] == 50003, resp.text
        assert elapsed < 5, f"{method} {path} took {elapsed:.1f} s"
    # a v2 avro produce needs the registry too: the REST Proxy's retriable 50003
    resp = httpx.post(f"{first.url}/topics/early/partitions/0", timeout=15,
                      headers={"Content-Type": AVRO_V2, "Accept": V2},
                      json={"value_schema": ORDER_V1, "records": [{"value": order(1)}]})
    assert resp.status_code == 500 and resp.json()["error_code"] == 50003, resp.text
    for b in brokers[1:]:
        b.start()
    wait_until(lambda: (s := schemas_state(zk)) is not None and len(s["isr"]) == 3, 30,
               "_schemas-0 created with three in-sync replicas")
    serving(brokers)
    assert all(ok(call(b, "GET", "/subjects")) == [] for b in brokers)


def test_schemas_topic_is_compacted_with_three_replicas(cluster: list[BrokerProcess],
                                                        zk: KazooClient) -> None:
    assignment = json.loads(zk.get("/brokers/topics/_schemas")[0])["partitions"]
    assert list(assignment) == ["0"] and sorted(assignment["0"]) == [0, 1, 2]
    st = schemas_state(zk)
    assert st is not None and sorted(st["isr"]) == [0, 1, 2] and st["leader"] == assignment["0"][0]
    config = json.loads(zk.get("/config/topics/_schemas")[0])["config"]
    assert config["cleanup.policy"] == "compact", config
    for b in cluster:  # an internal topic: readable, not writable by clients
        topic = httpx.get(f"{b.url}/v3/clusters/{cluster_id(b)}/topics/_schemas", timeout=10)
        assert ok(topic)["replication_factor"] == 3 and topic.json()["is_internal"] is True
    refused = httpx.post(f"{cluster[1].url}/topics/_schemas", timeout=10,
                         headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                         json={"records": [{"value": {"x": 1}}]})
    assert refused.status_code == 400 and refused.json()["error_code"] == 40002, refused.text


def test_concurrent_registrations_through_all_brokers_get_cluster_wide_ids(
        cluster: list[BrokerProcess]) -> None:
    jobs: list[tuple[BrokerProcess, str, str]] = []
    for b in cluster:
        for k in range(4):
            jobs.append((b, f"conc-{b.broker_id}-{k}-value", record_schema(f"R{b.broker_id}_{k}")))
        # one schema under a subject of each broker's own: the same id everywhere
        jobs.append((b, f"shared-{b.broker_id}-value", record_schema("Shared")))
    start = threading.Barrier(len(jobs))

    def run(job: tuple[BrokerProcess, str, str]) -> int:
        start.wait(timeout=10)
        return register(*job)

    with ThreadPoolExecutor(len(jobs)) as pool:
        ids = dict(zip([s for _, s, _ in jobs], pool.map(run, jobs), strict=True))
    distinct = {s: i for s, i in ids.items() if not s.startswith("shared-")}
    assert len(set(distinct.values())) == len(distinct), ids  # no id handed out twice
    shared = {i for s, i in ids.items() if s.startswith("shared-")}
    assert len(shared) == 1 and shared.isdisjoint(distinct.values()), ids
    assert sorted(set(ids.values())) == list(range(1, len(distinct) + 2)), ids  # dense, from 1
    schema_of = {s: text for _, s, text in jobs}
    for b in cluster:  # every broker answers the same id and text for each
        assert set(ok(call(b, "GET", "/subjects"))) == set(ids)
        for subject, sid in ids.items():
            got = ok(call(b, "GET", f"/subjects/{subject}/versions/latest"))
            assert (got["id"], got["version"]) == (sid, 1), got
            assert json.loads(got["schema"]) == json.loads(schema_of[subject])
            found = ok(call(b, "POST", f"/subjects/{subject}", {"schema": schema_of[subject]}))
            assert found["id"] == sid, found
        for sid in set(ids.values()):
            assert "schema" in ok(call(b, "GET", f"/schemas/ids/{sid}"))


def test_schemas_leader_killed_failover_then_restart(cluster: list[BrokerProcess],
                                                     zk: KazooClient) -> None:
    t_begin = time.monotonic()
    # --- before: what must survive --------------------------------------------------------
    v1 = register(cluster[0], f"{TOPIC}-value", ORDER_V1)
    ok(call(cluster[1], "PUT", "/config/audit-value", {"compatibility": "FULL"}))
    before = {s: ok(call(cluster[2], "GET", f"/subjects/{s}/versions/latest"))["id"]
              for s in ok(call(cluster[2], "GET", "/subjects"))}
    texts = {i: ok(call(cluster[0], "GET", f"/schemas/ids/{i}"))["schema"]
             for i in set(before.values())}
    r = httpx.post(f"{cluster[0].url}/v3/clusters/{cluster_id(cluster[0])}/topics", timeout=30,
                   json={"topic_name": TOPIC, "partitions_count": 1, "replication_factor": 3})
    assert r.status_code in (200, 201), r.text
    wait_until(lambda: httpx.get(f"{cluster[2].url}/topics/{TOPIC}", timeout=5).status_code == 200,
               10, f"{TOPIC} seen by every broker")
    produced = produce_avro(cluster[1], v1, [order(i) for i in range(5)])
    assert produced == list(range(5))

    # --- SIGKILL the leader of _schemas-0 ------------------------------------------------------
    st = schemas_state(zk)
    assert st is not None
    old = st["leader"]
    survivors = [b for b in cluster if b.broker_id != old]
    cluster[old].kill()
    t_kill = time.monotonic()

    # calls made while no leader is known: each ends within the bound, 200 or a clean 5xx
    any_id = next(iter(texts))
    window = [(s, "GET", "/subjects", None) for s in survivors] + \
             [(s, "GET", f"/schemas/ids/{any_id}", None) for s in survivors] + \
             [(s, "POST", f"/subjects/during-{s.broker_id}-value/versions",
               {"schema": record_schema(f"During{s.broker_id}")}) for s in survivors]
    with ThreadPoolExecutor(len(window)) as pool:
        outcomes = list(pool.map(lambda w: timed(call, *w), window))
    answered: list[str] = []
    for (b, method, path, _), (elapsed, resp) in zip(window, outcomes, strict=True):
        assert isinstance(resp, httpx.Response), f"{method} {path} on {b.broker_id}: {resp!r}"
        assert elapsed < CALL_BOUND_S, f"{method} {path} on {b.broker_id} took {elapsed:.1f} s"
        if resp.status_code != 200:
            assert_retriable(resp)
        answered.append(f"{method} {path} @{b.broker_id}: {resp.status_code} "
                        f"{resp.json().get('error_code', '') if resp.status_code != 200 else ''}"
                        f"in {elapsed:.1f} s")
    print("\ncalls during the failover:\n  " + "\n  ".join(answered))

    after = wait_until(lambda: (s := schemas_state(zk)) is not None and s["leader"] not in (old, -1)
                       and s, SESSION_MS / 1000 + 15, "a new leader of _schemas-0")
    assert after["leader_epoch"] > st["leader_epoch"] and old not in after["isr"]
    serving(survivors)
    print(f"failover: registry answering {time.monotonic() - t_kill:.1f} s after the SIGKILL")

    # --- every route through the survivors; nothing lost ---------------------------------
    during = {f"during-{b.broker_id}-value": b for b in survivors}
    for b in survivors:
        subjects = set(ok(call(b, "GET", "/subjects")))
        assert set(before) <= subjects, sorted(set(before) - subjects)
        for subject, sid in before.items():
            assert ok(call(b, "GET", f"/subjects/{subject}/versions/latest"))["id"] == sid
        for sid, text in texts.items():
            assert ok(call(b, "GET", f"/schemas/ids/{sid}"))["schema"] == text
        assert ok(call(b, "GET", "/config/audit-value")) == {"compatibilityLevel": "FULL"}
    # a registration answered 200 during the window is there; retrying one is idempotent
    for subject, b in during.items():
        sid = register(survivors[0], subject, record_schema(f"During{b.broker_id}"))
        assert ok(call(survivors[1], "GET", f"/subjects/{subject}/versions")) == [1]
        before[subject] = sid
    a, c = survivors
    compat = ok(call(a, "POST", f"/compatibility/subjects/{TOPIC}-value/versions/latest",
                     {"schema": ORDER_V2}))
    assert compat == {"is_compatible": True}
    incompat = call(c, "POST", f"/compatibility/subjects/{TOPIC}-value/versions/latest",
                    {"schema": ORDER_BAD})
    assert ok(incompat)["is_compatible"] is False
    refused = call(a, "POST", f"/subjects/{TOPIC}-value/versions", {"schema": ORDER_BAD})
    assert refused.status_code == 409 and refused.json()["error_code"] == 409, refused.text
    v2 = register(c, f"{TOPIC}-value", ORDER_V2)  # a new version through a survivor
    assert v2 not in before.values() and v2 > max(before.values())
    assert ok(call(a, "GET", f"/subjects/{TOPIC}-value/versions")) == [1, 2]
    assert ok(call(a, "GET", f"/schemas/ids/{v2}"))["schema"] == \
        ok(call(c, "GET", f"/subjects/{TOPIC}-value/versions/2"))["schema"]
    ok(call(c, "PUT", f"/config/{TOPIC}-value", {"compatibility": "FULL_TRANSITIVE"}))
    assert ok(call(a, "GET", f"/config/{TOPIC}-value")) == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert ok(call(a, "GET", "/config")) == {"compatibilityLevel": "BACKWARD"}
    before[f"{TOPIC}-value"] = v2
    texts[v2] = ok(call(a, "GET", f"/schemas/ids/{v2}"))["schema"]

    # --- v2 avro produce by id and an avro consumer instance through a survivor -----------
    assert produce_avro(a, v2, [order(i, v2=True) for i in range(5, 10)]) == list(range(5, 10))
    group = f"sr-avro-{time.monotonic_ns()}"
    created = httpx.post(f"{c.url}/consumers/{group}", timeout=30, headers={"Content-Type": V2},
                         json={"name": "c1", "format": "avro", "auto.offset.reset": "earliest"})
    base = f"{c.url}/consumers/{group}/instances/{ok(created)['instance_id']}"
    r = httpx.post(f"{base}/assignments", timeout=30, headers={"Content-Type": V2},
                   json={"partitions": [{"topic": TOPIC, "partition": 0}]})
    assert r.status_code == 204, r.text
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(rows) < 10 and time.monotonic() < deadline:
        r = httpx.get(f"{base}/records", params={"timeout": 1000}, timeout=30,
                      headers={"Accept": AVRO_V2})
        rows += ok(r)
    assert [(r["offset"], r["value"]) for r in rows] == \
        [(i, order(i, v2=i >= 5)) for i in range(10)]
    httpx.delete(base, timeout=10, headers={"Content-Type": V2})

    # --- the killed broker restarts, leads again and serves the same ids --------------------
    preferred = json.loads(zk.get("/brokers/topics/_schemas")[0])["partitions"]["0"][0]
    assert preferred == old  # it led at the start, with everyone alive
    cluster[old].start()
    wait_until(lambda: old in (schemas_state(zk) or {}).get("isr", []), 20,
               f"broker {old} back in the ISR of _schemas-0")
    r = httpx.post(f"{a.url}/v3/clusters/{cluster_id(a)}/preferred-replica-election", timeout=10,
                   json={"version": 1, "partitions": [{"topic": "_schemas", "partition": 0}]})
    assert r.status_code == 202, r.text
    wait_until(lambda: (schemas_state(zk) or {}).get("leader") == old, 15,
               f"broker {old} leading _schemas-0 again")
    back = cluster[old]
    serving(cluster)
    for b in cluster:
        subjects = set(ok(call(b, "GET", "/subjects")))
        assert set(before) <= subjects
        for subject, sid in before.items():
            assert ok(call(b, "GET", f"/subjects/{subject}/versions/latest"))["id"] == sid
        for sid, text in texts.items():
            assert ok(call(b, "GET", f"/schemas/ids/{sid}"))["schema"] == text
    assert ok(call(back, "GET", f"/config/{TOPIC}-value")) == {"compatibilityLevel": "FULL_TRANSITIVE"}
    # its state came from the log: the next id is above every id the interim leader gave
    fresh = register(back, "after-restart-value", record_schema("AfterRestart"))
    assert fresh > max(before.values()), (fresh, before)
    # an existing schema under a new subject keeps its id, through the new leader
    assert register(back, "again-value", ORDER_V1) == v1
    assert avro_range_read(back) == [order(i, v2=i >= 5) for i in range(10)]
    print(f"kill/failover/restart test body: {time.monotonic() - t_begin:.1f} s")


def test_no_leader_elected_is_a_bounded_retriable_50003(cluster: list[BrokerProcess],
                                                        zk: KazooClient) -> None:
    """Both followers of ``_schemas-0`` die (the ISR shrinks to the leader), then the
    leader: restarted alone, a former follower is out of the ISR and, without unclean
    election, cannot lead; ``_schemas-0`` has no leader. Registry calls through it answer
    500 / 50003 after the router's bounded wait for a leader; the old leader's return
    brings everything back."""
    subjects = set(ok(call(cluster[0], "GET", "/subjects")))
    ids = {s: ok(call(cluster[0], "GET", f"/subjects/{s}/versions/latest"))["id"] for s in subjects}
    st = schemas_state(zk)
    assert st is not None
    leader = cluster[st["leader"]]
    f1, f2 = (b for b in cluster if b is not leader)
    f1.kill()
    f2.kill()
    wait_until(lambda: (schemas_state(zk) or {}).get("isr") == [leader.broker_id],
               SESSION_MS / 1000 + 15, "the ISR of _schemas-0 shrunk to its leader")
    leader.kill()
    f1.start()  # alone, not in the ISR: _schemas-0 stays without a leader
    probes = [("GET", "/subjects", None), ("GET", "/schemas/ids/1", None),
              ("POST", "/subjects/leaderless-value/versions",
               {"schema": record_schema("Leaderless")})]
    with ThreadPoolExecutor(len(probes)) as pool:  # each waits for a leader: at once
        outcomes = list(pool.map(lambda p: timed(call, f1, *p), probes))
    for (method, path, _), (elapsed, resp) in zip(probes, outcomes, strict=True):
        assert isinstance(resp, httpx.Response), f"{method} {path}: {resp!r}"
        assert_retriable(resp)
        assert resp.json()["error_code"] == 50003, resp.text
        assert elapsed < CALL_BOUND_S, f"{method} {path} took {elapsed:.1f} s"
        print(f"\nno leader: {method} {path}: {resp.status_code} {resp.json()} in {elapsed:.1f} s")
    st = schemas_state(zk)
    assert st is not None and st["leader"] in (-1, leader.broker_id), st
    leader.start()
    f2.start()
    wait_until(lambda: len((schemas_state(zk) or {}).get("isr", [])) == 3, 30, "full ISR again")
    serving(cluster)
    for b in cluster:
        assert set(ok(call(b, "GET", "/subjects"))) == subjects
        for s, sid in ids.items():
            assert ok(call(b, "GET", f"/subjects/{s}/versions/latest"))["id"] == sid
