"""``find_dependents``: who depends on a workspace package, an exported symbol or a file.

- A package (its npm name): every ``package.json`` declaring it (section, range, and whether the
  range includes the workspace's current version: a service pinned to an older contract shows
  ``satisfied=false``), and every file importing it (``import``, ``export ... from``, side-effect
  imports, subpaths ``@scope/pkg/sub``).
- An exported symbol (a declared name): the files importing it by name, resolved through
  ``export { X as Y } from`` re-exports and ``export *`` barrels, package names and tsconfig paths
  (the index's own resolution, :class:`~tools.mesh_index.workspace.Layout`).
- A file (workspace-relative path): the files importing it, directly or through a barrel.

Import facts come from the index (no parse here); a line is found by reading the importing file.
``granularity="package"`` groups the importing files by package.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from server.errors import InvalidArgument
from tools.code_nav.files import read_text
from tools.code_nav.memo import per_build
from tools.code_nav.model import DeclaringPackage, DependentPackage, DependentsResult, ImportingFile, Page
from tools.code_nav.semver import satisfies

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService
    from tools.mesh_index.workspace import Layout

SECTIONS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")
GRANULARITIES = ("symbol", "package", "file")
MAX_ROUNDS = 12


def find_dependents(service: IndexService, target: str, granularity: str = "symbol", include_tests: bool = False,
                    limit: int = 50, offset: int = 0) -> DependentsResult:
    target = (target or "").strip()
    if not target or len(target) > 300:
        raise InvalidArgument("target must be a package name (@scope/messaging), an exported symbol or a file path "
                              "(1-300 characters)")
    if granularity not in GRANULARITIES:
        raise InvalidArgument(f"granularity must be one of {', '.join(GRANULARITIES)} (got {granularity!r})")
    if not 1 <= limit <= 500 or offset < 0:
        raise InvalidArgument(f"limit must be 1-500 and offset >= 0 (got limit={limit}, offset={offset})")
    facts = service.all_facts()
    layout = service.layout()
    markers = tuple(service.conventions.test_path_markers)
    notes: list[str] = []
    declaring: list[DeclaringPackage] = []
    version = declared_at = None
    pkg = layout.packages.get(target)
    rel_target = target.lstrip("./")
    if pkg is not None:
        resolved = "package"
        manifest = f"{pkg.dir}/package.json" if pkg.dir else "package.json"
        version = _manifest(service, manifest).get("version")
        declared_at = f"{manifest}:1"
        declaring = _declaring(service, layout, target, version if isinstance(version, str) else None)
        importers = _package_importers(per_build(service, "specs", lambda: _by_spec(facts)), target)
        if any(d.satisfied is False for d in declaring):
            notes.append("some packages declare a range that excludes the workspace's version "
                         f"{version}: they build against an older (or newer) published contract")
    elif rel_target in facts:
        resolved = "file"
        declared_at = f"{rel_target}:1"
        importers = _symbol_importers(_edges(service, facts, layout), {(rel_target, "*")}, any_name=True)
    else:
        resolved = "symbol"
        exported = per_build(service, "exported", lambda: _exported(facts))
        origins = set(exported.get(target, ()))
        if not origins:
            raise InvalidArgument(f"{target!r} is no workspace package, indexed file or exported symbol: give an npm "
                                  "name from a package.json, a file path relative to the workspace, or an exported "
                                  "name (smart_search finds declared names)")
        first = sorted(origins)[0]
        line = next((d[2] for d in facts[first[0]].get("decls", ()) if d[0] == target), 1)
        declared_at = f"{first[0]}:{line}"
        if len({o[0] for o in origins}) > 1:
            notes.append(f"{target!r} is exported by {len({o[0] for o in origins})} files: importers of each listed")
        importers = _symbol_importers(_edges(service, facts, layout), origins, any_name=False)
    hidden = 0
    rows: list[ImportingFile] = []
    names_by_dir = {p.dir: name for name, p in layout.packages.items()}
    for rel, (names, spec, via) in sorted(importers.items()):
        test = _is_test(rel, markers)
        if test and not include_tests:
            hidden += 1
            continue
        pdir = layout.package_dir_of(rel)
        rows.append(ImportingFile(repo=layout.repo_of(rel), file=rel, line=0, names=sorted(names), spec=spec, via=via,
                                  package=names_by_dir.get(pdir), test_only=test))
    if hidden:
        notes.append(f"{hidden} importing test file(s) not listed; include_tests=true lists them")
    packages: list[DependentPackage] = []
    if granularity == "package":
        by_pkg: dict[str, DependentPackage] = {}
        for r in rows:
            pdir = layout.package_dir_of(r.file)
            entry = by_pkg.setdefault(pdir, DependentPackage(package=r.package or pdir or "(workspace root)",
                                                             dir=pdir, files=0))
            entry.files += 1
        packages = sorted(by_pkg.values(), key=lambda p: p.package)
    total = len(packages) if granularity == "package" else len(rows)
    page = Page(total=total, offset=offset, limit=limit, next_offset=offset + limit if offset + limit < total else None)
    if granularity == "package":
        packages, rows = packages[offset:offset + limit], []
    else:
        rows = rows[offset:offset + limit]
        for row in rows:  # lines only for the page shown (each needs the file read)
            row.line = _line_of(service, row.file, row.spec)
    return DependentsResult(target=target, granularity=granularity, resolved=resolved, declared_at=declared_at,
                            version=version if isinstance(version, str) else None, declaring=declaring,
                            importers=rows, packages=packages, page=page, notes=notes)


def _is_test(rel: str, markers: tuple[str, ...]) -> bool:
    probe = "/" + rel
    return any(m in probe for m in markers)


def _manifest(service: IndexService, rel: str) -> dict[str, Any]:
    text = read_text(service.workspace, rel, 1024 * 1024)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _declaring(service: IndexService, layout: Layout, target: str, current: str | None) -> list[DeclaringPackage]:
    out = []
    for rel in service.package_files():
        data = _manifest(service, rel)
        for section in SECTIONS:
            deps = data.get(section)
            if not isinstance(deps, dict) or not isinstance(deps.get(target), str):
                continue
            spec = deps[target]
            text = read_text(service.workspace, rel, 1024 * 1024) or ""
            m = re.search(r'"' + re.escape(target) + r'"\s*:', text)
            line = text.count("\n", 0, m.start()) + 1 if m else 1
            out.append(DeclaringPackage(
                package=str(data.get("name") or (rel.rsplit("/", 2)[-2] if "/" in rel else ".")), file=rel,
                line=line, section=section, range=spec,
                satisfied=satisfies(current, spec) if current else None, current=current))
    return out


def _by_spec(facts: dict[str, Any]) -> dict[str, list[tuple[str, str, str, str]]]:
    """Every import-like statement by module specifier: (file, kind, name, local); kind in import, side,
    reexport, star."""
    out: dict[str, list[tuple[str, str, str, str]]] = {}
    for rel, f in facts.items():
        for local, name, spec in f.get("imports", ()):
            out.setdefault(spec, []).append((rel, "import", name, local))
        for spec in (*f.get("side_imports", ()), *f.get("dyn_imports", ())):
            out.setdefault(spec, []).append((rel, "side", "", ""))
        for exp, name, spec in f.get("reexports", ()):
            out.setdefault(spec, []).append((rel, "reexport", name, exp))
        for spec in f.get("stars", ()):
            out.setdefault(spec, []).append((rel, "star", "*", ""))
    return out


def _package_importers(specs: dict[str, list[tuple[str, str, str, str]]],
                       name: str) -> dict[str, tuple[set[str], str, None]]:
    out: dict[str, tuple[set[str], str, None]] = {}
    for spec, uses in specs.items():
        if spec != name and not spec.startswith(name + "/"):
            continue
        for rel, kind, imported, _local in uses:
            names = out.setdefault(rel, (set(), spec, None))[0]
            if kind != "side":
                names.add(imported)
    return out


def _exported(facts: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Exported name -> [(file, name)] of every exported declaration and local export."""
    out: dict[str, list[tuple[str, str]]] = {}
    for rel, f in facts.items():
        for d in f.get("decls", ()):
            if d[6]:
                out.setdefault(d[0], []).append((rel, d[0]))
        for e in f.get("exports", ()):
            out.setdefault(e[0], []).append((rel, e[0]))
    return out


class _Edges:
    """Import-like statements resolved to workspace files (one index build): re-exports and stars, and the
    imports by the file they name."""

    def __init__(self) -> None:
        self.reexports: list[tuple[str, str, str, str]] = []  # (file, exported as, name, source file)
        self.stars: list[tuple[str, str]] = []  # (file, source file)
        self.imports: dict[str, list[tuple[str, str, str, str]]] = {}  # source -> (file, local, name, spec)
        self.sides: dict[str, list[tuple[str, str]]] = {}  # source -> (file, spec)


def _edges(service: IndexService, facts: dict[str, Any], layout: Layout) -> _Edges:
    def build() -> _Edges:
        e = _Edges()
        for spec, uses in per_build(service, "specs", lambda: _by_spec(facts)).items():
            for rel, kind, name, local in uses:
                src = layout.resolve(rel, spec)
                if src is None:
                    continue
                if kind == "import":
                    e.imports.setdefault(src, []).append((rel, local, name, spec))
                elif kind == "side":
                    e.sides.setdefault(src, []).append((rel, spec))
                elif kind == "reexport":
                    e.reexports.append((rel, local, name, src))
                else:
                    e.stars.append((rel, src))
        return e

    return per_build(service, "edges", build)


def _symbol_importers(edges: _Edges, origins: set[tuple[str, str]],
                      any_name: bool) -> dict[str, tuple[set[str], str, str | None]]:
    """Files importing one of ``origins`` ((file, exported name); name ``*``: any), through re-exports."""
    aliases: dict[tuple[str, str], str | None] = {o: None for o in origins}  # (file, name) -> barrel it came through
    origin_files = {o[0] for o in origins}
    files_of = set(origin_files)
    for _ in range(MAX_ROUNDS):
        added = False
        for rel, exp, name, src in edges.reexports:
            if src in files_of and ((src, name) in aliases or (any_name and (src, "*") in aliases)) \
                    and (rel, exp) not in aliases:
                aliases[(rel, exp)] = rel
                files_of.add(rel)
                added = True
        for rel, src in edges.stars:
            if src not in files_of:
                continue
            for (afile, aname), _via in list(aliases.items()):
                if afile == src and (rel, aname) not in aliases:
                    aliases[(rel, aname)] = rel
                    files_of.add(rel)
                    added = True
        if not added:
            break
    out: dict[str, tuple[set[str], str, str | None]] = {}
    for src in files_of:
        for rel, local, name, spec in edges.imports.get(src, ()):
            key = (src, name)
            if key in aliases or (any_name and (src, "*") in aliases) or (name == "*" and any(
                    a[0] == src for a in aliases)):
                via = aliases.get(key) or (src if src not in origin_files else None)
                out.setdefault(rel, (set(), spec, via))[0].add(name if name != "*" else f"* as {local}")
        if any_name and src in origin_files:
            for rel, spec in edges.sides.get(src, ()):
                out.setdefault(rel, (set(), spec, None))
    for o_file in origin_files:
        out.pop(o_file, None)
    return out


def _line_of(service: IndexService, rel: str, spec: str) -> int:
    text = read_text(service.workspace, rel)
    if not text:
        return 1
    for quote in ("'", '"', "`"):
        i = text.find(quote + spec + quote)
        if i >= 0:
            return text.count("\n", 0, i) + 1
    return 1
