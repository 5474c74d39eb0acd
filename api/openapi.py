"""OpenAPI helpers: routes read raw bodies for speed, so request and response shapes are
declared here (``openapi_extra`` / ``responses``) and the TypedDict schemas are merged
into ``components/schemas`` when the document is built.

The document is meant to generate clients (``openapi-python-client``; tests/integration/
test_openapi_client.py): operationIds and tags are Confluent's (``listKafkaTopics``,
"Topic (v3)"), a request body has one media type per schema (v2 produce also names the
json format ``application/json``), every answer is declared with its shape, and every
property and parameter has a description. Path parameters mean the same on every
route, so they are described once (``PATH_PARAMETERS``, as Confluent's spec shares
``components/parameters``). Strings the server checks by hand against a fixed set (any
case) declare the canonical values as an ``enum`` (``enum_schema``, ``enum_parameter``)
without changing what is accepted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, WithJsonSchema

from api.errors import V2_MEDIA

if TYPE_CHECKING:
    from api.openapi_links import Link

JSON_MEDIA = "application/json"
_REF = "#/components/schemas/{model}"

_ERROR_TEXT: dict[int, tuple[str, int, str]] = {
    400: (
        "Malformed JSON, wrong field type, unknown field or bad parameter",
        400,
        "Unrecognized field: records[0].foo",
    ),
    404: (
        "Unknown topic (40401), partition (40402) or consumer instance (40403)",
        40401,
        "Topic 'orders' not found.",
    ),
    406: (
        "Accept does not match the consumer's format (40601)",
        40601,
        "The requested embedded data format does not match the deserializer for this "
        "consumer instance (format json)",
    ),
    409: (
        "Consumer instance exists (40902) or illegal consumer state (40903)",
        40902,
        "Consumer with specified consumer ID already exists in the specified consumer group.",
    ),
    413: ("Record too large (413)", 413, "Record too large."),
    415: ("Unsupported Content-Type (415)", 415, "HTTP 415 Unsupported Media Type"),
    416: (
        "franz: offset outside [log start, high watermark] (41601)",
        41601,
        "Offset 99 is out of range [0, 42] for orders-0",
    ),
    422: (
        "Body failed validation (422), invalid consumer config (42204), "
        "schema format without Schema Registry (42206)",
        422,
        "records may not be empty",
    ),
    500: ("Kafka error (50002) or retriable Kafka error (50003)", 50003, "Retriable Kafka error."),
}


#: Path parameters, by name: the same name is the same thing on every route.
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "topic": {"description": "The topic name", "example": "orders"},
    "partition": {"description": "The partition id (0-based)", "example": 0},
    "group": {"description": "The consumer group id", "example": "my_group"},
    "instance": {
        "description": "The consumer instance id (`instance_id` of `POST /consumers/{group}`)",
        "example": "my_consumer",
    },
    "cluster_id": {"description": "The cluster id (`GET /v3/clusters`)"},
    "topic_name": {"description": "The topic name", "example": "orders"},
    "partition_id": {"description": "The partition id (0-based)", "example": 0},
    "broker_id": {"description": "The broker id (`broker.id`)", "example": 0},
    "consumer_group_id": {"description": "The consumer group id", "example": "my_group"},
    "consumer_id": {
        "description": "The group member id, as `GET .../consumers` lists it",
        "example": "consumer-1-6f1c1c3e-2b0a-4a59-9d64-8a1bd4a5b0a7",
    },
    "name": {"description": "The config name", "example": "retention.ms"},
    "user_name": {"description": "The user (or API key) name", "example": "alice"},
}

#: The document's tags, in the order the docs show them: Confluent's names ("Topic (v3)"),
#: and the same style for v2 and for what only franz has.
TAGS: list[dict[str, str]] = [
    {"name": "Cluster (v3)", "description": "The cluster (franz serves exactly one)"},
    {"name": "Broker (v3)", "description": "Live brokers"},
    {"name": "Topic (v3)", "description": "List, describe, create, grow and delete topics"},
    {"name": "Partition (v3)", "description": "Partitions, their offsets and reassignments"},
    {"name": "Replica (v3)", "description": "Partition replicas, by partition or by broker"},
    {"name": "Records (v3)", "description": "Produce records (one, a stream or a batch); "
     "franz: read a range of a partition"},
    {"name": "Configs (v3)", "description": "Topic configs (changed live), broker configs"},
    {"name": "Consumer Group (v3)", "description": "Groups, members, assignments, lags; "
     "franz: committed offsets, offset reset, group delete"},
    {"name": "ACL (v3)", "description": "Kafka ACLs: search, create, delete"},
    {"name": "User (v3)", "description": "franz: users and API keys for HTTP Basic"},
    {"name": "Broker (v2)", "description": "Confluent REST Proxy v2: the API root and the "
     "broker ids"},
    {"name": "Topic (v2)", "description": "Topic metadata; produce to a topic"},
    {"name": "Partition (v2)", "description": "Partition metadata and offsets; produce to a "
     "partition; franz: read a range without a consumer"},
    {"name": "Consumer (v2)", "description": "Consumer instances: subscribe or assign, "
     "seek, read, commit"},
    {"name": "Schema Registry", "description": "Confluent Schema Registry: subjects, "
     "versions, schemas by id, compatibility levels and checks, modes"},
    {"name": "Health", "description": "Liveness and readiness probes"},
    {"name": "Metrics", "description": "Prometheus metrics"},
]

#: The request body note of v2 routes that declare only Confluent's media type.
V2_BODY_NOTE = "`application/json` is accepted as well."


def ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def enum_schema(*values: str, nullable: bool = False) -> WithJsonSchema:
    """The JSON schema of a string the route checks by hand against ``values`` (any
    case, or with aliases): ``Annotated[str | None, enum_schema(...), Field(...)]``
    documents the canonical values and leaves validation as it is."""
    schema: dict[str, Any] = {"type": "string", "enum": list(values)}
    if nullable:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return WithJsonSchema(schema)


def enum_parameter(name: str, values: Iterable[str], description: str, *,
                   where: str = "query", default: str | None = None) -> dict[str, Any]:
    """An optional parameter whose values the route checks by hand (any case), declared
    with its canonical values; in ``openapi_extra["parameters"]`` it replaces the entry
    FastAPI writes for ``name``."""
    schema: dict[str, Any] = {"type": "string", "enum": list(values)}
    if default is not None:
        schema["default"] = default
    return {"in": where, "name": name, "required": False, "description": description,
            "schema": schema}


def json_body(
    schema: str,
    example: Any,
    *,
    media: Iterable[str] = (V2_MEDIA,),
    required: bool = True,
    description: str = "",
) -> dict[str, Any]:
    """``openapi_extra`` declaring a JSON request body read by hand in the route. One
    media type per schema (a generated client offers one body type per media type):
    v2 routes declare Confluent's and say in the description that
    ``application/json`` is taken too."""
    content = {m: {"schema": ref(schema), "example": example} for m in media}
    text = " ".join(t for t in (description, V2_BODY_NOTE if V2_MEDIA in content else "") if t)
    body: dict[str, Any] = {"required": required, "content": content}
    if text:
        body["description"] = text
    return {"requestBody": body}


def ok(
    schema: str | None,
    example: Any = None,
    *,
    status: int = 200,
    media: Iterable[str] = (V2_MEDIA,),
    description: str = "Success",
) -> dict[int | str, dict[str, Any]]:
    """A documented success response; ``schema=None`` for an empty body."""
    if schema is None:
        return {status: {"description": description}}
    content: dict[str, Any] = {}
    for m in media:
        entry: dict[str, Any] = {"schema": ref(schema)}
        if example is not None:
            entry["example"] = example
        content[m] = entry
    return {status: {"description": description, "content": content}}


def array_ok(
    item_schema: str, example: Any, *, media: Iterable[str]
) -> dict[int | str, dict[str, Any]]:
    """A 200 whose body is a JSON array of ``item_schema``."""
    content = {
        m: {"schema": {"type": "array", "items": ref(item_schema)}, "example": example}
        for m in media
    }
    return {200: {"description": "Success", "content": content}}


def records_ok(binary_example: Any, json_example: Any) -> dict[int | str, dict[str, Any]]:
    """A 200 with an array of consumed records, per embedded format."""

    def arr(name: str, example: Any) -> dict[str, Any]:
        return {"schema": {"type": "array", "items": ref(name)}, "example": example}

    return {
        200: {
            "description": "Records (possibly none)",
            "content": {
                "application/vnd.kafka.binary.v2+json": arr("BinaryRecordOut", binary_example),
                "application/vnd.kafka.json.v2+json": arr("JsonRecordOut", json_example),
                JSON_MEDIA: arr("JsonRecordOut", json_example),
            },
        }
    }


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Documented error responses, all with the Confluent error body."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        out.update(error_doc(status, *_ERROR_TEXT[status]))
    return out


def error_doc(status: int, text: str, code: int, message: str) -> dict[int | str, dict[str, Any]]:
    """One documented error response with the Confluent error body, for a route whose
    wording differs from ``errors``' shared table."""
    example = {"error_code": code, "message": message}
    return {status: {"description": text, "content": {
        V2_MEDIA: {"schema": ref("ErrorBody"), "example": example}}}}


def install_openapi(
    app: FastAPI, schemas: Mapping[str, Any], links: Iterable[Link] = ()
) -> None:
    """Build the document once, with ``schemas`` (TypedDicts) in components and
    ``links`` (``api.openapi_links``) in the responses they start from."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        for name, tp in schemas.items():
            schema = TypeAdapter(tp).json_schema(ref_template=_REF)
            components.update(schema.pop("$defs", {}))
            components[name] = schema
        _restore_examples(doc, app.routes)
        _tidy(doc)
        _describe_path_parameters(doc)
        _check_refs(doc)
        add_links(doc, links)
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]


def _operation(doc: dict[str, Any], ref: str) -> dict[str, Any]:
    method, _, path = ref.partition(" ")
    op = doc.get("paths", {}).get(path, {}).get(method.lower())
    if op is None:
        raise ValueError(f"OpenAPI link: no operation {ref!r} in the document")
    return op  # type: ignore[no-any-return]


def add_links(doc: dict[str, Any], links: Iterable[Link]) -> None:
    """Each link into its source response's ``links``, naming the target by
    ``operationId``; a link whose source, status or target is not documented is an
    error (a renamed route must not leave a dangling link)."""
    for link in links:
        source = _operation(doc, link.source)
        target = _operation(doc, link.target)
        response = source.get("responses", {}).get(str(link.status))
        if response is None:
            raise ValueError(f"OpenAPI link {link.name}: {link.source} documents no {link.status}")
        entry: dict[str, Any] = {"operationId": target["operationId"]}
        if link.parameters:
            entry["parameters"] = dict(link.parameters)
        if link.description:
            entry["description"] = link.description
        named = response.setdefault("links", {})
        if link.name in named:
            raise ValueError(f"OpenAPI link {link.name}: twice on {link.source} {link.status}")
        named[link.name] = entry


def _merge(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for key, value in src.items():
        if key == "parameters" and isinstance(dst.get(key), list):
            dst[key] = _merge_parameters(dst[key], value)
        elif isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _merge(dst[key], value)
        else:
            dst[key] = value


def _merge_parameters(inferred: list[dict[str, Any]],
                      declared: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The document's parameters with the declared ones (``openapi_extra["parameters"]``)
    in place of those of the same name and location, each once (FastAPI appends the
    declared list to its own), the new ones after: a route that declares a header
    keeps its path parameters."""
    declared = list(declared)
    by_key = {(p["in"], p["name"]): p for p in declared}
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for param in [*inferred, *declared]:
        key = (param["in"], param["name"])
        if key not in seen:
            seen.add(key)
            out.append(by_key.get(key, param))
    return out


def _describe_path_parameters(doc: dict[str, Any]) -> None:
    """Path parameters without a description get ``PATH_PARAMETERS``' text and example."""
    for item in doc.get("paths", {}).values():
        for op in item.values():
            for param in op.get("parameters", []):
                known = PATH_PARAMETERS.get(param["name"]) if param["in"] == "path" else None
                if known is not None:
                    param.setdefault("description", known["description"])
                    if "example" in known:
                        param.setdefault("example", known["example"])


def _check_refs(doc: dict[str, Any]) -> None:
    """Every ``$ref`` names a schema of the document (a body declared by name must
    have its shape in ``components/schemas``)."""
    schemas = doc.get("components", {}).get("schemas", {})
    prefix = _REF.format(model="")

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            target = node.get("$ref")
            if isinstance(target, str) and target.removeprefix(prefix) not in schemas:
                raise ValueError(f"OpenAPI: {target} is not in components/schemas")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)


def _api_routes(routes: Iterable[Any]) -> list[Any]:
    """The API routes, also inside included routers (FastAPI >= 0.120 keeps those as
    lazily resolved branches; ``iter_route_contexts`` flattens them)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI flattens on include
        return [r for r in routes if isinstance(r, APIRoute)]
    return [c for c in iter_route_contexts(list(routes)) if isinstance(c.original_route, APIRoute)]


def _restore_examples(doc: dict[str, Any], routes: Iterable[Any]) -> None:
    """FastAPI drops ``None`` values (also inside examples) when it builds the
    document; merge each route's declared ``responses`` and ``openapi_extra`` back."""
    for route in _api_routes(routes):
        if not route.include_in_schema:
            continue
        for method in route.methods:
            op = doc["paths"].get(route.path_format, {}).get(method.lower())
            if op is None:
                continue
            declared = {str(k): v for k, v in route.responses.items()}
            _merge(op.setdefault("responses", {}), declared)
            if route.openapi_extra:
                _merge(op, route.openapi_extra)


def _tidy(doc: dict[str, Any]) -> None:
    """Remove what FastAPI infers for hand-parsed routes: a ``type`` beside a ``$ref``,
    an empty ``application/json`` entry next to the declared media types, and the
    pydantic 422 (franz answers bad parameters with Confluent's error body)."""
    for path_item in doc.get("paths", {}).values():
        for op in path_item.values():
            responses = op.get("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                del responses["422"]
            for resp in responses.values():
                content = resp.get("content") or {}
                for media in (JSON_MEDIA, V2_MEDIA):
                    if len(content) > 1 and content.get(media, {}).get("schema") in (
                        {},
                        {"type": "string"},
                    ):
                        del content[media]
                for entry in content.values():
                    schema = entry.get("schema", {})
                    if "$ref" in schema:
                        schema.pop("type", None)
    schemas = doc.get("components", {}).get("schemas", {})
    if "HTTPValidationError" not in str(doc.get("paths")):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
