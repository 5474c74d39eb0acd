"""Executor side of writes: rows -> ``POST /topics/{t}`` requests of up to ``batchSize``
records (binary embedded format; keys, values and header values base64), one buffer per
target topic. Every per-record ``error_code`` in an answer that a retry cannot change
fails the task (franz, like Confluent, answers 200 even when records failed).

With ``keyFormat`` / ``valueFormat`` (avro, jsonschema, protobuf) the requests go to
franz's v3 produce, ``POST /v3/clusters/{c}/topics/{t}/records``, as a JSON array of
records: v2 has one embedded format per request for keys and values alike (a binary key
beside an Avro value cannot be said there), v3 a ``type`` or schema per key and value,
and it takes the same ``Idempotency-Key``. The column of such a side is a string of
JSON, checked on the executor and sent as the record's ``data`` with the schema's id
(given, or the subject's latest version resolved once on the driver:
``resolve_schemas``) or text; franz encodes it (Confluent's wire format) or refuses the
record (42203 and the like, failing the task with franz's message). v3 writes with
acks=all, so ``acks`` must be ``all`` then.

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
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

from spark_connector.client import (
    FranzClient,
    FranzConnectionError,
    Response,
    dumps,
    json_text,
    loads,
)
from spark_connector.options import (
    REGISTRY_TYPES,
    V3_TYPES,
    FranzOptionError,
    SchemaSpec,
    WriterConf,
)

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
    for spec in (conf.key_schema, conf.value_schema):
        if spec.encoded and spec.side in types and types[spec.side] != "string":
            raise FranzOptionError(
                f"Column {spec.side!r} of the franz sink must be a string holding the "
                f"{spec.side} as JSON with {spec.option('Format')}={spec.format} (Avro's JSON "
                "encoding, a JSON document, protobuf's JSON mapping; e.g. "
                f"to_json(struct(...))), not {types[spec.side]}"
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


def _registry_lookup(client: FranzClient, path: str, what: str) -> dict[str, Any]:
    resp = client.registry_get(path)
    if resp.status_code != 200:
        err = client.error(resp)
        code = f" / {err.error_code}" if err.error_code is not None else ""
        raise FranzOptionError(
            f"{what}: franz's Schema Registry answered {resp.status_code}{code}: "
            f"{err.server_message}"
        )
    return dict(loads(resp.content))


def _check_type(spec: SchemaSpec, doc: dict[str, Any], what: str) -> None:
    """The registered schema is of the side's format (v3 takes the type from it)."""
    registered = doc.get("schemaType") or "AVRO"
    if registered != REGISTRY_TYPES[spec.format]:
        fmt = {t: f for f, t in REGISTRY_TYPES.items()}.get(registered, registered.lower())
        raise FranzOptionError(
            f"{what} is {'an' if registered[:1] in 'AEIOU' else 'a'} {registered} schema, "
            f"but {spec.option('Format')}={spec.format} (set {spec.option('Format')}={fmt}, "
            f"or name a {spec.format} schema)"
        )


def _resolve(client: FranzClient, spec: SchemaSpec, topic: str | None) -> SchemaSpec:
    if not spec.encoded or spec.schema is not None:
        return spec  # binary, or a text franz registers (its type is the format's)
    if spec.schema_id is not None:
        what = f"Option {spec.option('SchemaId')}={spec.schema_id}"
        doc = _registry_lookup(client, f"/schemas/ids/{spec.schema_id}", what)
        _check_type(spec, doc, what)
        return spec
    assert topic is not None or spec.subject is not None  # writer_conf checks it
    subject = spec.default_subject(topic or "")
    what = (
        f"Option {spec.option('Subject')}={subject!r}"
        if spec.subject is not None
        else f"{spec.option('Format')}={spec.format} writes with the latest version of the "
        f"subject {subject!r} (<topic>-{spec.side}; or give {spec.option('SchemaId')}, "
        f"{spec.option('Subject')} or {spec.option('Schema')})"
    )
    doc = _registry_lookup(client, f"/subjects/{quote(subject, safe='')}/versions/latest", what)
    _check_type(spec, doc, f"{what}: its latest version, schema {doc.get('id')},")
    return replace(spec, schema_id=int(doc["id"]))


def resolve_schemas(conf: WriterConf, client: FranzClient | None = None) -> WriterConf:
    """On the driver, once per write (or stream run): ``conf`` with every side that is
    written with the latest version of a subject pinned to that version's id (so every
    task, and every attempt of a task, writes with the same schema and sends the same
    bytes), the type of a schema given by id checked against the format, and the
    cluster id of the v3 path. Unchanged when nothing is written with a schema."""
    if not conf.with_schemas:
        return conf
    own = client is None
    client = client or FranzClient(conf.http)
    try:
        return replace(
            conf,
            key_schema=_resolve(client, conf.key_schema, conf.topic),
            value_schema=_resolve(client, conf.value_schema, conf.topic),
            cluster_id=conf.cluster_id or client.cluster_id(),
        )
    finally:
        if own:
            client.close()


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
    #: v2: the records as dicts; v3: each record's JSON bytes
    records: list[Any] = field(default_factory=list)
    size: int = 0


def _b64(data: bytes | bytearray | str) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return base64.b64encode(raw).decode("ascii")


class _V3Side:
    """Writes one side (key or value) of v3 records: ``{"type":"BINARY","data":<base64>}``,
    or the side's schema fields and, as ``data``, the column's JSON text (checked here,
    on the executor, then copied as it is: numbers keep their digits, and the bytes do
    not depend on the JSON library the executor has)."""

    def __init__(self, spec: SchemaSpec) -> None:
        self.spec = spec
        if not spec.encoded:
            self.head = b'{"type":"BINARY","data":'
            return
        fields: dict[str, Any] = {}
        if spec.schema is not None:  # franz registers it under the subject when new
            fields["type"] = V3_TYPES[spec.format]
        if spec.subject is not None:
            fields["subject"] = spec.subject
        if spec.schema is not None:
            fields["schema"] = spec.schema
        elif spec.schema_id is not None:
            fields["schema_id"] = spec.schema_id
        else:
            raise FranzProduceError(
                f"franz sink: {spec.option('Format')}={spec.format} without a schema id: "
                "the write's options were not resolved on the driver (writer.resolve_schemas)"
            )
        self.head = dumps(fields)[:-1] + b',"data":'

    def encode(self, data: Any, row: int) -> bytes:
        spec = self.spec
        if not spec.encoded:
            raw = data.encode() if isinstance(data, str) else bytes(data)
            return self.head + b'"' + base64.b64encode(raw) + b'"}'
        if not isinstance(data, str):
            raise FranzProduceError(
                f"franz sink: column {spec.side!r} of row {row} of this task is "
                f"{type(data).__name__}, not a string of JSON ({spec.option('Format')}="
                f"{spec.format})"
            )
        try:
            text = json_text(data)
        except ValueError as e:
            shown = data if len(data) <= 60 else data[:57] + "..."
            raise FranzProduceError(
                f"franz sink: column {spec.side!r} of row {row} of this task is not JSON "
                f"({spec.option('Format')}={spec.format} takes the {spec.side} as JSON, "
                f"e.g. to_json(struct(...))): {e}; the string: {shown!r}"
            ) from None
        return self.head + text + b"}"


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
        self.rows = 0  # rows seen, to name a bad one
        self.v3 = conf.with_schemas
        if self.v3 and conf.cluster_id is None:
            raise FranzProduceError(
                "franz sink: a write with keyFormat / valueFormat has no cluster id: the "
                "write's options were not resolved on the driver (writer.resolve_schemas)"
            )
        self.key_side = _V3Side(conf.key_schema) if self.v3 else None
        self.value_side = _V3Side(conf.value_schema) if self.v3 else None

    def add_rows(self, rows: Iterable[Any]) -> None:
        if self.v3:
            self._add_rows_v3(rows)
            return
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
            self._append(topic, rec, len(rec["value"] or "") + len(rec.get("key", "")) + 64)

    def _add_rows_v3(self, rows: Iterable[Any]) -> None:
        """Rows as v3 records (``POST /v3/clusters/{c}/topics/{t}/records``): the same
        columns, a ``type`` or schema per key and value; fields in a fixed order."""
        idx, conf = self.idx, self.conf
        vi, ki, ti = idx["value"], idx.get("key"), idx.get("topic")
        pi, hi = idx.get("partition"), idx.get("headers")
        key_side, value_side = self.key_side, self.value_side
        assert key_side is not None and value_side is not None
        for row in rows:
            n = self.rows
            self.rows += 1
            topic = conf.topic or (row[ti] if ti is not None else None)
            if not topic:
                raise FranzProduceError(
                    "franz sink: a row has a null or empty topic and the topic option is not set"
                )
            parts: list[bytes] = []
            if pi is not None and row[pi] is not None:
                parts.append(b'"partition_id":%d' % int(row[pi]))
            if hi is not None and row[hi]:
                parts.append(
                    b'"headers":'
                    + dumps(
                        [
                            {"name": h[0], "value": None if h[1] is None else _b64(h[1])}
                            for h in row[hi]
                        ]
                    )
                )
            if ki is not None and row[ki] is not None:
                parts.append(b'"key":' + key_side.encode(row[ki], n))
            value = row[vi]
            parts.append(b'"value":' + (b"null" if value is None else value_side.encode(value, n)))
            rec = b"{" + b",".join(parts) + b"}"
            self._append(topic, rec, len(rec) + 1)

    def _append(self, topic: str, rec: Any, size: int) -> None:
        conf = self.conf
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
        key = self.next_key(topic)
        # v3: a JSON array of the records; v2: {"records": [...]}
        body = b"[" + b",".join(buf.records) + b"]" if self.v3 else dumps({"records": buf.records})
        if key is None:
            answers = self._produce(topic, body)
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

    def _produce(self, topic: str, body: bytes) -> list[dict[str, Any]]:
        """At least once: one request (the client's own retries), the per-record answers."""
        if not self.v3:
            return self.client.produce(topic, body, acks=self.conf.acks)
        assert self.conf.cluster_id is not None
        resp = self.client.produce_v3(self.conf.cluster_id, topic, body)
        if resp.status_code != 200:
            raise self.client.error(resp)
        return self.client.v3_answers(resp)

    def _attempt(self, topic: str, body: bytes, key: str) -> Response:
        """One attempt of a keyed produce, on the write's route."""
        if not self.v3:
            return self.client.produce_once(topic, body, acks=self.conf.acks, idempotency_key=key)
        assert self.conf.cluster_id is not None
        return self.client.produce_v3(self.conf.cluster_id, topic, body, idempotency_key=key)

    def _answers(self, resp: Response) -> list[dict[str, Any]]:
        if self.v3:
            return self.client.v3_answers(resp)
        return list(loads(resp.content)["offsets"])

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
                resp = self._attempt(topic, body, key)
            except FranzConnectionError as e:
                why = str(e)
            else:
                status = resp.status_code
                if status == 200:
                    answers = self._answers(resp)
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
