"""npm packages (``package.json``) and TypeScript path aliases (``tsconfig.json``) of a workspace.

:func:`read_package` gives a package's name and the source files its entry points name
(``exports``/``types``/``main`` mapped from the built ``dist/`` back to ``src/``, then
``src/index``); :func:`read_tsconfig` gives the ``baseUrl`` and ``paths`` aliases of a
tsconfig (JSON with comments and trailing commas, relative ``extends`` followed inside the workspace).
Both are read through the guarded reader (:mod:`server.workspace_files`): an ``extends`` naming
``../../dev/zero`` or a symlink out of the workspace is not followed.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from server import workspace_files


@dataclass(slots=True)
class Package:
    name: str
    dir: str  # relative folder holding package.json ("" for the workspace root)
    entries: list[str]  # candidate entry files (relative to dir), in preference order
    subpaths: dict[str, list[str]]  # "./sub" -> candidate files


def _to_source(path: str) -> list[str]:
    """``./dist/index.js`` -> ``src/index`` (and the path itself), extension stripped."""
    path = path.removeprefix("./")
    for ext in (".d.ts", ".js", ".mjs", ".cjs", ".ts"):
        if path.endswith(ext):
            path = path[: -len(ext)]
            break
    out = []
    for built in ("dist/", "build/", "lib/", "out/"):
        if path.startswith(built):
            out.append("src/" + path[len(built) :])
    out.append(path)
    return out


def _export_targets(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        out: list[str] = []
        for key in ("types", "import", "default", "require", "node"):
            if key in value:
                out.extend(_export_targets(value[key]))
        return out
    return []


def read_package(workspace: Path, rel: str) -> Package | None:
    """The npm package described by ``rel`` (a package.json), or None without a name."""
    try:
        data = json.loads(workspace_files.read_text(workspace, rel, errors="strict"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    entries: list[str] = []
    subpaths: dict[str, list[str]] = {}
    exports = data.get("exports")
    if isinstance(exports, str):
        exports = {".": exports}
    if isinstance(exports, dict):
        for key, value in exports.items():
            targets = [c for t in _export_targets(value) for c in _to_source(t)]
            if key == ".":
                entries.extend(targets)
            elif key.startswith("./"):
                subpaths[key[2:]] = targets
    for key in ("types", "typings", "module", "main"):
        if isinstance(data.get(key), str):
            entries.extend(_to_source(data[key]))
    entries.extend(["src/index", "index"])
    return Package(data["name"], posixpath.dirname(rel), list(dict.fromkeys(entries)), subpaths)


@dataclass(slots=True)
class TsConfig:
    dir: str  # folder of the tsconfig.json
    base: str  # baseUrl folder (relative to the workspace)
    paths: list[tuple[str, str, list[str]]]  # (prefix, suffix, targets) of "prefix*suffix" patterns
    exact: dict[str, list[str]]
    has_base_url: bool


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (tsconfig) -> JSON."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        ch = text[i]
        if in_str:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            out.append(ch)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        else:
            out.append(ch)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _compiler_options(workspace: Path, rel: str, depth: int = 0) -> tuple[dict, str]:
    """compilerOptions of a tsconfig (following relative ``extends``) and the folder baseUrl is relative to."""
    try:
        data = json.loads(_strip_jsonc(workspace_files.read_text(workspace, rel, errors="strict")))
    except (OSError, ValueError, RecursionError):  # outside the workspace, not a regular file, over 2 MB
        return {}, posixpath.dirname(rel)
    if not isinstance(data, dict):
        return {}, posixpath.dirname(rel)
    options: dict = {}
    origin = posixpath.dirname(rel)
    parent = data.get("extends")
    if isinstance(parent, str) and parent.startswith(".") and depth < 4:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), parent))
        if not target.endswith(".json"):
            target += ".json"
        options, origin = _compiler_options(workspace, target, depth + 1)
        options = dict(options)
    own = data.get("compilerOptions")
    if isinstance(own, dict):
        if "baseUrl" in own or "paths" in own:
            origin = posixpath.dirname(rel)
        options.update(own)
    return options, origin


def read_tsconfig(workspace: Path, rel: str) -> TsConfig | None:
    """The ``baseUrl``/``paths`` aliases of a tsconfig.json, or None when it declares none."""
    options, origin = _compiler_options(workspace, rel)
    base_url = options.get("baseUrl")
    paths = options.get("paths")
    if not isinstance(paths, dict) and not isinstance(base_url, str):
        return None
    base = posixpath.normpath(posixpath.join(origin, base_url)) if isinstance(base_url, str) else origin
    base = "" if base == "." else base
    patterns: list[tuple[str, str, list[str]]] = []
    exact: dict[str, list[str]] = {}
    for pattern, targets in (paths or {}).items():
        if not isinstance(targets, list):
            continue
        targets = [t for t in targets if isinstance(t, str)]
        if "*" in pattern:
            prefix, suffix = pattern.split("*", 1)
            patterns.append((prefix, suffix, targets))
        else:
            exact[pattern] = targets
    patterns.sort(key=lambda p: len(p[0]), reverse=True)
    return TsConfig(posixpath.dirname(rel), base, patterns, exact, isinstance(base_url, str))
