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
- objects: each property name is read with the reader's schemas for it (its
  ``properties`` entry and every ``patternProperties`` entry whose pattern matches it,
  else its ``additionalProperties``), and each must read what the writer's schemas for
  the name allowed: a property removed from a closed content model, or one the reader's
  patterns or ``additionalProperties`` schema do not read, is incompatible; a property
  added to an open content model is incompatible unless it accepts anything; no newly
  required property; no closed ``additionalProperties`` where the writer's were open;
  ``min/maxProperties``. ``patternProperties`` are compared by their pattern: the same
  pattern's schemas as a property's, a writer pattern the reader dropped as a property
  the reader lacks, a reader pattern the writer lacked as a property the reader added
  (two different patterns are taken not to overlap). Patterns run on RE2 (linear time);
  one RE2 cannot run (lookaround, backreference) matches no name;
- dependencies (``dependencies``, ``dependentRequired``, ``dependentSchemas``): a
  property the reader makes depend on others the writer did not require with it is
  DEPENDENCY_ARRAY_ADDED / _EXTENDED / _CHANGED; a dependent schema the writer's
  documents may fail, DEPENDENCY_SCHEMA_ADDED (or what its comparison with the writer's
  finds); dependencies the reader dropped or narrowed are compatible;
- ``if`` / ``then`` / ``else``: each of the reader's branches must read the writer's
  documents: the writer's same branch when its ``if`` is the same, else the writer's
  schema; one that does not is PRODUCT_TYPE_EXTENDED (the reader's conditions add to
  what a document must be) or what the comparison of the branches finds;
- arrays: ``items`` (a schema, or per position), ``additionalItems`` / ``prefixItems``,
  ``min/maxItems``, no new ``uniqueItems``;
- ``allOf`` / ``anyOf`` / ``oneOf``: each writer alternative read by the reader, a
  reader alternative that reads the writer, each reader ``allOf`` member reads it;
  a reader ``not`` the writer does not have is incompatible;
- ``$ref``: local JSON pointers and the referenced schemas, followed (cycles once).

Not covered: ``propertyNames``, ``contains``, ``unevaluatedProperties`` (they do not make
anything incompatible here).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats.base import Incompatibility, ParsedSchema, dump_json, load_json
from core.broker.schemas.model import JSON, Reference

try:  # linear-time matching of patternProperties (a google-re2 wheel is a dependency)
    import re2 as _re2  # type: ignore[import-untyped, import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - an install without the wheel: Python's re
    _re2 = None

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
    if isinstance(doc, dict) and not isinstance(doc.get("$schema", ""), str):
        # jsonschema looks the metaschema up by it and fails on anything but a string
        raise InvalidSchemaError("Invalid JSON schema at '/$schema': not a string")
    try:
        cls = validators.validator_for(doc, default=validators.Draft7Validator)
        # a boolean schema is valid JSON Schema and jsonschema checks one; its stubs
        # (types-jsonschema) declare an object only
        cls.check_schema(doc)  # type: ignore[arg-type]
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


def _written_values(schema: dict[str, Any]) -> list[Any] | None:
    """The values a schema allows by ``const`` or ``enum``; None: not only those."""
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _typed(value: Any, types: set[str]) -> bool:
    """Whether ``value`` is of one of ``types`` (an integer is a number too)."""
    kind = _json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def _keyword(schema: dict[str, Any], word: str) -> dict[str, Any]:
    """An object-valued keyword (``properties``, ``patternProperties``...), {} if not."""
    value = schema.get(word)
    return value if isinstance(value, dict) else {}


def _required(schema: dict[str, Any]) -> set[str]:
    value = schema.get("required")
    return {n for n in value if isinstance(n, str)} if isinstance(value, list) else set()


@lru_cache(maxsize=512)
def _matcher(pattern: str) -> Callable[[str], Any] | None:
    """``pattern``'s search function; None when it cannot run here (RE2 takes no
    lookaround or backreference)."""
    try:
        if _re2 is not None:
            options = _re2.Options()
            options.log_errors = False
            return _re2.compile(pattern, options).search  # type: ignore[no-any-return]
        return re.compile(pattern).search
    except Exception:  # noqa: BLE001  (re.error, re2's error: not a pattern to run)
        return None


def _matching(patterns: dict[str, Any], name: str) -> list[Any]:
    """The schemas of the ``patternProperties`` whose pattern matches ``name``."""
    out = []
    for pattern, schema in patterns.items():
        search = _matcher(pattern)
        if search is not None and search(name):
            out.append(schema)
    return out


def _dependency_maps(schema: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """(property -> the properties it requires, property -> the schema it applies), from
    draft 4-7's ``dependencies`` and 2019-09's ``dependentRequired`` /
    ``dependentSchemas``."""
    arrays: dict[str, set[str]] = {}
    schemas: dict[str, Any] = {}
    for word in ("dependencies", "dependentRequired", "dependentSchemas"):
        for name, dep in _keyword(schema, word).items():
            if isinstance(dep, list) and word != "dependentSchemas":
                arrays.setdefault(name, set()).update(d for d in dep if isinstance(d, str))
            elif isinstance(dep, (dict, bool)) and word != "dependentRequired":
                schemas[name] = {"allOf": [schemas[name], dep]} if name in schemas else dep
    return arrays, schemas


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
        self._conditional(r, w, path)

    def _types(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        rt, wt = _types(r), _types(w)
        if rt is None:
            return
        if wt is None:
            values = _written_values(w)
            if values is not None:  # the writer's values have the types: each read?
                untyped = sorted({_json_type(v) for v in values if not _typed(v, rt)})
                if untyped:
                    self.add("TYPE_NARROWED", f"{path}/type", f"the reader accepts only "
                             f"{sorted(rt)}, the writer's values are also {untyped}")
                return
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
        written = _written_values(w)
        if "const" in r:
            allowed: list[Any] = [r["const"]]
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
        rp, wp = _keyword(r, "properties"), _keyword(w, "properties")
        r_extra = r.get("additionalProperties", True)
        w_extra = w.get("additionalProperties", True)
        for name in dict.fromkeys([*wp, *rp]):
            self._property(name, r, w, f"{path}/properties/{name}")
        self._patterns(r, w, path)
        w_req = _required(w)
        for name in sorted(_required(r) - w_req):
            self.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                     if w_extra is not True else "REQUIRED_ATTRIBUTE_ADDED",
                     f"{path}/required", f"the reader requires '{name}', the writer did not")
        if r_extra is False and w_extra is not False:
            self.add("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
                     "the reader allows no additional properties, the writer did")
        elif isinstance(r_extra, dict) and w_extra is not False:
            self.check(r_extra, w_extra if isinstance(w_extra, dict) else _ANY,
                       f"{path}/additionalProperties")
        self._bound(r, w, "maxProperties", path, upper=True, kind="MAX_PROPERTIES")
        self._bound(r, w, "minProperties", path, upper=False, kind="MIN_PROPERTIES")
        self._dependencies(r, w, path)

    def _property(self, name: str, r: dict[str, Any], w: dict[str, Any], where: str) -> None:
        """The reader's schemas for property ``name`` against the writer's: its
        ``properties`` entry, the ``patternProperties`` matching it, else the
        ``additionalProperties`` (Confluent's content models: open, closed, partially
        open)."""
        rp, wp = _keyword(r, "properties"), _keyword(w, "properties")
        r_extra = r.get("additionalProperties", True)
        w_extra = w.get("additionalProperties", True)
        r_match = _matching(_keyword(r, "patternProperties"), name)
        w_match = _matching(_keyword(w, "patternProperties"), name)
        if name in wp:
            written = [wp[name], *w_match]
        elif w_match:
            written = w_match
        elif w_extra is False:
            return  # the writer never wrote it
        else:
            written = [w_extra if isinstance(w_extra, dict) else _ANY]
        open_writer = name not in wp and not w_match and not isinstance(w_extra, dict)

        def reads(schema: Any) -> bool:
            return _accepts_all(schema) or any(self.compatible(schema, ws, where)
                                               for ws in written)

        if name in rp:
            if name in wp:
                self.check(rp[name], wp[name], where)
            elif open_writer:
                if not _accepts_all(rp[name]):
                    self.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                             f"the reader's property '{name}' constrains what the writer's "
                             "open content model may have written under that name")
            elif not reads(rp[name]):
                self.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"the reader's property '{name}' does not read what the writer's "
                         "patternProperties or additionalProperties allowed")
            if not all(reads(schema) for schema in r_match):
                self.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"a reader patternProperties schema matching '{name}' does not read "
                         "the writer's property")
            return
        if r_match:
            if not all(reads(schema) for schema in r_match):
                self.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"the writer's property '{name}' is not read by the reader's "
                         "patternProperties")
        elif r_extra is False:
            if wp.get(name) is not False:  # a property the writer forbade may go
                self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                         f"the writer's property '{name}' is not allowed by the reader")
        elif isinstance(r_extra, dict) and not reads(r_extra):
            self.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                     f"the writer's property '{name}' is not read by the reader's "
                     "additionalProperties")

    def _patterns(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        """``patternProperties`` by their pattern: the same one's schemas compared, a
        writer pattern the reader dropped read by its ``additionalProperties``, a reader
        pattern the writer lacked reading the writer's ``additionalProperties``."""
        rpp, wpp = _keyword(r, "patternProperties"), _keyword(w, "patternProperties")
        r_extra = r.get("additionalProperties", True)
        w_extra = w.get("additionalProperties", True)
        for pattern, ws in wpp.items():
            where = f"{path}/patternProperties/{pattern}"
            if pattern in rpp:
                self.check(rpp[pattern], ws, where)
            elif ws is False:
                continue
            elif r_extra is False:
                self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                         f"properties matching '{pattern}' are not allowed by the reader")
            elif isinstance(r_extra, dict) and not self.compatible(r_extra, ws, where):
                self.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"properties matching '{pattern}' are not read by the reader's "
                         "additionalProperties")
        for pattern, rs in rpp.items():
            if pattern in wpp or w_extra is False or _accepts_all(rs):
                continue
            where = f"{path}/patternProperties/{pattern}"
            if not isinstance(w_extra, dict):
                self.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                         f"the reader's properties matching '{pattern}' constrain what the "
                         "writer's open content model may have written")
            elif not self.compatible(rs, w_extra, where):
                self.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"the reader's properties matching '{pattern}' do not read the "
                         "writer's additionalProperties")

    def _dependencies(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        r_arrays, r_schemas = _dependency_maps(r)
        if not r_arrays and not r_schemas:
            return
        w_arrays, w_schemas = _dependency_maps(w)
        always = _required(w)
        for name, needs in r_arrays.items():
            had = w_arrays.get(name)
            missing = needs - (had or set()) - always
            if not missing:
                continue
            kind = ("DEPENDENCY_ARRAY_ADDED" if had is None else
                    "DEPENDENCY_ARRAY_EXTENDED" if needs >= had else "DEPENDENCY_ARRAY_CHANGED")
            self.add(kind, f"{path}/dependencies/{name}",
                     f"with '{name}' the reader requires {sorted(missing)}, the writer did not")
        for name, rs in r_schemas.items():
            where = f"{path}/dependencies/{name}"
            ws = w_schemas.get(name)
            if _accepts_all(rs) or (ws is not None and self.compatible(rs, ws, where)):
                continue
            if self.compatible(rs, w, where):
                continue  # the writer's schema itself gives what the reader's adds
            if ws is None:
                self.add("DEPENDENCY_SCHEMA_ADDED", where,
                         f"with '{name}' the reader applies a schema the writer did not")
            else:
                self.check(rs, ws, where)

    def _conditional(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        """The reader's ``if`` / ``then`` / ``else``: each branch reads the writer's
        documents (those of the writer's same branch when its ``if`` is the same)."""
        if "if" not in r:
            return
        same = "if" in w and w["if"] == r["if"]
        base = {k: v for k, v in w.items() if k not in ("if", "then", "else")}
        for word in ("then", "else"):
            rb = r.get(word, True)
            if _accepts_all(rb):
                continue
            where = f"{path}/{word}"
            wb = w.get(word, True) if same else None
            if wb is not None and self.compatible(rb, wb, where):
                continue
            if self.compatible(rb, base, where):
                continue  # every writer document, in that branch or not, is read
            if wb is not None and not _accepts_all(wb):
                self.check(rb, wb, where)
            else:
                self.add("PRODUCT_TYPE_EXTENDED", where,
                         f"the reader's '{word}' constrains documents the writer did not")

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
