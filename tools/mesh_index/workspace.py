"""File discovery, repositories, npm packages and module resolution of a TypeScript workspace.

A workspace is a folder of git repositories side by side (or a single repository).
:func:`discover` lists the files the index reads (``.ts``/``.tsx``/``.mts``/``.cts``,
``.sql``, JSON config files) and the ``package.json`` files; :class:`Layout` answers which
repository a file belongs to and which file an import specifier names, including npm
names resolved through each package's ``package.json`` (``types``/``main``/``exports``
mapped from the built ``dist/`` back to ``src/``, with a ``src/index.ts`` fallback) and
ESM ``.js`` specifiers that name ``.ts`` files.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tools.mesh_index.packages import Package, TsConfig, read_package, read_tsconfig

__all__ = ["Discovery", "Layout", "Package", "SourceFile", "TsConfig", "discover", "find_stale", "read_package",
           "read_tsconfig"]

TS_EXTENSIONS = (".ts", ".tsx", ".mts", ".cts")
JSON_CONFIG_SKIP = {"package.json", "package-lock.json", "tsconfig.json", "composer.json", "yarn.lock"}
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file the index reads: path relative to the workspace, kind, size and mtime."""

    rel: str
    kind: str  # ts | tsx | sql | json
    size: int
    mtime_ns: int


def file_kind(name: str) -> str | None:
    """``ts``, ``tsx``, ``sql`` or ``json`` (config files only), else None."""
    if name.endswith(".tsx"):
        return "tsx"
    if name.endswith(TS_EXTENSIONS):
        return "ts"
    if name.endswith(".sql"):
        return "sql"
    if name.endswith(".json") and name not in JSON_CONFIG_SKIP and not name.startswith("tsconfig"):
        return "json"
    return None


def indexed_kind(rel: str) -> str | None:
    """The kind of file the index reads at ``rel`` (None for files it ignores)."""
    kind = file_kind(posixpath.basename(rel))
    return None if kind == "json" and not _json_wanted(rel) else kind


def _json_wanted(rel: str) -> bool:
    """JSON files read for names: those under a ``config`` folder or named ``*config*.json``."""
    parts = rel.split("/")
    return "config" in parts[:-1] or "config" in parts[-1].lower()


@dataclass(slots=True)
class Discovery:
    files: list[SourceFile]
    packages: list[str]  # package.json files
    tsconfigs: list[str]  # tsconfig.json files
    git_roots: list[str]
    dirs: dict[str, int]  # every folder walked -> its mtime, read before listing (an entry added or removed changes it)
    skipped: list[str] = field(default_factory=list)  # source files over MAX_FILE_BYTES, not indexed
    skill_files: list[str] = field(default_factory=list)  # SKILL.md files under .agents/skills/ or .claude/skills/
    started_ns: int = 0  # wall clock when the walk started (mtimes close to it prove nothing: see manifest.py)


def discover(workspace: Path, skip_dirs: Iterable[str], start: str = "",
             before_scan: Callable[[str], object] | None = None) -> Discovery:
    """Walk the workspace (or its folder ``start``): source files, package.json and tsconfig.json
    paths, git roots (relative, sorted) and the mtime of every folder walked.

    Directories named in ``skip_dirs`` (``node_modules``, ``dist``, ...) are not entered;
    symlinked directories are not followed; files over 2 MB are skipped (listed in ``skipped``).
    ``before_scan`` is called with each folder's absolute path right before it is read (the
    folder watches of :mod:`tools.mesh_index.watch` are set there). The ``SKILL.md`` files of skill
    folders met on the way are listed too (``skill_files``: the server's start-up walk gives them
    to the workspace-skills catalog, see :mod:`tools.mesh_index.warmup`).
    """
    started_ns = time.time_ns()
    skip = set(skip_dirs)
    files: list[SourceFile] = []
    packages: list[str] = []
    tsconfigs: list[str] = []
    git_roots: list[str] = []
    dirs: dict[str, int] = {}
    skipped: list[str] = []
    stack = [start]
    root = str(workspace)
    wanted = (*TS_EXTENSIONS, ".sql", ".json", ".git", ".md")
    skill_files: list[str] = []
    append = files.append
    while stack:
        rel_dir = stack.pop()
        abs_dir = root + "/" + rel_dir if rel_dir else root
        prefix = rel_dir + "/" if rel_dir else ""
        if before_scan is not None:
            before_scan(abs_dir)
        try:
            mtime = os.stat(abs_dir).st_mtime_ns  # before listing: an entry added meanwhile shows as a newer mtime
            with os.scandir(abs_dir) as it:
                entries = list(it)
        except OSError:
            continue
        dirs[rel_dir] = mtime
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name == ".git":
                        git_roots.append(rel_dir)
                    if name not in skip:
                        stack.append(prefix + name)
                    continue
                if not name.endswith(wanted):
                    continue
                rel = prefix + name
                if name in SKILL_FILE_NAMES:  # as the skills walk: whatever entry is not a folder
                    if _in_skill_folder(rel):
                        skill_files.append(rel)
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                if name.endswith(".json"):
                    if name == "package.json":
                        packages.append(rel)
                        continue
                    if name == "tsconfig.json":
                        tsconfigs.append(rel)
                        continue
                    if name.startswith("tsconfig") or name in JSON_CONFIG_SKIP or not _json_wanted(rel):
                        continue
                    kind = "json"
                elif name.endswith(".sql"):
                    kind = "sql"
                elif name.endswith(TS_EXTENSIONS):
                    kind = "tsx" if name.endswith(".tsx") else "ts"
                else:
                    if name == ".git":  # worktree or submodule marker file
                        git_roots.append(rel_dir)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_size <= MAX_FILE_BYTES:
                append(SourceFile(rel, kind, st.st_size, st.st_mtime_ns))
            else:
                skipped.append(rel)
    files.sort(key=lambda f: f.rel)
    return Discovery(files, sorted(packages), sorted(tsconfigs), sorted(set(git_roots)), dirs, sorted(skipped),
                     sorted(skill_files), started_ns)


SKILL_FILE_NAMES = ("SKILL.md", "skill.md")  # as resources.workspace_skills (not imported: it imports YAML)
SKILL_FOLDERS = (".agents", ".claude")


def _in_skill_folder(rel: str) -> bool:
    """``rel`` is under ``<.agents or .claude>/skills/`` (see resources.workspace_skills)."""
    parts = rel.split("/")[:-1]
    return any(part in SKILL_FOLDERS and parts[i + 1] == "skills" for i, part in enumerate(parts[:-1]))


def is_test_path(rel: str, markers: Iterable[str]) -> bool:
    """True when the path matches a test marker (``/tests/``, ``.spec.``, ...)."""
    probe = "/" + rel
    return any(m in probe for m in markers)


def migration_order(rel: str) -> int:
    """The timestamp a migration file name starts with (``1779115100001-AddX.ts``), else 0."""
    name = posixpath.basename(rel)
    digits = ""
    for ch in name:
        if ch.isdigit():
            digits += ch
        else:
            break
    return int(digits) if len(digits) >= 8 else 0


_COPY_MARKERS = ("/test/", "/tests/", "/__tests__/", "/fixtures/", "/fixture/", "/examples/", "/example/",
                 "/samples/", "/sample/", "/vendor/", "/tmp/")


def _package_preference(pkg: Package) -> tuple[int, int, str]:
    """Packages in test/fixture/example folders last, then the shallowest, then by path."""
    probe = "/" + pkg.dir + "/"
    return (1 if any(m in probe for m in _COPY_MARKERS) else 0, pkg.dir.count("/"), pkg.dir)


class Layout:
    """Repositories, packages and module resolution over the discovered file set."""

    def __init__(self, workspace: Path, files: Iterable[str], packages: Iterable[Package], git_roots: list[str],
                 tsconfigs: Iterable[TsConfig] = ()):
        self.workspace = workspace
        self.tsconfigs = sorted(tsconfigs, key=lambda t: len(t.dir), reverse=True)
        self.files = set(files)
        self.packages: dict[str, Package] = {}
        for pkg in sorted(packages, key=_package_preference):  # a name declared twice: the real one wins
            self.packages.setdefault(pkg.name, pkg)
        self.package_dirs = sorted((p.dir for p in self.packages.values()), key=len, reverse=True)
        self.git_roots = sorted((r for r in git_roots if r), key=len, reverse=True)
        self.root_is_repo = "" in git_roots
        self._cache: dict[tuple[str, str], str | None] = {}
        self._git_set = set(self.git_roots)
        self._package_set = set(self.package_dirs)
        self._tsconfig_by_dir = {t.dir: t for t in self.tsconfigs}
        self._tsconfig_set = set(self._tsconfig_by_dir)
        self._repo_memo: dict[str, str | None] = {}
        self._package_memo: dict[str, str | None] = {}
        self._tsconfig_memo: dict[str, str | None] = {}

    @staticmethod
    def _nearest(rel: str, dirs: set[str], memo: dict[str, str | None]) -> str | None:
        """The deepest folder of ``dirs`` holding ``rel`` (memoized per folder)."""
        start = posixpath.dirname(rel)
        if start in memo:
            return memo[start]
        cur = start
        found: str | None = None
        while True:
            if cur in dirs:
                found = cur
                break
            if not cur:
                break
            cur = posixpath.dirname(cur)
        memo[start] = found
        return found

    def repo_of(self, rel: str) -> str:
        """The git repository holding ``rel`` (its folder path), else the top-level folder."""
        root = self._nearest(rel, self._git_set, self._repo_memo) if self._git_set else None
        if root:
            return root
        if self.root_is_repo or "/" not in rel:
            return self.workspace.name
        return rel.split("/", 1)[0]

    def package_dir_of(self, rel: str) -> str:
        """The folder of the nearest package.json above ``rel`` ("" when none)."""
        return self._nearest(rel, self._package_set, self._package_memo) or ""

    def _file(self, base: str) -> str | None:
        base = posixpath.normpath(base)
        if base.startswith("../"):
            return None
        stem = base
        for ext in (".js", ".mjs", ".cjs", ".jsx"):
            if base.endswith(ext):
                stem = base[: -len(ext)]
                break
        candidates = [base] if base.endswith(TS_EXTENSIONS) else []
        for s in dict.fromkeys((stem, base)):
            candidates += [s + ".ts", s + ".tsx", s + ".mts", s + ".cts", s + ".d.ts"]
            candidates += [s + "/index.ts", s + "/index.tsx", s + "/index.d.ts"]
        for cand in candidates:
            if cand in self.files:
                return cand
        return None

    def resolve(self, importer: str, spec: str) -> str | None:
        """The workspace file an import of ``spec`` from ``importer`` names, or None (external)."""
        if spec.startswith("."):
            key = (posixpath.dirname(importer), spec)
        else:
            ts = self._tsconfig_of(importer) if self.tsconfigs else None
            key = ("\0" + (ts.dir if ts else ""), spec)
        if key in self._cache:
            return self._cache[key]
        if spec.startswith("."):
            found = self._file(posixpath.join(key[0], spec))
        else:
            found = self._resolve_alias(importer, spec) if self.tsconfigs else None
            if found is None:
                found = self._resolve_package(spec)
        self._cache[key] = found
        return found

    def _tsconfig_of(self, rel: str) -> TsConfig | None:
        found = self._nearest(rel, self._tsconfig_set, self._tsconfig_memo) if self.tsconfigs else None
        return self._tsconfig_by_dir.get(found) if found is not None else None

    def _resolve_alias(self, importer: str, spec: str) -> str | None:
        """``spec`` through the ``paths``/``baseUrl`` of the tsconfig nearest ``importer``."""
        ts = self._tsconfig_of(importer)
        if ts is None:
            return None
        join = (lambda p: posixpath.join(ts.base, p)) if ts.base else (lambda p: p)
        for target in ts.exact.get(spec, ()):
            found = self._file(join(target))
            if found:
                return found
        for prefix, suffix, targets in ts.paths:
            if spec.startswith(prefix) and spec.endswith(suffix) and len(spec) >= len(prefix) + len(suffix):
                star = spec[len(prefix):len(spec) - len(suffix)]
                for target in targets:
                    found = self._file(join(target.replace("*", star, 1)))
                    if found:
                        return found
        if ts.has_base_url:
            return self._file(join(spec))
        return None

    def _resolve_package(self, spec: str) -> str | None:
        parts = spec.split("/")
        cut = 2 if spec.startswith("@") else 1
        name, sub = "/".join(parts[:cut]), "/".join(parts[cut:])
        pkg = self.packages.get(name)
        if pkg is None:
            return None
        join = (lambda p: posixpath.join(pkg.dir, p)) if pkg.dir else (lambda p: p)
        if not sub:
            for entry in pkg.entries:
                found = self._file(join(entry))
                if found:
                    return found
            return None
        for target in pkg.subpaths.get(sub, []):
            found = self._file(join(target))
            if found:
                return found
        cands = ["src/" + sub, sub]
        for built in ("dist/", "build/", "lib/", "out/"):  # a deep import of the built output: its source
            if sub.startswith(built):
                cands.insert(0, "src/" + sub[len(built):])
        for cand in cands:
            found = self._file(join(cand))
            if found:
                return found
        return None


def find_stale(workspace: Path, files: dict[str, tuple[int, int, str]], dirs: dict[str, int],
               skip_dirs: Iterable[str]) -> list[str]:
    """Indexed files changed or removed (one stat each), and files added in folders whose mtime changed."""
    root = str(workspace)
    skip = set(skip_dirs)
    stale = []
    for rel, (size, mtime, _sha) in files.items():
        try:
            st = os.stat(os.path.join(root, rel))
        except OSError:
            stale.append(rel)
            continue
        if st.st_size != size or st.st_mtime_ns != mtime:
            stale.append(rel)
    for rel_dir, mtime in dirs.items():
        abs_dir = os.path.join(root, rel_dir) if rel_dir else root
        try:
            if os.stat(abs_dir).st_mtime_ns == mtime:
                continue
            entries = list(os.scandir(abs_dir))
        except OSError:
            continue  # removed: its files were reported above
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                if rel not in dirs and entry.name not in skip:
                    stale.extend(f.rel for f in discover(workspace, skip, rel).files)
            elif rel not in files and indexed_kind(rel) is not None:
                stale.append(rel)
    return sorted(set(stale))
