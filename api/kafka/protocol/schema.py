"""Kafka's message definitions, read from the JSON files Kafka ships.

``messages/`` holds the files of ``clients/src/main/resources/common/message/`` in
apache/kafka as they are (Apache License 2.0, their headers kept; the commit is named in
``messages/README.md``): each names an API key, its valid and flexible versions and
every field with the versions it exists in. They are the source of truth of the codec
(``codegen``): nothing about a message's layout is written by hand in franz.

A field's ``versions`` / ``nullableVersions`` / ``taggedVersions`` are ranges (``"3+"``,
``"0-2"``, ``"none"``); structs named in ``commonStructs`` are resolved in place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

_COMMENTS = re.compile(r"(?m)^\s*//.*$")
_NONE = (1, 0)  # an empty range


class SchemaError(ValueError):
    """A message definition franz cannot read (a bug in the vendored files or here)."""


@dataclass(frozen=True, slots=True)
class Versions:
    low: int
    high: int  # inclusive; a large number for "N+"

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(*_NONE)
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))


@dataclass(frozen=True, slots=True)
class Field:
    name: str  # snake_case of Kafka's name: ``TopicId`` -> ``topic_id``
    kafka_name: str
    type: str  # ``int32``, ``string``, ``[]int32``, ``records``, a struct name, ``[]Struct``
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    # Kafka's default: a struct's is the dict of its fields' defaults (a fresh copy per
    # decode; do not mutate this one), None for a nullable struct whose default is null
    default: object
    fields: tuple[Field, ...] = ()  # a struct's (or an array of structs') fields
    flexible_override: Versions | None = None  # RequestHeader's ClientId: never compact

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element[:1].isupper()


@dataclass(frozen=True, slots=True)
class Message:
    name: str  # ``ProduceRequest``
    api_key: int | None
    kind: str  # "request", "response", "header"
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...] = field(default_factory=tuple)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


_TYPE_DEFAULTS: dict[str, object] = {
    "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
    "float64": 0.0, "string": "", "bytes": b"", "records": None, "uuid": bytes(16),
}


def _default(kind: str, raw: object, nullable: Versions) -> object:
    if kind.startswith("[]"):
        return None if raw == "null" else ()
    if kind[:1].isupper():
        return None
    if raw is None:
        return _TYPE_DEFAULTS.get(kind)
    if raw == "null":
        return None
    if kind == "bool":
        return str(raw).lower() == "true"
    if kind in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(str(raw), 0)
    if kind == "float64":
        return float(str(raw))
    if kind == "string":
        return str(raw)
    return _TYPE_DEFAULTS.get(kind)


def _field(obj: dict, common: dict[str, list[dict]]) -> Field:
    kind = obj["type"]
    element = kind[2:] if kind.startswith("[]") else kind
    raw_fields = obj.get("fields")
    if raw_fields is None and element[:1].isupper():
        if element not in common:
            raise SchemaError(f"struct {element} of field {obj['name']} is not defined")
        raw_fields = common[element]
    nullable = Versions.parse(obj.get("nullableVersions"))
    fields = tuple(_field(f, common) for f in raw_fields or ())
    default = _default(kind, obj.get("default"), nullable)
    if element[:1].isupper() and kind == element and obj.get("default") != "null":
        # Kafka's default of a struct field is the struct of its fields' defaults (Java's
        # `new Struct()`): what an absent tagged struct or a version without it reads as
        default = {f.name: f.default for f in fields}
    return Field(
        name=snake(obj["name"]), kafka_name=obj["name"], type=kind,
        versions=Versions.parse(obj.get("versions")), nullable=nullable,
        tagged=Versions.parse(obj.get("taggedVersions")), tag=obj.get("tag"),
        default=default, fields=fields,
        flexible_override=Versions.parse(obj["flexibleVersions"])
        if "flexibleVersions" in obj else None,
    )


@cache
def load(name: str) -> Message:
    """The definition in ``messages/<name>.json`` (``ProduceRequest``, ``RequestHeader``)."""
    try:
        text = resources.files(__package__).joinpath("messages", f"{name}.json").read_text()
    except FileNotFoundError as exc:
        raise SchemaError(f"no message definition {name}") from exc
    doc = json.loads(_COMMENTS.sub("", text))
    common = {s["name"]: s["fields"] for s in doc.get("commonStructs", ())}
    return Message(
        name=doc["name"], api_key=doc.get("apiKey"), kind=doc["type"],
        valid=Versions.parse(doc.get("validVersions")),
        flexible=Versions.parse(doc.get("flexibleVersions")),
        fields=tuple(_field(f, common) for f in doc.get("fields", ())),
    )
