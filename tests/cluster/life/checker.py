"""The model against what the brokers serve, after every step.

- Logs (range reads ``GET /topics/{t}/partitions/{p}/records?offset=`` through one
  broker, a different one each check): every acknowledged record at its offset, exactly
  once, nothing never written, no value twice; the high watermark at or past every
  acknowledged offset. Compacted topics: the latest acknowledged value of each key
  present unless a later record of that key is; records compacted away are counted.
  Retention topics: what is at or above the log start is intact, and the last
  acknowledged record is always there (the active segment is never deleted).
- Committed offsets (``GET /v3/.../consumer-groups/{g}/offsets`` through every broker,
  and a member's ``GET .../offsets``): equal on every broker, equal to the last
  acknowledged commit (or one of the unanswered ones), never below a value read before.
- Members (``GET /v3/.../consumer-groups/{g}/consumers`` through every broker): exactly
  the instances created and not deleted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .context import Ctx
from .errors import Violation
from .http import JSON_V2, V2
from .settings import DATA, TOPICS, TopicSpec
from .workload import check_record

MAX_READS = 10_000  # range reads per partition per check, a bound on the loop


class Checker:
    def __init__(self) -> None:
        self.checks = 0
        self.counts: Counter[str] = Counter()

    def check(self, ctx: Ctx) -> dict[str, Any]:
        self.checks += 1
        live = ctx.cluster.live()
        via = live[self.checks % len(live)]
        for spec in TOPICS:
            for p in range(spec.partitions):
                self._partition(ctx, spec, p, via)
        for g in ctx.model.groups.values():
            self._committed(ctx, g, live)
            self._members(ctx, g, live)
        self.counts["checks"] += 1
        return {"via": via.broker_id}

    # --- logs ------------------------------------------------------------------------------

    def _read_all(self, ctx: Ctx, spec: TopicSpec, p: int, via: Any) -> tuple[list[dict], int, int]:
        """Every record from the log start to the high watermark; (records, log start, hw)."""
        for _ in range(5):  # a retention pass may move the log start under the read
            rows: list[dict[str, Any]] = []
            a = ctx.http.until(f"offsets of {spec.name}-{p}", lambda: ctx.http.send(
                "GET", f"{via.url}/topics/{spec.name}/partitions/{p}/offsets"))
            start, hw = int(a.body["beginning_offset"]), int(a.body["end_offset"])
            offset, restarted = start, False
            for _ in range(MAX_READS):
                if offset >= hw:
                    return rows, start, hw
                r = ctx.http.until(f"read {spec.name}-{p}@{offset}", lambda o=offset:
                                   ctx.http.send("GET", f"{via.url}/topics/{spec.name}/partitions/"
                                                 f"{p}/records", params={"offset": o},
                                                 headers={"Accept": JSON_V2}))
                if r.status == 416 and spec.kind == "retain":
                    restarted = True
                    break
                if r.status != 200:
                    raise Violation("read-refused", f"{spec.name}-{p}@{offset} via "
                                    f"{via.broker_id}: {r.brief()}")
                rows += r.body
                nxt = int(r.headers.get("x-franz-next-offset", offset))
                if nxt <= offset and not r.body:
                    raise Violation("read-stuck", f"{spec.name}-{p}@{offset} via "
                                    f"{via.broker_id}: no records and next offset {nxt} "
                                    f"below the high watermark {hw}")
                offset = max(nxt, rows[-1]["offset"] + 1 if r.body else nxt)
            if not restarted:
                raise Violation("read-stuck", f"{spec.name}-{p}: {MAX_READS} reads")
            self.counts["retention-raced-a-read"] += 1
        raise Violation("read-stuck", f"{spec.name}-{p}: the log start kept moving")

    def _partition(self, ctx: Ctx, spec: TopicSpec, p: int, via: Any) -> None:
        rows, start, hw = self._read_all(ctx, spec, p, via)
        how = f"range read via broker {via.broker_id}"
        acked = ctx.model.acked.get((spec.name, p), {})
        present: dict[int, str] = {}
        last = -1
        for r in rows:
            if r["partition"] != p or r["offset"] <= last:
                raise Violation("offsets-out-of-order", f"{spec.name}-{p}: {r['offset']} after "
                                f"{last} ({how})")
            last = r["offset"]
            check_record(ctx, spec.name, p, r["offset"], r.get("key"), r["value"], how)
            present[r["offset"]] = r["value"]
        values = Counter(present.values())
        twice = [v for v, n in values.items() if n > 1]
        if twice:
            raise Violation("duplicate", f"{spec.name}-{p}: {twice[:5]} more than once ({how})")
        if acked and max(acked) >= hw:
            raise Violation("lost", f"{spec.name}-{p}: high watermark {hw} below acknowledged "
                            f"offset {max(acked)} ({how})")
        if spec.kind == "data":
            missing = [o for o in acked if o not in present]
            if start != 0 or missing:
                raise Violation("lost", f"{spec.name}-{p}: acknowledged offsets {missing[:10]} "
                                f"missing (log start {start}, hw {hw}, {how})")
        elif spec.kind == "retain":
            missing = [o for o in acked if o >= start and o not in present]
            if missing:
                raise Violation("lost", f"{spec.name}-{p}: acknowledged offsets {missing[:10]} "
                                f"above the log start {start} missing ({how})")
            if acked and max(acked) < start:
                raise Violation("lost", f"{spec.name}-{p}: log start {start} past the last "
                                f"acknowledged record {max(acked)} ({how})")
            self.counts["retention-deleted-records"] = max(
                self.counts["retention-deleted-records"], start)
        else:
            keys_after: dict[str, int] = {}
            for r in rows:
                keys_after[r.get("key")] = r["offset"]  # the last offset of each key
            lost = [(k, off, v) for k, (off, v) in ctx.model.latest_by_key((spec.name, p)).items()
                    if present.get(off) != v and keys_after.get(k, -1) <= off]
            if lost:
                raise Violation("lost", f"{spec.name}-{p}: latest values of keys {lost[:5]} "
                                f"gone ({how})")
            gone = sum(1 for o in acked if o not in present)
            self.counts["compacted-away"] = max(self.counts["compacted-away"], gone)

    # --- groups ----------------------------------------------------------------------------

    def _committed(self, ctx: Ctx, g: Any, live: list[Any]) -> None:
        if not g.committed and not g.maybe:
            return
        views = {}
        for b in live:
            a = ctx.http.until(f"offsets of {g.name} via {b.broker_id}", lambda b=b: ctx.http.send(
                "GET", ctx.cluster.v3(b, "consumer-groups", g.name, "offsets")))
            if a.status != 200:
                raise Violation("committed-lost", f"{g.name} via broker {b.broker_id}: "
                                f"{a.brief()} (model {g.committed})")
            views[b.broker_id] = {(row["topic_name"], row["partition_id"]): row["current_offset"]
                                  for row in a.body["data"]}
        if g.members:
            member = sorted(g.members)[0]
            b = live[self.checks % len(live)]
            tps = sorted(set(g.committed) | set(g.maybe))
            a = ctx.http.until(f"committed of {g.name}/{member}", lambda: ctx.http.send(
                "GET", f"{b.url}/consumers/{g.name}/instances/{member}/offsets",
                headers={"Content-Type": V2, "Accept": V2},
                json={"partitions": [{"topic": t, "partition": p} for t, p in tps]}))
            if a.status == 404:
                raise Violation("member-vanished", f"{g.name}/{member} committed read via "
                                f"{b.broker_id}: {a.brief()}")
            views[f"{b.broker_id}/instance"] = {(o["topic"], o["partition"]): o["offset"]
                                                for o in a.body["offsets"]}
        for tp in sorted(set(g.committed) | set(g.maybe)):
            seen = {who: v.get(tp) for who, v in views.items()}
            if len(set(seen.values())) != 1:
                raise Violation("committed-disagree", f"{g.name} {tp}: {seen}")
            got = next(iter(seen.values()))
            allowed = set(g.maybe.get(tp, ())) | ({g.committed[tp]} if tp in g.committed else set())
            # forward only: never below a value read back, nor below an acknowledged
            # commit (unanswered ones are all above it: commits only go forward)
            floor = max(g.seen_max.get(tp, -1), g.committed.get(tp, -1))
            if got is None or got < floor:
                raise Violation("committed-went-back", f"{g.name} {tp}: {got}, earlier "
                                f"{floor}, last acknowledged commit {g.committed.get(tp)} "
                                f"({seen})")
            if got not in allowed:
                raise Violation("committed-wrong", f"{g.name} {tp}: {got}, acknowledged "
                                f"{g.committed.get(tp)}, unanswered {sorted(g.maybe.get(tp, ()))}")
            g.seen_max[tp] = got
            if tp in g.maybe:  # settled: the value every broker serves
                ctx.model.commit_acked(g.name, tp, got)

    def _members(self, ctx: Ctx, g: Any, live: list[Any]) -> None:
        for b in live:
            a = ctx.http.until(f"members of {g.name} via {b.broker_id}", lambda b=b: ctx.http.send(
                "GET", ctx.cluster.v3(b, "consumer-groups", g.name, "consumers")))
            if a.status == 404 and not g.members:
                continue
            if a.status != 200:
                raise Violation("member-vanished", f"{g.name} via {b.broker_id}: {a.brief()} "
                                f"(model {sorted(g.members)})")
            got = {c["consumer_id"] for c in a.body["data"]}
            if g.uncertain and not ctx.degraded:  # settled by what the coordinator says
                g.members |= got & g.uncertain
                g.uncertain.clear()
            if not (g.members <= got <= g.members | g.uncertain):
                kind = "member-vanished" if g.members - got else "member-unexpected"
                raise Violation(kind, f"{g.name} via broker {b.broker_id}: {sorted(got)}, "
                                f"model {sorted(g.members)}")


__all__ = ["Checker", "DATA"]
