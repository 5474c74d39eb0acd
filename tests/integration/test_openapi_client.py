"""A client generated from ``/openapi.json`` with ``openapi-python-client`` (the ``dev``
extra) works as generated: every module imports, and the quickstart runs through it
without edits (v2: produce binary records, a consumer instance subscribes, reads,
commits and is deleted; v3: list clusters, create a topic, produce, list topics).

Also the document's own promises that such a client relies on: Confluent-style
operationIds and tags, one schema per request body media type, every success declared
with its shape (arrays with their ``items``), and a description on every property and
parameter.
"""

from __future__ import annotations

import base64
import importlib
import json
import pkgutil
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

GENERATOR = "openapi-python-client"
PACKAGE = "franz_client"  # from the document's title, "franz"
METHODS = ("get", "put", "post", "delete", "patch")


def _generator() -> list[str] | None:
    """The generator's command line: the script on PATH, else the module's."""
    script = shutil.which(GENERATOR)
    if script is not None:
        return [script]
    try:
        importlib.import_module("openapi_python_client")
    except ImportError:
        return None
    return [sys.executable, "-m", "openapi_python_client"]


@pytest.fixture(scope="module")
def document(franz_url: str) -> dict[str, Any]:
    return dict(httpx.get(franz_url + "/openapi.json", timeout=30).json())


@pytest.fixture(scope="module")
def generated(document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[ModuleType]:
    """The generated package, imported from a temporary directory (and forgotten
    afterwards, so nothing else sees it)."""
    command = _generator()
    if command is None:
        pytest.skip(f"{GENERATOR} is not installed (pip install -e '.[dev]')")
    base = tmp_path_factory.mktemp("openapi-client")
    spec = base / "openapi.json"
    spec.write_text(json.dumps(document))
    out = base / "client"
    run = subprocess.run([*command, "generate", "--path", str(spec), "--output-path", str(out)],
                         capture_output=True, text=True, timeout=120, cwd=base)
    assert run.returncode == 0, run.stdout + run.stderr
    # the generator warns about anything it could not turn into code
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _api(generated: ModuleType, module: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.api.{module}")


def _models(generated: ModuleType) -> Any:
    return importlib.import_module(f"{PACKAGE}.models")


def test_every_generated_module_imports(generated: ModuleType) -> None:
    names = [m.name for m in pkgutil.walk_packages(generated.__path__, PACKAGE + ".")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # every failure, not just the first
            failed[name] = repr(exc)
    assert not failed, failed
    assert len([n for n in names if ".api." in n]) >= 80  # one module per operation


def test_v2_quickstart_through_the_generated_client(
    generated: ModuleType, franz_url: str, topic: str, group: str
) -> None:
    models = _models(generated)
    produce = _api(generated, "topic_v_2.produce_to_topic")
    consumers = {name: _api(generated, f"consumer_v_2.{name}") for name in (
        "create_consumer", "subscribe", "consume_records", "commit_offsets",
        "get_committed_offsets", "delete_consumer")}
    values = [b"hello", b"franz"]
    with generated.Client(base_url=franz_url, raise_on_unexpected_status=True,
                          timeout=httpx.Timeout(30.0)) as client:
        produced = produce.sync(topic, client=client, body=models.BinaryProduceRequest(
            records=[models.BinaryProduceRecord(value=base64.b64encode(v).decode())
                     for v in values]))
        assert isinstance(produced, models.ProduceResponse), produced
        assert [o.error_code for o in produced.offsets] == [None, None]

        created = consumers["create_consumer"].sync(group, client=client,
                                                    body=models.CreateConsumerRequest(
            name="quickstart",
            format_=models.CreateConsumerRequestFormatType0.BINARY,
            auto_offset_reset=models.CreateConsumerRequestAutoOffsetResetType0.EARLIEST))
        assert isinstance(created, models.CreateConsumerResponse), created
        instance = created.instance_id
        assert created.base_uri.endswith(f"/consumers/{group}/instances/{instance}")

        answer = consumers["subscribe"].sync_detailed(
            group, instance, client=client, body=models.SubscriptionRequest(topics=[topic]))
        assert answer.status_code == 204, answer.content

        read: list[Any] = []
        deadline = time.monotonic() + 30
        while len(read) < len(values) and time.monotonic() < deadline:
            got = consumers["consume_records"].sync(group, instance, client=client,
                                                    timeout=1000)
            assert isinstance(got, list), got
            read += got
        assert sorted(base64.b64decode(r.value) for r in read) == sorted(values)
        assert all(isinstance(r, models.BinaryRecordOut) and r.topic == topic for r in read)

        last = {}
        for r in read:
            last[r.partition] = max(last.get(r.partition, -1), r.offset)
        committed = consumers["commit_offsets"].sync(group, instance, client=client,
                                                     body=models.CommitRequest(offsets=[
            models.CommitOffset(topic=topic, partition=p, offset=o) for p, o in last.items()]))
        assert committed == []
        stored = consumers["get_committed_offsets"].sync(
            group, instance, client=client, body=models.PartitionsRequest(partitions=[
                models.TopicPartitionIn(topic=topic, partition=p) for p in last]))
        assert isinstance(stored, models.CommittedOffsetsOut), stored
        assert {o.partition: o.offset for o in stored.offsets} == {
            p: o + 1 for p, o in last.items()}

        deleted = consumers["delete_consumer"].sync_detailed(group, instance, client=client)
        assert deleted.status_code == 204, deleted.content
        gone = consumers["delete_consumer"].sync(group, instance, client=client)
        assert isinstance(gone, models.ErrorBody) and gone.error_code == 40403


def test_v3_quickstart_through_the_generated_client(
    generated: ModuleType, franz_url: str, topic: str
) -> None:
    models = _models(generated)
    list_clusters = _api(generated, "cluster_v_3.list_kafka_clusters")
    create_topic = _api(generated, "topic_v_3.create_kafka_topic")
    list_topics = _api(generated, "topic_v_3.list_kafka_topics")
    produce = _api(generated, "records_v_3.produce_record")
    with generated.Client(base_url=franz_url, raise_on_unexpected_status=True,
                          timeout=httpx.Timeout(30.0)) as client:
        clusters = list_clusters.sync(client=client)
        assert isinstance(clusters, models.KafkaClusterList), clusters
        cluster_id = clusters.data[0].cluster_id

        created = create_topic.sync(cluster_id, client=client, body=models.CreateTopicRequest(
            topic_name=topic, partitions_count=2, replication_factor=1))
        assert isinstance(created, models.KafkaTopic), created
        assert (created.topic_name, created.partitions_count) == (topic, 2)

        report = produce.sync(cluster_id, topic, client=client, body=models.ProduceRecordRequest(
            partition_id=1,
            key=models.ProduceRecordData(type_=models.ProduceRecordDataType.STRING,
                                         data="user-1"),
            value=models.ProduceRecordData(type_=models.ProduceRecordDataType.JSON,
                                           data={"clicks": 3})))
        assert isinstance(report, models.ProduceReport), report
        assert (report.error_code, report.topic_name, report.partition_id, report.offset) == (
            200, topic, 1, 0)
        assert report.value.type_ == models.ProduceReportDataType.JSON

        topics = list_topics.sync(cluster_id, client=client)
        assert isinstance(topics, models.KafkaTopicList), topics
        assert topic in [t.topic_name for t in topics.data]


# --- what the generated client relies on, checked on the document itself --------------------


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, op) for p, item in document["paths"].items()
            for m, op in item.items() if m in METHODS]


def test_operation_ids_and_tags_are_confluents(document: dict[str, Any]) -> None:
    ops = {(m, p): op for m, p, op in _operations(document)}
    v3 = "/v3/clusters/{cluster_id}"
    expected = {
        ("get", "/v3/clusters"): ("listKafkaClusters", "Cluster (v3)"),
        ("get", v3): ("getKafkaCluster", "Cluster (v3)"),
        ("get", v3 + "/topics"): ("listKafkaTopics", "Topic (v3)"),
        ("post", v3 + "/topics"): ("createKafkaTopic", "Topic (v3)"),
        ("get", v3 + "/topics/{topic_name}"): ("getKafkaTopic", "Topic (v3)"),
        ("delete", v3 + "/topics/{topic_name}"): ("deleteKafkaTopic", "Topic (v3)"),
        ("get", v3 + "/topics/{topic_name}/partitions"): ("listKafkaPartitions",
                                                          "Partition (v3)"),
        ("post", v3 + "/topics/{topic_name}/records"): ("produceRecord", "Records (v3)"),
        ("post", v3 + "/topics/{topic_name}/records:batch"): ("produceRecordsBatch",
                                                              "Records (v3)"),
        ("get", v3 + "/acls"): ("getKafkaAcls", "ACL (v3)"),
        ("get", v3 + "/consumer-groups"): ("listKafkaConsumerGroups", "Consumer Group (v3)"),
        ("get", "/topics"): ("listTopics", "Topic (v2)"),
        ("post", "/topics/{topic}"): ("produceToTopic", "Topic (v2)"),
        ("post", "/topics/{topic}/partitions/{partition}"): ("produceToPartition",
                                                             "Partition (v2)"),
        ("post", "/consumers/{group}"): ("createConsumer", "Consumer (v2)"),
        ("post", "/consumers/{group}/instances/{instance}/subscription"): ("subscribe",
                                                                           "Consumer (v2)"),
        ("post", "/consumers/{group}/instances/{instance}/offsets"): ("commitOffsets",
                                                                      "Consumer (v2)"),
    }
    for key, (operation_id, tag) in expected.items():
        assert (ops[key]["operationId"], ops[key]["tags"]) == (operation_id, [tag]), key
    ids = [op["operationId"] for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert all(i[0].islower() and i.isalnum() and len(i) <= 40 for i in ids), ids
    declared = {t["name"] for t in document["tags"]}
    assert {t for op in ops.values() for t in op["tags"]} <= declared
    assert all(len(op["tags"]) == 1 for op in ops.values())


def test_one_schema_per_request_body_media_type(document: dict[str, Any]) -> None:
    """Two media types with one schema make a generated client offer the same body type
    twice; only v2 produce keeps ``application/json`` beside the json format's media
    type (the same format under two names), and its three schema formats share one body
    (JSON values with a schema or a schema id: the media type names the format)."""
    aliases = {"application/json", "application/vnd.kafka.json.v2+json"}
    schema_formats = {f"application/vnd.kafka.{f}.v2+json"
                      for f in ("avro", "jsonschema", "protobuf")}
    for method, path, op in _operations(document):
        content = op.get("requestBody", {}).get("content", {})
        by_schema: dict[str, set[str]] = {}
        for media, entry in content.items():
            by_schema.setdefault(json.dumps(entry["schema"], sort_keys=True), set()).add(media)
        shared = [m for m in by_schema.values() if len(m) > 1]
        assert all(m in (aliases, schema_formats) for m in shared), (method, path, shared)
        if shared:
            assert path.startswith("/topics/") and method == "post", path


def _schemas(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object under ``node`` (components, bodies, answers, parameters)."""
    if isinstance(node, dict):
        if "type" in node or "properties" in node or "$ref" in node or "anyOf" in node:
            yield where, node
        for key, value in node.items():
            yield from _schemas(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _schemas(value, f"{where}/{i}")


def test_every_property_and_parameter_is_described(document: dict[str, Any]) -> None:
    undescribed = [f"{where}/{name}" for where, schema in _schemas(document, "")
                   for name, prop in (schema.get("properties") or {}).items()
                   if not (isinstance(prop, dict) and prop.get("description"))]
    assert not undescribed, undescribed
    params = [(m, p, q["name"]) for m, p, op in _operations(document)
              for q in op.get("parameters", []) if not q.get("description")]
    assert not params, params


def test_every_answer_is_declared_with_its_shape(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for where, schema in _schemas(document, ""):
        assert schema.get("type") != "array" or "items" in schema, where
        ref = schema.get("$ref", "")
        assert not ref or ref.removeprefix("#/components/schemas/") in schemas, where
    for method, path, op in _operations(document):
        statuses = [s for s in op["responses"] if s.startswith("2")]
        assert statuses, (method, path)
        for status in statuses:
            for media, entry in (op["responses"][status].get("content") or {}).items():
                assert entry.get("schema") not in (None, {}), (method, path, status, media)
    commit = document["paths"]["/consumers/{group}/instances/{instance}/offsets"]["post"]
    assert commit["responses"]["200"]["content"]["application/vnd.kafka.v2+json"][
        "schema"]["items"]


def test_fixed_value_strings_are_enums(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]

    def values(schema: dict[str, Any]) -> list[str]:
        for option in schema.get("anyOf", [schema]):
            if "enum" in option:
                return list(option["enum"])
        raise AssertionError(f"no enum in {schema}")

    consumer = schemas["CreateConsumerRequest"]["properties"]
    assert values(consumer["format"]) == ["binary", "json", "avro", "jsonschema", "protobuf"]
    assert values(consumer["auto.offset.reset"]) == ["earliest", "latest", "none"]
    assert values(schemas["AlterConfigEntry"]["properties"]["operation"]) == ["SET", "DELETE"]
    assert "TOPIC" in values(schemas["CreateAclRequest"]["properties"]["resource_type"])
    read = document["paths"][
        "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records"]["get"]
    key_format = next(p for p in read["parameters"] if p["name"] == "key_format")
    assert values(key_format["schema"]) == ["BINARY", "JSON", "STRING"]


def test_enums_declare_canonical_values_the_server_also_takes_in_any_case(
    client: httpx.Client, group: str
) -> None:
    """The enums document; the validation stays the server's (any case)."""
    created = client.post(f"/consumers/{group}", json={
        "name": "mixed-case", "format": "JSON", "auto.offset.reset": "Earliest"},
        headers={"Content-Type": "application/vnd.kafka.v2+json"})
    assert created.status_code == 200, created.text
    assert client.delete(f"/consumers/{group}/instances/mixed-case").status_code == 204


def test_the_generator_is_in_the_test_extra() -> None:
    """CI installs the ``dev`` extra (.ci/run): the generator must be in it."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert f'"{GENERATOR}' in pyproject.read_text()
