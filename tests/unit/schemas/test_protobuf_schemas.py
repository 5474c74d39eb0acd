"""PROTOBUF schemas (core.broker.schemas.formats.protobuf, proto_text, proto_print):
``.proto`` text and base64 descriptors, validation by protobuf's DescriptorPool, the
canonical text (a round trip through the printer), imports resolved by references or
protobuf's own files, and the compatibility rules both ways."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2, struct_pb2, timestamp_pb2

from core.broker.schemas.errors import InvalidSchemaError
from core.broker.schemas.formats import ParsedSchema, check, parse, render
from core.broker.schemas.model import Reference


def proto(text: str, refs: dict[str, ParsedSchema] | None = None,
          names: tuple[Reference, ...] = (), **kw: bool) -> ParsedSchema:
    return parse("PROTOBUF", text, refs or {}, names, **kw)


def p3(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def directions(old: str, new: str) -> tuple[bool, bool]:
    o, n = proto(old), proto(new)
    return not check(n, o), not check(o, n)


ORDER = p3("message Order { string id = 1; int32 qty = 2; }")
CASES: list[tuple[str, str, str, tuple[bool, bool]]] = [
    ("identical", ORDER, ORDER, (True, True)),
    ("field added", ORDER, p3("message Order { string id = 1; int32 qty = 2; bool x = 3; }"),
     (True, True)),
    ("field removed", ORDER, p3("message Order { string id = 1; }"), (True, True)),
    ("field renamed", ORDER, p3("message Order { string id = 1; int32 quantity = 2; }"),
     (True, True)),
    ("int32 to int64 (wire-compatible)", ORDER,
     p3("message Order { string id = 1; int64 qty = 2; }"), (True, True)),
    ("string to bytes", ORDER, p3("message Order { bytes id = 1; int32 qty = 2; }"),
     (True, True)),
    ("int32 to sint32", ORDER, p3("message Order { string id = 1; sint32 qty = 2; }"),
     (False, False)),
    ("fixed32 to sfixed32", p3("message M { fixed32 a = 1; }"),
     p3("message M { sfixed32 a = 1; }"), (True, True)),
    ("int32 to string", ORDER, p3("message Order { string id = 1; string qty = 2; }"),
     (False, False)),
    ("scalar to message", ORDER,
     p3("message Order { string id = 1; Q qty = 2; } message Q { int32 n = 1; }"),
     (False, False)),
    ("message type changed",
     p3("message A { B b = 1; } message B { int32 x = 1; } message C { int32 x = 1; }"),
     p3("message A { C b = 1; } message B { int32 x = 1; } message C { int32 x = 1; }"),
     (False, False)),
    ("singular to repeated", ORDER,
     p3("message Order { string id = 1; repeated int32 qty = 2; }"), (False, False)),
    ("package changed", ORDER, p3("message Order { string id = 1; int32 qty = 2; }", "shop2"),
     (False, False)),
    ("message removed", p3("message A { int32 a = 1; } message B { int32 b = 1; }"),
     p3("message A { int32 a = 1; }"), (False, True)),
    ("message added", p3("message A { int32 a = 1; }"),
     p3("message A { int32 a = 1; } message B { int32 b = 1; }"), (True, False)),
    ("message renamed", p3("message A { int32 a = 1; }"), p3("message Z { int32 a = 1; }"),
     (False, False)),
    ("required field added (proto2)",
     'syntax = "proto2"; message M { optional int32 a = 1; }',
     'syntax = "proto2"; message M { optional int32 a = 1; required int32 b = 2; }',
     (False, True)),
    ("required field removed (proto2)",
     'syntax = "proto2"; message M { optional int32 a = 1; required int32 b = 2; }',
     'syntax = "proto2"; message M { optional int32 a = 1; }', (True, False)),
    ("one field moved into a new oneof", p3("message M { int32 a = 1; int32 b = 2; }"),
     p3("message M { oneof o { int32 a = 1; } int32 b = 2; }"), (True, True)),
    ("two fields moved into a new oneof", p3("message M { int32 a = 1; int32 b = 2; }"),
     p3("message M { oneof o { int32 a = 1; int32 b = 2; } }"), (False, True)),
    ("a field moved into an existing oneof",
     p3("message M { int32 a = 1; oneof o { int32 b = 2; } }"),
     p3("message M { oneof o { int32 a = 1; int32 b = 2; } }"), (False, True)),
    ("a oneof member removed", p3("message M { oneof o { int32 a = 1; int32 b = 2; } }"),
     p3("message M { oneof o { int32 a = 1; } }"), (False, True)),
    ("map value type changed", p3("message M { map<string, int32> m = 1; }"),
     p3("message M { map<string, string> m = 1; }"), (False, False)),
    ("map value type widened", p3("message M { map<string, int32> m = 1; }"),
     p3("message M { map<string, int64> m = 1; }"), (True, True)),
    ("nested message's field changed",
     p3("message M { message In { int32 x = 1; } In i = 1; }"),
     p3("message M { message In { string x = 1; } In i = 1; }"), (False, False)),
    ("enum value added", p3("enum E { A = 0; } message M { E e = 1; }"),
     p3("enum E { A = 0; B = 1; } message M { E e = 1; }"), (True, True)),
    ("enum to message", p3("enum E { A = 0; } message F { int32 a = 1; } message M { E e = 1; }"),
     p3("enum E { A = 0; } message F { int32 a = 1; } message M { F e = 1; }"),
     (False, False)),
    ("comments, spacing and relative or full type names only",
     p3("message A { B b = 1; } message B { int32 x = 1; }"),
     p3("// one\nmessage A {\n  .shop.B b = 1; // two\n}\nmessage B { int32 x = 1; }"),
     (True, True)),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_compatibility(old: str, new: str, expected: tuple[bool, bool]) -> None:
    assert directions(old, new) == expected


def test_incompatibilities_name_the_rule() -> None:
    kinds = [i.kind for i in check(proto(p3("message Order { string id = 1; string qty = 2; }")),
                                   proto(ORDER))]
    assert kinds == ["FIELD_SCALAR_KIND_CHANGED"]
    kinds = [i.kind for i in check(proto(p3("message M { int32 a = 1; }", "x")),
                                   proto(p3("message N { int32 a = 1; }", "y")))]
    assert kinds == ["PACKAGE_CHANGED", "MESSAGE_REMOVED"]


FULL = '''
syntax = "proto3";
package a.b;
import "google/protobuf/timestamp.proto";
option java_package = "x.y";
// a comment
message Foo {
  reserved 5, 7 to 9;
  reserved "old";
  int32 id = 1 [deprecated = true, json_name = "ID"];
  optional string name = 2;
  repeated Bar bars = 3;
  map<string, int64> counts_by_x = 4;
  google.protobuf.Timestamp ts = 6;
  oneof choice { string s = 10; Bar b = 11; }
  message Bar { E e = 1; }
  enum E { option allow_alias = true; E0 = 0; E1 = 1 [deprecated = true]; E2 = 1; }
}
service S { rpc Get(Foo) returns (stream Foo.Bar) { option deprecated = true; } }
'''


def test_text_is_kept_and_the_canonical_form_round_trips() -> None:
    parsed = proto(FULL)
    assert parsed.text == FULL  # as given
    canonical = parsed.canonical
    assert "a comment" not in canonical and ".a.b.Foo.Bar" in canonical
    assert "map<string, int64> counts_by_x = 4;" in canonical
    assert 'json_name = "ID"' in canonical and "optional string name = 2;" in canonical
    again = proto(canonical)
    assert again.canonical == canonical
    assert proto(FULL, normalize=True).text == canonical


def test_base64_descriptors_as_confluent_clients_send_them() -> None:
    parsed = proto(FULL)
    serialized = render(parsed, "serialized")
    from_descriptor = proto(serialized)
    assert from_descriptor.canonical == parsed.canonical
    assert from_descriptor.text == parsed.canonical  # kept as text
    for module in (struct_pb2, timestamp_pb2, descriptor_pb2):  # proto2, extensions, defaults
        text = base64.b64encode(module.DESCRIPTOR.serialized_pb).decode()
        first = proto(text)
        assert proto(first.text).canonical == first.canonical, module.__name__


def test_proto2_details_round_trip() -> None:
    text = '''syntax = "proto2";
package p;
message A {
  optional int32 n = 1 [default = -5];
  optional string s = 2 [default = "a\\"b\\n"];
  optional bytes by = 3 [default = "\\001\\377"];
  optional double d = 4 [default = inf];
  optional E e = 5 [default = B];
  required group G = 6 { optional int32 y = 1; }
  extensions 100 to max;
  enum E { A0 = 0; B = 1; reserved 7 to 9; reserved "Z"; }
}
extend A { optional int32 ext = 100; }
'''
    parsed = proto(text)
    assert proto(parsed.canonical).canonical == parsed.canonical
    assert 'default = "a\\"b\\n"' in parsed.canonical
    assert "extend .p.A {" in parsed.canonical


def test_imports_resolve_through_references_and_builtin_files() -> None:
    money = proto(p3("message Money { int64 cents = 1; }", "common"))
    refs = (Reference("common/money.proto", "common-money", 1),)
    order = proto(p3('import "common/money.proto";\nimport "google/protobuf/timestamp.proto";\n'
                     "message Order { common.Money total = 1; "
                     "google.protobuf.Timestamp at = 2; }"),
                  {"common/money.proto": money}, refs)
    assert ".common.Money total = 1;" in order.canonical
    assert set(order.model.deps) == {"common/money.proto", "google/protobuf/timestamp.proto"}
    with pytest.raises(InvalidSchemaError, match="common/money.proto"):
        proto(p3('import "common/money.proto";\nmessage Order { common.Money total = 1; }'))


BAD = [
    ("a syntax error", "message {"),
    ("not protobuf at all", "hello world"),
    ("an unknown type", p3("message A { Nope x = 1; }")),
    ("a field name used twice", p3("message A { int32 x = 1; string x = 2; }")),
    ("a field number used twice", p3("message A { int32 x = 1; string y = 1; }")),
    ("field number 0", p3("message A { int32 x = 0; }")),
    ("required in proto3", p3("message A { required int32 x = 1; }")),
    ("a proto3 enum not starting at 0", p3("enum E { A = 1; }")),
    ("an unknown syntax", 'syntax = "proto4"; message A {}'),
    ("an unknown option value", p3("option optimize_for = FASTEST; message A {}")),
    ("an unresolved import", p3('import "x.proto"; message A {}')),
    ("a base64 text that is no descriptor", "aGVsbG8gd29ybGQ="),
]


@pytest.mark.parametrize("text", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid_schemas_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        proto(text)
