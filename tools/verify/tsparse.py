"""Tree-sitter parsing of the few TypeScript files a verification looks at.

The static index owns symbol resolution across the workspace; this module only parses
single files again (handler, worker, module, producer files) to read shapes the index
does not record: return statements, envelope reads, ``throw`` statements, ``providers``
arrays. Parsed files are kept in a small cache keyed by path, size and mtime, so a
``verify --all`` run parses each file once.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tree_sitter import Node, Parser

from server import workspace_files
from tools.mesh_index.ts_queries import language
from tools.mesh_index.workspace import MAX_FILE_BYTES, TS_EXTENSIONS

T = TypeVar("T")

FUNCTION_NODES = frozenset(
    {
        "arrow_function",
        "function_expression",
        "function_declaration",
        "generator_function",
        "generator_function_declaration",
        "method_definition",
    }
)
"""Node types that open a new function scope (their ``return`` is not the outer one's)."""

CLASS_NODES = frozenset({"class_declaration", "abstract_class_declaration", "class"})

_WRAPPERS = frozenset(
    {"parenthesized_expression", "as_expression", "satisfies_expression", "non_null_expression", "await_expression"}
)


@dataclass(frozen=True)
class ParsedFile:
    """One parsed source file: absolute path, bytes and syntax tree.

    ``memo`` holds what extractors computed on this exact content (class index, call
    list, per-class facts), so a ``verify --all`` run reads each file's shapes once.
    """

    path: Path
    source: bytes
    root: Node
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def memoized(self, key: Any, compute: Callable[[], T]) -> T:
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


class _ParseCache:
    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._items: OrderedDict[tuple[str, int, int], ParsedFile] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path) -> ParsedFile | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        if stat.st_size > MAX_FILE_BYTES:  # not indexed either
            return None
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        try:
            source = workspace_files.read_regular_file(path, MAX_FILE_BYTES)
        except OSError:
            return None
        parser = Parser(language("tsx" if path.suffix == ".tsx" else "ts"))
        parsed = ParsedFile(path=path, source=source, root=parser.parse(source).root_node)
        with self._lock:
            self._items[key] = parsed
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)
        return parsed


_CACHE = _ParseCache()


def parse_file(path: Path) -> ParsedFile | None:
    """The parsed file, or ``None`` when it cannot be read."""
    return _CACHE.get(path)


def marked_files(
    root: Path, skip_dirs: Iterable[str], markers: Iterable[bytes], max_files: int
) -> Iterator[ParsedFile]:
    """Parsed TypeScript files under ``root`` (not ``.d.ts``) whose bytes hold one of ``markers``.

    A sorted walk that skips ``skip_dirs`` and dot folders, stops after ``max_files`` source
    files and, like the index, ignores files over ``MAX_FILE_BYTES``.
    """
    skip = set(skip_dirs)
    wanted = list(markers)
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(TS_EXTENSIONS) or name.endswith(".d.ts"):
                continue
            seen += 1
            if seen > max_files:
                return
            path = Path(dirpath) / name
            try:
                if not any(m in workspace_files.read_regular_file(path, MAX_FILE_BYTES) for m in wanted):
                    continue
            except OSError:
                continue
            parsed = parse_file(path)
            if parsed is not None:
                yield parsed


def walk(node: Node, *, skip: frozenset[str] = frozenset()) -> Iterator[Node]:
    """Every named descendant of ``node`` (pre-order), not entering node types in ``skip``."""
    stack = list(reversed(node.named_children))
    while stack:
        current = stack.pop()
        yield current
        if current.type in skip:
            continue
        stack.extend(reversed(current.named_children))


def unwrap(node: Node | None) -> Node | None:
    """The expression inside parentheses, ``as``/``satisfies`` casts, ``!`` and ``await``."""
    while node is not None and node.type in _WRAPPERS:
        inner = [c for c in node.named_children if c.type not in ("type_annotation",)]
        node = inner[0] if inner else None
    return node


def line_of(node: Node) -> int:
    """1-based line of the node's first character."""
    return node.start_point[0] + 1


def find_classes(pf: ParsedFile, name: str) -> list[Node]:
    """Class declarations named ``name`` in the file."""

    def index() -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for node in walk(pf.root, skip=FUNCTION_NODES):
            if node.type in CLASS_NODES:
                ident = node.child_by_field_name("name")
                if ident is not None:
                    out.setdefault(pf.text(ident), []).append(node)
        return out

    return pf.memoized("classes", index).get(name, [])


def calls_in(pf: ParsedFile) -> list[tuple[int, int, str, Node]]:
    """Every call of the file as (first line, last line, callee name, node), in source order."""

    def collect() -> list[tuple[int, int, str, Node]]:
        calls = (n for n in walk(pf.root) if n.type == "call_expression")
        return [(line_of(n), n.end_point[0] + 1, callee_name(pf, n), n) for n in calls]

    return pf.memoized("calls", collect)


def class_methods(pf: ParsedFile, cls: Node, names: list[str]) -> list[Node]:
    """Methods of ``cls`` named in ``names``: method definitions, or fields holding an arrow/function.

    For a field (``handle = async (job) => ...``) the function node is returned; both have
    ``parameters`` and ``body`` fields (an arrow's body may be an expression).
    """
    body = cls.child_by_field_name("body")
    if body is None:
        return []
    out = []
    for member in body.named_children:
        ident = member.child_by_field_name("name")
        if ident is None or pf.text(ident) not in names:
            continue
        if member.type == "method_definition":
            out.append(member)
        elif member.type == "public_field_definition":
            value = unwrap(member.child_by_field_name("value"))
            if value is not None and value.type in ("arrow_function", "function_expression"):
                out.append(value)
    return out


def callee_name(pf: ParsedFile, call: Node) -> str:
    """The last name of a call's callee: ``createJob`` for ``JobsOutboxEntity.createJob(...)``."""
    fn = unwrap(call.child_by_field_name("function"))
    if fn is None:
        return ""
    if fn.type == "member_expression":
        return pf.text(fn.child_by_field_name("property"))
    if fn.type == "identifier":
        return pf.text(fn)
    return ""


def call_arguments(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    if args is None:
        return []
    return [a for a in args.named_children if a.type != "comment"]


def enclosing(node: Node, types: frozenset[str]) -> Node | None:
    """The nearest ancestor of ``node`` whose type is in ``types``."""
    parent = node.parent
    while parent is not None:
        if parent.type in types:
            return parent
        parent = parent.parent
    return None


def local_imports(pf: ParsedFile) -> dict[str, str]:
    """Local binding -> imported name for named imports (``import { A as B }`` gives B -> A)."""
    out: dict[str, str] = {}
    for stmt in pf.root.named_children:
        if stmt.type != "import_statement":
            continue
        for spec in walk(stmt):
            if spec.type != "import_specifier":
                continue
            name = spec.child_by_field_name("name")
            alias = spec.child_by_field_name("alias")
            if name is not None:
                out[pf.text(alias or name)] = pf.text(name)
    return out


def object_pairs(pf: ParsedFile, obj: Node) -> dict[str, Node]:
    """Key -> value node of an object literal (shorthand ``{ a }`` maps ``a`` to its identifier)."""
    out: dict[str, Node] = {}
    for child in obj.named_children:
        if child.type == "pair":
            key = child.child_by_field_name("key")
            value = child.child_by_field_name("value")
            if key is not None and value is not None:
                out[pf.text(key).strip("'\"`")] = value
        elif child.type == "shorthand_property_identifier":
            out[pf.text(child)] = child
    return out
