"""The Schema Registry API (docs/schema-registry.md) on a real ``franz serve``: every
route, every Confluent error code it answers, hostile inputs (4xx, never 5xx), the
``_schemas`` topic and its Confluent-style records, persistence across a restart, and
Confluent's own Python client (``confluent_kafka.schema_registry``) registering, looking
up, checking and serializing AVRO, JSON and PROTOBUF payloads that are decoded here with
the schema franz hands back for the payload's id."""

from __future__ import annotations

import base64
import io
import json
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import FranzServer

SR = "application/vnd.schemaregistry.v1+json"
HEADERS = {"Content-Type": SR}


def avro_record(*fields: tuple[str, str] | tuple[str, str, Any], name: str = "R") -> str:
    out = []
    for field in fields:
        doc: dict[str, Any] = {"name": field[0], "type": field[1]}
        if len(field) == 3:
            doc["default"] = field[2]
        out.append(doc)
    return json.dumps({"type": "record", "name": name, "fields": out})


A1 = avro_record(("a", "int"))
A2 = avro_record(("a", "int"), ("b", "string", "x"))
BAD_A = avro_record(("a", "string"))  # A1 cannot read it, nor it A1's data


class Registry:
    """httpx over the registry routes; every call asserts its status (and error code)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def call(self, method: str, path: str, body: Any = None, *, status: int = 200,
             code: int | None = None, **params: Any) -> Any:
        content = None if body is None else (body if isinstance(body, (str, bytes))
                                             else json.dumps(body))
        resp = self.http.request(method, path, content=content, params=params or None,
                                 headers=HEADERS)
        assert resp.status_code == status, (method, path, resp.status_code, resp.text)
        if status >= 400:
            assert resp.headers["content-type"].startswith(SR), resp.headers
            doc = resp.json()
            assert set(doc) == {"error_code", "message"} and doc["message"], doc
            if code is not None:
                assert doc["error_code"] == code, doc
            return doc
        assert resp.headers["content-type"].startswith(SR), resp.headers
        return resp.json()

    def register(self, subject: str, schema: str, schema_type: str | None = None, *,
                 refs: list[dict[str, Any]] | None = None, **kw: Any) -> Any:
        body: dict[str, Any] = {"schema": schema}
        if schema_type:
            body["schemaType"] = schema_type
        if refs:
            body["references"] = refs
        return self.call("POST", f"/subjects/{subject}/versions", body, **kw)


def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FranzServer]:
    """A broker of this module's own: the tests change the registry's global level and
    mode, which other tests' servers must not see."""
    s = FranzServer(tmp_path_factory.mktemp("registry") / "data", ["num.partitions=1"])
    s.start()
    yield s
    s.stop()


@pytest.fixture
def reg(server: FranzServer) -> Iterator[Registry]:
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        yield Registry(http)


# --- routes -------------------------------------------------------------------------------


def test_types_defaults_and_the_schemas_topic(reg: Registry) -> None:
    assert reg.call("GET", "/schemas/types") == ["JSON", "PROTOBUF", "AVRO"]
    assert reg.call("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    assert reg.call("GET", "/mode") == {"mode": "READWRITE"}
    base = "/v3/clusters/" + reg.http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    info = reg.http.get(f"{base}/topics/_schemas").json()
    assert (info["partitions_count"], info["is_internal"]) == (1, True)
    configs = {c["name"]: c["value"] for c in
               reg.http.get(f"{base}/topics/_schemas/configs").json()["data"]}
    assert configs["cleanup.policy"] == "compact"
    # clients may not write it
    resp = reg.http.post("/topics/_schemas", json={"records": [{"value": 1}]},
                         headers={"Content-Type": "application/vnd.kafka.json.v2+json"})
    assert resp.status_code == 400 and resp.json()["error_code"] == 40002, resp.text


def test_register_read_and_look_up(reg: Registry) -> None:
    s = subject()
    first = reg.register(s, A1)["id"]
    assert reg.register(s, json.dumps(json.loads(A1), indent=2)) == {"id": first}  # no new version
    second = reg.register(s, A2)["id"]
    assert second != first
    assert reg.call("GET", f"/subjects/{s}/versions") == [1, 2]
    v1 = reg.call("GET", f"/subjects/{s}/versions/1")
    assert v1 == {"subject": s, "version": 1, "id": first,
                  "schema": json.dumps(json.loads(A1), separators=(",", ":"))}
    for latest in ("latest", "-1"):
        assert reg.call("GET", f"/subjects/{s}/versions/{latest}")["version"] == 2
    assert json.loads(reg.http.get(f"/subjects/{s}/versions/1/schema").text) == json.loads(A1)
    assert reg.call("GET", f"/schemas/ids/{first}") == {"schema": v1["schema"]}
    assert json.loads(reg.http.get(f"/schemas/ids/{first}/schema").text) == json.loads(A1)
    assert reg.call("GET", f"/schemas/ids/{first}/versions") == [{"subject": s, "version": 1}]
    assert reg.call("GET", f"/schemas/ids/{first}/subjects") == [s]
    found = reg.call("POST", f"/subjects/{s}", {"schema": A1})
    assert (found["version"], found["id"]) == (1, first)
    assert s in reg.call("GET", "/subjects")
    assert reg.call("GET", "/subjects", subjectPrefix=s) == [s]
    listed = reg.call("GET", "/schemas", subjectPrefix=s, latestOnly="true")
    assert [(x["subject"], x["version"]) for x in listed] == [(s, 2)]
    assert reg.call("GET", "/subjects", subjectPrefix="s-", offset=0, limit=1).__len__() == 1
    # the same schema under another subject: the same id
    other = subject()
    assert reg.register(other, A1) == {"id": first}
    assert sorted(reg.call("GET", f"/schemas/ids/{first}/subjects")) == sorted([s, other])


def test_json_protobuf_and_references(reg: Registry) -> None:
    s = subject()
    doc = json.dumps({"type": "object", "properties": {"n": {"type": "string"}}})
    json_id = reg.register(s, doc, "JSON")["id"]
    assert reg.call("GET", f"/schemas/ids/{json_id}")["schemaType"] == "JSON"
    assert reg.call("GET", f"/subjects/{s}/versions/1")["schemaType"] == "JSON"
    # protobuf: an import given as a reference, a subject with '/' in it
    common = "common/money.proto"
    quoted = common.replace("/", "%2F")
    money = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    reg.register(quoted, money, "PROTOBUF")
    assert common in reg.call("GET", "/subjects")
    order = ('syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
             "message Order { common.Money total = 1; }\n")
    ref = {"name": common, "subject": common, "version": 1}
    o = subject()
    order_id = reg.register(o, order, "PROTOBUF", refs=[ref])["id"]
    got = reg.call("GET", f"/subjects/{o}/versions/latest")
    assert got["references"] == [ref] and got["schemaType"] == "PROTOBUF"
    assert got["schema"] == order  # .proto text is kept as given
    serialized = reg.call("GET", f"/schemas/ids/{order_id}", format="serialized")["schema"]
    from google.protobuf import descriptor_pb2
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in fdp.message_type] == ["Order"]
    assert reg.call("GET", f"/subjects/{quoted}/versions/1/referencedby") == [order_id]
    reg.call("DELETE", f"/subjects/{quoted}", status=422, code=42206)
    # without the reference the import does not resolve
    reg.register(subject(), order, "PROTOBUF", status=422, code=42201)
    # avro references: named types of another subject
    addr = subject()
    reg.register(addr, json.dumps({"type": "record", "name": "Address", "namespace": "x",
                                   "fields": [{"name": "street", "type": "string"}]}))
    user = json.dumps({"type": "record", "name": "User", "namespace": "x",
                       "fields": [{"name": "home", "type": "Address"}]})
    u = subject()
    reg.register(u, user, refs=[{"name": "x.Address", "subject": addr, "version": 1}])
    assert reg.call("GET", f"/subjects/{u}/versions/1")["references"][0]["subject"] == addr
    reg.register(subject(), user, status=422, code=42201)


def test_deletes_soft_then_permanent(reg: Registry) -> None:
    s = subject()
    only_here = avro_record(("a", "int"), name=f"R{uuid.uuid4().hex}")
    one = reg.register(s, only_here)["id"]
    reg.register(s, avro_record(("a", "int"), ("b", "string", "x"),
                                name=json.loads(only_here)["name"]))
    assert reg.call("DELETE", f"/subjects/{s}/versions/1") == 1
    reg.call("DELETE", f"/subjects/{s}/versions/1", status=404, code=40406)
    reg.call("GET", f"/subjects/{s}/versions/1", status=404, code=40402)
    assert reg.call("GET", f"/subjects/{s}/versions/1", deleted="true")["version"] == 1
    assert reg.call("GET", f"/subjects/{s}/versions", deleted="true") == [1, 2]
    assert reg.call("GET", f"/subjects/{s}/versions", deletedOnly="true") == [1]
    reg.call("DELETE", f"/subjects/{s}/versions/2", status=404, code=40407, permanent="true")
    assert reg.call("DELETE", f"/subjects/{s}/versions/1", permanent="true") == 1
    reg.call("DELETE", f"/subjects/{s}", status=404, code=40405, permanent="true")
    assert reg.call("DELETE", f"/subjects/{s}") == [2]
    reg.call("DELETE", f"/subjects/{s}", status=404, code=40404)
    reg.call("GET", f"/subjects/{s}/versions", status=404, code=40401)
    assert s not in reg.call("GET", "/subjects")
    assert s in reg.call("GET", "/subjects", deleted="true")
    assert reg.call("DELETE", f"/subjects/{s}", permanent="true") == [2]
    reg.call("DELETE", f"/subjects/{s}", status=404, code=40401)
    # the id of a schema deleted for good under every subject is gone
    reg.call("GET", f"/schemas/ids/{one}", status=404, code=40403)


def test_config_and_mode(reg: Registry) -> None:
    s = subject()
    reg.call("GET", f"/config/{s}", status=404, code=40408)
    assert reg.call("GET", f"/config/{s}", defaultToGlobal="true") == {
        "compatibilityLevel": "BACKWARD"}
    assert reg.call("PUT", f"/config/{s}", {"compatibility": "full_transitive"}) == {
        "compatibility": "FULL_TRANSITIVE"}
    assert reg.call("GET", f"/config/{s}") == {"compatibilityLevel": "FULL_TRANSITIVE"}
    reg.call("PUT", f"/config/{s}", {"compatibility": "SIDEWAYS"}, status=422, code=42203)
    reg.call("PUT", f"/config/{s}", {}, status=422, code=42203)
    assert reg.call("DELETE", f"/config/{s}") == {"compatibilityLevel": "FULL_TRANSITIVE"}
    reg.call("DELETE", f"/config/{s}", status=404, code=40401)
    assert reg.call("PUT", "/config", {"compatibility": "NONE"}) == {"compatibility": "NONE"}
    try:
        reg.register(s, A1)
        reg.register(s, BAD_A)  # NONE: anything goes
    finally:
        assert reg.call("DELETE", "/config") == {"compatibilityLevel": "NONE"}
    assert reg.call("GET", "/config") == {"compatibilityLevel": "BACKWARD"}

    reg.call("GET", f"/mode/{s}", status=404, code=40409)
    assert reg.call("PUT", f"/mode/{s}", {"mode": "readonly"}) == {"mode": "READONLY"}
    assert reg.call("GET", f"/mode/{s}") == {"mode": "READONLY"}
    reg.register(s, A2, status=422, code=42205)
    reg.call("DELETE", f"/subjects/{s}/versions/1", status=422, code=42205)
    assert reg.call("POST", f"/subjects/{s}", {"schema": A1})["version"] == 1  # reads go on
    reg.call("PUT", f"/mode/{s}", {"mode": "SOMETIMES"}, status=422, code=42204)
    reg.call("PUT", f"/mode/{s}", {"mode": "IMPORT"}, status=422, code=42205)  # not empty
    assert reg.call("DELETE", f"/mode/{s}") == {"mode": "READONLY"}
    assert reg.call("GET", f"/mode/{s}", defaultToGlobal="true") == {"mode": "READWRITE"}
    # IMPORT: explicit ids and versions
    reg.call("POST", f"/subjects/{subject()}/versions", {"schema": A1, "id": 500},
             status=422, code=42205)  # not in IMPORT mode
    imported = subject()
    assert reg.call("PUT", f"/mode/{imported}", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    schema = avro_record(("imported", "int"))
    assert reg.call("POST", f"/subjects/{imported}/versions",
                    {"schema": schema, "id": 500, "version": 7}) == {"id": 500}
    assert reg.call("GET", f"/subjects/{imported}/versions") == [7]
    reg.call("POST", f"/subjects/{imported}/versions", {"schema": schema, "id": 501},
             status=422, code=42207)
    reg.call("DELETE", f"/mode/{imported}")
    assert reg.call("GET", "/schemas/ids/500")["schema"] == json.dumps(
        json.loads(schema), separators=(",", ":"))
    assert reg.call("PUT", "/mode", {"mode": "READONLY"}) == {"mode": "READONLY"}
    try:
        reg.register(subject(), A1, status=422, code=42205)
    finally:
        assert reg.call("PUT", "/mode", {"mode": "READWRITE"}) == {"mode": "READWRITE"}


def test_compatibility_routes(reg: Registry) -> None:
    s = subject()
    assert reg.call("POST", f"/compatibility/subjects/{s}/versions/latest",
                    {"schema": A1}) == {"is_compatible": True}  # nothing to break
    reg.register(s, A1)
    reg.register(s, A2)
    ok = reg.call("POST", f"/compatibility/subjects/{s}/versions/latest", {"schema": A2},
                  verbose="true")
    assert ok == {"is_compatible": True, "messages": []}
    bad = reg.call("POST", f"/compatibility/subjects/{s}/versions/1", {"schema": BAD_A},
                   verbose="true")
    assert bad["is_compatible"] is False
    assert any("TYPE_MISMATCH" in m for m in bad["messages"])
    assert "{oldSchemaVersion: 1}" in bad["messages"]
    assert reg.call("POST", f"/compatibility/subjects/{s}/versions", {"schema": BAD_A}) == {
        "is_compatible": False}
    reg.call("POST", f"/compatibility/subjects/{s}/versions/9", {"schema": A1}, status=404,
             code=40402)
    reg.call("POST", f"/compatibility/subjects/{subject()}/versions/1", {"schema": A1},
             status=404, code=40401)
    reg.call("POST", f"/compatibility/subjects/{s}/versions/latest", {"schema": "{"},
             status=422, code=42201)
    incompatible = reg.register(s, BAD_A, status=409, code=409)
    assert f'subject "{s}"' in incompatible["message"]


def test_content_types_and_accept(reg: Registry) -> None:
    s = subject()
    for media in ("application/json", "application/vnd.schemaregistry+json", SR):
        resp = reg.http.post(f"/subjects/{s}/versions", content=json.dumps({"schema": A1}),
                             headers={"Content-Type": media})
        assert resp.status_code == 200, resp.text
    resp = reg.http.get("/subjects", headers={"Accept": "application/json"})
    assert resp.headers["content-type"].startswith("application/json")
    resp = reg.http.post(f"/subjects/{s}/versions", content=json.dumps({"schema": A1}),
                         headers={"Content-Type": "text/plain"})
    assert (resp.status_code, resp.json()["error_code"]) == (415, 415)


def test_a_subject_is_one_path_segment(reg: Registry) -> None:
    """As in Confluent's registry: a ``/`` in a subject is sent as ``%2F``; a literal one
    separates path segments, so no route takes more of the path for the subject."""
    s = subject()
    slashed = f"{s}/versions/1"
    reg.register(slashed.replace("/", "%2F"), A1)
    assert reg.call("GET", f"/subjects/{slashed.replace('/', '%2F')}/versions") == [1]
    assert s + "/versions/1" in reg.call("GET", "/subjects")
    percent = f"{s}%41"  # a literal %, sent as %25
    reg.register(percent.replace("%", "%25"), A1)
    assert percent in reg.call("GET", "/subjects")
    resp = reg.http.get(f"/subjects/{slashed}/versions")  # no such path
    assert resp.status_code == 404, resp.text
    resp = reg.http.post(f"/subjects/{s}/versions/1", content=json.dumps({"schema": A1}),
                         headers=HEADERS)  # not a lookup of subject "s/versions/1"
    assert resp.status_code == 405 and resp.headers["allow"] == "DELETE, GET", resp.text
    resp = reg.http.request("OPTIONS", f"/subjects/{s}/versions")
    assert resp.status_code == 405 and resp.headers["allow"] == "GET, POST", resp.text


# --- every error code -----------------------------------------------------------------------


def test_error_codes(reg: Registry) -> None:
    s = subject()
    reg.register(s, A1)
    missing = subject()
    reg.call("GET", f"/subjects/{missing}/versions", status=404, code=40401)
    reg.call("GET", f"/subjects/{missing}/versions/1", status=404, code=40401)
    reg.call("POST", f"/subjects/{missing}", {"schema": A1}, status=404, code=40401)
    reg.call("GET", f"/subjects/{s}/versions/5", status=404, code=40402)
    reg.call("GET", "/schemas/ids/999999", status=404, code=40403)
    reg.call("GET", "/schemas/ids/99999999999", status=404, code=40403)
    reg.call("GET", "/schemas/ids/abc", status=404, code=404)
    reg.call("POST", f"/subjects/{s}", {"schema": A2}, status=404, code=40403)
    for version in ("0", "-2", "2147483648", "abc", "1.0"):
        reg.call("GET", f"/subjects/{s}/versions/{version}", status=422, code=42202)
    reg.register(s, "{", status=422, code=42201)
    reg.register(s, '{"type": "record", "name": "R"}', status=422, code=42201)
    reg.register(s, "{}", "XML", status=422, code=42201)
    reg.register(s, "syntax = nope", "PROTOBUF", status=422, code=42201)
    reg.register(s, '{"type": 5}', "JSON", status=422, code=42201)
    reg.call("POST", f"/subjects/{s}/versions", {"schemaType": "AVRO"}, status=422, code=42201)
    reg.call("POST", f"/subjects/{s}/versions", {"schema": 5}, status=422, code=42201)
    reg.call("POST", f"/subjects/{s}/versions", {"schema": A1, "references": "x"}, status=422,
             code=42201)
    reg.call("POST", f"/subjects/{s}/versions",
             {"schema": A1, "references": [{"name": "n", "subject": s, "version": "two"}]},
             status=422, code=42201)
    reg.call("POST", f"/subjects/{s}/versions", {"schema": A1, "version": "x"}, status=422,
             code=42202)
    reg.register(s, json.dumps({"type": "string", "doc": "x" * (512 * 1024)}), status=422,
                 code=42209)
    reg.register("%01bad", A1, status=422, code=42208)
    reg.register("x" * 1100, A1, status=422, code=42208)
    reg.call("POST", f"/subjects/{s}/versions", "{nope", status=400, code=400)
    reg.call("POST", f"/subjects/{s}/versions", "[1]", status=400, code=400)
    reg.call("POST", f"/subjects/{s}/versions", "", status=400, code=400)
    reg.call("GET", "/subjects", offset="x", status=400, code=400)


# the subject "x" is never registered: every request below is refused
HOSTILE: list[tuple[str, str, Any]] = [
    ("POST", "/subjects/x/versions", {"schema": "[" * 5000}),
    ("POST", "/subjects/x/versions", {"schema": "\"" + "\\u0000" * 10 + "\""}),
    ("POST", "/subjects/x/versions", {"schema": "message " * 2000, "schemaType": "PROTOBUF"}),
    ("POST", "/subjects/x/versions", {"schema": "aGVsbG8=", "schemaType": "PROTOBUF"}),
    ("POST", "/subjects/x/versions", {"schema": "{" * 3000, "schemaType": "JSON"}),
    ("POST", "/subjects/x/versions", {"schema": json.dumps({"type": "string", "pattern": "(a+"}),
                                      "schemaType": "JSON"}),
    ("POST", "/subjects/x/versions", {"schema": json.dumps({"$schema": True}),
                                      "schemaType": "JSON"}),
    ("POST", "/subjects/x/versions", {"schema": A1, "references": [{"name": 1}]}),
    ("POST", "/subjects/x/versions", {"schema": A1, "references": [None]}),
    ("POST", "/subjects/x/versions", {"schema": A1, "id": True}),
    ("POST", "/subjects/x/versions", {"schema": A1, "id": 2**40}),
    ("POST", "/subjects/x/versions", {"schema": A1, "schemaType": ["AVRO"]}),
    ("POST", "/subjects/x", {"schema": None}),
    ("PUT", "/config", {"compatibility": 5}),
    ("PUT", "/config", [1]),
    ("PUT", "/mode", {"mode": None}),
    ("PUT", "/mode/x", "not json"),
    ("POST", "/compatibility/subjects/x/versions/latest", {"schema": A1, "schemaType": "Z"}),
    ("POST", "/compatibility/subjects/x/versions/99999999999", {"schema": A1}),
    ("GET", "/subjects/x/versions/latest/schema", None),
    ("GET", "/schemas/ids/-1", None),
    ("GET", "/schemas/ids/0/versions", None),
    ("DELETE", "/subjects/x/versions/latest", None),
    ("GET", "/subjects//versions", None),
]


@pytest.mark.parametrize(("method", "path", "body"), HOSTILE,
                         ids=[f"{m} {p} {str(b)[:30]}" for m, p, b in HOSTILE])
def test_hostile_inputs_get_4xx(reg: Registry, method: str, path: str, body: Any) -> None:
    content = None if body is None else (body if isinstance(body, str) else json.dumps(body))
    resp = reg.http.request(method, path, content=content, headers=HEADERS)
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text)
    assert set(resp.json()) == {"error_code", "message"}


# --- the log and restarts -------------------------------------------------------------------


def test_records_in_the_schemas_topic(reg: Registry) -> None:
    s = subject()
    schema_id = reg.register(s, A1)["id"]
    resp = reg.http.get("/topics/_schemas/partitions/0/records", params={"offset": 0},
                        headers={"Accept": "application/vnd.kafka.binary.v2+json"})
    assert resp.status_code == 200, resp.text
    keys = [json.loads(base64.b64decode(r["key"])) for r in resp.json()]
    values = [r["value"] and json.loads(base64.b64decode(r["value"])) for r in resp.json()]
    i = keys.index({"keytype": "SCHEMA", "subject": s, "version": 1, "magic": 1})
    assert values[i] == {"subject": s, "version": 1, "id": schema_id, "references": [],
                         "deleted": False, "schema": json.dumps(json.loads(A1),
                                                                separators=(",", ":"))}


def test_everything_survives_a_restart(restartable_server: FranzServer) -> None:
    with httpx.Client(base_url=restartable_server.url, timeout=30.0) as http:
        reg = Registry(http)
        kept, gone, soft = subject(), subject(), subject()
        reg.register(kept, A1)
        second = reg.register(kept, A2)["id"]
        reg.register(soft, A1)
        reg.register(gone, BAD_A)
        reg.call("DELETE", f"/subjects/{soft}")
        reg.call("DELETE", f"/subjects/{gone}")
        reg.call("DELETE", f"/subjects/{gone}", permanent="true")
        reg.call("PUT", f"/config/{kept}", {"compatibility": "FULL"})
        reg.call("PUT", "/config", {"compatibility": "FORWARD"})
        reg.call("PUT", f"/mode/{soft}", {"mode": "READONLY"})
        before = [reg.call("GET", "/subjects"), reg.call("GET", "/subjects", deleted="true"),
                  reg.call("GET", f"/subjects/{kept}/versions/2"),
                  reg.call("GET", f"/config/{kept}"), reg.call("GET", "/config")]
    restartable_server.restart()
    with httpx.Client(base_url=restartable_server.url, timeout=30.0) as http:
        reg = Registry(http)
        after = [reg.call("GET", "/subjects"), reg.call("GET", "/subjects", deleted="true"),
                 reg.call("GET", f"/subjects/{kept}/versions/2"),
                 reg.call("GET", f"/config/{kept}"), reg.call("GET", "/config")]
        assert after == before
        assert reg.call("GET", f"/mode/{soft}") == {"mode": "READONLY"}
        assert reg.call("GET", f"/subjects/{soft}/versions", deleted="true") == [1]
        assert reg.register(kept, A2) == {"id": second}  # known: same id, no version
        third = reg.register(subject(), avro_record(("new", "int")))["id"]
        assert third > second  # ids go on from the highest ever seen


# --- Confluent's Python client ----------------------------------------------------------------


def _framed(data: bytes) -> tuple[int, bytes]:
    magic, schema_id = struct.unpack(">bI", data[:5])
    assert magic == 0
    return schema_id, data[5:]


def test_confluent_python_client(reg: Registry, server: FranzServer) -> None:
    sr = pytest.importorskip("confluent_kafka.schema_registry")
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from fastavro import parse_schema, schemaless_reader

    client = sr.SchemaRegistryClient({"url": server.url})
    topic = f"t-{uuid.uuid4().hex[:8]}"
    value_subject = f"{topic}-value"
    ctx = SerializationContext(topic, MessageField.VALUE)

    # the client API: register, look up, check, levels, versions, delete
    user = json.dumps({"type": "record", "name": "User", "namespace": "franz.test", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
    schema_id = client.register_schema(value_subject, sr.Schema(user, "AVRO"))
    found = client.lookup_schema(value_subject, sr.Schema(user, "AVRO"))
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert client.get_latest_version(value_subject).schema_id == schema_id
    assert client.get_schema(schema_id).schema_type == "AVRO"
    assert client.test_compatibility(value_subject, sr.Schema(user, "AVRO")) is True
    assert client.test_compatibility(value_subject, sr.Schema(BAD_A, "AVRO")) is False
    assert value_subject in client.get_subjects()
    assert client.get_versions(value_subject) == [1]
    scratch = subject()
    client.register_schema(scratch, sr.Schema(A1, "AVRO"))
    client.set_compatibility(scratch, "FULL")
    assert client.get_compatibility(scratch) == "FULL"
    assert client.delete_subject(scratch) == [1]
    assert client.delete_subject(scratch, permanent=True) == [1]
    with pytest.raises(sr.SchemaRegistryError) as info:
        client.get_latest_version(scratch)
    assert (info.value.http_status_code, info.value.error_code) == (404, 40401)

    # AVRO: bytes framed with the id franz gave; decoded with franz's schema for it
    data = AvroSerializer(client, user)({"name": "ada", "age": 36}, ctx)
    wire_id, payload = _framed(data)
    assert wire_id == schema_id
    writer = json.loads(reg.call("GET", f"/schemas/ids/{wire_id}")["schema"])
    assert schemaless_reader(io.BytesIO(payload), parse_schema(writer), None) == {
        "name": "ada", "age": 36}

    # JSON Schema
    doc = {"type": "object", "properties": {"sku": {"type": "string"}, "n": {"type": "integer"}},
           "required": ["sku"]}
    json_ctx = SerializationContext(f"{topic}-json", MessageField.VALUE)
    data = JSONSerializer(json.dumps(doc), client)({"sku": "a1", "n": 2}, json_ctx)
    wire_id, payload = _framed(data)
    got = reg.call("GET", f"/schemas/ids/{wire_id}")
    assert got["schemaType"] == "JSON" and json.loads(got["schema"]) == doc
    assert json.loads(payload) == {"sku": "a1", "n": 2}

    # PROTOBUF: a message type made here, importing a well-known type
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    fdp = descriptor_pb2.FileDescriptorProto(name=f"franz/test/{topic}.proto",
                                             package=f"franz.t{uuid.uuid4().hex[:8]}",
                                             syntax="proto3")
    fdp.dependency.append("google/protobuf/timestamp.proto")
    msg = fdp.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    msg.field.add(name="qty", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)
    msg.field.add(name="at", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                  type_name=".google.protobuf.Timestamp")
    descriptor_pool.Default().Add(fdp)
    order_cls = message_factory.GetMessageClass(
        descriptor_pool.Default().FindMessageTypeByName(f"{fdp.package}.Order"))
    order = order_cls(id="o-1", qty=3, at=timestamp_pb2.Timestamp(seconds=1_700_000_000))
    proto_ctx = SerializationContext(f"{topic}-proto", MessageField.VALUE)
    data = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})(order,
                                                                                 proto_ctx)
    wire_id, payload = _framed(data)
    got = reg.call("GET", f"/schemas/ids/{wire_id}")
    assert got["schemaType"] == "PROTOBUF" and "message Order {" in got["schema"]
    assert payload[0] == 0  # message index [0]: the first message of the file
    assert order_cls.FromString(payload[1:]) == order
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    decoded = ProtobufDeserializer(order_cls, {"use.deprecated.format": False},
                                   schema_registry_client=client)(data, proto_ctx)
    assert decoded == order


# --- with authentication and ACLs -------------------------------------------------------------


def test_acls(tmp_path: Any) -> None:
    """Any authenticated principal reads, registers, looks up and checks (Confluent's
    registry without its ACL plug-in); deletes, levels and modes need ALTER on the
    cluster."""
    from test_security import SECURED, add_users

    server = FranzServer(tmp_path / "data", SECURED)
    add_users(server.data_dir, {"admin": "admin-pw", "app": "app-pw"})
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as anonymous:
            assert anonymous.get("/subjects").status_code == 401
        with httpx.Client(base_url=server.url, timeout=30.0, auth=("app", "app-pw")) as http:
            app = Registry(http)
            s = subject()
            app.register(s, A1)
            assert app.call("GET", f"/subjects/{s}/versions") == [1]
            assert app.call("POST", f"/compatibility/subjects/{s}/versions/latest",
                            {"schema": A2}) == {"is_compatible": True}
            for method, path, body in (("DELETE", f"/subjects/{s}", None),
                                       ("PUT", "/config", {"compatibility": "NONE"}),
                                       ("PUT", f"/mode/{s}", {"mode": "READONLY"})):
                resp = http.request(method, path, content=body and json.dumps(body),
                                    headers=HEADERS)
                assert resp.status_code == 403, (method, path, resp.text)
        with httpx.Client(base_url=server.url, timeout=30.0, auth=("admin", "admin-pw")) as http:
            assert Registry(http).call("DELETE", f"/subjects/{s}") == [1]
    finally:
        server.stop()
