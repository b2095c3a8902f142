"""The layer contract of docs/architecture.md, read from the imports of every module.

An ``ast`` walk of every module of the installed packages (``server``, ``tools``,
``resources``, ``skills``) collects each import, at module level or inside a function (a
lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` are left out (they
never run). Relative imports are resolved; ``from a import b`` where ``a.b`` is a module is
an edge to ``a.b``; importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``.

Checked: no import cycle between files (every strongly connected component is listed with
the import lines that close it), and the layers:

- entry points (the MCP app, the command line and its commands, the demo) on top: nothing
  below imports them;
- capabilities (``tools.*``, ``resources.*``) import the runtime and the approval gate, never
  an entry point;
- the approval gate (``server.approval``, but its two commands) imports the runtime only;
- the runtime (the rest of ``server``) imports no capability and no entry point; of the gate,
  only ``server.config`` reads ``server.approval.trust`` (the trust policy of the settings);
- the demo is imported by nothing outside ``server.demo`` (the command table names it by string);
- stream records are read in one place: ``tools.streams.records`` defines the dead-letter
  entry and the retry bookkeeping models, and ``tools.streams`` never imports ``tools.outbox``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

PACKAGES = ("server", "tools", "resources", "skills")

ENTRY_POINTS = (
    "server.app", "server.cli", "server.serve", "server.doctor", "server.demo",
    "server.approval.cli", "server.approval.audit_cli",
)
GATE = "server.approval"
CAPABILITIES = ("tools", "resources", "skills")
RECORD_NAMES = ("DeadLetter", "parse_dlq_entry", "parse_timestamp_ms", "RetryState", "IdempotencyLock",
                "OriginalState", "GroupBookkeeping", "PendingHolder")


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, dict[str, int]] = field(default_factory=dict)  # importer -> imported -> line
    runs: dict[str, dict[str, int]] = field(default_factory=dict)  # edges + the package __init__s they run
    defined: dict[str, set[str]] = field(default_factory=dict)  # module -> top-level class and function names


def _under(module: str, prefixes: tuple[str, ...] | str) -> bool:
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _imports(tree: ast.AST, name: str, is_package: bool) -> list[tuple[str, int]]:
    """(dotted name, line) of every import that runs: the module and each imported name."""
    skip = _type_checking_nodes(tree)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.append((base, node.lineno))
            found.extend((f"{base}.{alias.name}", node.lineno) for alias in node.names)
    return found


def build_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> Graph:
    graph = Graph()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            graph.modules[_module_name(root, path)] = path
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph.defined[name] = {n.name for n in tree.body
                               if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}
        out: dict[str, int] = {}
        runs: dict[str, int] = {}
        own_packages = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for dotted, line in _imports(tree, name, path.name == "__init__.py"):
            target = dotted
            while target and target not in graph.modules:
                target = target.rpartition(".")[0]
            if not target or target == name:
                continue
            out.setdefault(target, line)
            runs.setdefault(target, line)
            parts = target.split(".")
            for i in range(1, len(parts)):  # importing a.b.c runs a/__init__ and a/b/__init__ first
                parent = ".".join(parts[:i])
                if parent in graph.modules and parent not in own_packages and parent != name:
                    runs.setdefault(parent, line)
        graph.edges[name] = out
        graph.runs[name] = runs
    return graph


def import_cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


@pytest.fixture(scope="module")
def graph() -> Graph:
    return build_graph(REPO_ROOT)


def _violations(graph: Graph, importer_in, imported_in) -> list[str]:
    return sorted(f"{graph.modules[a].relative_to(REPO_ROOT)}:{line} imports {b}"
                  for a, out in graph.edges.items() if importer_in(a)
                  for b, line in out.items() if imported_in(b))


def test_the_walk_sees_the_whole_tree(graph: Graph) -> None:
    assert len(graph.modules) > 200
    assert "tools.lint.cli_parser" in graph.edges["server.cli"]
    assert "server.approval.tokens" in graph.edges["tools.remediation.executor"]
    assert "server.config" in graph.edges["tools.streams.dlq"]
    # a lazy import counts, a TYPE_CHECKING one does not
    assert "tools.mesh_index.render" in graph.edges["tools.mesh_index.model"]
    assert "tools.mesh_index.model" not in graph.edges["tools.mesh_index.render"]


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}, "e": {"e": 1}, "f": {"d": 1}}
    assert import_cycles(edges) == [["a", "b", "c"]]


def test_no_import_cycle_between_files(graph: Graph) -> None:
    report = []
    for component in import_cycles(graph.runs):
        members = set(component)
        lines = [f"  {graph.modules[a].relative_to(REPO_ROOT)}:{line} imports {b}"
                 for a in component for b, line in sorted(graph.runs[a].items()) if b in members]
        report.append("cycle: " + " <-> ".join(component) + "\n" + "\n".join(lines))
    assert report == [], "\n".join(report)


def test_capabilities_never_import_an_entry_point(graph: Graph) -> None:
    assert _violations(graph, lambda a: _under(a, CAPABILITIES), lambda b: _under(b, ENTRY_POINTS)) == []


def test_the_gate_imports_the_runtime_only(graph: Graph) -> None:
    def in_gate(m: str) -> bool:
        return _under(m, GATE) and not _under(m, ENTRY_POINTS)

    bad = _violations(graph, in_gate, lambda b: _under(b, (*CAPABILITIES, *ENTRY_POINTS)))
    assert bad == []


def test_the_runtime_imports_no_capability_and_no_entry_point(graph: Graph) -> None:
    def in_runtime(m: str) -> bool:
        return _under(m, "server") and not _under(m, (GATE, *ENTRY_POINTS))

    assert _violations(graph, in_runtime, lambda b: _under(b, (*CAPABILITIES, *ENTRY_POINTS))) == []
    gate_users = _violations(graph, in_runtime, lambda b: _under(b, GATE))
    assert [v for v in gate_users if not v.startswith("server/config.py:")] == []
    assert all(v.endswith("imports server.approval.trust") for v in gate_users), gate_users


def test_nothing_outside_the_demo_imports_it(graph: Graph) -> None:
    bad = _violations(graph, lambda a: not _under(a, "server.demo"), lambda b: _under(b, "server.demo"))
    assert bad == []


def test_stream_records_are_read_in_one_place(graph: Graph) -> None:
    assert _violations(graph, lambda a: _under(a, "tools.streams"), lambda b: _under(b, "tools.outbox")) == []
    defined_elsewhere = sorted(f"{m}.{n}" for m, names in graph.defined.items() if m != "tools.streams.records"
                               for n in names & set(RECORD_NAMES))
    assert defined_elsewhere == []
    assert set(RECORD_NAMES) <= graph.defined["tools.streams.records"]
    assert all(_under(b, ("server.config", "server.errors", "tools.streams.keys", "tools.streams.values",
                          "tools.streams.ids")) for b in graph.edges["tools.streams.records"]), \
        graph.edges["tools.streams.records"]
    for reader in ("tools.outbox.delivery", "tools.streams.dlq", "tools.streams.dlq_joins"):
        assert "tools.streams.records" in graph.edges[reader], reader
