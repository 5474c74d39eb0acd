"""PROTOBUF schemas.

A schema is ``.proto`` text (parsed by ``proto_text``) or, as Confluent's clients send
it, a base64 serialized ``FileDescriptorProto``. Either way it is validated by building
it into a fresh ``google.protobuf`` ``DescriptorPool`` with its imports: each import is a
reference of that name (a registered PROTOBUF schema) or one of protobuf's own
well-known files (``google/protobuf/*.proto``). The pool resolves every type name and
refuses what protoc refuses (unknown types, duplicate names or numbers, proto3
``required``, ...). The canonical text is the resolved descriptor printed back
(``proto_print``): comments, spacing and relative or absolute type names do not make
two schemas different. Text is kept as given; a serialized descriptor is kept as its
printed text.

Compatibility, reader against writer (Confluent's names):

- ``PACKAGE_CHANGED``; ``MESSAGE_REMOVED``: a writer message the reader lacks (by full
  name; map entry types are compared with their fields);
- per field number: ``FIELD_KIND_CHANGED`` (scalar, message, enum), ``FIELD_SCALAR_KIND_CHANGED``
  unless both types are wire-compatible (int32, uint32, int64, uint64, bool; sint32,
  sint64; fixed32, sfixed32; fixed64, sfixed64; string, bytes),
  ``FIELD_NAMED_TYPE_CHANGED`` (another message or enum; map key and value types
  compared), ``FIELD_LABEL_CHANGED`` (singular to repeated or back);
- ``REQUIRED_FIELD_ADDED`` (a reader's required field the writer lacks),
  ``ONEOF_FIELD_REMOVED`` (a writer oneof member the reader lacks),
  ``FIELD_MOVED_TO_EXISTING_ONEOF`` and ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``.

Removing or adding other fields, renaming fields, and enum value changes are compatible
(the wire format carries numbers; unknown fields and values are kept).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats.base import Incompatibility, ParsedSchema
from core.broker.schemas.formats.proto_print import SCALAR_NAMES, print_file
from core.broker.schemas.formats.proto_text import file_descriptor
from core.broker.schemas.model import PROTOBUF, Reference

F = descriptor_pb2.FieldDescriptorProto
FileProto: TypeAlias = descriptor_pb2.FileDescriptorProto
ROOT_NAME = "schema.proto"  # the pool's name of a text schema
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+\Z")
_BUILTIN = re.compile(r"google/(protobuf|type)/[a-z_0-9]+\.proto\Z")
_WIRE_GROUPS = (
    frozenset({F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL}),
    frozenset({F.TYPE_SINT32, F.TYPE_SINT64}),
    frozenset({F.TYPE_FIXED32, F.TYPE_SFIXED32}),
    frozenset({F.TYPE_FIXED64, F.TYPE_SFIXED64}),
    frozenset({F.TYPE_STRING, F.TYPE_BYTES}),
)


@dataclass(frozen=True, slots=True)
class ProtoModel:
    """The schema's descriptor with every type name resolved, and the descriptors of the
    files it imports (transitively), by import name."""

    file: FileProto
    deps: dict[str, FileProto]


def builtin_file(name: str) -> FileProto | None:
    """One of protobuf's own files (``google/protobuf/timestamp.proto``...), or of the
    common Google types when that package is installed."""
    if not _BUILTIN.match(name):
        return None
    try:
        importlib.import_module(name[:-len(".proto")].replace("/", ".") + "_pb2")
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
    out = FileProto()
    found.CopyToProto(out)
    return out


def _from_base64(text: str) -> FileProto | None:
    if not _BASE64.match(text):
        return None
    try:
        fdp = FileProto.FromString(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    defines = fdp.message_type or fdp.enum_type or fdp.service or fdp.extension
    return fdp if defines else None


def parse(text: str, references: Mapping[str, ParsedSchema], refs: tuple[Reference, ...],
          *, normalize: bool = False) -> ParsedSchema:
    files: dict[str, FileProto] = {}
    for name, dep in references.items():
        if dep.schema_type != PROTOBUF:
            raise InvalidSchemaError(f"Invalid PROTOBUF schema: the reference {name!r} is a "
                                     f"{dep.schema_type} schema")
        for dep_name, dep_file in dep.model.deps.items():
            files.setdefault(dep_name, dep_file)
        own = FileProto()
        own.CopyFrom(dep.model.file)
        own.name = name
        files[name] = own
    fdp = _from_base64(text.strip())
    from_descriptor = fdp is not None
    if fdp is None:
        fdp = file_descriptor(text, ROOT_NAME)
    if not fdp.name or fdp.name in files:
        fdp.name = ROOT_NAME if ROOT_NAME not in files else f"_{len(files)}_{ROOT_NAME}"
    pool = descriptor_pool.DescriptorPool()
    used: dict[str, FileProto] = {}
    try:
        for dep_name in fdp.dependency:
            _add(pool, dep_name, files, used, [fdp.name])
        built = pool.AddSerializedFile(fdp.SerializeToString())
    except InvalidSchemaError:
        raise
    except Exception as exc:  # the pool's TypeError and friends
        message = str(exc).replace("Couldn't build proto file into descriptor pool: ", "")
        raise InvalidSchemaError(f"Invalid PROTOBUF schema: {message[:500]}") from None
    resolved = FileProto()
    built.CopyToProto(resolved)
    canonical = print_file(resolved)
    stored = canonical if normalize or from_descriptor else text
    return ParsedSchema(PROTOBUF, stored, canonical, canonical, refs, ProtoModel(resolved, used))


def _add(pool: descriptor_pool.DescriptorPool, name: str, files: Mapping[str, FileProto],
         used: dict[str, FileProto], stack: list[str]) -> None:
    if name in used:
        return
    if name in stack or len(stack) > 64:
        raise InvalidSchemaError(f"Invalid PROTOBUF schema: import cycle through {name!r}")
    fdp = files.get(name) or builtin_file(name)
    if fdp is None:
        raise InvalidSchemaError(f"Invalid PROTOBUF schema: the import {name!r} is not "
                                 "resolved: give it as a reference of that name")
    for dep_name in fdp.dependency:
        _add(pool, dep_name, files, used, [*stack, name])
    pool.AddSerializedFile(fdp.SerializeToString())
    used[name] = fdp


def serialized(parsed: ParsedSchema) -> str:
    """The schema as Confluent's ``format=serialized``: its descriptor in base64."""
    return base64.b64encode(parsed.model.file.SerializeToString()).decode()


# --- compatibility ----------------------------------------------------------------------


def _messages(fdp: FileProto) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    prefix = f".{fdp.package}" if fdp.package else ""
    stack = [(prefix, m) for m in fdp.message_type]
    while stack:
        scope, msg = stack.pop()
        full = f"{scope}.{msg.name}"
        yield full, msg
        stack.extend((full, n) for n in msg.nested_type)


def _kind(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type in SCALAR_NAMES:
        return "scalar"
    return "enum" if field.type == F.TYPE_ENUM else "message"


def _real_oneof(msg: descriptor_pb2.DescriptorProto,
                field: descriptor_pb2.FieldDescriptorProto) -> str | None:
    if field.HasField("oneof_index") and not field.proto3_optional:
        return msg.oneof_decl[field.oneof_index].name
    return None


def check(reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
    return _Compare(reader.model.file, writer.model.file).run()


class _Compare:
    def __init__(self, reader: FileProto, writer: FileProto) -> None:
        self.reader, self.writer = reader, writer
        self.rm = dict(_messages(reader))
        self.wm = dict(_messages(writer))
        self.out: list[Incompatibility] = []

    def add(self, kind: str, path: str, description: str) -> None:
        self.out.append(Incompatibility(kind, path, description))

    def run(self) -> list[Incompatibility]:
        if self.reader.package != self.writer.package:
            self.add("PACKAGE_CHANGED", "#/package", f"the reader's package "
                     f"{self.reader.package!r} is not the writer's {self.writer.package!r}")
        for name, wmsg in self.wm.items():
            if wmsg.options.map_entry:
                continue
            rmsg = self.rm.get(name)
            if rmsg is None:
                self.add("MESSAGE_REMOVED", f"#/{name[1:]}",
                         f"the writer's message {name[1:]} is not in the reader's schema")
            else:
                self.message(rmsg, wmsg, name[1:])
        return self.out

    def message(self, rmsg: descriptor_pb2.DescriptorProto,
                wmsg: descriptor_pb2.DescriptorProto, path: str) -> None:
        rf = {f.number: f for f in rmsg.field}
        wf = {f.number: f for f in wmsg.field}
        for number, w in wf.items():
            where = f"#/{path}/{number}"
            r = rf.get(number)
            if r is None:
                if _real_oneof(wmsg, w):
                    self.add("ONEOF_FIELD_REMOVED", where, f"the writer's field {w.name} of "
                             f"oneof {_real_oneof(wmsg, w)} is not in the reader's schema")
                continue
            self.field(r, w, where)
        for number, r in rf.items():
            if number not in wf and r.label == F.LABEL_REQUIRED:
                self.add("REQUIRED_FIELD_ADDED", f"#/{path}/{number}",
                         f"the reader's required field {r.name} is not in the writer's schema")
        self.oneofs(rmsg, wmsg, rf, wf, path)

    def field(self, r: descriptor_pb2.FieldDescriptorProto,
              w: descriptor_pb2.FieldDescriptorProto, where: str) -> None:
        rk, wk = _kind(r), _kind(w)
        if rk != wk:
            self.add("FIELD_KIND_CHANGED", where, f"field {r.name}: the reader's {rk} cannot "
                                                  f"read the writer's {wk}")
            return
        if (r.label == F.LABEL_REPEATED) != (w.label == F.LABEL_REPEATED):
            self.add("FIELD_LABEL_CHANGED", where, f"field {r.name}: repeated on one side only")
            return
        if rk == "scalar":
            if r.type != w.type and not any(r.type in g and w.type in g for g in _WIRE_GROUPS):
                self.add("FIELD_SCALAR_KIND_CHANGED", where,
                         f"field {r.name}: the reader's {SCALAR_NAMES[r.type]} cannot read the "
                         f"writer's {SCALAR_NAMES[w.type]}")
            return
        rentry, wentry = self.rm.get(r.type_name), self.wm.get(w.type_name)
        if rentry is not None and wentry is not None and rentry.options.map_entry and \
                wentry.options.map_entry:  # maps: their key and value types
            for rsub, wsub in zip(sorted(rentry.field, key=lambda f: f.number),
                                  sorted(wentry.field, key=lambda f: f.number), strict=False):
                self.field(rsub, wsub, f"{where}/{rsub.name}")
            return
        if r.type_name == w.type_name:
            return
        self.add("FIELD_NAMED_TYPE_CHANGED", where, f"field {r.name}: the reader's type "
                 f"{r.type_name[1:]} is not the writer's {w.type_name[1:]}")

    def oneofs(self, rmsg: descriptor_pb2.DescriptorProto, wmsg: descriptor_pb2.DescriptorProto,
               rf: dict[int, descriptor_pb2.FieldDescriptorProto],
               wf: dict[int, descriptor_pb2.FieldDescriptorProto], path: str) -> None:
        writer_oneofs = {d.name for d in wmsg.oneof_decl}
        moved: dict[str, list[str]] = {}
        for number, r in rf.items():
            oneof = _real_oneof(rmsg, r)
            w = wf.get(number)
            if oneof is None or w is None or _real_oneof(wmsg, w) == oneof:
                continue
            moved.setdefault(oneof, []).append(r.name)
        for oneof, names in moved.items():
            if oneof in writer_oneofs:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"#/{path}/{oneof}",
                         f"the fields {names} moved into the existing oneof {oneof}")
            elif len(names) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"#/{path}/{oneof}",
                         f"the fields {names} moved into the new oneof {oneof}")
