"""Nest ``@Module`` declarations: the ``providers`` of each module, and the modules of a package.

:func:`module_providers` reads one file (providers flattened through local arrays, import
aliases and ``{ provide, useClass }`` objects; anything else is reported as unresolved);
:class:`ModuleScanner` finds the module files of a package by a bounded walk, parsed once
per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Node

from server.config import StaticConventions
from tools.verify.tsparse import (
    FUNCTION_NODES,
    ParsedFile,
    call_arguments,
    callee_name,
    line_of,
    local_imports,
    marked_files,
    object_pairs,
    unwrap,
    walk,
)


@dataclass
class ModuleFacts:
    """One ``@Module`` class: its providers (class name -> line) and what could not be read."""

    name: str
    line: int
    providers: dict[str, int] = field(default_factory=dict)
    unresolved: list[tuple[str, int]] = field(default_factory=list)


def _local_arrays(pf: ParsedFile) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for node in walk(pf.root, skip=FUNCTION_NODES | {"class_body"}):
        if node.type == "variable_declarator":
            name = node.child_by_field_name("name")
            value = unwrap(node.child_by_field_name("value"))
            if name is not None and name.type == "identifier" and value is not None and value.type == "array":
                out[pf.text(name)] = value
    return out


def _module_class_name(pf: ParsedFile, decorator: Node) -> str:
    holder = decorator.parent
    if holder is None:
        return ""
    candidates = [holder] if holder.type.endswith("class_declaration") else list(holder.named_children)
    for node in candidates:
        if node.type in ("class_declaration", "abstract_class_declaration"):
            return pf.text(node.child_by_field_name("name"))
    return ""


def module_providers(pf: ParsedFile, conv: StaticConventions) -> list[ModuleFacts]:
    """Every ``@Module({ providers: [...] })`` of the file, providers flattened through local arrays."""
    imports = local_imports(pf)
    arrays = _local_arrays(pf)
    modules = []
    for node in walk(pf.root, skip=FUNCTION_NODES):
        if node.type != "decorator":
            continue
        call = unwrap(next(iter(node.named_children), None))
        if call is None or call.type != "call_expression" or callee_name(pf, call) not in conv.module_decorators:
            continue
        args = call_arguments(call)
        facts = ModuleFacts(name=_module_class_name(pf, node), line=line_of(node))
        modules.append(facts)
        if not args or unwrap(args[0]) is None or unwrap(args[0]).type != "object":
            if args:
                facts.unresolved.append((pf.text(args[0])[:120], line_of(args[0])))
            continue
        pairs = object_pairs(pf, unwrap(args[0]))
        for key in conv.module_provider_fields:
            if key in pairs:
                _collect_providers(pf, pairs[key], facts, imports, arrays, depth=0)
    return modules


def _collect_providers(
    pf: ParsedFile,
    node: Node | None,
    facts: ModuleFacts,
    imports: dict[str, str],
    arrays: dict[str, Node],
    depth: int,
) -> None:
    node = unwrap(node)
    if node is None or depth > 8:
        return
    if node.type in ("identifier", "shorthand_property_identifier"):
        name = pf.text(node)
        if name in arrays:
            _collect_providers(pf, arrays[name], facts, imports, arrays, depth + 1)
        else:
            facts.providers.setdefault(imports.get(name, name), line_of(node))
    elif node.type == "array":
        for element in node.named_children:
            _collect_providers(pf, element, facts, imports, arrays, depth + 1)
    elif node.type == "spread_element":
        inner = unwrap(next(iter(node.named_children), None))
        if inner is not None and inner.type in ("identifier", "array") and (
            inner.type == "array" or pf.text(inner) in arrays
        ):
            _collect_providers(pf, inner, facts, imports, arrays, depth + 1)
        else:
            facts.unresolved.append((pf.text(node)[:120], line_of(node)))
    elif node.type == "object":
        pairs = object_pairs(pf, node)
        for key in ("provide", "useClass", "useExisting"):
            value = unwrap(pairs.get(key))
            if value is not None and value.type == "identifier":
                name = pf.text(value)
                facts.providers.setdefault(imports.get(name, name), line_of(value))
    elif node.type != "comment":
        facts.unresolved.append((pf.text(node)[:120], line_of(node)))


MAX_FILES_PER_PACKAGE = 20_000


class ModuleScanner:
    """Lists the ``@Module`` classes of a package folder (relative to the workspace), cached per folder."""

    def __init__(self, workspace: Path, conv: StaticConventions) -> None:
        self.workspace = workspace
        self.conv = conv
        self._cache: dict[str, list[tuple[str, ModuleFacts]]] = {}
        self._markers = [f"@{name}(".encode() for name in conv.module_decorators]

    def modules_in(self, package_dir: str) -> list[tuple[str, ModuleFacts]]:
        """(file relative to the workspace, module facts) for every module of the package, sorted by file."""
        if package_dir not in self._cache:
            self._cache[package_dir] = self._scan(package_dir)
        return self._cache[package_dir]

    def _scan(self, package_dir: str) -> list[tuple[str, ModuleFacts]]:
        root = self.workspace / package_dir if package_dir else self.workspace
        found: list[tuple[str, ModuleFacts]] = []
        for parsed in marked_files(root, self.conv.skip_dirs, self._markers, MAX_FILES_PER_PACKAGE):
            rel = parsed.path.relative_to(self.workspace).as_posix()
            found.extend((rel, module) for module in module_providers(parsed, self.conv))
        return found
