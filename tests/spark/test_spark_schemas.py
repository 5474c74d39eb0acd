"""Schema Registry topics with ``keyFormat`` / ``valueFormat``.

Reads: values written by Confluent's serializers (registered with franz's registry),
decoded by franz into JSON string columns; and the documented alternative, Spark's own
``from_avro`` on the bytes after Confluent's 5-byte header.

Writes: string columns of JSON written by franz with a schema (v3 produce): by the
subject's latest version, by id, by schema text (avro, jsonschema, protobuf; a binary key
beside them), read back decoded and by Confluent's deserializer; a row that is not JSON
and a value its schema refuses fail the write with the message; exactly once as binary
writes are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

sr = pytest.importorskip("confluent_kafka.schema_registry")
F = pytest.importorskip("pyspark.sql.functions")

from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from spark_connector.options import FranzOptionError, reader_conf, writer_conf  # noqa: E402
from spark_connector.writer import KeyScope, Producer, resolve_schemas  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

USER = json.dumps({"type": "record", "name": "User", "namespace": "franz.spark", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None}]})


def _ctx(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


@pytest.fixture
def registry(franz: Any) -> Any:
    return sr.SchemaRegistryClient({"url": franz.url})


def test_format_options() -> None:
    conf = reader_conf({"url": "http://h:1", "subscribe": "t", "VALUEFORMAT": " Avro "})
    assert (conf.key_format, conf.value_format) == ("binary", "avro")
    with pytest.raises(FranzOptionError, match="keyFormat='xml' is not one of binary, avro"):
        reader_conf({"url": "http://h:1", "subscribe": "t", "keyFormat": "xml"})
    with pytest.raises(FranzOptionError, match="decoded by franz with valueFormat"):
        reader_conf({"url": "http://h:1", "subscribe": "t", "kafka.value.deserializer": "x"})


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_avro_values_as_json_strings(franz: Any, reader: Any, registry: Any, topic: str,
                                     arrow: str) -> None:
    franz.create_topic(topic, partitions=1)
    values = AvroSerializer(registry, USER)
    franz.produce(topic, [
        {"key": "u1", "value": values({"name": "ada", "age": 36}, _ctx(topic))},
        {"key": "u2", "value": values({"name": "bob", "age": None}, _ctx(topic))},
        {"key": "u3", "value": None},
    ], partition=0)
    df = reader(subscribe=topic, valueFormat="avro", arrow=arrow).load()
    assert df.schema.simpleString().startswith("struct<key:binary,value:string,topic:string")
    rows = df.selectExpr("CAST(key AS STRING) AS k", "value", "offset").collect()
    assert [(r.k, None if r.value is None else json.loads(r.value)) for r in rows] == [
        ("u1", {"name": "ada", "age": {"int": 36}}),  # Avro's JSON encoding, as REST consumers
        ("u2", {"name": "bob", "age": None}),
        ("u3", None),
    ]
    parsed = df.select(F.from_json("value", "name STRING, age STRUCT<int: INT>").alias("u"))
    assert [(r.u.name, r.u.age.int if r.u.age else None) for r in parsed.collect()[:2]] == [
        ("ada", 36), ("bob", None)]


def test_jsonschema_keys_and_values(franz: Any, reader: Any, registry: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    keys = JSONSerializer(json.dumps({"type": "integer"}), registry)
    values = JSONSerializer(json.dumps({"type": "object"}), registry)
    franz.produce(topic, [{"key": keys(7, _ctx(topic, key=True)),
                           "value": values({"a": [1, "x"]}, _ctx(topic))}], partition=0)
    df = reader(subscribe=topic, keyFormat="jsonschema", valueFormat="jsonschema").load()
    assert df.schema.simpleString().startswith("struct<key:string,value:string,")
    assert [(r.key, json.loads(r.value)) for r in df.collect()] == [("7", {"a": [1, "x"]})]


def test_undecodable_record_fails_the_read(franz: Any, reader: Any, registry: Any,
                                           topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    good = AvroSerializer(registry, USER)({"name": "c", "age": 1}, _ctx(topic))
    franz.produce(topic, [{"value": good}, {"value": b"not avro"}], partition=0)
    with pytest.raises(Exception) as info:  # noqa: B017 - Spark wraps the task's error
        reader(subscribe=topic, valueFormat="avro").load().collect()
    assert f"408 / 40801: Error deserializing value for partition {topic}-0 at offset 1" in str(
        info.value)


def test_from_avro_on_the_bytes_after_the_header(franz: Any, reader: Any, registry: Any,
                                                 topic: str) -> None:
    """docs/spark.md: Spark's own from_avro with the subject's latest schema."""
    avro = pytest.importorskip("pyspark.sql.avro.functions")
    franz.create_topic(topic, partitions=1)
    values = AvroSerializer(registry, USER)
    franz.produce(topic, [{"value": values({"name": "eve", "age": 5}, _ctx(topic))}],
                  partition=0)
    schema = franz.http.get(f"/subjects/{topic}-value/versions/latest").json()["schema"]
    try:
        rows = reader(subscribe=topic).load().select(
            avro.from_avro(F.expr("substring(value, 6)"), schema).alias("user")).collect()
    except Exception as exc:
        if "AVRO_NOT_LOADED" in str(exc):
            pytest.skip(f"spark-avro is not on the classpath: {str(exc)[:200]}")
        raise
    assert [(r.user.name, r.user.age) for r in rows] == [("eve", 5)]


# --- writes --------------------------------------------------------------------------------


def _save(df: Any, franz: Any, **options: Any) -> None:
    w = df.write.format("franz").option("url", franz.url).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def _avro_user() -> Any:
    """A User in Avro's JSON encoding from typed columns: the union branch named
    (``{"int": 36}``); a null age is left out by to_json and takes its default."""
    age = F.when(F.col("age").isNotNull(), F.struct(F.col("age").alias("int")))
    return F.to_json(F.struct("name", age.alias("age")))


def _decoded(reader: Any, topic: str, **formats: str) -> list[tuple[Any, Any]]:
    """(key, parsed value) of every record, sorted (Spark's tasks write in any order)."""
    rows = reader(subscribe=topic, **formats).load().collect()
    return sorted(((r.key, None if r.value is None else json.loads(r.value)) for r in rows),
                  key=str)


def test_avro_write_by_latest_subject_and_by_id(
    spark: Any, franz: Any, reader: Any, registry: Any, topic: str
) -> None:
    franz.create_topic(topic, partitions=1)
    schema_id = registry.register_schema(f"{topic}-value", sr.Schema(USER, "AVRO"))
    people = spark.createDataFrame(
        [("u1", "ada", 36), ("u2", "bob", None)], "k string, name string, age int"
    )
    # the subject's latest version (<topic>-value); the key stays binary (its string's bytes)
    _save(people.select(F.col("k").alias("key"), _avro_user().alias("value")), franz,
          topic=topic, valueFormat="avro")
    _save(spark.createDataFrame([("u3", '{"name": "cy", "age": {"int": 7}}'), ("u4", None)],
                                "key string, value string"),
          franz, topic=topic, valueFormat="avro", valueSchemaId=schema_id)

    assert _decoded(reader, topic, valueFormat="avro") == [
        (b"u1", {"name": "ada", "age": {"int": 36}}),
        (b"u2", {"name": "bob", "age": None}),
        (b"u3", {"name": "cy", "age": {"int": 7}}),
        (b"u4", None),  # a null value is a tombstone
    ]
    raw = {bytes(r.key): r.value for r in reader(subscribe=topic).load().collect()}
    header = b"\x00" + schema_id.to_bytes(4, "big")  # Confluent's wire format
    assert [bytes(raw[k][:5]) for k in (b"u1", b"u2", b"u3")] == [header] * 3
    read = AvroDeserializer(registry)  # Confluent's deserializer reads what franz wrote
    assert [read(bytes(raw[k]), _ctx(topic)) for k in (b"u1", b"u2", b"u3")] == [
        {"name": "ada", "age": 36}, {"name": "bob", "age": None}, {"name": "cy", "age": 7}]


def test_stream_copy_with_a_schema_text(
    franz: Any, reader: Any, stream_reader: Any, registry: Any, topic: str, tmp_path: Path
) -> None:
    """What a read with valueFormat=avro gives is what a write with it takes: a stream
    copies an Avro topic, registering its schema under the target's subject."""
    src, dst = topic + "-src", topic + "-dst"
    franz.create_topic(src, partitions=2)
    franz.create_topic(dst, partitions=2)
    values = AvroSerializer(registry, USER)
    for p in range(2):
        franz.produce(src, [{"key": f"k{p}{i}", "value": values(
            {"name": f"n{p}{i}", "age": i or None}, _ctx(src))} for i in range(5)], partition=p)
    q = (
        stream_reader(subscribe=src, startingOffsets="earliest", valueFormat="avro")
        .select("key", "value", "partition")
        .writeStream.format("franz").option("url", franz.url).option("topic", dst)
        .option("valueFormat", "avro").option("valueSchema", USER)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True).start()
    )
    assert q.awaitTermination(120)
    assert q.exception() is None
    assert _decoded(reader, dst, valueFormat="avro") == _decoded(reader, src, valueFormat="avro")
    assert registry.get_latest_version(f"{dst}-value").schema.schema_str == (
        registry.get_latest_version(f"{src}-value").schema.schema_str)


def test_jsonschema_and_protobuf_writes(spark: Any, franz: Any, reader: Any, topic: str) -> None:
    a, b = topic + "-json", topic + "-proto"
    for t in (a, b):
        franz.create_topic(t, partitions=1)
    orders = spark.createDataFrame([("7", "a1", 2), ("8", "b2", 5)], "k string, sku string, n int")
    order = json.dumps({"type": "object", "properties": {"sku": {"type": "string"},
                                                         "n": {"type": "integer"}},
                        "required": ["sku"]})
    _save(orders.select(F.col("k").alias("key"), F.to_json(F.struct("sku", "n")).alias("value")),
          franz, topic=a, keyFormat="jsonschema", keySchema='{"type": "integer"}',
          valueFormat="jsonschema", valueSchema=order)
    assert _decoded(reader, a, keyFormat="jsonschema", valueFormat="jsonschema") == [
        ("7", {"sku": "a1", "n": 2}), ("8", {"sku": "b2", "n": 5})]

    proto = 'syntax = "proto3"; message Order { string sku = 1; int32 n = 2; }'
    _save(orders.select(F.to_json(F.struct("sku", "n")).alias("value")), franz, topic=b,
          valueFormat="protobuf", valueSchema=proto)
    assert [v for _, v in _decoded(reader, b, valueFormat="protobuf")] == [
        {"sku": "a1", "n": 2}, {"sku": "b2", "n": 5}]


def test_bad_rows_fail_the_write_with_the_reason(
    spark: Any, franz: Any, registry: Any, topic: str
) -> None:
    franz.create_topic(topic, partitions=1)
    registry.register_schema(f"{topic}-value", sr.Schema(USER, "AVRO"))
    one = "value string"
    with pytest.raises(Exception, match="column 'value' of row 0 of this task is not JSON "
                       r"\(valueFormat=avro takes the value as JSON"):
        _save(spark.createDataFrame([("not json",)], one), franz, topic=topic,
              valueFormat="avro")
    with pytest.raises(Exception) as info:  # noqa: B017 - Spark wraps the task's error
        _save(spark.createDataFrame([('{"name": "dee", "age": 3}',)], one), franz, topic=topic,
              valueFormat="avro")
    assert ("42203 Conversion of JSON to Object failed: value.data.age: expected a union value"
            in str(info.value))
    # an id the registry has, but not under the topic's subject: the registry refuses it
    other = registry.register_schema(f"{topic}-other", sr.Schema('"string"', "AVRO"))
    with pytest.raises(Exception, match="42207 Error serializing message"):
        _save(spark.createDataFrame([('"x"',)], one), franz, topic=topic, valueFormat="avro",
              valueSchemaId=other)
    assert franz.offsets(topic, 0) == (0, 0)
    # found on the driver, before any task: no such subject, a schema of another type
    with pytest.raises(Exception, match=f"Subject '{topic}-key' not found"):
        _save(spark.createDataFrame([("1", "x")], "key string, value string"), franz,
              topic=topic, keyFormat="avro")
    with pytest.raises(Exception, match="is an AVRO schema, but valueFormat=protobuf"):
        _save(spark.createDataFrame([("{}",)], one), franz, topic=topic, valueFormat="protobuf")


def test_schema_writes_are_exactly_once(franz: Any, registry: Any, topic: str) -> None:
    """A retried request or task (the same keys and bodies) writes nothing again."""
    franz.create_topic(topic, partitions=2)
    registry.register_schema(f"{topic}-value", sr.Schema(USER, "AVRO"))
    data = [(f"k{i}", json.dumps({"name": f"n{i}", "age": {"int": i}})) for i in range(10)]

    def run(options: dict[str, str], scope: KeyScope | None) -> Producer:
        conf = resolve_schemas(writer_conf({"url": franz.url, "topic": topic,
                                            "valueFormat": "avro", "batchSize": "3", **options}))
        p = Producer(conf, ["key", "value"], scope)
        try:
            p.add_rows(data)
        finally:
            p.close()
        return p

    def total() -> int:
        return sum(hi - lo for lo, hi in (franz.offsets(topic, p) for p in range(2)))

    scope = KeyScope(f"eo:{topic}", "-", 0)
    first = run({}, scope)
    assert (first.records, first.requests, total()) == (10, 4, 10)
    again = run({}, scope)  # a retry: answered from franz's record of the first
    assert (again.records, again.requests, again.resends, total()) == (10, 4, 0, 10)
    run({"exactlyOnce": "false"}, None)  # at least once: written again
    assert total() == 20


def test_schemas_are_resolved_once_on_the_driver(franz: Any, registry: Any, topic: str) -> None:
    franz.create_topic(topic, partitions=1)
    subject = f"team/{topic} users"  # any subject name: URL-encoded in the lookup
    first = registry.register_schema(subject, sr.Schema(USER, "AVRO"))
    binary = writer_conf({"url": "http://127.0.0.1:1", "topic": topic})
    assert resolve_schemas(binary) is binary  # nothing to look up, no request
    conf = resolve_schemas(writer_conf({"url": franz.url, "topic": topic, "keyFormat": "avro",
                                        "keySchema": '"string"', "valueFormat": "avro",
                                        "valueSubject": subject}))
    assert conf.value_schema.schema_id == first and conf.value_schema.subject == subject
    assert conf.key_schema.schema_id is None  # a text: franz registers it when writing
    assert conf.cluster_id == franz.cluster
    # a later version does not change a write that has started
    registry.register_schema(subject, sr.Schema(json.dumps({**json.loads(USER), "fields": [
        *json.loads(USER)["fields"], {"name": "x", "type": "int", "default": 0}]}), "AVRO"))
    p = Producer(conf, ["key", "value"], KeyScope(f"r:{topic}", "-", 0))
    p.add_rows([('"k"', '{"name": "fay"}')])
    p.close()
    raw = franz.http.get(f"/topics/{topic}/partitions/0/records",
                         params={"offset": 0, "count": 1, "max_bytes": 1 << 20, "timeout": 0},
                         headers={"Accept": "application/vnd.kafka.avro.v2+json"}).json()
    assert [(r["key"], r["value"]) for r in raw] == [("k", {"name": "fay", "age": None})]
    assert len(registry.get_versions(f"{topic}-key")) == 1
