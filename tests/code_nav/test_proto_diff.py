"""proto_diff: breaking changes between two versions of one .proto file, without false alarms."""

from __future__ import annotations

from tools.code_nav.proto import parse_proto
from tools.code_nav.proto_diff import compare

BASE = """syntax = "proto3";
package shop.v1;
message M {
  string name = 1;
  int32 age = 2;
  Inner inner = 3;
  Color color = 4;
  message Inner { string x = 1; }
}
enum Color { COLOR_UNKNOWN = 0; COLOR_RED = 1; }
"""


def _changes(old: str, new: str) -> list[tuple[str, str]]:
    return [(c.kind, c.message) for c in compare("x.proto", parse_proto("x.proto", old), parse_proto("x.proto", new))]


def test_a_double_slash_inside_a_string_is_no_comment():
    old = 'syntax = "proto3";\nmessage M {\n  string u = 1 [json_name = "http://x"]; string q = 2;\n  int32 r = 3;\n}\n'
    new = old.replace("string q = 2;", "int32 q = 2;")
    assert set(parse_proto("x.proto", old).messages["M"].fields) == {1, 2, 3}
    assert [k for k, m in _changes(old, new) if "M.q = 2" in m] == ["field_type_changed"]
    # a comment after a string, and a quote inside a comment, are still handled
    text = 'message N { string a = 1 [default = "a//b"]; // it\'s "odd\n int32 b = 2; /* "x */ int32 c = 3; }'
    assert set(parse_proto("x.proto", text).messages["N"].fields) == {1, 2, 3}


def test_a_reserved_name_alone_leaves_the_number_reusable():
    changes = _changes(BASE, BASE.replace("int32 age = 2;", 'reserved "age";'))
    assert [k for k, _ in changes] == ["field_removed"]
    assert "reserved 2;" in changes[0][1] and "only the name is reserved" in changes[0][1]
    assert _changes(BASE, BASE.replace("int32 age = 2;", 'reserved 2; reserved "age";')) == []
    assert _changes(BASE, BASE.replace("int32 age = 2;", "reserved 2 to max;")) == []


def test_a_rename_with_the_same_number_and_type_is_wire_compatible():
    changes = _changes(BASE, BASE.replace("string name = 1;", "string full_name = 1;"))
    assert [k for k, _ in changes] == ["field_renamed"]
    assert "JSON/text format only" in changes[0][1]
    # another name AND another type on the number: a reuse
    assert [k for k, _ in _changes(BASE, BASE.replace("int32 age = 2;", "string email = 2;"))] == ["number_reused"]


def test_types_compared_fully_qualified():
    for spelled in ("M.Inner", "shop.v1.M.Inner", ".shop.v1.M.Inner"):
        assert _changes(BASE, BASE.replace("Inner inner = 3;", f"{spelled} inner = 3;")) == [], spelled
    assert [k for k, _ in _changes(BASE, BASE.replace("Inner inner = 3;", "M inner = 3;"))] == ["field_type_changed"]


def test_enum_to_int32_says_the_wire_encoding_is_the_same():
    changes = _changes(BASE, BASE.replace("Color color = 4;", "int32 color = 4;"))
    assert [k for k, _ in changes] == ["field_type_changed"]
    assert "not a wire break" in changes[0][1]
    back = _changes(BASE.replace("Color color = 4;", "int32 color = 4;"), BASE)
    assert "not a wire break" in back[0][1]
    string = _changes(BASE, BASE.replace("Color color = 4;", "string color = 4;"))
    assert "not a wire break" not in string[0][1]
