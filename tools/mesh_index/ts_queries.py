"""tree-sitter languages, parsers, the queries fact extraction runs (compiled once) and the word finder.

tree-sitter itself is imported on first use: a process that parses nothing (a warm start
loading the snapshot) never loads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser, Query

    from server.config import Conventions


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


def extract_config(conv: Conventions) -> ExtractConfig:
    """The names extraction needs, from the conventions (here, not in the service: the command line
    starts its workers before it imports the service)."""
    sc = conv.static
    calls = sc.create_job_calls + sc.fallback_calls + sc.create_event_calls + sc.direct_queue_calls
    calls = calls + sc.migration_query_calls + sc.ws_send_calls
    repo_create = [c for c in sc.repository_create_calls if c not in calls]  # kept only with a type field
    calls = calls + repo_create
    sql_tokens = [conv.tables.event_queue, conv.audit_trigger, *sc.sql_event_functions, "create trigger"]
    return ExtractConfig(
        call_names=tuple(dict.fromkeys(calls)),
        processor_decorators=tuple(sc.processor_decorators),
        handler_type_fields=tuple(sc.handler_type_fields),
        filter_methods=tuple(sc.post_processor_filter_methods),
        stream_fields=tuple(sc.post_processor_stream_fields),
        group_fields=tuple(sc.post_processor_group_fields),
        sql_tokens=tuple(t.lower() for t in sql_tokens),
        fallback_calls=tuple(sc.fallback_calls),
        event_table=conv.tables.event_queue,
        repo_create_calls=tuple(repo_create),
        job_registries=tuple(sc.job_registry),
    )


@lru_cache(maxsize=2)
def language(kind: str) -> Language:
    import tree_sitter_typescript as tst
    from tree_sitter import Language

    return Language(tst.language_tsx() if kind == "tsx" else tst.language_typescript())


@lru_cache(maxsize=4)
def parser(kind: str) -> Parser:
    from tree_sitter import Parser

    return Parser(language(kind))


QUERY_SOURCES = {
    "strings": "[(string) (template_string)] @s",
    "news": "(new_expression constructor: (identifier) @c arguments: (arguments)) @n",
    "refs": "[(identifier) (type_identifier)] @id",
    "cases": "(switch_case value: (_) @v)",
    "members": "(member_expression) @m",
    "filter_calls": """(call_expression function: [(identifier) @f
                          (member_expression property: (property_identifier) @f)]) @call""",
    "supers": "(call_expression function: (super)) @call",
    "finds": """(call_expression function: (member_expression property: (property_identifier) @prop)
                                  arguments: (arguments . (arrow_function) @arrow))""",
    "member_calls": """(call_expression
                         function: (member_expression
                           object: (member_expression object: (this) property: (property_identifier))
                           property: (property_identifier))
                         arguments: (arguments)) @call""",
}


class Queries(dict):  # type: ignore[type-arg]
    """The compiled queries of one language by name, each compiled on first use (3-13 ms each: a
    worker that meets one .tsx file compiles only what that file needs)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def __missing__(self, name: str) -> Query:
        from tree_sitter import Query

        query = self[name] = Query(language(self.kind), QUERY_SOURCES[name])
        return query

    def compile_all(self) -> Queries:
        for name in QUERY_SOURCES:
            self[name]  # compiles it
        return self


@lru_cache(maxsize=8)
def queries(kind: str, cfg: ExtractConfig) -> Queries:
    """The queries of ``kind`` (``cfg`` kept for the callers: no query depends on it any more)."""
    return Queries(kind)


def captures(query: Query, node: Node) -> dict[str, list[Node]]:
    """Captured nodes by name, each list in document order (facts must not depend on match order)."""
    from tree_sitter import QueryCursor

    return {name: sorted(nodes, key=_start) for name, nodes in QueryCursor(query).captures(node).items()}


def matches(query: Query, node: Node) -> list[tuple[int, dict[str, list[Node]]]]:
    """The query's matches under ``node``, each its pattern's index and its captures by name."""
    from tree_sitter import QueryCursor

    return QueryCursor(query).matches(node)


def _start(node: Node) -> int:
    return node.start_byte



IDENT_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
IDENT_REST = re.compile(rb"[\w$]*")


@lru_cache(maxsize=16)
def _needles(words: tuple[str, ...]) -> tuple[tuple[bytes, ...], frozenset[bytes]]:
    """The words' shortest prefixes among themselves (``create`` finds ``createJob`` too) and the words."""
    encoded = sorted({w.encode() for w in words})
    needles = tuple(w for w in encoded if not any(o != w and w.startswith(o) for o in encoded))
    return needles, frozenset(encoded)


def word_spans(src: bytes, words: tuple[str, ...], start: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of every whole word of ``words`` written in ``src[start:stop]`` (not inside a
    longer identifier), in order: each needle found by a fast substring search, then widened to
    its word."""
    needles, wanted = _needles(words)
    stop = len(src) if stop is None else stop
    spans = []
    for needle in needles:
        i = src.find(needle, start, stop)
        while i >= 0:
            end = IDENT_REST.match(src, i + len(needle)).end()
            if (i == 0 or src[i - 1] not in IDENT_BYTES) and src[i:end] in wanted:
                spans.append((i, end))
            i = src.find(needle, end, stop)
    spans.sort()
    return spans


def word_nodes(root: Node, src: bytes, words: tuple[str, ...]) -> Iterator[Node]:
    """The syntax nodes spanning exactly a whole word of ``words``, in document order.

    Instead of a query run over every node of the tree (as costly as the parse on real code),
    a substring search finds the few places where a name is written and tree-sitter the
    smallest node there: a word inside a comment, a string or a longer name spans no node of
    its own."""
    for start, end in word_spans(src, words):
        node = root.descendant_for_byte_range(start, end)
        if node is not None and node.start_byte == start and node.end_byte == end:
            yield node
