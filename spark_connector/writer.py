"""Executor side of writes: rows -> ``POST /topics/{t}`` requests of up to ``batchSize``
records (binary embedded format; keys, values and header values base64), one buffer per
target topic. Every per-record ``error_code`` in an answer that a retry cannot change
fails the task (franz, like Confluent, answers 200 even when records failed).

Delivery is exactly once by default (option ``exactlyOnce``, off with ``acks=0``): every
request carries an ``Idempotency-Key`` header derived from what the request is, never
from which attempt sends it::

    <prefix>:<micro-batch>:<Spark partition>:<topic>:<chunk>

- prefix: the option ``idempotencyKeyPrefix``, else ``spark:<query id>`` for a stream
  (Spark's task-local property ``sql.streaming.queryId``; the id is kept in the
  checkpoint, so it is the same after a restart) or ``spark:<uuid>`` for a batch write
  (made once per write on the driver, in ``writer()``, and shipped to every task inside
  the writer object);
- micro-batch: the task-local property ``streaming.sql.batchId``, ``-`` for batch writes;
- Spark partition: ``TaskContext.partitionId()`` (the attempt number is left out on
  purpose: a retried or speculative attempt sends the same keys);
- topic: the target topic, or ``sha256-<digest>`` when it is long or has characters
  other than letters, digits, ``.``, ``_`` and ``-``;
- chunk: the number of the request among the task's requests to that topic (0, 1, ...).

Bodies are built deterministically (fields in a fixed order, ``client.dumps``), so the
same rows in the same order give the same keys and byte-identical bodies. franz runs a
key's request once and answers every later request with that key and body with the
first answer, writing nothing (docs/delivery.md): a request that timed out, a task that
failed half way and is retried, a speculative twin or a micro-batch re-run after a
restart from the checkpoint all write each row once. A request with no definite answer
(connection error, timeout, HTTP 409 "in progress", 429, 5xx, per-record error 50003) is
resent with the same key and body, with a doubling pause, bounded in count and time
(``write.maxRetries``, ``write.retryBackoffMs``, ``write.maxRetryBackoffMs``,
``write.retryTimeoutMs``); HTTP 422 (the key was used for other rows) and other 4xx fail
the task. With ``exactlyOnce=false`` delivery is at least once: a retried task writes
its rows again."""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_connector.client import FranzClient, FranzConnectionError, dumps, loads
from spark_connector.options import FranzOptionError, WriterConf

log = logging.getLogger("spark_connector")

#: Spark's task-local properties naming a streaming query (its id, kept in the
#: checkpoint) and the micro-batch a task belongs to (``StreamExecution.QUERY_ID_KEY``,
#: ``MicroBatchExecution.BATCH_ID_KEY``).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: franz's limit on an ``Idempotency-Key`` (api/idempotency.py).
MAX_KEY_LENGTH = 255
#: A per-record error a resend of the same request may clear (Kafka's retriable errors).
RETRIABLE_RECORD_ERROR = 50003
_PLAIN_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,100}$")

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


def topic_in_key(topic: str) -> str:
    """The topic as it appears in a key: itself, or a digest when it is long or holds
    characters a key should not (``:`` separates the key's parts)."""
    if _PLAIN_TOPIC.match(topic):
        return topic
    return "sha256-" + hashlib.sha256(topic.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True)
class KeyScope:
    """What names a task's requests: the write (or query), the micro-batch and the Spark
    partition; ``key(topic, chunk)`` adds which request of the task it is."""

    prefix: str
    batch: str
    partition: int

    def key(self, topic: str, chunk: int) -> str:
        key = f"{self.prefix}:{self.batch}:{self.partition}:{topic_in_key(topic)}:{chunk}"
        if len(key) > MAX_KEY_LENGTH:  # not with a prefix of <= 100 characters
            raise FranzProduceError(f"franz sink: Idempotency-Key {key!r} is too long")
        return key


def new_write_id(conf: WriterConf) -> str:
    """The prefix of a batch write's keys: ``idempotencyKeyPrefix``, else a new
    ``spark:<uuid>`` (called once per write, on the driver)."""
    return conf.idempotency_key_prefix or f"spark:{uuid.uuid4().hex}"


def task_key_scope(
    conf: WriterConf, *, streaming: bool, write_id: str | None = None
) -> KeyScope | None:
    """The running task's ``KeyScope`` (None when exactly-once writes are off), from
    Spark's ``TaskContext``: a stream's query id and micro-batch from the task-local
    properties, a batch write's ``write_id`` from the writer object.

    Without what a stable key needs (no TaskContext, or a stream task without the
    properties), the task's keys get a random prefix: franz still deduplicates the
    resends of each request, but a retried task writes its rows again (logged)."""
    if not conf.exactly_once:
        return None
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        log.warning(
            "franz sink: no Spark TaskContext; Idempotency-Keys are random per task "
            "(a retried task would write again)"
        )
        return KeyScope(f"spark:{uuid.uuid4().hex}", "-", 0)
    partition = ctx.partitionId()
    if not streaming:
        return KeyScope(write_id or new_write_id(conf), "-", partition)
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_id is None:
        log.warning(
            "franz sink: the stream task has no %s / %s property; Idempotency-Keys are "
            "random per task (a retried micro-batch would write again)",
            QUERY_ID_PROPERTY,
            BATCH_ID_PROPERTY,
        )
        return KeyScope(f"spark:{uuid.uuid4().hex}", "-", partition)
    return KeyScope(conf.idempotency_key_prefix or f"spark:{query_id}", batch_id, partition)


@dataclass
class _Buffer:
    records: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0


def _b64(data: bytes | bytearray | str) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return base64.b64encode(raw).decode("ascii")


class Producer:
    """Buffers rows per topic and sends them in batches; ``close()`` flushes.

    ``scope``: the task's ``KeyScope`` for exactly-once writes (every request then
    carries its ``Idempotency-Key`` and is resent until it has a definite answer), None
    for at-least-once writes."""

    def __init__(self, conf: WriterConf, columns: list[str], scope: KeyScope | None = None) -> None:
        self.conf = conf
        self.scope = scope
        self.idx = {name: columns.index(name) for name in COLUMN_TYPES if name in columns}
        self.client = FranzClient(conf.http)
        self.buffers: dict[str, _Buffer] = {}
        self.chunks: dict[str, int] = {}  # topic -> requests built for it so far
        self.records = 0
        self.requests = 0
        self.resends = 0

    def add_rows(self, rows: Iterable[Any]) -> None:
        # a record's fields always in the same order: the same rows give the same bytes
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

    def next_key(self, topic: str) -> str | None:
        """The ``Idempotency-Key`` of the next request to ``topic`` (None when exactly
        once is off); counts the request."""
        if self.scope is None:
            return None
        chunk = self.chunks.get(topic, 0)
        self.chunks[topic] = chunk + 1
        return self.scope.key(topic, chunk)

    def flush(self, topic: str) -> None:
        buf = self.buffers.pop(topic, None)
        if buf is None or not buf.records:
            return
        body = dumps({"records": buf.records})
        key = self.next_key(topic)
        if key is None:
            answers = self.client.produce(topic, body, acks=self.conf.acks)
        else:
            answers = self.produce_exactly_once(topic, body, key, len(buf.records))
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

    def produce_exactly_once(
        self, topic: str, body: bytes, key: str, count: int
    ) -> list[dict[str, Any]]:
        """Send ``body`` with ``key`` until franz gives a definite answer (the per-record
        answers, possibly the first request's when this key was seen before), resending
        the same bytes with the same key after a connection error or timeout, HTTP 409
        (the key's request is in progress elsewhere), 429 or 5xx, or per-record errors
        that are all retriable (50003). Bounded by ``write.maxRetries`` and
        ``write.retryTimeoutMs``; 422 and other answers fail the task."""
        conf = self.conf
        started = time.monotonic()
        deadline = started + conf.retry_timeout_ms / 1000.0
        attempts = 0
        while True:
            attempts += 1
            why: str
            try:
                resp = self.client.produce_once(topic, body, acks=conf.acks, idempotency_key=key)
            except FranzConnectionError as e:
                why = str(e)
            else:
                status = resp.status_code
                if status == 200:
                    answers = list(loads(resp.content)["offsets"])
                    codes = [a.get("error_code") for a in answers]
                    retriable = sum(1 for c in codes if c == RETRIABLE_RECORD_ERROR)
                    if not retriable or any(
                        c is not None and c != RETRIABLE_RECORD_ERROR for c in codes
                    ):
                        return answers  # definite: written, or refused for what it is
                    first = next(a for a in answers if a.get("error_code") is not None)
                    why = (
                        f"{retriable} of {len(answers)} records failed with retriable error "
                        f"{RETRIABLE_RECORD_ERROR} ({first.get('error')})"
                    )
                elif status in (409, 429) or status >= 500:
                    why = f"HTTP {status}: {resp.text[:300]}"
                else:
                    raise self._refused(resp, topic, key, count)
            pause = (
                min(conf.retry_backoff_ms * (2 ** min(attempts - 1, 30)), conf.max_retry_backoff_ms)
                / 1000.0
            )
            elapsed = time.monotonic() - started
            if attempts > conf.max_retries or time.monotonic() + pause > deadline:
                raise FranzProduceError(
                    f"franz: the produce of {count} records to topic {topic!r} with "
                    f"Idempotency-Key {key!r} had no definite answer after {attempts} "
                    f"attempt(s) in {elapsed:.1f}s (write.maxRetries={conf.max_retries}, "
                    f"write.retryTimeoutMs={conf.retry_timeout_ms}); last: {why}. A retry "
                    "of the task sends the same keys, so it resumes this request and "
                    "writes nothing twice."
                )
            self.resends += 1
            log.info(
                "franz sink: resending %d records to %r with Idempotency-Key %r in %.2fs "
                "(attempt %d): %s",
                count,
                topic,
                key,
                pause,
                attempts + 1,
                why,
            )
            time.sleep(pause)

    def _refused(self, resp: Any, topic: str, key: str, count: int) -> FranzProduceError:
        """The error of an answer a resend cannot change (422 and other 4xx)."""
        err = self.client.error(resp)
        text = (
            f"franz refused the produce of {count} records to topic {topic!r} "
            f"(Idempotency-Key {key!r}): {err}"
        )
        if resp.status_code == 422 and "idempotency-key" in err.server_message.lower():
            text += (
                ". The key was first used for another request: this task built other rows "
                "(or another order, or other chunks) than an earlier attempt of the same "
                "Spark partition, e.g. after a shuffle, from a non-deterministic input, or "
                "with other batchSize / maxBytesPerRequest / topic options; or the first "
                "request's outcome can no longer be told. Nothing of this request was "
                "written. Give the write a new idempotencyKeyPrefix (or a new checkpoint), "
                "or set exactlyOnce=false for at-least-once writes"
            )
        return FranzProduceError(text)

    def close(self) -> None:
        try:
            for topic in list(self.buffers):
                self.flush(topic)
        finally:
            self.client.close()
