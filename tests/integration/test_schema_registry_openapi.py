"""The Schema Registry in ``/openapi.json`` (docs/schema-registry.md): every route with
Confluent's operationId and the "Schema Registry" tag, its errors in the registry's
media type and body, its request bodies declared; and a client generated from the
document (``openapi-python-client``, as tests/integration/test_openapi_client.py)
registers, reads, looks up and checks schemas as generated."""

from __future__ import annotations

import importlib
import json
import uuid
from types import ModuleType
from typing import Any

import httpx
import pytest
from test_openapi_client import PACKAGE, generated  # noqa: F401  (generated: the fixture)

SR = "application/vnd.schemaregistry.v1+json"
TAG = "Schema Registry"

#: (method, path) -> Confluent's operationId (its registry's published document)
OPERATIONS = {
    ("get", "/schemas/types"): "getSchemaTypes",
    ("get", "/schemas"): "getSchemas",
    ("get", "/schemas/ids/{id}"): "getSchema",
    ("get", "/schemas/ids/{id}/schema"): "getSchemaOnly",
    ("get", "/schemas/ids/{id}/subjects"): "getSubjects",
    ("get", "/schemas/ids/{id}/versions"): "getVersions",
    ("get", "/subjects"): "list",
    ("get", "/subjects/{subject}/versions"): "listVersions",
    ("post", "/subjects/{subject}/versions"): "register",
    ("get", "/subjects/{subject}/versions/{version}"): "getSchemaByVersion",
    ("get", "/subjects/{subject}/versions/{version}/schema"): "getSchemaOnly1",
    ("get", "/subjects/{subject}/versions/{version}/referencedby"): "getReferencedBy",
    ("delete", "/subjects/{subject}/versions/{version}"): "deleteSchemaVersion",
    ("post", "/subjects/{subject}"): "lookUpSchemaUnderSubject",
    ("delete", "/subjects/{subject}"): "deleteSubject",
    ("get", "/config"): "getTopLevelConfig",
    ("put", "/config"): "updateTopLevelConfig",
    ("delete", "/config"): "deleteTopLevelConfig",
    ("get", "/config/{subject}"): "getSubjectLevelConfig",
    ("put", "/config/{subject}"): "updateSubjectLevelConfig",
    ("delete", "/config/{subject}"): "deleteSubjectConfig",
    ("get", "/mode"): "getTopLevelMode",
    ("put", "/mode"): "updateTopLevelMode",
    ("delete", "/mode"): "deleteTopLevelMode",
    ("get", "/mode/{subject}"): "getMode",
    ("put", "/mode/{subject}"): "updateMode",
    ("delete", "/mode/{subject}"): "deleteSubjectMode",
    ("post", "/compatibility/subjects/{subject}/versions/{version}"):
        "testCompatibilityBySubjectName",
    ("post", "/compatibility/subjects/{subject}/versions"): "testCompatibilityForSubject",
}


@pytest.fixture(scope="module")
def document(franz_url: str) -> dict[str, Any]:
    return dict(httpx.get(franz_url + "/openapi.json", timeout=30).json())


def _registry_operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m, p): op for p, item in document["paths"].items() for m, op in item.items()
            if TAG in op.get("tags", ())}


def test_every_route_has_confluents_operation_id(document: dict[str, Any]) -> None:
    ops = _registry_operations(document)
    assert {key: op["operationId"] for key, op in ops.items()} == OPERATIONS
    assert TAG in {t["name"] for t in document["tags"]}
    assert all(op.get("summary") and op.get("description") for op in ops.values())


def test_errors_bodies_and_answers_are_declared(document: dict[str, Any]) -> None:
    for (method, path), op in _registry_operations(document).items():
        where = (method, path)
        responses = op["responses"]
        assert {"200", "500"} <= set(responses), where
        assert set(responses["200"]["content"]) == {SR, "application/json"}, where
        for status, answer in responses.items():
            if status.startswith("2"):
                continue
            assert answer["description"].startswith("Error code "), where
            (media, entry), = answer["content"].items()
            assert (media, entry["schema"]) == (SR, {"$ref": "#/components/schemas/ErrorBody"})
            code = entry["example"]["error_code"]
            assert str(code).startswith(status), (where, status, code)
        if "{subject}" in path:
            assert "422" in responses, where  # an invalid subject
        if method in ("post", "put"):
            (media, entry), = op["requestBody"]["content"].items()
            assert media == SR and entry["schema"]["$ref"], where
            assert op["requestBody"]["required"], where
            assert {"400", "415"} <= set(responses), where
        params = {(q["in"], q["name"]) for q in op.get("parameters", [])}
        assert {("path", n) for n in ("subject", "version", "id") if f"{{{n}}}" in path} <= params
    register = document["paths"]["/subjects/{subject}/versions"]["post"]
    assert register["responses"]["409"]["content"][SR]["example"]["error_code"] == 409
    schemas = document["components"]["schemas"]
    for name in ("RegisterSchemaRequest", "RegisterSchemaResponse", "Schema", "SchemaString",
                 "SchemaReference", "SubjectVersion", "Config", "ConfigUpdateRequest", "Mode",
                 "ModeUpdateRequest", "CompatibilityCheckResponse"):
        assert name in schemas, name
    assert schemas["Mode"]["properties"]["mode"]["enum"] == [
        "READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"]


def test_links_follow_a_registration(document: dict[str, Any]) -> None:
    links = document["paths"]["/subjects/{subject}/versions"]["post"]["responses"]["200"][
        "links"]
    assert links["GetSchema"] == {"operationId": "getSchema",
                                  "parameters": {"id": "$response.body#/id"},
                                  "description": "The id just registered."}
    assert links["GetLatestVersion"]["parameters"] == {"subject": "$request.path.subject",
                                                       "version": "latest"}


def _api(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.api.schema_registry.{name}")


def test_a_generated_client_uses_the_registry(generated: ModuleType,  # noqa: F811
                                               franz_url: str) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    subject = f"gen/{uuid.uuid4().hex[:8]}-value"  # a "/": sent as %2F by the client
    first = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    second = json.dumps({"type": "object", "properties": {"a": {"type": "number"}}})
    with generated.Client(base_url=franz_url, raise_on_unexpected_status=True,
                          timeout=httpx.Timeout(30.0)) as client:
        def register(text: str) -> int:
            body = models.RegisterSchemaRequest(
                schema=text, schema_type=models.RegisterSchemaRequestSchematype.JSON)
            answer = _api("register").sync(subject, client=client, body=body)
            assert isinstance(answer, models.RegisterSchemaResponse), answer
            return int(answer.id)

        schema_id = register(first)
        by_id = _api("get_schema").sync(schema_id, client=client)
        assert isinstance(by_id, models.SchemaString), by_id
        assert json.loads(by_id.schema) == json.loads(first)
        assert _api("get_subjects").sync(schema_id, client=client) == [subject]
        latest = _api("get_schema_by_version").sync(subject, "latest", client=client)
        assert isinstance(latest, models.Schema), latest
        assert (latest.subject, latest.version, latest.id) == (subject, 1, schema_id)
        text = _api("get_schema_only_1").sync(subject, "1", client=client)
        assert text.to_dict() == json.loads(first)  # a JSON object: the generated model
        check = _api("test_compatibility_for_subject").sync(
            subject, client=client, verbose=True, body=models.RegisterSchemaRequest(
                schema=second, schema_type=models.RegisterSchemaRequestSchematype.JSON))
        assert isinstance(check, models.CompatibilityCheckResponse) and check.is_compatible
        assert register(second) != schema_id
        assert _api("list_versions").sync(subject, client=client) == [1, 2]
        level = _api("update_subject_level_config").sync(
            subject, client=client, body=models.ConfigUpdateRequest(
                compatibility=models.ConfigUpdateRequestCompatibility.FULL))
        assert isinstance(level, models.ConfigUpdateRequest), level
        missing = _api("get_schema").sync(2**31 - 1, client=client)
        assert isinstance(missing, models.ErrorBody) and missing.error_code == 40403
