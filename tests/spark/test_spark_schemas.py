"""Reading Schema Registry topics with ``keyFormat`` / ``valueFormat``: values written by
Confluent's serializers (registered with franz's registry), decoded by franz into JSON
string columns; and the documented alternative, Spark's own ``from_avro`` on the bytes
after Confluent's 5-byte header."""

from __future__ import annotations

import json
from typing import Any

import pytest

sr = pytest.importorskip("confluent_kafka.schema_registry")
F = pytest.importorskip("pyspark.sql.functions")

from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from spark_connector.options import FranzOptionError, reader_conf  # noqa: E402

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
