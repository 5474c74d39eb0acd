"""Consuming with schemas on a real server: keys and values written by Confluent's Python
serializers (AvroSerializer, JSONSerializer, ProtobufSerializer, registering their
schemas with franz's registry through SchemaRegistryClient), produced as raw bytes
(v2 binary), then read back decoded by v2 consumer instances of format avro,
jsonschema and protobuf and by the range read; bytes that cannot be decoded.
"""

from __future__ import annotations

import json
import struct
import uuid
from typing import Any

import httpx
import pytest
from conftest import V2Client

sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402

AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
MEDIA = {"avro": AVRO, "jsonschema": JSONSCHEMA, "protobuf": PROTOBUF}

ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "float"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tag", "type": ["null", "long", {"type": "record", "name": "Tag", "fields": [
            {"name": "label", "type": "string"}]}], "default": None},
        {"name": "raw", "type": "bytes"},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "DONE"]}},
        {"name": "items", "type": {"type": "array", "items": "Tag"}},
    ]})


@pytest.fixture
def registry(franz_url: str) -> Any:
    return sr.SchemaRegistryClient({"url": franz_url})


def _ctx(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


def _produce(v2: V2Client, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Raw bytes to partition 0 (binary v2 produce)."""
    rows = [{"key": None if k is None else v2.b64(k), "value": None if v is None else v2.b64(v)}
            for k, v in records]
    body = v2.produce(topic, rows, partition=0)
    assert all(o["error_code"] is None for o in body["offsets"]), body


def _consumer(v2: V2Client, topic: str, fmt: str) -> str:
    base = v2.create_consumer(f"g-{uuid.uuid4().hex[:10]}", format=fmt,
                              **{"auto.offset.reset": "earliest"})["base_uri"]
    v2.post(base + "/assignments", {"partitions": [{"topic": topic, "partition": 0}]})
    return str(base)


def _read(v2: V2Client, base: str, fmt: str, count: int) -> list[dict[str, Any]]:
    return v2.read_until(base, count, fmt=MEDIA[fmt])


def _kv(rows: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(r["key"], r["value"]) for r in rows]


# --- AVRO -----------------------------------------------------------------------------------


def test_avro_keys_and_values(v2: V2Client, registry: Any, topic: str) -> None:
    values = AvroSerializer(registry, ORDER)
    keys = AvroSerializer(registry, '"string"')
    order = {"id": "o-1", "qty": 3, "price": 1.1, "note": "gift", "tag": {"label": "vip"},
             "raw": b"\x00\xffA", "state": "DONE", "items": [{"label": "a"}]}
    plain = {**order, "note": None, "tag": 7, "items": []}
    _produce(v2, topic, [
        (keys("k1", _ctx(topic, key=True)), values(order, _ctx(topic))),
        (None, values(plain, _ctx(topic))),
        (keys("k3", _ctx(topic, key=True)), None),  # a tombstone
    ])
    base = _consumer(v2, topic, "avro")
    rows = _read(v2, base, "avro", 3)
    assert [r["offset"] for r in rows] == [0, 1, 2]
    # Avro's JSON encoding, as Confluent's REST Proxy answers it
    assert _kv(rows) == [
        ("k1", {"id": "o-1", "qty": 3, "price": 1.1, "note": {"string": "gift"},
                "tag": {"shop.Tag": {"label": "vip"}}, "raw": "\u0000\u00ffA",
                "state": "DONE", "items": [{"label": "a"}]}),
        (None, {"id": "o-1", "qty": 3, "price": 1.1, "note": None, "tag": {"long": 7},
                "raw": "\u0000\u00ffA", "state": "DONE", "items": []}),
        ("k3", None),
    ]
    assert {r["topic"] for r in rows} == {topic} and rows[0]["timestamp_type"] == "CreateTime"


def test_accept_must_match_the_format(v2: V2Client, topic: str) -> None:
    _produce(v2, topic, [(None, None)])
    base = _consumer(v2, topic, "AVRO")  # any case, as Confluent
    for accept in (v2.BINARY, v2.JSON, v2.V2, JSONSCHEMA, "application/json"):
        resp = v2.http.get(base + "/records", headers={"Accept": accept})
        v2.error_of(resp, 406, 40601)
    resp = v2.http.get(base + "/records", headers={"Accept": "*/*"}, params={"timeout": 10})
    assert resp.status_code == 200 and resp.headers["content-type"] == AVRO
    binary = _consumer(v2, topic, "binary")
    v2.error_of(v2.http.get(binary + "/records", headers={"Accept": AVRO}), 406, 40601)


# --- JSON Schema ----------------------------------------------------------------------------


def test_jsonschema(v2: V2Client, registry: Any, topic: str) -> None:
    schema = json.dumps({"type": "object", "properties": {
        "sku": {"type": "string"}, "n": {"type": "integer"}, "tags": {"type": "array"}}})
    values = JSONSerializer(schema, registry)
    keys = JSONSerializer(json.dumps({"type": "string"}), registry)
    doc = {"sku": "a1", "n": 2, "tags": ["x", {"deep": [1.5, None]}]}
    _produce(v2, topic, [(keys("k", _ctx(topic, key=True)), values(doc, _ctx(topic))),
                         (None, values({"sku": "é"}, _ctx(topic)))])
    base = _consumer(v2, topic, "jsonschema")
    assert _kv(_read(v2, base, "jsonschema", 2)) == [("k", doc), (None, {"sku": "é"})]


# --- PROTOBUF -------------------------------------------------------------------------------


def _proto_classes() -> tuple[Any, Any, Any]:
    """Messages of a file made here: ``Order`` (first), ``Order.Line`` (nested) and
    ``Refund`` (second), so the three kinds of message indexes are written."""
    F = descriptor_pb2.FieldDescriptorProto
    package = f"franz.t{uuid.uuid4().hex[:8]}"
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{package.replace('.', '/')}.proto",
                                             package=package, syntax="proto3")
    state = fdp.enum_type.add(name="State")
    state.value.add(name="NEW", number=0)
    state.value.add(name="DONE", number=1)
    order = fdp.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    line.field.add(name="unit_count", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)
    order.field.add(name="order_id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    order.field.add(name="total_cents", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64)
    order.field.add(name="state", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_ENUM,
                    type_name=f".{package}.State")
    order.field.add(name="lines", number=4, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                    type_name=f".{package}.Order.Line")
    order.field.add(name="flag", number=5, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL)
    refund = fdp.message_type.add(name="Refund")
    refund.field.add(name="order_id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    pool = descriptor_pool.Default()
    pool.Add(fdp)

    def cls(name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))

    return cls("Order"), cls("Order.Line"), cls("Refund")


def test_protobuf(v2: V2Client, registry: Any, topic: str) -> None:
    order_cls, line_cls, refund_cls = _proto_classes()
    conf = {"use.deprecated.format": False}
    order = order_cls(order_id="o-1", total_cents=2**40, state=1,
                      lines=[line_cls(sku="a", unit_count=2)])
    orders = ProtobufSerializer(order_cls, registry, conf)
    # one subject per message type: each serializer registers its own file under it
    refunds = ProtobufSerializer(refund_cls, registry,
                                 {**conf, "subject.name.strategy": lambda ctx, name: name})
    lines = ProtobufSerializer(line_cls, registry,
                               {**conf, "subject.name.strategy": lambda ctx, name: name})
    _produce(v2, topic, [
        (None, orders(order, _ctx(topic))),
        (None, orders(order_cls(), _ctx(topic))),
        (None, refunds(refund_cls(order_id="o-1"), _ctx(topic))),
        (None, lines(line_cls(sku="z"), _ctx(topic))),
    ])
    base = _consumer(v2, topic, "protobuf")
    # protobuf's JSON mapping as Confluent prints it: lowerCamelCase names, int64 as a
    # string, enums by name, fields with no presence printed with their defaults
    assert [v for _, v in _kv(_read(v2, base, "protobuf", 4))] == [
        {"orderId": "o-1", "totalCents": str(2**40), "state": "DONE",
         "lines": [{"sku": "a", "unitCount": 2}], "flag": False},
        {"orderId": "", "totalCents": "0", "state": "NEW", "lines": [], "flag": False},
        {"orderId": "o-1"},
        {"sku": "z", "unitCount": 0},
    ]


# --- what cannot be decoded -----------------------------------------------------------------


def _framed(schema_id: int, payload: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + payload


def test_undecodable_records_stop_the_read_and_keep_the_position(
    v2: V2Client, registry: Any, topic: str
) -> None:
    values = AvroSerializer(registry, ORDER)
    order = {"id": "o", "qty": 1, "price": 0.5, "note": None, "tag": None, "raw": b"",
             "state": "NEW", "items": []}
    good = values(order, _ctx(topic))
    _produce(v2, topic, [(None, good), (None, good), (None, b"plain text"), (None, good),
                         (None, _framed(2**31 - 1, b"\x02")), (b"plain key", good),
                         (None, good)])
    base = _consumer(v2, topic, "avro")
    rows = _read(v2, base, "avro", 2)
    assert [r["offset"] for r in rows] == [0, 1]
    for _ in range(2):  # the position stays at the bad record
        msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": AVRO}), 408, 40801)
        assert msg.startswith(f"Error deserializing value for partition {topic}-0 at offset 2: "
                              "not in the schema wire format: unknown magic byte"), msg
        assert "seek past the record" in msg
    seek = {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
    v2.post(base + "/positions", seek)
    assert [r["offset"] for r in v2.records(base, fmt=AVRO, timeout=1000)] == [3]
    msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": AVRO}), 408, 40801)
    assert f"{topic}-0 at offset 4: schema id {2**31 - 1} is not registered" in msg, msg
    v2.post(base + "/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": 5}]})
    # one deserializer for keys and values (Confluent): a plain key fails an avro read
    msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": AVRO}), 408, 40801)
    assert msg.startswith(f"Error deserializing key for partition {topic}-0 at offset 5"), msg
    # a schema of another type
    proto = _consumer(v2, topic, "protobuf")
    msg = v2.error_of(v2.http.get(proto + "/records", headers={"Accept": PROTOBUF}), 408, 40801)
    assert "is of type AVRO, not PROTOBUF" in msg, msg


def test_bad_protobuf_payloads(v2: V2Client, registry: Any, topic: str) -> None:
    order_cls, _line, _refund = _proto_classes()
    good = ProtobufSerializer(order_cls, registry, {"use.deprecated.format": False})(
        order_cls(order_id="x"), _ctx(topic))
    schema_id = struct.unpack(">I", good[1:5])[0]
    _produce(v2, topic, [(None, _framed(schema_id, b"\x02\x0e")),  # index [7]: no such message
                         (None, _framed(schema_id, b"\x00\xff\xff"))])  # not a message
    base = _consumer(v2, topic, "protobuf")
    msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": PROTOBUF}), 408, 40801)
    assert "the file has no message number 7" in msg, msg
    v2.post(base + "/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": 1}]})
    msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": PROTOBUF}), 408, 40801)
    assert ".Order message of schema" in msg, msg


# --- the range read -------------------------------------------------------------------------


def test_range_read(v2: V2Client, registry: Any, topic: str, client: httpx.Client) -> None:
    values = AvroSerializer(registry, ORDER)
    order = {"id": "r", "qty": 1, "price": 2.5, "note": None, "tag": None, "raw": b"\x01",
             "state": "NEW", "items": []}
    _produce(v2, topic, [(b"user-1", values(order, _ctx(topic))), (b"user-2", b"not avro"),
                         (None, values(order, _ctx(topic)))])
    url = f"/topics/{topic}/partitions/0/records"
    decoded = {**order, "raw": "\u0001"}
    # plain keys beside avro values: key_format=binary
    resp = client.get(url, params={"offset": 0, "key_format": "binary"},
                      headers={"Accept": AVRO})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == AVRO
    assert _kv(resp.json()) == [(v2.b64("user-1"), decoded)]
    assert resp.headers["x-franz-next-offset"] == "1"  # stops before the bad record
    resp = client.get(url, params={"offset": 1, "key_format": "binary"},
                      headers={"Accept": AVRO})
    v2.error_of(resp, 408, 40801)
    resp = client.get(url, params={"offset": 2}, headers={"Accept": AVRO})
    assert _kv(resp.json()) == [(None, decoded)]
    # the reverse: avro keys asked for, binary values
    resp = client.get(url, params={"offset": 2, "key_format": "avro"},
                      headers={"Accept": v2.BINARY})
    assert resp.status_code == 200 and resp.json()[0]["key"] is None
    v2.error_of(client.get(url, params={"offset": 0, "key_format": "xml"}), 400, 400)


# --- hostile payloads -----------------------------------------------------------------------

LINKED = json.dumps({"type": "record", "name": "L",
                     "fields": [{"name": "n", "type": ["null", "L"]}]})


def _linked(depth: int) -> bytes:
    """A linked list of ``depth`` records in Avro binary."""
    return b"\x02" * (depth - 1) + b"\x00"


def test_hostile_avro_payloads_are_refused_and_the_broker_lives(
    v2: V2Client, registry: Any, topic: str, client: httpx.Client
) -> None:
    """A recursive schema's payload nested 200,000 levels deep made fastavro overflow the
    stack and killed the broker (a 500, then a dead process); one 200 levels deep was a
    500 (too deep for a JSON answer); five bytes of array count asked for billions of
    nulls. Each is now an undecodable record (408 / 40801, seek past it)."""
    linked_id = registry.register_schema(f"{topic}-linked", sr.Schema(LINKED, "AVRO"))
    nulls_id = registry.register_schema(
        f"{topic}-nulls", sr.Schema(json.dumps({"type": "array", "items": "null"}), "AVRO"))
    huge_count = b"\x80\x80\x80\x80\x80\x80\x80\x80\x02"  # zig-zag 2^62 ... items
    _produce(v2, topic, [(None, _framed(linked_id, _linked(3))),
                         (None, _framed(linked_id, _linked(200_000))),
                         (None, _framed(linked_id, _linked(200))),
                         (None, _framed(nulls_id, huge_count + b"\x00")),
                         (None, _framed(nulls_id, b"\x04\x00"))])
    base = _consumer(v2, topic, "avro")
    rows = _read(v2, base, "avro", 1)
    assert rows[0]["value"] == {"n": {"L": {"n": {"L": {"n": None}}}}}
    for offset, why in ((1, "nests deeper than 128 levels"), (2, "nests deeper than 128 levels"),
                        (3, "more array or map items than its")):
        msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": AVRO}), 408, 40801)
        assert f"{topic}-0 at offset {offset}: " in msg and why in msg, msg
        v2.post(base + "/positions",
                {"offsets": [{"topic": topic, "partition": 0, "offset": offset + 1}]})
    assert _kv(v2.records(base, fmt=AVRO, timeout=1000)) == [(None, [None, None])]
    url = f"/topics/{topic}/partitions/0/records"
    for offset in (1, 2, 3):  # the range read too, and the broker still answers
        v2.error_of(client.get(url, params={"offset": offset, "count": 1},
                               headers={"Accept": AVRO}), 408, 40801)
    resp = client.get(url, params={"offset": 0, "count": 1}, headers={"Accept": AVRO})
    assert resp.status_code == 200 and resp.json()[0]["offset"] == 0


def test_json_values_deeper_than_an_answer_can_hold(
    v2: V2Client, registry: Any, topic: str, client: httpx.Client
) -> None:
    """Stored JSON nested 300 levels deep (valid JSON, written as bytes) was a 500 for a
    json or jsonschema reader: orjson cannot write it back. Now 408 / 40801 naming the
    record; 128 levels still read."""
    schema_id = registry.register_schema(f"{topic}-any", sr.Schema('{"type": "array"}', "JSON"))
    ok, deep = (b"[" * n + b"]" * n for n in (128, 300))
    _produce(v2, topic, [(None, ok), (None, deep), (None, _framed(schema_id, ok)),
                         (None, _framed(schema_id, deep))])
    url = f"/topics/{topic}/partitions/0/records"
    resp = client.get(url, params={"offset": 0, "count": 1}, headers={"Accept": v2.JSON})
    assert resp.status_code == 200 and resp.json()[0]["value"] is not None
    msg = v2.error_of(client.get(url, params={"offset": 1, "count": 1},
                                 headers={"Accept": v2.JSON}), 408, 40801)
    assert f"offset 1 of {topic}-0 nests deeper than 128 levels" in msg, msg
    resp = client.get(url, params={"offset": 2, "count": 1}, headers={"Accept": JSONSCHEMA})
    assert resp.status_code == 200, resp.text
    msg = v2.error_of(client.get(url, params={"offset": 3, "count": 1},
                                 headers={"Accept": JSONSCHEMA}), 408, 40801)
    assert "nests deeper than 128 levels" in msg, msg
    base = _consumer(v2, topic, "json")
    assert len(v2.records(base, fmt=v2.JSON, timeout=1000)) == 1  # stops before offset 1
    msg = v2.error_of(v2.http.get(base + "/records", headers={"Accept": v2.JSON}), 408, 40801)
    assert "nests deeper than 128 levels" in msg, msg
