"""A history of operations and the queue checker.

An operation (``Op``) is what one client process did: ``f`` is ``send`` (one value
produced with acks=all) or ``read`` (a partition read whole, from offset 0 to the high
watermark, through one broker); it has its invocation and completion times (seconds,
monotonic, from the run's start) and its outcome, Jepsen's three:

- ``ok``: it happened (a send's answer gave its partition and offset; a read's records);
- ``fail``: it certainly did not happen (the connection was refused, a 4xx that writes
  nothing);
- ``info``: unknown (a timeout, a dropped connection, a 5xx, a retriable per-record error:
  the value may be written, now or later).

``check(history)`` looks at every send and read and reports, each with examples:

- ``lost``: a value acknowledged (``ok``) and missing from a final read;
- ``duplicated``: a value at two offsets (in any reads);
- ``inconsistent``: two values at one offset, across reads and acknowledgements (an
  acknowledged offset holding another value counts), or a value read at another offset
  than the one acknowledged for it;
- ``unexpected``: a value read that no send ever attempted;
- ``failed-present``: a value read whose send definitely failed;
- ``unseen`` (not an anomaly): ``info`` sends never read, for the counts.

The final reads are the ``read`` operations marked ``final``; without any, every read is.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ANOMALIES = ("lost", "duplicated", "inconsistent", "unexpected", "failed-present")
EXAMPLES = 10


@dataclass
class Op:
    process: int
    f: str  # send | read
    value: Any = None  # send: the value; read: None
    invoke: float = 0.0
    complete: float | None = None
    type: str = "info"  # ok | fail | info
    partition: int | None = None  # send: the partition written; read: the one read
    offset: int | None = None  # send ok: the acknowledged offset
    records: list[tuple[int, Any]] = field(default_factory=list)  # read: (offset, value)
    final: bool = False  # read: one of the final reads
    via: str = ""  # the broker the request went to
    idempotent: bool = False
    attempts: int = 1
    error: str = ""

    def line(self) -> str:
        return json.dumps(asdict(self), default=str)


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)

    def add(self, op: Op) -> Op:
        self.ops.append(op)
        return op

    def write(self, path: Path) -> None:
        path.write_text("".join(op.line() + "\n" for op in self.ops))

    @classmethod
    def read(cls, path: Path) -> History:
        ops = []
        for line in path.read_text().splitlines():
            d = json.loads(line)
            d["records"] = [tuple(r) for r in d.get("records", [])]
            ops.append(Op(**d))
        return cls(ops)


@dataclass
class Analysis:
    counts: dict[str, int]
    anomalies: dict[str, list[Any]]

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.get(k) for k in ANOMALIES)

    def summary(self) -> str:
        parts = [f"{k} {v}" for k, v in self.counts.items()]
        bad = [f"{k}: {len(v)} e.g. {v[:EXAMPLES]}" for k, v in self.anomalies.items() if v]
        return "; ".join(parts) + ("\nANOMALIES " + "; ".join(bad) if bad else "")


def check(history: History | Iterable[Op]) -> Analysis:
    ops = list(history.ops if isinstance(history, History) else history)
    sends = [o for o in ops if o.f == "send"]
    reads = [o for o in ops if o.f == "read" and o.type == "ok"]
    finals = [o for o in reads if o.final] or reads

    attempted: dict[Any, Op] = {}
    for o in sends:
        attempted.setdefault(o.value, o)
    acked = {o.value: o for o in sends if o.type == "ok"}
    failed = {o.value for o in sends if o.type == "fail"} - set(acked)

    # (partition, offset) -> {value: where from}; value -> {(partition, offset)}
    at: dict[tuple[int, int], dict[Any, list[str]]] = defaultdict(lambda: defaultdict(list))
    where: dict[Any, set[tuple[int, int]]] = defaultdict(set)
    for o in acked.values():
        if o.partition is not None and o.offset is not None:
            at[(o.partition, o.offset)][o.value].append(f"ack p{o.process}")
    for r in reads:
        assert r.partition is not None
        for off, v in r.records:
            at[(r.partition, off)][v].append(f"read via {r.via}")
            where[v].add((r.partition, off))

    anomalies: dict[str, list[Any]] = {k: [] for k in ANOMALIES}
    for (p, off), vals in sorted(at.items()):
        if len(vals) > 1:
            anomalies["inconsistent"].append(
                {"partition": p, "offset": off, "values": {str(v): w for v, w in vals.items()}})
    for v, places in where.items():
        if len(places) > 1:
            anomalies["duplicated"].append({"value": v, "at": sorted(places)})
        if v not in attempted:
            anomalies["unexpected"].append({"value": v, "at": sorted(places)})
        elif v in failed:
            anomalies["failed-present"].append({"value": v, "at": sorted(places)})
    for v, o in acked.items():
        if o.offset is not None and where.get(v) and (o.partition, o.offset) not in where[v]:
            anomalies["inconsistent"].append({"value": v, "acked": (o.partition, o.offset),
                                              "read_at": sorted(where[v])})

    final_sets = [(r, {v for _, v in r.records}) for r in finals]
    for v, o in sorted(acked.items(), key=lambda kv: kv[1].invoke):
        mine = [(r, seen) for r, seen in final_sets if r.partition == o.partition]
        missing = [f"read via {r.via}" for r, seen in mine if v not in seen]
        if missing or not mine:
            anomalies["lost"].append({"value": v, "partition": o.partition, "offset": o.offset,
                                      "acked": [round(o.invoke, 3), o.complete], "via": o.via,
                                      "missing_from": missing or ["no read of its partition"]})
    read_values = set(where)
    counts = {
        "sends": len(sends),
        "ok": len(acked),
        "fail": sum(1 for o in sends if o.type == "fail"),
        "info": sum(1 for o in sends if o.type == "info"),
        "info-read": sum(1 for o in sends if o.type == "info" and o.value in read_values),
        "unseen": sum(1 for o in sends if o.type == "info" and o.value not in read_values),
        "reads": len(reads),
        "values-read": len(read_values),
    }
    counts.update({k: len(v) for k, v in anomalies.items()})
    return Analysis(counts, anomalies)
