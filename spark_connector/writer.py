"""Executor side of writes: rows -> ``POST /topics/{t}`` requests of up to ``batchSize``
records (binary embedded format; keys, values and header values base64), one buffer per
target topic. Every per-record ``error_code`` in an answer fails the task (franz, like
Confluent, answers 200 even when records failed). Delivery is at least once: a retried
task writes its rows again."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_connector.client import FranzClient, dumps
from spark_connector.options import FranzOptionError, WriterConf

#: Input columns and the Spark types accepted for them (``simpleString``).
COLUMN_TYPES = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
}


class FranzProduceError(RuntimeError):
    """franz refused records of a write."""


def check_columns(types: Mapping[str, str], conf: WriterConf) -> None:
    """``types``: column name -> Spark ``simpleString``. Columns other than the five
    known ones are ignored (as by Spark's Kafka sink)."""
    if "value" not in types:
        raise FranzOptionError(
            "The franz sink needs a 'value' column (binary or string); got columns: "
            + ", ".join(types)
        )
    for name, allowed in COLUMN_TYPES.items():
        if name in types and types[name] not in allowed:
            raise FranzOptionError(
                f"Column {name!r} of the franz sink must be {' or '.join(allowed)}, "
                f"not {types[name]}"
            )
    if conf.topic is None and "topic" not in types:
        raise FranzOptionError(
            "The franz sink needs a target topic: the option topic, or a 'topic' column"
        )


@dataclass
class _Buffer:
    records: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0


def _b64(data: bytes | bytearray | str) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return base64.b64encode(raw).decode("ascii")


class Producer:
    """Buffers rows per topic and sends them in batches; ``close()`` flushes."""

    def __init__(self, conf: WriterConf, columns: list[str]) -> None:
        self.conf = conf
        self.idx = {name: columns.index(name) for name in COLUMN_TYPES if name in columns}
        self.client = FranzClient(conf.http)
        self.buffers: dict[str, _Buffer] = {}
        self.records = 0
        self.requests = 0

    def add_rows(self, rows: Iterable[Any]) -> None:
        idx, conf = self.idx, self.conf
        vi, ki, ti = idx["value"], idx.get("key"), idx.get("topic")
        pi, hi = idx.get("partition"), idx.get("headers")
        for row in rows:
            topic = conf.topic or (row[ti] if ti is not None else None)
            if not topic:
                raise FranzProduceError(
                    "franz sink: a row has a null or empty topic and the topic option is not set"
                )
            value = row[vi]
            rec: dict[str, Any] = {"value": None if value is None else _b64(value)}
            if ki is not None and row[ki] is not None:
                rec["key"] = _b64(row[ki])
            if pi is not None and row[pi] is not None:
                rec["partition"] = int(row[pi])
            if hi is not None and row[hi]:
                rec["headers"] = [
                    {"key": h[0], "value": None if h[1] is None else _b64(h[1])} for h in row[hi]
                ]
            size = len(rec["value"] or "") + len(rec.get("key", "")) + 64
            buf = self.buffers.setdefault(topic, _Buffer())
            if buf.records and buf.size + size > conf.max_bytes_per_request:
                self.flush(topic)
                buf = self.buffers.setdefault(topic, _Buffer())
            buf.records.append(rec)
            buf.size += size
            if len(buf.records) >= conf.batch_size:
                self.flush(topic)

    def flush(self, topic: str) -> None:
        buf = self.buffers.pop(topic, None)
        if buf is None or not buf.records:
            return
        answers = self.client.produce(topic, dumps({"records": buf.records}), acks=self.conf.acks)
        self.requests += 1
        failed = [(i, a) for i, a in enumerate(answers) if a.get("error_code") is not None]
        if failed:
            shown = "; ".join(
                f"record {i}: {a['error_code']} {a.get('error')}" for i, a in failed[:5]
            )
            raise FranzProduceError(
                f"franz refused {len(failed)} of {len(answers)} records sent to topic "
                f"{topic!r}: {shown}"
            )
        self.records += len(answers)

    def close(self) -> None:
        try:
            for topic in list(self.buffers):
                self.flush(topic)
        finally:
            self.client.close()
