"""tree-sitter languages, parsers and the queries fact extraction runs (compiled once per config).

tree-sitter itself is imported on first use: a process that parses nothing (a warm start
loading the snapshot) never loads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser, Query


@dataclass(frozen=True)
class ExtractConfig:
    """The convention names extraction needs (hashable, sent to worker processes)."""

    call_names: tuple[str, ...]
    processor_decorators: tuple[str, ...]
    handler_type_fields: tuple[str, ...]
    filter_methods: tuple[str, ...]
    stream_fields: tuple[str, ...]
    group_fields: tuple[str, ...]
    sql_tokens: tuple[str, ...]
    fallback_calls: tuple[str, ...]
    event_table: str
    repo_create_calls: tuple[str, ...] = ()
    job_registries: tuple[str, ...] = ()


@lru_cache(maxsize=2)
def language(kind: str) -> Language:
    import tree_sitter_typescript as tst
    from tree_sitter import Language

    return Language(tst.language_tsx() if kind == "tsx" else tst.language_typescript())


@lru_cache(maxsize=4)
def parser(kind: str) -> Parser:
    from tree_sitter import Parser

    return Parser(language(kind))


def quote_names(names: tuple[str, ...]) -> str:
    return " ".join(json.dumps(n) for n in names)


@lru_cache(maxsize=8)
def queries(kind: str, cfg: ExtractConfig) -> dict[str, Query]:
    from tree_sitter import Query

    lang = language(kind)
    keys = cfg.stream_fields + cfg.group_fields + ("provide",)
    q = {
        "calls": f"""(call_expression
                     function: [(identifier) @fn (member_expression property: (property_identifier) @fn)]
                     (#any-of? @fn {quote_names(cfg.call_names)})) @call""",
        "pairs": f"""(pair key: [(property_identifier) (string (string_fragment))] @k
                     (#any-of? @k {quote_names(keys)})) @pair""",
        "strings": "[(string) (template_string)] @s",
        "news": "(new_expression constructor: (identifier) @c arguments: (arguments)) @n",
        "refs": "[(identifier) (type_identifier)] @id",
        "cases": "(switch_case value: (_) @v)",
        "members": "(member_expression) @m",
        "lookups": """[(subscript_expression object: (identifier) @o)
                       (call_expression function: (member_expression object: (identifier) @o
                          property: (property_identifier) @p) (#any-of? @p "get" "has"))]""",
        "filter_calls": """(call_expression function: [(identifier) @f
                              (member_expression property: (property_identifier) @f)]) @call""",
        "supers": "(call_expression function: (super)) @call",
        "member_calls": """(call_expression
                             function: (member_expression
                               object: (member_expression object: (this) property: (property_identifier))
                               property: (property_identifier))
                             arguments: (arguments)) @call""",
        "returns": "(return_statement (_) @r)",
    }
    return {name: Query(lang, src) for name, src in q.items()}


def captures(query: Query, node: Node) -> dict[str, list[Node]]:
    """Captured nodes by name, each list in document order (facts must not depend on match order)."""
    from tree_sitter import QueryCursor

    return {name: sorted(nodes, key=_start) for name, nodes in QueryCursor(query).captures(node).items()}


def _start(node: Node) -> int:
    return node.start_byte
