"""JSON schemas (``schemaType`` JSON).

Parsing: the text is a JSON object or boolean, valid against the metaschema of its
``$schema`` (draft 4, 6, 7, 2019-09, 2020-12; draft 7 when it names none), checked by
``jsonschema``. The canonical text is the compact JSON, keys in the order given; the
normalized form sorts the keys. References name the ``$ref`` URIs of other registered
JSON schemas.

Compatibility: a reader schema can read what a writer schema wrote when every document
valid against the writer is valid against the reader. The rules (Confluent's names):

- types: the reader accepts every writer type (``integer`` is read as ``number``);
  a reader type where the writer had none is ``TYPE_NARROWED``;
- ``enum`` / ``const``: the reader's values include the writer's;
- numbers: ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` no
  tighter than the writer's, ``multipleOf`` dividing the writer's;
- strings: ``minLength`` / ``maxLength`` no tighter, ``pattern`` unchanged;
- objects: a writer property the reader lacks is read by the reader's
  ``additionalProperties`` (removed from a closed content model: incompatible); a
  reader property the writer lacks must accept what the writer's
  ``additionalProperties`` allowed (a property added to an open content model is
  incompatible unless it accepts anything); no newly required property; no closed
  ``additionalProperties`` where the writer's were open; ``min/maxProperties``;
- arrays: ``items`` (a schema, or per position), ``additionalItems`` / ``prefixItems``,
  ``min/maxItems``, no new ``uniqueItems``;
- ``allOf`` / ``anyOf`` / ``oneOf``: each writer alternative read by the reader, a
  reader alternative that reads the writer, each reader ``allOf`` member reads it;
  a reader ``not`` the writer does not have is incompatible;
- ``$ref``: local JSON pointers and the referenced schemas, followed (cycles once).

Not covered: ``patternProperties``, ``dependencies`` / ``dependentSchemas``,
``if/then/else``, ``propertyNames``, ``contains`` (they do not make anything
incompatible here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats.base import Incompatibility, ParsedSchema, dump_json, load_json
from core.broker.schemas.model import JSON, Reference

_ANY: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class JsonModel:
    """The schema document and the documents its ``$ref``s may name, by URI (its
    references', transitively)."""

    document: Any
    resources: dict[str, Any]


def parse(text: str, references: Mapping[str, ParsedSchema], refs: tuple[Reference, ...],
          *, normalize: bool = False) -> ParsedSchema:
    doc = load_json(text, JSON)
    if not isinstance(doc, (dict, bool)):
        raise InvalidSchemaError("Invalid JSON schema: a JSON schema is an object or a boolean")
    try:
        cls = validators.validator_for(doc, default=validators.Draft7Validator)
        cls.check_schema(doc)
    except js_exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise InvalidSchemaError(
            f"Invalid JSON schema at '/{where}': {exc.message[:300]}") from None
    except (RecursionError, ValueError, TypeError) as exc:
        raise InvalidSchemaError(f"Invalid JSON schema: {str(exc)[:300]}") from None
    resources: dict[str, Any] = {}
    for name, dep in references.items():
        if dep.schema_type != JSON:
            raise InvalidSchemaError(f"Invalid JSON schema: the reference {name!r} is a "
                                     f"{dep.schema_type} schema")
        resources.update(dep.model.resources)
        resources[name] = dep.model.document
    canonical = dump_json(doc)
    normalized = dump_json(doc, sort_keys=True)
    return ParsedSchema(JSON, normalized if normalize else canonical, canonical, normalized,
                        refs, JsonModel(doc, resources))


# --- compatibility ----------------------------------------------------------------------


def check(reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
    checker = _Subset(reader.model, writer.model)
    try:
        checker.check(reader.model.document, writer.model.document, "#")
    except RecursionError:
        checker.add("TYPE_CHANGED", "#", "the schemas nest too deeply to be compared")
    return checker.out


def _accepts_all(schema: Any) -> bool:
    if schema is True:
        return True
    return isinstance(schema, dict) and not (set(schema) - _ANNOTATIONS)


#: keywords that constrain nothing
_ANNOTATIONS = frozenset({"$schema", "$id", "id", "$comment", "title", "description", "default",
                          "examples", "deprecated", "readOnly", "writeOnly", "definitions",
                          "$defs", "format"})
_NUMERIC = frozenset({"number", "integer"})


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class _Subset:
    """Is every document valid against the writer valid against the reader?"""

    def __init__(self, reader: JsonModel, writer: JsonModel) -> None:
        self.reader = reader
        self.writer = writer
        self.out: list[Incompatibility] = []
        self._in_progress: set[tuple[int, int]] = set()
        self._roots: tuple[Any, Any] = (reader.document, writer.document)

    def add(self, kind: str, path: str, description: str) -> None:
        self.out.append(Incompatibility(kind, path, description))

    def compatible(self, r: Any, w: Any, path: str) -> bool:
        saved = self.out
        self.out = []
        try:
            self.check(r, w, path)
            return not self.out
        finally:
            self.out = saved

    # --- $ref ---

    def _deref(self, schema: Any, model: JsonModel, root: Any) -> tuple[Any, Any]:
        """``schema`` with ``$ref``s followed (at most 32 hops): (schema, its document)."""
        for _ in range(32):
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema, root
            target, root = self._resolve(schema["$ref"], model, root)
            if target is None:
                return _ANY, root  # unresolvable: constrains nothing we know of
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if rest and isinstance(target, dict) and not (set(rest) - _ANNOTATIONS):
                schema = target
            elif rest:
                return schema, root  # $ref beside constraints (2019-09+): taken as given
            else:
                schema = target
        return schema, root

    @staticmethod
    def _resolve(ref: str, model: JsonModel, root: Any) -> tuple[Any, Any]:
        uri, _, fragment = ref.partition("#")
        doc = root if not uri else model.resources.get(uri)
        if doc is None:
            return None, root
        node = doc
        for part in (p for p in fragment.split("/") if p):
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None, doc
        return node, doc

    # --- the rules ---

    def check(self, r: Any, w: Any, path: str) -> None:
        """Record why documents valid against ``w`` may be invalid against ``r``; their
        ``$ref``s resolve in the documents being walked (``_roots``)."""
        r_root, w_root = self._roots
        r, r_root2 = self._deref(r, self.reader, r_root)
        w, w_root2 = self._deref(w, self.writer, w_root)
        key = (id(r), id(w))
        if key in self._in_progress:
            return
        self._in_progress.add(key)
        self._roots = (r_root2, w_root2)
        try:
            self._check(r, w, path)
        finally:
            self._roots = (r_root, w_root)
            self._in_progress.discard(key)

    def _check(self, r: Any, w: Any, path: str) -> None:
        if w is False or _accepts_all(r):
            return
        if r is False:
            self.add("TYPE_NARROWED", path, "the reader accepts nothing")
            return
        if w is True:
            w = _ANY
        if not isinstance(r, dict) or not isinstance(w, dict):
            return
        sub, fits = self.check, self.compatible

        # combinations: each alternative the writer may take, read by the reader
        for word in ("anyOf", "oneOf"):
            if isinstance(w.get(word), list) and w[word]:
                base = {k: v for k, v in w.items() if k != word}
                for i, branch in enumerate(w[word]):
                    merged = {**base, **branch} if isinstance(branch, dict) else branch
                    sub(r, merged, f"{path}/{word}/{i}")
                return
        for word in ("anyOf", "oneOf"):
            if isinstance(r.get(word), list) and r[word]:
                base = {k: v for k, v in r.items() if k != word}
                if not any(fits({**base, **b} if isinstance(b, dict) else b, w, path)
                           for b in r[word]):
                    self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", f"{path}/{word}",
                             f"no alternative of the reader's {word} reads the writer's schema")
                return
        if isinstance(r.get("allOf"), list):
            for i, member in enumerate(r["allOf"]):
                if isinstance(w.get("allOf"), list) and any(
                        fits(member, wm, path) for wm in w["allOf"]):
                    continue
                sub(member, {k: v for k, v in w.items() if k != "allOf"}, f"{path}/allOf/{i}")
        if "not" in r and r.get("not") != w.get("not"):
            self.add("NOT_TYPE_EXTENDED", f"{path}/not", "the reader excludes documents with "
                                                         "'not' that the writer did not")
        self._types(r, w, path)
        self._values(r, w, path)
        self._numbers(r, w, path)
        self._strings(r, w, path)
        self._objects(r, w, path)
        self._arrays(r, w, path)

    def _types(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        rt, wt = _types(r), _types(w)
        if rt is None:
            return
        if wt is None:
            if "enum" in w or "const" in w:
                return  # the values decide (_values)
            self.add("TYPE_NARROWED", f"{path}/type",
                     f"the reader accepts only {sorted(rt)}, the writer any type")
            return
        lost = {t for t in wt if t not in rt and not (t == "integer" and "number" in rt)}
        if lost:
            narrowed = all(t in wt or (t == "integer" and "number" in wt) for t in rt)
            self.add("TYPE_NARROWED" if narrowed else "TYPE_CHANGED",
                     f"{path}/type", f"the reader does not accept the writer's types "
                                     f"{sorted(lost)}")

    def _values(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        if "const" in w:
            written: list[Any] | None = [w["const"]]
        elif isinstance(w.get("enum"), list):
            written = w["enum"]
        else:
            written = None
        if "const" in r:
            allowed: list[Any] | None = [r["const"]]
        elif isinstance(r.get("enum"), list):
            allowed = r["enum"]
        else:
            return
        if written is None:
            self.add("ENUM_ARRAY_NARROWED", f"{path}/enum",
                     "the reader accepts only some values, the writer any")
            return
        missing = [v for v in written if v not in allowed]
        if missing:
            self.add("ENUM_ARRAY_NARROWED", f"{path}/enum",
                     f"the reader does not accept the writer's values {missing[:10]}")

    def _bound(self, r: dict[str, Any], w: dict[str, Any], word: str, path: str, *,
               upper: bool, kind: str) -> None:
        rv, wv = _number(r.get(word)), _number(w.get(word))
        if rv is None:
            return
        if wv is None:
            self.add(f"{kind}_ADDED", f"{path}/{word}", f"the reader adds {word} {r[word]}")
        elif (wv > rv) if upper else (wv < rv):
            self.add(f"{kind}_{'DECREASED' if upper else 'INCREASED'}", f"{path}/{word}",
                     f"the reader's {word} {r[word]} is tighter than the writer's {w[word]}")

    def _numbers(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        self._bound(r, w, "maximum", path, upper=True, kind="MAXIMUM")
        self._bound(r, w, "minimum", path, upper=False, kind="MINIMUM")
        self._bound(r, w, "exclusiveMaximum", path, upper=True, kind="EXCLUSIVE_MAXIMUM")
        self._bound(r, w, "exclusiveMinimum", path, upper=False, kind="EXCLUSIVE_MINIMUM")
        rm, wm = _number(r.get("multipleOf")), _number(w.get("multipleOf"))
        if rm is not None and rm > 0:
            ok = wm is not None and wm > 0 and math.isclose(
                round(wm / rm) * rm, wm, rel_tol=1e-9, abs_tol=1e-12)
            if not ok:
                self.add("MULTIPLE_OF_CHANGED", f"{path}/multipleOf",
                         f"the reader's multipleOf {r['multipleOf']} does not divide the "
                         f"writer's {w.get('multipleOf')}")

    def _strings(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        self._bound(r, w, "maxLength", path, upper=True, kind="MAX_LENGTH")
        self._bound(r, w, "minLength", path, upper=False, kind="MIN_LENGTH")
        if "pattern" in r and r.get("pattern") != w.get("pattern"):
            self.add("PATTERN_CHANGED" if "pattern" in w else "PATTERN_ADDED",
                     f"{path}/pattern", f"the reader's pattern {r['pattern']!r} differs from "
                                        f"the writer's {w.get('pattern')!r}")

    def _objects(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        sub = self.check
        rp = r.get("properties") if isinstance(r.get("properties"), dict) else {}
        wp = w.get("properties") if isinstance(w.get("properties"), dict) else {}
        r_extra = r.get("additionalProperties", True)
        w_extra = w.get("additionalProperties", True)
        for name, ws in wp.items():
            where = f"{path}/properties/{name}"
            if name in rp:
                sub(rp[name], ws, where)
            elif r_extra is False:
                self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                         f"the writer's property '{name}' is not allowed by the reader")
            elif isinstance(r_extra, dict) and not self.compatible(r_extra, ws, where):
                self.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                         where, f"the writer's property '{name}' is not read by the reader's "
                                "additionalProperties")
        for name, rs in rp.items():
            if name in wp or w_extra is False:
                continue
            where = f"{path}/properties/{name}"
            if w_extra is True or not isinstance(w_extra, dict):
                if not _accepts_all(rs):
                    self.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                             f"the reader's property '{name}' constrains what the writer's "
                             "open content model may have written under that name")
            elif not self.compatible(rs, w_extra, where):
                self.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"the reader's property '{name}' does not read the writer's "
                         "additionalProperties")
        r_req = set(r.get("required") or ()) if isinstance(r.get("required"), list) else set()
        w_req = set(w.get("required") or ()) if isinstance(w.get("required"), list) else set()
        for name in sorted(r_req - w_req):
            self.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                     if w_extra is not True else "REQUIRED_ATTRIBUTE_ADDED",
                     f"{path}/required", f"the reader requires '{name}', the writer did not")
        if r_extra is False and w_extra is not False:
            self.add("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
                     "the reader allows no additional properties, the writer did")
        elif isinstance(r_extra, dict) and w_extra is not False:
            sub(r_extra, w_extra if isinstance(w_extra, dict) else _ANY,
                f"{path}/additionalProperties")
        self._bound(r, w, "maxProperties", path, upper=True, kind="MAX_PROPERTIES")
        self._bound(r, w, "minProperties", path, upper=False, kind="MIN_PROPERTIES")

    def _arrays(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        sub = self.check
        r_tuple = r.get("prefixItems") if isinstance(r.get("prefixItems"), list) else (
            r.get("items") if isinstance(r.get("items"), list) else None)
        w_tuple = w.get("prefixItems") if isinstance(w.get("prefixItems"), list) else (
            w.get("items") if isinstance(w.get("items"), list) else None)
        r_rest = r.get("items", True) if "prefixItems" in r else (
            r.get("additionalItems", True) if r_tuple is not None else r.get("items", True))
        w_rest = w.get("items", True) if "prefixItems" in w else (
            w.get("additionalItems", True) if w_tuple is not None else w.get("items", True))
        r_tuple, w_tuple = r_tuple or [], w_tuple or []
        for i in range(max(len(r_tuple), len(w_tuple))):
            rs = r_tuple[i] if i < len(r_tuple) else r_rest
            ws = w_tuple[i] if i < len(w_tuple) else w_rest
            if ws is False:
                break
            sub(rs, ws, f"{path}/items/{i}")
        if w_rest is not False:
            if r_rest is False:
                self.add("ADDITIONAL_ITEMS_REMOVED", f"{path}/items",
                         "the reader allows no more items, the writer did")
            elif not _accepts_all(r_rest):
                sub(r_rest, w_rest, f"{path}/items")
        self._bound(r, w, "maxItems", path, upper=True, kind="MAX_ITEMS")
        self._bound(r, w, "minItems", path, upper=False, kind="MIN_ITEMS")
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            self.add("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems",
                     "the reader requires unique items, the writer did not")
