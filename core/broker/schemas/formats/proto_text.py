"""A ``.proto`` file's text as a ``FileDescriptorProto``, the form protoc hands on.

``protobuf`` reads descriptors but not ``.proto`` source (that is protoc's job): the text
is parsed by ``proto-schema-parser`` (pure Python, an ANTLR grammar of the protobuf
language), and its syntax tree is turned here into the descriptor protoc would make,
type names as written (``DescriptorPool`` resolves them, as protoc does). Custom options
(``(my.option) = ...``) and aggregate option values are not carried into the
descriptor: the registry keeps the text as given, so they are not lost, but they take
no part in validation, identity or compatibility.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from proto_schema_parser import Parser
from proto_schema_parser import ast as p

from core.broker.schemas.errors import InvalidSchemaError

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64, "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}
MAX_FIELD_NUMBER = 536_870_911
MAX_ENUM_NUMBER = 2_147_483_647
_EDITIONS = {name: getattr(descriptor_pb2, f"EDITION_{name}") for name in ("2023", "2024")
             if hasattr(descriptor_pb2, f"EDITION_{name}")}



def is_repeated(fd: Any) -> bool:
    """Whether a field descriptor is repeated (``is_repeated`` since protobuf 6, ``label``
    before)."""
    flag = getattr(fd, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(fd.label == fd.LABEL_REPEATED)


class _Raise(ErrorListener):  # type: ignore[misc]
    def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str,
                    e: Any) -> None:
        raise InvalidSchemaError(f"Invalid PROTOBUF schema: line {line}:{column}: {msg[:300]}")


def _quiet(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


_PARSER = Parser(setup_lexer=_quiet, setup_parser=_quiet)
#: ANTLR's Python runtime shares its prediction caches between parsers, unguarded: one
#: parse at a time (schemas are parsed off the event loop, on worker threads)
_PARSE_LOCK = threading.Lock()


def file_descriptor(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    """``text`` (a ``.proto`` file) as a descriptor called ``name``; InvalidSchemaError
    for a syntax error."""
    try:
        with _PARSE_LOCK:
            tree = _PARSER.parse(text)
    except InvalidSchemaError:
        raise
    except RecursionError:
        raise InvalidSchemaError("Invalid PROTOBUF schema: nested too deeply") from None
    except Exception as exc:  # the parser's own failures on odd input
        raise InvalidSchemaError(f"Invalid PROTOBUF schema: {str(exc)[:300]}") from None
    fdp = descriptor_pb2.FileDescriptorProto(name=name)
    _Builder(fdp).file(tree)
    return fdp


def camel(name: str) -> str:
    """protoc's json_name of a field name (``foo_bar`` -> ``fooBar``)."""
    out, upper = [], False
    for c in name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper())
            upper = False
        else:
            out.append(c)
    return "".join(out)


def map_entry_name(field_name: str) -> str:
    """protoc's name of a map field's entry type (``counts_by_id`` -> ``CountsByIdEntry``)."""
    out, upper = [], True
    for c in field_name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper())
            upper = False
        else:
            out.append(c)
    return "".join(out) + "Entry"


def c_unescape(text: str) -> bytes:
    """A protobuf string literal's body (escapes as written) as its bytes."""
    out = bytearray()
    i, n = 0, len(text)
    simple = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, "\\": 92, "'": 39,
              '"': 34, "?": 63}
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out += c.encode()
            i += 1
            continue
        e = text[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e in "xX":
            j = i + 2
            while j < n and j < i + 4 and text[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(text[i + 2:j] or "0", 16) & 0xFF)
            i = j
        elif e in "01234567":
            j = i + 1
            while j < n and j < i + 4 and text[j] in "01234567":
                j += 1
            out.append(int(text[i + 1:j], 8) & 0xFF)
            i = j
        elif e in "uU":
            width = 4 if e == "u" else 8
            digits = text[i + 2:i + 2 + width]
            try:
                out += chr(int(digits, 16)).encode()
            except (ValueError, OverflowError):
                raise InvalidSchemaError(f"Invalid PROTOBUF schema: bad escape \\{e}{digits}") \
                    from None
            i += 2 + width
        else:
            out += e.encode()
            i += 2
    return bytes(out)


def c_escape(data: bytes) -> str:
    """protoc's C escaping of bytes (the ``default_value`` of a bytes field)."""
    special = {10: "\\n", 13: "\\r", 9: "\\t", 34: '\\"', 39: "\\'", 92: "\\\\"}
    return "".join(special.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}")
                   for b in data)


def _ranges(items: list[str], *, maximum: int) -> list[tuple[int, int]]:
    """``["5", "7 to 9", "10 to max"]`` as inclusive (start, end) pairs."""
    out = []
    for item in items:
        start, _, end = (part.strip() for part in str(item).partition(" to "))
        try:
            lo = int(start, 0)
            hi = maximum if end == "max" else int(end, 0) if end else lo
        except ValueError:
            raise InvalidSchemaError(f"Invalid PROTOBUF schema: bad range {item!r}") from None
        out.append((lo, hi))
    return out


def _scalar(value: Any) -> Any:
    return value.name if isinstance(value, p.Identifier) else value


class _Builder:
    def __init__(self, fdp: descriptor_pb2.FileDescriptorProto) -> None:
        self.fdp = fdp
        self.proto3 = False

    def file(self, tree: p.File) -> None:
        fdp = self.fdp
        if tree.edition is not None:
            edition = str(tree.edition).strip("\"'")
            if edition not in _EDITIONS:
                raise InvalidSchemaError(f"Invalid PROTOBUF schema: unknown edition {edition!r}")
            fdp.syntax = "editions"
            fdp.edition = _EDITIONS[edition]
        else:
            syntax = str(tree.syntax or "proto2").strip("\"'")
            if syntax not in ("proto2", "proto3"):
                raise InvalidSchemaError(f"Invalid PROTOBUF schema: unknown syntax {syntax!r}")
            fdp.syntax = syntax
            self.proto3 = syntax == "proto3"
        for element in tree.file_elements:
            if isinstance(element, p.Package):
                fdp.package = element.name
            elif isinstance(element, p.Import):
                if element.public:
                    fdp.public_dependency.append(len(fdp.dependency))
                if element.weak:
                    fdp.weak_dependency.append(len(fdp.dependency))
                fdp.dependency.append(element.name)
            elif isinstance(element, p.Option):
                self.option(fdp.options, element)
            elif isinstance(element, p.Message):
                self.message(fdp.message_type.add(), element)
            elif isinstance(element, p.Enum):
                self.enum(fdp.enum_type.add(), element)
            elif isinstance(element, p.Service):
                self.service(fdp.service.add(), element)
            elif isinstance(element, p.Extension):
                self.extend(fdp.extension, element)

    def option(self, options: Any, option: p.Option) -> None:
        """A plain option (a field of the descriptor's options message) with a scalar
        value; custom and aggregate options are left to the text."""
        name, value = option.name, _scalar(option.value)
        fd = options.DESCRIPTOR.fields_by_name.get(name)
        if fd is None or fd.message_type is not None or \
                is_repeated(fd) or isinstance(value, p.MessageLiteral):
            return
        try:
            if fd.enum_type is not None:
                enum_value = fd.enum_type.values_by_name.get(str(value))
                if enum_value is None:
                    raise InvalidSchemaError(
                        f"Invalid PROTOBUF schema: option {name} = {value}: no such value")
                setattr(options, name, enum_value.number)
            else:
                if fd.type == fd.TYPE_STRING and isinstance(value, str):
                    value = c_unescape(value).decode("utf-8", "replace")
                setattr(options, name, value)
        except (TypeError, ValueError) as exc:
            raise InvalidSchemaError(
                f"Invalid PROTOBUF schema: option {name} = {value!r}: {exc}") from None

    def message(self, msg: descriptor_pb2.DescriptorProto, node: p.Message) -> None:
        msg.name = node.name
        synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
        for element in node.elements:
            if isinstance(element, p.Field):
                field = self.field(msg.field.add(), element, in_oneof=False)
                if field.proto3_optional:
                    synthetic.append(field)
            elif isinstance(element, p.MapField):
                self.map_field(msg, element)
            elif isinstance(element, p.Group):
                self.group(msg, element, oneof=None)
            elif isinstance(element, p.OneOf):
                index = len(msg.oneof_decl)
                decl = msg.oneof_decl.add(name=element.name)
                for member in element.elements:
                    if isinstance(member, p.Field):
                        f = self.field(msg.field.add(), member, in_oneof=True)
                        f.oneof_index = index
                    elif isinstance(member, p.Group):
                        self.group(msg, member, oneof=index)
                    elif isinstance(member, p.Option):
                        self.option(decl.options, member)
            elif isinstance(element, p.Message):
                self.message(msg.nested_type.add(), element)
            elif isinstance(element, p.Enum):
                self.enum(msg.enum_type.add(), element)
            elif isinstance(element, p.Option):
                self.option(msg.options, element)
            elif isinstance(element, p.Reserved):
                for lo, hi in _ranges(element.ranges, maximum=MAX_FIELD_NUMBER):
                    msg.reserved_range.add(start=lo, end=hi + 1)
                msg.reserved_name.extend(n.strip("\"'") for n in element.names)
            elif isinstance(element, p.ExtensionRange):
                for lo, hi in _ranges(element.ranges, maximum=MAX_FIELD_NUMBER):
                    msg.extension_range.add(start=lo, end=hi + 1)
            elif isinstance(element, p.Extension):
                self.extend(msg.extension, element)
        # proto3 ``optional``: one synthetic oneof per field, after the real ones (protoc)
        for field in synthetic:
            field.oneof_index = len(msg.oneof_decl)
            name = "_" + field.name
            while any(d.name == name for d in msg.oneof_decl):
                name = "X" + name
            msg.oneof_decl.add(name=name)

    def field(self, field: descriptor_pb2.FieldDescriptorProto, node: p.Field, *,
              in_oneof: bool) -> descriptor_pb2.FieldDescriptorProto:
        field.name = node.name
        field.number = node.number
        card = node.cardinality
        if card == p.FieldCardinality.REPEATED:
            field.label = F.LABEL_REPEATED
        elif card == p.FieldCardinality.REQUIRED:
            field.label = F.LABEL_REQUIRED
        else:
            field.label = F.LABEL_OPTIONAL
            if card == p.FieldCardinality.OPTIONAL and self.proto3 and not in_oneof:
                field.proto3_optional = True
        self.set_type(field, node.type)
        for option in node.options:
            if option.name == "default":
                field.default_value = self.default(field, _scalar(option.value))
            elif option.name == "json_name":
                field.json_name = c_unescape(str(_scalar(option.value))).decode("utf-8",
                                                                                "replace")
            else:
                self.option(field.options, option)
        return field

    @staticmethod
    def set_type(field: descriptor_pb2.FieldDescriptorProto, type_name: str) -> None:
        if type_name in SCALARS:
            field.type = SCALARS[type_name]
        else:
            field.type_name = type_name

    @staticmethod
    def default(field: descriptor_pb2.FieldDescriptorProto, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            if math.isnan(value):
                return "nan"
            if math.isinf(value):
                return "inf" if value > 0 else "-inf"
            return repr(value)
        if isinstance(value, int):
            return str(value)
        text = str(value)
        if field.type == F.TYPE_BYTES:
            return c_escape(c_unescape(text))
        if field.type == F.TYPE_STRING:
            return c_unescape(text).decode("utf-8", "replace")
        return text

    def map_field(self, msg: descriptor_pb2.DescriptorProto, node: p.MapField) -> None:
        entry = msg.nested_type.add(name=map_entry_name(node.name))
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL)
        self.set_type(key, node.key_type)
        value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
        self.set_type(value, node.value_type)
        field = msg.field.add(name=node.name, number=node.number, label=F.LABEL_REPEATED,
                              type_name=entry.name)
        for option in node.options:
            if option.name == "json_name":
                field.json_name = c_unescape(str(_scalar(option.value))).decode("utf-8",
                                                                                "replace")
            else:
                self.option(field.options, option)

    def group(self, msg: descriptor_pb2.DescriptorProto, node: p.Group, *,
              oneof: int | None) -> None:
        nested = p.Message(name=node.name, elements=node.elements)
        self.message(msg.nested_type.add(), nested)
        card = node.cardinality
        label = F.LABEL_REPEATED if card == p.FieldCardinality.REPEATED else (
            F.LABEL_REQUIRED if card == p.FieldCardinality.REQUIRED else F.LABEL_OPTIONAL)
        field = msg.field.add(name=node.name.lower(), number=node.number, label=label,
                              type=F.TYPE_GROUP, type_name=node.name)
        if oneof is not None:
            field.oneof_index = oneof

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto, node: p.Enum) -> None:
        enum.name = node.name
        for element in node.elements:
            if isinstance(element, p.EnumValue):
                value = enum.value.add(name=element.name, number=element.number)
                for option in element.options:
                    self.option(value.options, option)
            elif isinstance(element, p.Option):
                self.option(enum.options, element)
            elif isinstance(element, p.EnumReserved):
                for lo, hi in _ranges(element.ranges, maximum=MAX_ENUM_NUMBER):
                    enum.reserved_range.add(start=lo, end=hi)
                enum.reserved_name.extend(n.strip("\"'") for n in element.names)

    def service(self, service: descriptor_pb2.ServiceDescriptorProto, node: p.Service) -> None:
        service.name = node.name
        for element in node.elements:
            if isinstance(element, p.Method):
                method = service.method.add(
                    name=element.name, input_type=element.input_type.type,
                    output_type=element.output_type.type)
                if element.input_type.stream:
                    method.client_streaming = True
                if element.output_type.stream:
                    method.server_streaming = True
                for option in element.elements:
                    if isinstance(option, p.Option):
                        self.option(method.options, option)
            elif isinstance(element, p.Option):
                self.option(service.options, element)

    def extend(self, extensions: Any, node: p.Extension) -> None:
        for element in node.elements:
            if isinstance(element, p.Field):
                field = self.field(extensions.add(), element, in_oneof=False)
                field.extendee = node.typeName
                field.proto3_optional = False
