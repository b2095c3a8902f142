"""The calls, object keys, return values and lookups extraction finds from the names' places in
the text are those the tree-sitter queries they replaced found (kept here as references).

The queries matched every node of the tree and cost as much as the parse on real code; the new
finders search the source for the names and ask tree-sitter for the node there. These tests
compare both on hand-written edge cases (chains, optional calls, type arguments, tagged
templates, names in comments, strings, longer names, ``$name``, ``#name``, quoted and computed
keys), on random token soup and on every fixture file; and the facts of the fixture files with
the references patched in are the facts of the new code.
"""

from __future__ import annotations

import json
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

import tools.mesh_index.literal_facts as literal_facts
import tools.mesh_index.parser as parser_module
from server.config import Conventions
from tests.static.test_index_speed import fixture_files
from tools.mesh_index.parser import call_sites, extract, lookup_objects, return_values
from tools.mesh_index.service import extract_config
from tools.mesh_index.ts_queries import language, parser, word_spans

CFG = extract_config(Conventions())
KEYS = CFG.stream_fields + CFG.group_fields + ("provide",)


def _quote(names: tuple[str, ...]) -> str:
    return " ".join(json.dumps(n) for n in names)


# -- the queries the finders replaced, verbatim ----------------------------------------------------

REF_CALLS = f"""(call_expression
                 function: [(identifier) @fn (member_expression property: (property_identifier) @fn)]
                 (#any-of? @fn {_quote(CFG.call_names)})) @call"""
REF_PAIRS = f"""(pair key: [(property_identifier) (string (string_fragment))] @k
                 (#any-of? @k {_quote(KEYS)})) @pair"""
REF_RETURNS = "(return_statement (_) @r)"
REF_LOOKUPS = """[(subscript_expression object: (identifier) @o)
                  (call_expression function: (member_expression object: (identifier) @o
                     property: (property_identifier) @p) (#any-of? @p "get" "has"))]"""


def _ref(query_src: str, name: str, root, kind: str) -> list:
    from tree_sitter import Query, QueryCursor

    nodes = QueryCursor(Query(language(kind), query_src)).captures(root).get(name, [])
    return sorted(nodes, key=lambda n: (n.start_byte, n.end_byte))  # the query's order of a chain is arbitrary


KIND = {"now": "ts"}  # the kind of the file being extracted (a query is compiled for one language)


def ref_call_sites(root, src: bytes, cfg) -> list:
    return _ref(REF_CALLS, "call", root, KIND["now"])


def ref_key_pairs(root, src: bytes, cfg) -> list:
    return _ref(REF_PAIRS, "pair", root, KIND["now"])


def _extract(path, kind: str) -> str:
    KIND["now"] = kind
    return json.dumps(extract(path.read_bytes(), kind, CFG), sort_keys=True)


def _spans(nodes) -> list[tuple[int, int]]:
    return [(n.start_byte, n.end_byte) for n in nodes]


def _both(src: bytes, kind: str = "ts"):
    root = parser(kind).parse(src).root_node
    new_calls, old_calls = call_sites(root, src, CFG), _ref(REF_CALLS, "call", root, kind)
    new_pairs, old_pairs = literal_facts.key_pairs(root, src, CFG), _ref(REF_PAIRS, "pair", root, kind)
    return _spans(new_calls), _spans(old_calls), _spans(new_pairs), _spans(old_pairs)


# -- edge cases ----------------------------------------------------------------------------------------

CASES = [
    b"a.add(x).add(y).add(z).add(w);",  # a chain: equal starts
    b"add(add(1)); q?.add(1); (b.add)(2); add<T>(4); query`select 1`; x.query<Row>`s`;",
    b"this.#add(3); $add(1); add$(2); _add(3); add_(4); addBulk(5); addBulks(6); xadd(7);",
    b"// add(1)\n/* createJob(x) */ const s = 'add(2)'; const t = `${add(3)} add(4)`;",
    b"createJob<Payload>({ type: X.A }); this.queue.createJob(X.B, { stream: 's' });",
    b"@add() class C { add() { return super.add(1); } [add](x) { this.add(x); } }",
    b"const o = { stream: 'a', 'group': 'b', \"streamName\": 'c', [provide]: 1, provide, streamKey: 2 };",
    b"const o = { stream: { stream: 'inner' } }; type T = { stream: string }; f({ group: g, x: 1 });",
    b"obj.stream = 1; stream: while (true) { break stream; } const { stream } = o; const stream = 2;",
    b"const caf\xc3\xa9add = add(1); \xc3\xa9add(2); add\n  (3); a\n  .add(4); a . add (5);",
    b"new add(1); add; a.add; emit(1)(2); emit?.(3); create(x).emit(y).create(z);",
    b"export default { provide: TOKEN, useFactory: () => new Foo(a, OPTS), inject: [A] };",
]


def test_the_finders_equal_the_queries_on_edge_cases():
    for src in CASES:
        new_calls, old_calls, new_pairs, old_pairs = _both(src)
        assert new_calls == old_calls, src
        assert new_pairs == old_pairs, src
    calls, *_ = _both(CASES[0])
    assert calls == [(0, 8), (0, 15), (0, 22), (0, 29)]  # inner call first
    _, _, pairs, _ = _both(CASES[6])
    assert len(pairs) == 2  # stream and streamKey: a quoted key never equalled a name in the query


def test_the_finders_equal_the_queries_in_tsx():
    src = b"const A = () => <div onClick={() => add(1)}>{items.add(2)}</div>; const o = { stream: 's' };"
    new_calls, old_calls, new_pairs, old_pairs = _both(src, "tsx")
    assert new_calls == old_calls and len(new_calls) == 2
    assert new_pairs == old_pairs and len(new_pairs) == 1


def test_word_spans_finds_whole_words_only():
    src = b"create createJob createJobs xcreate create$ $create create_ createJob"
    assert [src[a:b] for a, b in word_spans(src, ("create", "createJob"))] == [
        b"create", b"createJob", b"createJob"]
    assert word_spans(b"", ("add",)) == [] and word_spans(b"add", ("add",)) == [(0, 3)]


TOKENS = ["add", "add", "create", "createJob", "stream", "group", "provide", "x", "a.", "?.", "(", ")", "{", "}",
          ":", ",", ";", "'", "`", "//", "\n", " ", "<T>", "$", "#", "this.", "=>", "[", "]", "new ", "super."]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_the_finders_equal_the_queries_on_token_soup(tokens):
    src = "".join(tokens).encode()
    new_calls, old_calls, new_pairs, old_pairs = _both(src)
    assert new_calls == old_calls
    assert new_pairs == old_pairs


def test_the_finders_equal_the_queries_on_every_fixture_file():
    found = 0
    for root, rel, kind in fixture_files():
        if kind not in ("ts", "tsx"):
            continue
        new_calls, old_calls, new_pairs, old_pairs = _both((root / rel).read_bytes(), kind)
        assert new_calls == old_calls, rel
        assert new_pairs == old_pairs, rel
        found += len(new_calls) + len(new_pairs)
    assert found > 100


def test_facts_of_every_fixture_file_are_those_of_the_queries(monkeypatch):
    files = fixture_files()
    current = {rel: _extract(root / rel, kind) for root, rel, kind in files}
    monkeypatch.setattr(parser_module, "call_sites", ref_call_sites)
    monkeypatch.setattr(literal_facts, "key_pairs", ref_key_pairs)
    assert sys.modules["tools.mesh_index.parser"].call_sites is ref_call_sites
    before = {rel: _extract(root / rel, kind) for root, rel, kind in files}
    assert current == before and sum('"calls"' in v for v in current.values()) > 20
    assert sum('"bindings"' in v or '"providers"' in v for v in current.values()) > 3


# -- return values and lookups of function bodies ----------------------------------------------------

BODY_CASES = [
    b"function f(a) { if (a) { return a.x; } const g = () => { return 1; }; return /* c */ b; }",
    b"function f() { return; } function g() { // return x\n const s = 'return y'; return `return ${z}`; }",
    b"function f(m, k) { return m.get(k) ?? M[k] ?? m?.get(k) ?? m.get<T>(k) ?? (m.get)(k) ?? a.b.get(k); }",
    b"function f(a) { const t: string[] = [1, 2]; x = a[b[c]] + a?.[d] + this.e[f] + g()[h] + get(k) + has(k); }",
    b"function f(o) { return o.return + o['return'] + returned + xreturn; } function g() { return o.has(1), 2; }",
    b"const f = function* () { yield 1; return m.has(x) ? T[x] : null; };",
]


def _function_bodies(root):
    stack, out = [root], []
    while stack:
        node = stack.pop()
        if node.type == "statement_block":
            out.append(node)
        stack.extend(node.children)
    return out


def _compare_bodies(src: bytes, kind: str = "ts") -> int:
    root = parser(kind).parse(src).root_node
    n = 0
    for body in _function_bodies(root):
        old_r, old_l = _ref(REF_RETURNS, "r", body, kind), _ref(REF_LOOKUPS, "o", body, kind)
        assert _spans(return_values(body, src)) == _spans(old_r), (src[body.start_byte:body.end_byte][:200])
        assert _spans(lookup_objects(body, src)) == _spans(old_l), (src[body.start_byte:body.end_byte][:200])
        n += len(old_r) + len(old_l)
    return n


def test_return_values_and_lookups_equal_the_queries_on_edge_cases():
    for src in BODY_CASES:
        _compare_bodies(src)
    root = parser("ts").parse(BODY_CASES[0]).root_node
    outer = max(_function_bodies(root), key=lambda b: b.end_byte - b.start_byte)  # its returns and the arrow's
    assert [n.text for n in return_values(outer, BODY_CASES[0])] == [b"a.x", b"1", b"/* c */", b"b"]
    root = parser("ts").parse(BODY_CASES[2]).root_node
    body = max(_function_bodies(root), key=lambda b: b.end_byte - b.start_byte)
    assert [n.text for n in lookup_objects(body, BODY_CASES[2])] == [b"m", b"M", b"m", b"m"]


BODY_TOKENS = ["return", "return ", "x", "m.get(", "m.has(", "a[", "]", "(", ")", "{", "}", ";", "'", "//", "\n",
               " ", "=>", ",", "?.", "this.", "get", "[1]", "function f() {"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(BODY_TOKENS), max_size=30))
def test_return_values_and_lookups_equal_the_queries_on_token_soup(tokens):
    _compare_bodies(("function f() { " + "".join(tokens) + " }").encode())


def test_return_values_and_lookups_equal_the_queries_on_every_fixture_file():
    found = 0
    for root, rel, kind in fixture_files():
        if kind in ("ts", "tsx"):
            found += _compare_bodies((root / rel).read_bytes(), kind)
    assert found > 100
