"""Producing with Schema Registry schemas on a real ``franz serve`` (docs/schema-registry.md,
"Producing with schemas"): v2 avro / jsonschema / protobuf with a schema text or id, v3
records and records:batch with a schema type and text, an id, a version, the latest
version, a subject or a subject name strategy. The stored bytes are read back raw (v3
range read) and decoded with Confluent's own deserializers (``confluent_kafka``) against
franz's registry; every error answers its Confluent status and code, nothing written."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from api.v3 import models as m
from core.broker.schemas.resolver import LATEST_TTL_S

AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
V2 = "application/vnd.kafka.v2+json"
SR = "application/vnd.schemaregistry.v1+json"

USER = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None},
    {"name": "avatar", "type": "bytes", "default": ""}]})
ITEM = json.dumps({"type": "object", "properties": {"sku": {"type": "string"},
                                                    "n": {"type": "integer"}},
                   "required": ["sku"]})
ORDER_PROTO = """syntax = "proto3";
package shop.v1;
message Order { string id = 1; int32 qty = 2; Line line = 3;
  message Line { string sku = 1; } }
message Other { bool b = 1; }
"""
KEY_PROTO = 'syntax = "proto3"; package shop.v1; message OrderKey { string id = 1; }'

sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

# --- helpers --------------------------------------------------------------------------------


def cluster_id(client: httpx.Client) -> str:
    return str(client.get("/v3/clusters").json()["data"][0]["cluster_id"])


def v2_post(client: httpx.Client, path: str, body: Any, ctype: str = AVRO) -> httpx.Response:
    return client.post(path, content=json.dumps(body), headers={"Content-Type": ctype})


def v2_ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert all(o["error_code"] is None for o in body["offsets"]), body
    return body  # type: ignore[no-any-return]


def v2_error(resp: httpx.Response, status: int, code: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith(V2)
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


def stored(client: httpx.Client, topic: str, partition: int,
           offset: int) -> tuple[bytes | None, bytes | None]:
    """The raw key and value of one record (the v3 range read, BINARY)."""
    resp = client.get(f"/v3/clusters/{cluster_id(client)}/topics/{topic}/partitions/"
                      f"{partition}/records", params={"offset": offset, "count": 1})
    assert resp.status_code == 200, resp.text
    record = resp.json()["data"][0]
    return tuple(None if record[f] is None else base64.b64decode(record[f]["data"])
                 for f in ("key", "value"))  # type: ignore[return-value]


def header_id(data: bytes | None) -> int:
    assert data is not None and data[0] == 0, data
    return int.from_bytes(data[1:5], "big")


def registry(url: str) -> Any:
    return sr.SchemaRegistryClient({"url": url})


def ctx(topic: str, field: Any = MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


def end_offset(client: httpx.Client, topic: str) -> int:
    parts = client.get(f"/topics/{topic}/partitions").json()
    return sum(client.get(f"/topics/{topic}/partitions/{p['partition']}/offsets").json()[
        "end_offset"] for p in parts)


def order_class() -> Any:
    """``shop.v1.Order`` as a Python class (a pool of its own), the message the
    ORDER_PROTO schema's payloads decode to."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop.v1",
                                             syntax="proto3")
    order = fdp.message_type.add(name="Order")
    order.field.add(name="id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    order.field.add(name="qty", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)
    order.field.add(name="line", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                    type_name=".shop.v1.Order.Line")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    fdp.message_type.add(name="Other").field.add(name="b", number=1, label=F.LABEL_OPTIONAL,
                                                 type=F.TYPE_BOOL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Order"))


def v3_base(client: httpx.Client, topic: str) -> str:
    return f"/v3/clusters/{cluster_id(client)}/topics/{topic}"


def v3_reports(client: httpx.Client, topic: str, *records: Any) -> list[dict[str, Any]]:
    body = "".join(json.dumps(r) for r in records)
    resp = client.post(f"{v3_base(client, topic)}/records", content=body,
                       headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
    reports = [json.loads(line) for line in resp.text.split("\r\n") if line]
    adapter = TypeAdapter(m.ProduceReport)
    for report in reports:
        adapter.validate_python(report)
    return reports


def register(client: httpx.Client, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    body: dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    resp = client.post(f"/subjects/{subject}/versions", content=json.dumps(body),
                       headers={"Content-Type": SR})
    assert resp.status_code == 200, resp.text
    return int(resp.json()["id"])


# --- v2 ---------------------------------------------------------------------------------------


def test_v2_avro_schema_text_then_id(client: httpx.Client, franz_url: str, topic: str) -> None:
    body = v2_ok(v2_post(client, f"/topics/{topic}", {
        "key_schema": '"string"', "value_schema": USER,
        "records": [{"key": "u1", "value": {"name": "ada", "age": {"int": 36},
                                            "avatar": "\u00ff\u0000"}},
                    {"key": "u2", "value": {"name": "bob"}, "partition": 0},
                    {"value": None}]}))
    key_id, value_id = body["key_schema_id"], body["value_schema_id"]
    assert isinstance(key_id, int) and isinstance(value_id, int) and key_id != value_id
    client_sr = registry(franz_url)
    assert client_sr.get_latest_version(f"{topic}-value").schema_id == value_id
    assert client_sr.get_latest_version(f"{topic}-key").schema_id == key_id
    decode = AvroDeserializer(client_sr)
    first = body["offsets"][0]
    key, value = stored(client, topic, first["partition"], first["offset"])
    assert (header_id(key), header_id(value)) == (key_id, value_id)
    assert decode(key, ctx(topic, MessageField.KEY)) == "u1"
    assert decode(value, ctx(topic)) == {"name": "ada", "age": 36, "avatar": b"\xff\x00"}
    second = body["offsets"][1]
    assert second["partition"] == 0
    assert decode(stored(client, topic, 0, second["offset"])[1], ctx(topic)) == {
        "name": "bob", "age": None, "avatar": b""}
    third = body["offsets"][2]
    assert stored(client, topic, third["partition"], third["offset"]) == (None, None)

    # by id, to the partition path; the same ids again
    again = v2_ok(v2_post(client, f"/topics/{topic}/partitions/1", {
        "value_schema_id": value_id, "records": [{"value": {"name": "cy"}}]}))
    assert (again["key_schema_id"], again["value_schema_id"]) == (None, value_id)
    value = stored(client, topic, 1, again["offsets"][0]["offset"])[1]
    assert decode(value, ctx(topic))["name"] == "cy"


def test_v2_jsonschema(client: httpx.Client, franz_url: str, topic: str) -> None:
    body = v2_ok(v2_post(client, f"/topics/{topic}", {
        "value_schema": ITEM,
        "records": [{"value": {"sku": "a1", "n": 2}}, {"value": {"sku": "b"}}]}, JSONSCHEMA))
    value_id = body["value_schema_id"]
    assert registry(franz_url).get_schema(value_id).schema_type == "JSON"
    decode = JSONDeserializer(None, schema_registry_client=registry(franz_url))
    for offset, expected in zip(body["offsets"], [{"sku": "a1", "n": 2}, {"sku": "b"}],
                                strict=True):
        value = stored(client, topic, offset["partition"], offset["offset"])[1]
        assert header_id(value) == value_id
        compact = json.dumps(expected, separators=(",", ":")).encode()
        assert value is not None and value[5:] == compact
        assert decode(value, ctx(topic)) == expected
    by_id = v2_ok(v2_post(client, f"/topics/{topic}", {
        "value_schema_id": value_id, "records": [{"value": {"sku": "c"}}]}, JSONSCHEMA))
    assert by_id["value_schema_id"] == value_id


def test_v2_protobuf(client: httpx.Client, franz_url: str, topic: str) -> None:
    body = v2_ok(v2_post(client, f"/topics/{topic}", {
        "key_schema": KEY_PROTO, "value_schema": ORDER_PROTO,
        "records": [{"key": {"id": "o-1"}, "value": {"id": "o-1", "qty": 3,
                                                      "line": {"sku": "s"}}}]}, PROTOBUF))
    offset = body["offsets"][0]
    key, value = stored(client, topic, offset["partition"], offset["offset"])
    assert (header_id(key), header_id(value)) == (body["key_schema_id"], body["value_schema_id"])
    assert value is not None and value[5] == 0  # message indexes [0]: the first message
    order_cls = order_class()
    order = order_cls.FromString(value[6:])
    assert (order.id, order.qty, order.line.sku) == ("o-1", 3, "s")
    decode = ProtobufDeserializer(order_cls, {"use.deprecated.format": False},
                                  schema_registry_client=registry(franz_url))
    assert decode(value, ctx(topic)) == order
    got = registry(franz_url).get_schema(body["value_schema_id"])
    assert got.schema_type == "PROTOBUF" and "message Order" in got.schema_str


def test_v2_schema_ids_are_null_without_schemas(client: httpx.Client, topic: str) -> None:
    body = v2_ok(v2_post(client, f"/topics/{topic}", {"records": [{"value": None}]}))
    assert (body["key_schema_id"], body["value_schema_id"]) == (None, None)
    binary = v2_ok(v2_post(client, f"/topics/{topic}", {"records": [{"value": "YQ=="}]},
                           "application/vnd.kafka.binary.v2+json"))
    assert (binary["key_schema_id"], binary["value_schema_id"]) == (None, None)


V2_ERRORS = [
    ("no value schema", AVRO, {"records": [{"value": {"name": "a"}}]}, 422, 42202,
     "Request includes values but does not include value schema"),
    ("no key schema", AVRO, {"value_schema": '"string"', "records": [{"key": "k", "value": "v"}]},
     422, 42201, "Request includes keys but does not include key schema"),
    ("unknown id", AVRO, {"value_schema_id": 2_000_000, "records": [{"value": "v"}]}, 422, 42207,
     "Error serializing message. Error when fetching schema by id. schemaId = 2000000"),
    ("invalid schema", AVRO, {"value_schema": "{nope", "records": [{"value": "v"}]}, 422, 42205,
     "Invalid schema: the value schema: Invalid AVRO schema"),
    ("invalid proto", PROTOBUF, {"value_schema": "message {", "records": [{"value": {}}]}, 422,
     42205, "Invalid schema"),
    ("avro mismatch", AVRO, {"value_schema": USER, "records": [{"value": {"name": "a"}},
                                                              {"value": {"name": 5}}]},
     422, 42203, "Conversion of JSON to Object failed: records[1].value.name: expected a string"),
    ("union not wrapped", AVRO, {"value_schema": USER, "records": [{"value": {
        "name": "a", "age": 3}}]}, 422, 42203, "records[0].value.age: expected a union value"),
    ("json mismatch", JSONSCHEMA, {"value_schema": ITEM, "records": [{"value": {"n": 1}}]}, 422,
     42203, "Conversion of JSON to Object failed: records[0].value: 'sku' is a required"),
    ("proto mismatch", PROTOBUF, {"value_schema": ORDER_PROTO, "records": [{"value": {
        "qty": "many"}}]}, 422, 42203, "Conversion of JSON to Object failed: records[0].value"),
    ("schema and id", AVRO, {"value_schema": '"string"', "value_schema_id": 1,
                             "records": [{"value": "v"}]}, 400, 400,
     "value_schema and value_schema_id cannot both be given"),
    ("bad body", AVRO, {"records": [{"value": "v", "extra": 1}]}, 400, 400, "extra"),
    ("empty records", AVRO, {"value_schema": '"string"', "records": []}, 422, 422, "empty"),
]


@pytest.mark.parametrize(("ctype", "body", "status", "code", "text"),
                         [case[1:] for case in V2_ERRORS], ids=[case[0] for case in V2_ERRORS])
def test_v2_errors_write_nothing(client: httpx.Client, topic: str, ctype: str, body: Any,
                                 status: int, code: int, text: str) -> None:
    v2_ok(v2_post(client, f"/topics/{topic}", {"records": [{"value": "YQ=="}]},
                  "application/vnd.kafka.binary.v2+json"))
    assert text in v2_error(v2_post(client, f"/topics/{topic}", body, ctype), status, code)
    assert end_offset(client, topic) == 1


def test_v2_registry_refusals(client: httpx.Client, topic: str) -> None:
    """An incompatible schema text, an id registered under another subject only, an id
    of another type: 42207, nothing written."""
    v2_ok(v2_post(client, f"/topics/{topic}", {"value_schema": USER,
                                               "records": [{"value": {"name": "a"}}]}))
    text = v2_error(v2_post(client, f"/topics/{topic}", {
        "value_schema": '"string"', "records": [{"value": "v"}]}), 422, 42207)
    assert "Error when registering schema" in text and "incompatible" in text.lower()
    elsewhere = register(client, f"other-{uuid.uuid4().hex[:8]}", '"long"')
    text = v2_error(v2_post(client, f"/topics/{topic}", {
        "value_schema_id": elsewhere, "records": [{"value": 1}]}), 422, 42207)
    assert "not registered under the subject" in text and f"{topic}-value" in text
    proto_id = register(client, f"{topic}-key", KEY_PROTO, "PROTOBUF")
    text = v2_error(v2_post(client, f"/topics/{topic}", {
        "key_schema_id": proto_id, "value_schema": USER,
        "records": [{"key": {"id": "x"}, "value": {"name": "a"}}]}), 422, 42207)
    assert "is a PROTOBUF schema, not AVRO" in text
    assert end_offset(client, topic) == 1


# --- v3 ---------------------------------------------------------------------------------------


def _check(client: httpx.Client, franz_url: str, topic: str, report: dict[str, Any],
           side: str = "value") -> Any:
    """The stored key or value of ``report``'s record, decoded by Confluent's
    deserializer of its type, after checking its header against the report."""
    key, value = stored(client, topic, report["partition_id"], report["offset"])
    data = key if side == "key" else value
    assert header_id(data) == report[side]["schema_id"]
    assert data is not None and report[side]["size"] == len(data)
    client_sr = registry(franz_url)
    field = MessageField.KEY if side == "key" else MessageField.VALUE
    kind = report[side]["type"]
    if kind == "AVRO":
        return AvroDeserializer(client_sr)(data, ctx(topic, field))
    if kind == "JSONSCHEMA":
        return JSONDeserializer(None, schema_registry_client=client_sr)(data, ctx(topic, field))
    return ProtobufDeserializer(order_class(), {"use.deprecated.format": False},
                                schema_registry_client=client_sr)(data, ctx(topic, field))


def test_v3_schema_text_id_version_and_latest(client: httpx.Client, franz_url: str,
                                              topic: str) -> None:
    reports = v3_reports(client, topic, {
        "key": {"type": "JSONSCHEMA", "schema": '{"type": "string"}', "data": "k1"},
        "value": {"type": "AVRO", "schema": USER, "data": {"name": "ada"}}})
    report = reports[0]
    assert report["error_code"] == 200
    value = report["value"]
    assert (value["type"], value["subject"], value["schema_version"]) == (
        "AVRO", f"{topic}-value", 1)
    assert report["key"]["type"] == "JSONSCHEMA" and report["key"]["subject"] == f"{topic}-key"
    assert _check(client, franz_url, topic, report)["name"] == "ada"
    assert _check(client, franz_url, topic, report, "key") == "k1"
    schema_id = value["schema_id"]

    newer = json.dumps({**json.loads(USER), "fields": [*json.loads(USER)["fields"], {
        "name": "email", "type": ["null", "string"], "default": None}]})
    v2_id = register(client, f"{topic}-value", newer)
    time.sleep(LATEST_TTL_S + 0.1)  # a subject's latest version is cached that long
    by_id, by_version, latest, explicit_latest = v3_reports(
        client, topic,
        {"value": {"schema_id": schema_id, "data": {"name": "by id"}}},
        {"value": {"schema_version": 1, "data": {"name": "by version"}}},
        {"value": {"data": {"name": "latest", "email": {"string": "a@b"}}}},
        {"value": {"schema_version": -1, "subject_name_strategy": "TOPIC_NAME",
                   "data": {"name": "latest again"}}})
    assert (by_id["value"]["schema_id"], by_id["value"]["schema_version"]) == (schema_id, 1)
    assert (by_version["value"]["schema_id"], by_version["value"]["schema_version"]) == (
        schema_id, 1)
    assert (latest["value"]["schema_id"], latest["value"]["schema_version"]) == (v2_id, 2)
    assert explicit_latest["value"]["schema_id"] == v2_id
    assert _check(client, franz_url, topic, by_version)["name"] == "by version"
    assert _check(client, franz_url, topic, latest)["email"] == "a@b"
    assert "key" not in latest


def test_v3_subjects_and_strategies(client: httpx.Client, franz_url: str, topic: str) -> None:
    subject = f"own-{uuid.uuid4().hex[:8]}"
    named, topic_named, own, no_latest = v3_reports(
        client, topic,
        {"value": {"type": "AVRO", "subject_name_strategy": "RECORD_NAME", "schema": USER,
                   "data": {"name": "r"}}},
        {"value": {"type": "PROTOBUF", "subject_name_strategy": "TOPIC_RECORD_NAME",
                   "schema": ORDER_PROTO, "data": {"id": "o", "qty": 1}}},
        {"value": {"type": "AVRO", "subject": subject, "schema": '"string"', "data": "s"}},
        {"value": {"data": None}})
    assert named["value"]["subject"] == "shop.User"
    assert topic_named["value"]["subject"] == f"{topic}-shop.v1.Order"
    assert _check(client, franz_url, topic, topic_named).qty == 1
    assert own["value"]["subject"] == subject
    assert no_latest["error_code"] == 42207  # no {topic}-value subject: no latest version
    user_id = named["value"]["schema_id"]
    again, latest_named = v3_reports(
        client, topic,
        {"value": {"schema_id": user_id, "subject_name_strategy": "RECORD_NAME",
                   "data": {"name": "by id"}}},
        {"value": {"subject": subject, "data": "latest of own subject"}})
    assert (again["value"]["subject"], again["value"]["schema_id"]) == ("shop.User", user_id)
    assert latest_named["value"]["schema_id"] == own["value"]["schema_id"]
    assert _check(client, franz_url, topic, latest_named) == "latest of own subject"


def test_v3_null_data_with_a_schema(client: httpx.Client, topic: str) -> None:
    (report,) = v3_reports(client, topic, {"value": {"type": "AVRO", "schema": '"string"',
                                                     "data": None}})
    assert report["value"]["size"] == 0 and report["value"]["type"] == "AVRO"
    assert stored(client, topic, report["partition_id"], report["offset"]) == (None, None)


V3_ERRORS = [
    ({"type": "AVRO", "schema": '"string"', "data": 5}, 42203,
     "Conversion of JSON to Object failed: value.data: expected a string, got 5"),
    ({"type": "AVRO", "schema": "{nope", "data": "x"}, 42205, "Invalid schema"),
    ({"schema_id": 2_000_000, "data": "x"}, 42207, "schemaId = 2000000"),
    ({"data": "x"}, 42207, "Error when fetching latest schema version. subject = {topic}-value"),
    ({"schema_version": 4, "data": "x"}, 400,
     "Schema does not exist for subject: {topic}-value, version: 4"),
    ({"subject_name_strategy": "RECORD_NAME", "data": "x"}, 400,
     "Cannot use schema_subject_strategy=RECORD_NAME without schema_id or schema."),
    ({"type": "AVRO", "subject_name_strategy": "RECORD_NAME", "schema": '"string"',
      "data": "x"}, 42207, "must have a record name"),
    ({"type": "AVRO", "schema_id": 1, "data": "x"}, 400,
     "Bad Request: value: schema_id cannot be used with type AVRO"),
    ({"type": "AVRO", "data": "x"}, 400, "Bad Request: value: type AVRO needs schema"),
    ({"schema": '"string"', "data": "x"}, 400, "Bad Request: value: schema needs a type"),
    ({"schema_id": 1, "schema_version": 1}, 400, "only one of schema_id, schema_version"),
    ({"subject": "s", "subject_name_strategy": "TOPIC_NAME"}, 400,
     "only one of subject_name_strategy or subject"),
    ({"subject_name_strategy": "OTHER"}, 400, 'subject_name_strategy="OTHER" is not one of'),
    ({"schema_id": "1"}, 400, 'value.schema_id="1" is not a 32-bit integer.'),
    ({"type": "JSON", "subject": "s", "data": 1}, 400, "subject cannot be used with type JSON"),
]


@pytest.mark.parametrize(("value", "code", "text"), V3_ERRORS)
def test_v3_record_errors(client: httpx.Client, topic: str, value: Any, code: int,
                          text: str) -> None:
    """Each bad record fails alone (HTTP 200, its report), the next one is written."""
    first, second = v3_reports(client, topic, {"value": value},
                               {"value": {"type": "STRING", "data": "fine"}})
    assert first == {"error_code": code, "message": first["message"]}
    assert text.format(topic=topic) in first["message"], first
    assert second["error_code"] == 200


def test_v3_record_fails_at_its_key_first(client: httpx.Client, topic: str) -> None:
    (report,) = v3_reports(client, topic, {
        "key": {"type": "AVRO", "schema": '"string"', "data": 1},
        "value": {"schema_id": 2_000_000, "data": "x"}})
    assert report["error_code"] == 42203 and "key.data" in report["message"]


def test_v3_batch_with_schemas(client: httpx.Client, franz_url: str, topic: str) -> None:
    entries = [
        {"id": "a", "value": {"type": "AVRO", "schema": USER, "data": {"name": "a"}}},
        {"id": "b", "value": {"type": "AVRO", "schema": USER, "data": {"name": 1}}},
        {"id": "c", "key": {"type": "STRING", "data": "k"},
         "value": {"subject_name_strategy": "TOPIC_NAME", "data": {"name": "latest"}}},
        {"id": "d", "value": {"schema_id": 2_000_000, "data": {}}},
    ]
    resp = client.post(f"{v3_base(client, topic)}/records:batch", json={"entries": entries})
    assert resp.status_code == 207, resp.text
    body = TypeAdapter(m.ProduceBatchResponse).validate_python(resp.json())
    assert [s["id"] for s in body["successes"]] == ["a", "c"]
    assert [(f["id"], f["error_code"]) for f in body["failures"]] == [("b", 42203), ("d", 42207)]
    a, c = body["successes"]
    assert a["value"]["schema_id"] == c["value"]["schema_id"]
    assert c["key"] == {"type": "STRING", "size": 1}
    report = {**c, "partition_id": c["partition_id"], "offset": c["offset"]}
    assert _check(client, franz_url, topic, report)["name"] == "latest"


def test_v3_many_records_encoded_together(client: httpx.Client, topic: str) -> None:
    records = [{"value": {"type": "AVRO", "schema": USER, "data": {"name": f"n{i}"}}}
               for i in range(200)]
    records[150]["value"]["data"] = {"name": None}
    reports = v3_reports(client, topic, *records)
    assert [r["error_code"] for r in reports] == [200] * 150 + [42203] + [200] * 49
    assert len({r["value"]["schema_id"] for r in reports if r["error_code"] == 200}) == 1


def test_v2_many_records(client: httpx.Client, franz_url: str, topic: str) -> None:
    body = v2_ok(v2_post(client, f"/topics/{topic}", {
        "value_schema": USER, "key_schema": '"long"',
        "records": [{"key": i, "value": {"name": f"n{i}"}} for i in range(500)]}))
    assert len(body["offsets"]) == 500
    last = body["offsets"][-1]
    key, value = stored(client, topic, last["partition"], last["offset"])
    assert AvroDeserializer(registry(franz_url))(value, ctx(topic))["name"] == "n499"
    assert AvroDeserializer(registry(franz_url))(key, ctx(topic, MessageField.KEY)) == 499
