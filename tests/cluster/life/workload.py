"""The client steps: what applications do to the cluster all week.

Each step takes the ``Ctx``, does its requests, tells the model what was acknowledged,
and returns what it did (for the history). Produce is ``acks=all``, JSON keys and values.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from .context import Ctx
from .errors import Violation
from .http import JSON_V2, V2, Answer
from .model import Group, KeyedRequest
from .settings import COMPACT, COMPACT_KEYS, DATA, MAX_MEMBERS, RETAIN, TopicSpec

# --- producing ---------------------------------------------------------------------------


def _records(ctx: Ctx, spec: TopicSpec, n: int, *, keyed: bool) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        if spec.kind == "compact":
            key: str | None = f"k{ctx.rng.randrange(COMPACT_KEYS)}"
        elif keyed:
            key = f"key{ctx.rng.randrange(40)}"
        else:
            key = None
        rec: dict[str, Any] = {"value": ctx.model.new_value(spec.name, key)}
        if key is not None:
            rec["key"] = key
        elif spec.kind == "retain" or ctx.rng.random() < 0.3:
            rec["partition"] = ctx.rng.randrange(spec.partitions)
        out.append(rec)
    return out


def _ack_answer(ctx: Ctx, spec: TopicSpec, records: list[dict[str, Any]],
                a: Answer) -> tuple[int, list[tuple[int, int] | None]]:
    """Acks what a 200 says was written; (count acked, place per record or None)."""
    if a.status != 200:
        raise Violation("produce-refused", f"{spec.name}: {a.brief()}")
    offsets = a.body["offsets"]
    if len(offsets) != len(records):
        raise Violation("produce-answer", f"{len(records)} records, {len(offsets)} offsets")
    places: list[tuple[int, int] | None] = []
    for rec, o in zip(records, offsets, strict=True):
        if o.get("error_code") is None and o.get("offset") is not None:
            if "partition" in rec and rec["partition"] != o["partition"]:
                raise Violation("produce-answer", f"{rec} written to partition {o['partition']}")
            ctx.model.ack(spec.name, o["partition"], o["offset"], rec.get("key"), rec["value"])
            places.append((o["partition"], o["offset"]))
        else:
            ctx.counts[f"record-error:{o.get('error_code')}"] += 1
            places.append(None)
    return sum(p is not None for p in places), places


def produce(ctx: Ctx, spec: TopicSpec, *, n: int | None = None,
            idempotent: bool | None = None) -> dict[str, Any]:
    n = n if n is not None else ctx.rng.randint(2, 6)
    keyed = spec.kind == "compact" or ctx.rng.random() < 0.5
    if idempotent is None:
        idempotent = ctx.rng.random() < 0.4
    if idempotent:
        return _produce_keyed(ctx, spec, _records(ctx, spec, n, keyed=keyed))
    tries = 0
    acked = 0

    def attempt() -> Answer | None:
        nonlocal tries, acked
        tries += 1
        records = _records(ctx, spec, n, keyed=keyed)  # a new request: new values
        b = ctx.broker()
        a = ctx.http.send("POST", f"{b.url}/topics/{spec.name}", params={"acks": "all"},
                          headers={"Content-Type": JSON_V2},
                          content=json.dumps({"records": records}))
        if a.kind != "ok":
            return a
        acked, _ = _ack_answer(ctx, spec, records, a)
        return a if acked else None

    ctx.until(f"produce to {spec.name}", attempt)
    return {"topic": spec.name, "records": n, "keyed": keyed, "tries": tries, "acked": acked}


def _produce_keyed(ctx: Ctx, spec: TopicSpec, records: list[dict[str, Any]]) -> dict[str, Any]:
    ctx.model.next_key_request += 1
    key = f"life-{ctx.model.next_key_request}-{uuid.UUID(int=ctx.rng.getrandbits(128)).hex[:12]}"
    body = json.dumps({"records": records}).encode()
    req = {"key": key, "spec": spec, "records": records, "body": body}
    done = _send_keyed(ctx, req)
    if not done:
        ctx.pending_keyed.append(req)
    return {"topic": spec.name, "records": len(records), "idempotency_key": key,
            "answered": done}


def _send_keyed(ctx: Ctx, req: dict[str, Any]) -> bool:
    """The same request with the same key until every record is written (a retry
    resumes it); True once answered in full."""
    spec: TopicSpec = req["spec"]
    result: list[Any] = []

    def attempt() -> Answer | None:
        b = ctx.broker()
        a = ctx.http.send("POST", f"{b.url}/topics/{spec.name}", params={"acks": "all"},
                          headers={"Content-Type": JSON_V2, "Idempotency-Key": req["key"]},
                          content=req["body"])
        if a.kind != "ok":
            return a
        if a.status == 422:
            raise Violation("idempotency-422", f"key {req['key']}, the same request: {a.brief()}")
        offsets = a.body["offsets"] if a.status == 200 else []
        if a.status != 200 or any(o.get("error_code") is not None for o in offsets):
            ctx.counts["keyed-partial-answer"] += 1
            return None  # a retriable failure: the retry resumes it
        acked, places = _ack_answer(ctx, spec, req["records"], a)
        result.append(places)
        return a

    if ctx.until(f"Idempotency-Key {req['key']}", attempt) is None:
        return False
    ctx.model.keyed.append(KeyedRequest(req["key"], spec.name, req["body"], result[0]))
    return True


def retry_pending_keyed(ctx: Ctx) -> list[str]:
    """Requests left unanswered by a fault, sent again until answered."""
    done = []
    for req in list(ctx.pending_keyed):
        if _send_keyed(ctx, req):
            ctx.pending_keyed.remove(req)
            done.append(req["key"])
    return done


def exact_retry(ctx: Ctx) -> dict[str, Any]:
    """An answered Idempotency-Key request sent again, byte for byte, through any
    broker: the same offsets, and nothing written."""
    if not ctx.model.keyed:
        return produce(ctx, DATA, idempotent=True)
    req = ctx.model.keyed[ctx.rng.randrange(len(ctx.model.keyed))]
    spec = next(s for s in (DATA, COMPACT, RETAIN) if s.name == req.topic)
    before = _end_offsets(ctx, spec)
    b = ctx.broker()
    a = ctx.until(f"retry of {req.key}", lambda: ctx.http.send(
        "POST", f"{b.url}/topics/{spec.name}", params={"acks": "all"},
        headers={"Content-Type": JSON_V2, "Idempotency-Key": req.key}, content=req.body))
    if a is None:
        return {"key": req.key, "answered": False}
    if a.status != 200:
        raise Violation("idempotency-retry", f"key {req.key} through {b.broker_id}: {a.brief()}")
    got = [(o["partition"], o["offset"]) for o in a.body["offsets"]]
    if got != req.answer:
        raise Violation("idempotency-retry", f"key {req.key}: first answer {req.answer}, "
                        f"the retry's {got}")
    after = _end_offsets(ctx, spec)
    if after != before:
        raise Violation("idempotency-rewrote", f"key {req.key}: end offsets {before} -> {after}")
    return {"key": req.key, "via": b.broker_id, "offsets": got}


def _end_offsets(ctx: Ctx, spec: TopicSpec) -> list[int]:
    out = []
    for p in range(spec.partitions):
        b = ctx.broker()
        a = ctx.http.until(f"offsets of {spec.name}-{p}", lambda b=b, p=p: ctx.http.send(
            "GET", f"{b.url}/topics/{spec.name}/partitions/{p}/offsets"))
        out.append(int(a.body["end_offset"]))
    return out


def burst_compact(ctx: Ctx) -> dict[str, Any]:
    """Many writes to a few keys of the compacted topic: segments of 1 KB roll and the
    cleaner (every 100 ms, dirty ratio 0.01) compacts them."""
    rounds = ctx.rng.randint(4, 8)
    for _ in range(rounds):
        produce(ctx, COMPACT, n=ctx.rng.randint(5, 10), idempotent=ctx.rng.random() < 0.2)
    return {"requests": rounds}


def burst_retain(ctx: Ctx) -> dict[str, Any]:
    rounds = ctx.rng.randint(3, 6)
    for _ in range(rounds):
        produce(ctx, RETAIN, n=ctx.rng.randint(5, 10), idempotent=False)
    return {"requests": rounds}


# --- consumer instances ------------------------------------------------------------------


def _instance_url(ctx: Ctx, group: str, member: str) -> str:
    return f"{ctx.broker().url}/consumers/{group}/instances/{member}"


def _vanished(group: str, member: str, a: Answer, what: str) -> Violation:
    return Violation("member-vanished", f"{what}: member {member} of {group}, acknowledged "
                     f"and never deleted: {a.brief()}")


def join(ctx: Ctx, g: Group) -> dict[str, Any]:
    if len(g.members) >= MAX_MEMBERS:
        return leave(ctx, g)
    g.next_member += 1
    name = f"m{g.next_member}"
    tried = [0]

    def create() -> Answer | None:
        tried[0] += 1
        return ctx.http.send("POST", f"{ctx.broker().url}/consumers/{g.name}",
                             headers={"Content-Type": V2},
                             json={"name": name, "format": "json",
                                   "auto.offset.reset": "earliest",
                                   "auto.commit.enable": "false"})

    a = ctx.until(f"create {g.name}/{name}", create)
    if a is None:
        g.uncertain.add(name)
        return {"group": g.name, "member": name, "created": "unknown"}
    # 409 / 40902 after a try without an answer: that try had created it
    if a.status not in (200, 409) or (a.status == 409 and (tried[0] == 1 or a.code != 40902)):
        raise Violation("join-refused", f"{g.name}/{name}: {a.brief()}")
    g.members.add(name)
    s = ctx.until(f"subscribe {g.name}/{name}", lambda: ctx.http.send(
        "POST", f"{_instance_url(ctx, g.name, name)}/subscription",
        headers={"Content-Type": V2}, json={"topics": [DATA.name]}))
    if s is not None and s.status != 204:
        if s.status == 404:
            raise _vanished(g.name, name, s, "subscribe")
        raise Violation("subscribe-refused", f"{g.name}/{name}: {s.brief()}")
    return {"group": g.name, "member": name}


def leave(ctx: Ctx, g: Group) -> dict[str, Any]:
    if len(g.members) <= 1:
        return join(ctx, g)
    name = sorted(g.members)[ctx.rng.randrange(len(g.members))]
    tried = [0]

    def delete() -> Answer | None:
        tried[0] += 1
        return ctx.http.send("DELETE", _instance_url(ctx, g.name, name),
                             headers={"Content-Type": V2})

    a = ctx.until(f"delete {g.name}/{name}", delete)
    if a is None:
        g.members.discard(name)
        g.uncertain.add(name)
        return {"group": g.name, "member": name, "deleted": "unknown"}
    if a.status == 404 and tried[0] == 1:
        raise _vanished(g.name, name, a, "delete")
    if a.status not in (204, 404):
        raise Violation("leave-refused", f"{g.name}/{name}: {a.brief()}")
    g.members.discard(name)
    return {"group": g.name, "member": name}


def read(ctx: Ctx, g: Group) -> dict[str, Any]:
    if not g.members:
        return join(ctx, g)
    name = sorted(g.members)[ctx.rng.randrange(len(g.members))]
    a = ctx.until(f"read {g.name}/{name}", lambda: ctx.http.send(
        "GET", f"{_instance_url(ctx, g.name, name)}/records",
        params={"timeout": 500, "max_bytes": 65536}, headers={"Accept": JSON_V2}))
    if a is None:
        return {"group": g.name, "member": name, "read": "unavailable"}
    if a.status == 404:
        raise _vanished(g.name, name, a, "read")
    if a.status != 200:
        raise Violation("read-refused", f"{g.name}/{name}: {a.brief()}")
    for r in a.body:
        check_record(ctx, r["topic"], r["partition"], r["offset"], r.get("key"), r["value"],
                     f"read by {g.name}/{name}")
    return {"group": g.name, "member": name, "records": len(a.body)}


def check_record(ctx: Ctx, topic: str, p: int, offset: int, key: Any, value: Any,
                 how: str) -> None:
    """A record served to a client: sent to that topic with that key, and where it was
    acknowledged if it was."""
    sent = ctx.model.sent.get(value) if isinstance(value, str) else None
    if sent is None or sent[0] != topic or sent[1] != key:
        raise Violation("never-written", f"{how}: {topic}-{p}@{offset} key {key!r} value "
                        f"{value!r} (sent as {sent})")
    acked = ctx.model.acked.get((topic, p), {}).get(offset)
    if acked is not None and acked[1] != value:
        raise Violation("wrong-record", f"{how}: {topic}-{p}@{offset} holds {value!r}, "
                        f"acknowledged {acked[1]!r}")
    placed = ctx.model.where.get(value)
    if placed is not None and placed != (topic, p, offset):
        raise Violation("duplicate", f"{how}: {value!r} at {topic}-{p}@{offset}, "
                        f"acknowledged at {placed}")


def commit(ctx: Ctx, g: Group, *, partitions: list[int] | None = None) -> dict[str, Any]:
    """Offsets of one to three partitions committed together, never below the last
    acknowledged commit (committed offsets must only move forward)."""
    if not g.members:
        return join(ctx, g)
    name = sorted(g.members)[ctx.rng.randrange(len(g.members))]
    if partitions is None:
        partitions = sorted(ctx.rng.sample(range(DATA.partitions), ctx.rng.randint(1, 3)))
    ends = _end_offsets(ctx, DATA)
    plan = {}
    for p in partitions:
        cur = max([g.committed.get((DATA.name, p), 0), *g.maybe.get((DATA.name, p), ())])
        if ends[p] < 1 or ends[p] < cur:
            continue
        # the next offset to read: forward when there is something new
        plan[p] = ctx.rng.randint(max(min(cur + 1, ends[p]), 1), ends[p])
    if not plan:
        return {"group": g.name, "committed": {}}
    body = {"offsets": [{"topic": DATA.name, "partition": p, "offset": c - 1}
                        for p, c in plan.items()]}
    a = ctx.until(f"commit {g.name}/{name}", lambda: ctx.http.send(
        "POST", f"{_instance_url(ctx, g.name, name)}/offsets", headers={"Content-Type": V2},
        json=body))
    if a is None:
        for p, c in plan.items():
            ctx.model.commit_unknown(g.name, (DATA.name, p), c)
        return {"group": g.name, "member": name, "committed": plan, "answered": False}
    if a.status == 404 and a.code == 40403:
        raise _vanished(g.name, name, a, "commit")
    if a.status != 200:
        raise Violation("commit-refused", f"{g.name}/{name} {body}: {a.brief()}")
    for p, c in plan.items():
        ctx.model.commit_acked(g.name, (DATA.name, p), c)
    return {"group": g.name, "member": name, "committed": plan}


def commit_burst(ctx: Ctx, g: Group) -> dict[str, Any]:
    """Commits in a row: __consumer_offsets' 2 KB segments roll and get compacted."""
    n = ctx.rng.randint(8, 16)
    for _ in range(n):
        commit(ctx, g)
    return {"group": g.name, "commits": n}
