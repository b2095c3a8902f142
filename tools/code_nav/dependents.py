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
        importers = _package_importers(facts, layout, target)
        if any(d.satisfied is False for d in declaring):
            notes.append("some packages declare a range that excludes the workspace's version "
                         f"{version}: they build against an older (or newer) published contract")
    elif rel_target in facts:
        resolved = "file"
        declared_at = f"{rel_target}:1"
        importers = _symbol_importers(facts, layout, {(rel_target, "*")}, any_name=True)
    else:
        resolved = "symbol"
        origins = {(rel, d[0]) for rel, f in facts.items() for d in f.get("decls", ())
                   if d[6] and d[0] == target}
        origins |= {(rel, target) for rel, f in facts.items() for e in f.get("exports", ()) if e[0] == target}
        if not origins:
            raise InvalidArgument(f"{target!r} is no workspace package, indexed file or exported symbol: give an npm "
                                  "name from a package.json, a file path relative to the workspace, or an exported "
                                  "name (smart_search finds declared names)")
        first = sorted(origins)[0]
        line = next((d[2] for d in facts[first[0]].get("decls", ()) if d[0] == target), 1)
        declared_at = f"{first[0]}:{line}"
        if len({o[0] for o in origins}) > 1:
            notes.append(f"{target!r} is exported by {len({o[0] for o in origins})} files: importers of each listed")
        importers = _symbol_importers(facts, layout, origins, any_name=False)
    hidden = 0
    rows: list[ImportingFile] = []
    for rel, (names, spec, via) in sorted(importers.items()):
        test = _is_test(rel, markers)
        if test and not include_tests:
            hidden += 1
            continue
        pdir = layout.package_dir_of(rel)
        rows.append(ImportingFile(repo=layout.repo_of(rel), file=rel, line=_line_of(service, rel, spec),
                                  names=sorted(names), spec=spec, via=via, package=_pkg_name(layout, pdir),
                                  test_only=test))
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
    return DependentsResult(target=target, granularity=granularity, resolved=resolved, declared_at=declared_at,
                            version=version if isinstance(version, str) else None, declaring=declaring,
                            importers=rows, packages=packages, page=page, notes=notes)


def _is_test(rel: str, markers: tuple[str, ...]) -> bool:
    probe = "/" + rel
    return any(m in probe for m in markers)


def _pkg_name(layout: Layout, pdir: str) -> str | None:
    return next((name for name, p in layout.packages.items() if p.dir == pdir), None)


def _manifest(service: IndexService, rel: str) -> dict[str, Any]:
    text = read_text(service.workspace, rel, 1024 * 1024)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _declaring(service: IndexService, layout: Layout, target: str, current: str | None) -> list[DeclaringPackage]:
    out = []
    for pdir in sorted(set(layout.package_dirs)):
        rel = f"{pdir}/package.json" if pdir else "package.json"
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
                package=str(data.get("name") or pdir), file=rel, line=line, section=section, range=spec,
                satisfied=satisfies(current, spec) if current else None, current=current))
    return out


def _package_importers(facts: dict[str, Any], layout: Layout, name: str) -> dict[str, tuple[set[str], str, None]]:
    out: dict[str, tuple[set[str], str, None]] = {}

    def hit(spec: str) -> bool:
        return spec == name or spec.startswith(name + "/")

    for rel, f in facts.items():
        for imp in f.get("imports", ()):
            if hit(imp[2]):
                out.setdefault(rel, (set(), imp[2], None))[0].add(imp[1])
        for spec in f.get("side_imports", ()):
            if hit(spec):
                out.setdefault(rel, (set(), spec, None))
        for r in f.get("reexports", ()):
            if hit(r[2]):
                out.setdefault(rel, (set(), r[2], None))[0].add(r[1])
        for spec in f.get("stars", ()):
            if hit(spec):
                out.setdefault(rel, (set(), spec, None))[0].add("*")
    return out


def _symbol_importers(facts: dict[str, Any], layout: Layout, origins: set[tuple[str, str]],
                      any_name: bool) -> dict[str, tuple[set[str], str, str | None]]:
    """Files importing one of ``origins`` ((file, exported name); name ``*``: any), through re-exports."""
    aliases: dict[tuple[str, str], str | None] = {o: None for o in origins}  # (file, name) -> barrel it came through
    files_of = {o[0] for o in origins}
    for _ in range(MAX_ROUNDS):
        added = False
        for rel, f in facts.items():
            for exp, name, spec in f.get("reexports", ()):
                src = layout.resolve(rel, spec)
                if src in files_of and ((src, name) in aliases or (any_name and (src, "*") in aliases)) \
                        and (rel, exp) not in aliases:
                    aliases[(rel, exp)] = rel
                    files_of.add(rel)
                    added = True
            for spec in f.get("stars", ()):
                src = layout.resolve(rel, spec)
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
    for rel, f in facts.items():
        for local, name, spec in f.get("imports", ()):
            src = layout.resolve(rel, spec)
            if src not in files_of:
                continue
            key = (src, name)
            if key in aliases or (any_name and (src, "*") in aliases) or (name == "*" and any(
                    a[0] == src for a in aliases)):
                via = aliases.get(key) or (src if src not in {o[0] for o in origins} else None)
                out.setdefault(rel, (set(), spec, via))[0].add(name if name != "*" else f"* as {local}")
        for spec in f.get("side_imports", ()):
            if any_name and layout.resolve(rel, spec) in {o[0] for o in origins}:
                out.setdefault(rel, (set(), spec, None))
    for o_file in {o[0] for o in origins}:
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
