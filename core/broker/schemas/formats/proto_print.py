"""A ``FileDescriptorProto`` printed as ``.proto`` text.

Used for the canonical form of PROTOBUF schemas (the descriptor after the pool resolved
its type names: one text for every spelling of one schema) and to keep a schema that a
client sent as a serialized descriptor (Confluent's clients send base64) as text. The
output parses back (``proto_text``) to the same descriptor. Options are printed when
they are plain fields of the options messages; custom options are not (a descriptor
carries them as unknown fields of its options).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

from core.broker.schemas.formats.proto_text import camel, is_repeated, map_entry_name

F = descriptor_pb2.FieldDescriptorProto
SCALAR_NAMES = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}
MAX_FIELD_NUMBER = 536_870_911
MAX_ENUM_NUMBER = 2_147_483_647
_EDITION_NAMES = {getattr(descriptor_pb2, f"EDITION_{n}"): n for n in ("2023", "2024")
                  if hasattr(descriptor_pb2, f"EDITION_{n}")}


def quote(text: str) -> str:
    """A protobuf string literal of ``text``."""
    out = []
    for c in text:
        if c in "\\\"":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def print_file(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    return _Printer(fdp).text()


def _option_value(fd: Any, value: Any) -> str:
    if fd.enum_type is not None:
        v = fd.enum_type.values_by_number.get(value)
        return v.name if v is not None else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bytes):
        return quote(value.decode("utf-8", "replace"))
    return repr(value) if isinstance(value, float) else str(value)


def _plain_options(options: Any, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(name, printed value) of the options message's plain fields that are set."""
    out = []
    for fd, value in options.ListFields():
        if fd.is_extension or fd.message_type is not None or is_repeated(fd) \
                or fd.name in skip:
            continue
        out.append((fd.name, _option_value(fd, value)))
    return out



class _Printer:
    def __init__(self, fdp: descriptor_pb2.FileDescriptorProto) -> None:
        self.fdp = fdp
        self.lines: list[str] = []
        self.syntax = fdp.syntax or "proto2"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def text(self) -> str:
        fdp = self.fdp
        if self.syntax == "editions":
            self.emit(0, f'edition = "{_EDITION_NAMES.get(fdp.edition, "2023")}";')
        else:
            self.emit(0, f'syntax = "{self.syntax}";')
        if fdp.package:
            self.emit(0, f"package {fdp.package};")
        public, weak = set(fdp.public_dependency), set(fdp.weak_dependency)
        for i, dep in enumerate(fdp.dependency):
            kind = "public " if i in public else "weak " if i in weak else ""
            self.emit(0, f"import {kind}{quote(dep)};")
        for name, value in _plain_options(fdp.options):
            self.emit(0, f"option {name} = {value};")
        for msg in fdp.message_type:
            self.message(msg, 0)
        for enum in fdp.enum_type:
            self.enum(enum, 0)
        for service in fdp.service:
            self.service(service)
        self.extensions(fdp.extension, 0)
        return "\n".join(self.lines) + "\n"

    # --- messages ---

    def message(self, msg: descriptor_pb2.DescriptorProto, depth: int) -> None:
        self.emit(depth, f"message {msg.name} {{")
        self.body(msg, depth + 1)
        self.emit(depth, "}")

    def body(self, msg: descriptor_pb2.DescriptorProto, depth: int) -> None:
        for name, value in _plain_options(msg.options, skip=("map_entry",)):
            self.emit(depth, f"option {name} = {value};")
        nested = {n.name: n for n in msg.nested_type}
        hidden: set[str] = set()  # map entries and group bodies, printed with their field
        printed_oneofs: set[int] = set()
        for field in msg.field:
            real_oneof = field.HasField("oneof_index") and not field.proto3_optional
            if real_oneof:
                index = field.oneof_index
                if index in printed_oneofs:
                    continue
                printed_oneofs.add(index)
                self.emit(depth, f"oneof {msg.oneof_decl[index].name} {{")
                for name, value in _plain_options(msg.oneof_decl[index].options):
                    self.emit(depth + 1, f"option {name} = {value};")
                for member in msg.field:
                    if member.HasField("oneof_index") and member.oneof_index == index and \
                            not member.proto3_optional:
                        self.field(member, msg, nested, hidden, depth + 1, in_oneof=True)
                self.emit(depth, "}")
            else:
                self.field(field, msg, nested, hidden, depth, in_oneof=False)
        for sub in msg.nested_type:
            if sub.name not in hidden:
                self.message(sub, depth)
        for enum in msg.enum_type:
            self.enum(enum, depth)
        for r in msg.extension_range:
            end = "max" if r.end - 1 >= MAX_FIELD_NUMBER else str(r.end - 1)
            self.emit(depth, f"extensions {r.start}" + ("" if r.end - 1 == r.start
                                                         else f" to {end}") + ";")
        self.extensions(msg.extension, depth)
        self.reserved(msg.reserved_range, msg.reserved_name, depth, exclusive=True,
                      maximum=MAX_FIELD_NUMBER)

    def reserved(self, ranges: Any, names: Any, depth: int, *, exclusive: bool,
                 maximum: int) -> None:
        if len(ranges):
            parts = []
            for r in ranges:
                end = r.end - 1 if exclusive else r.end
                parts.append(str(r.start) if end == r.start else
                             f"{r.start} to {'max' if end >= maximum else end}")
            self.emit(depth, f"reserved {', '.join(parts)};")
        if len(names):
            self.emit(depth, f"reserved {', '.join(quote(n) for n in names)};")

    def type_of(self, field: descriptor_pb2.FieldDescriptorProto) -> str:
        if field.type in SCALAR_NAMES:
            return SCALAR_NAMES[field.type]
        return field.type_name

    def label(self, field: descriptor_pb2.FieldDescriptorProto, *, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == F.LABEL_REPEATED:
            return "repeated "
        if self.syntax == "proto2":
            return "required " if field.label == F.LABEL_REQUIRED else "optional "
        return "optional " if field.proto3_optional else ""

    def field(self, field: descriptor_pb2.FieldDescriptorProto,
              msg: descriptor_pb2.DescriptorProto, nested: dict[str, Any], hidden: set[str],
              depth: int, *, in_oneof: bool) -> None:
        short = field.type_name.rpartition(".")[2]
        entry = nested.get(short) if field.type_name else None
        options = self.field_options(field)
        suffix = f" [{', '.join(options)}]" if options else ""
        if entry is not None and entry.options.map_entry and \
                field.label == F.LABEL_REPEATED and short == map_entry_name(field.name):
            hidden.add(short)
            key, value = (next(f for f in entry.field if f.number == n) for n in (1, 2))
            self.emit(depth, f"map<{self.type_of(key)}, {self.type_of(value)}> {field.name} = "
                             f"{field.number}{suffix};")
            return
        if field.type == F.TYPE_GROUP and entry is not None:
            hidden.add(short)
            self.emit(depth, f"{self.label(field, in_oneof=in_oneof)}group {entry.name} = "
                             f"{field.number}{suffix} {{")
            self.body(entry, depth + 1)
            self.emit(depth, "}")
            return
        self.emit(depth, f"{self.label(field, in_oneof=in_oneof)}{self.type_of(field)} "
                         f"{field.name} = {field.number}{suffix};")

    def field_options(self, field: descriptor_pb2.FieldDescriptorProto) -> list[str]:
        out = []
        if field.HasField("default_value"):
            out.append(f"default = {self.default(field)}")
        if field.HasField("json_name") and field.json_name != camel(field.name):
            out.append(f"json_name = {quote(field.json_name)}")
        out += [f"{name} = {value}" for name, value in _plain_options(field.options)]
        return out

    @staticmethod
    def default(field: descriptor_pb2.FieldDescriptorProto) -> str:
        value = field.default_value
        if field.type == F.TYPE_STRING:
            return quote(value)
        if field.type == F.TYPE_BYTES:
            return '"' + value + '"'  # already C-escaped
        return value

    # --- enums, services, extensions ---

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto, depth: int) -> None:
        self.emit(depth, f"enum {enum.name} {{")
        for name, value in _plain_options(enum.options):
            self.emit(depth + 1, f"option {name} = {value};")
        for v in enum.value:
            options = [f"{n} = {val}" for n, val in _plain_options(v.options)]
            suffix = f" [{', '.join(options)}]" if options else ""
            self.emit(depth + 1, f"{v.name} = {v.number}{suffix};")
        self.reserved(enum.reserved_range, enum.reserved_name, depth + 1, exclusive=False,
                      maximum=MAX_ENUM_NUMBER)
        self.emit(depth, "}")

    def service(self, service: descriptor_pb2.ServiceDescriptorProto) -> None:
        self.emit(0, f"service {service.name} {{")
        for name, value in _plain_options(service.options):
            self.emit(1, f"option {name} = {value};")
        for m in service.method:
            head = (f"rpc {m.name}({'stream ' if m.client_streaming else ''}{m.input_type}) "
                    f"returns ({'stream ' if m.server_streaming else ''}{m.output_type})")
            options = _plain_options(m.options)
            if options:
                self.emit(1, head + " {")
                for name, value in options:
                    self.emit(2, f"option {name} = {value};")
                self.emit(1, "}")
            else:
                self.emit(1, head + ";")
        self.emit(0, "}")

    def extensions(self, fields: Any, depth: int) -> None:
        by_extendee: dict[str, list[Any]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, members in by_extendee.items():
            self.emit(depth, f"extend {extendee} {{")
            for field in members:
                options = self.field_options(field)
                suffix = f" [{', '.join(options)}]" if options else ""
                self.emit(depth + 1, f"{self.label(field, in_oneof=False)}{self.type_of(field)} "
                                     f"{field.name} = {field.number}{suffix};")
            self.emit(depth, "}")
