"""The gateway's HTTP routes, from the index's facts: NestJS ``@Controller('events')`` classes and their
``@Post()`` / ``@Get(':id')`` ... methods, under the global prefix (``app.setGlobalPrefix('api')``) and
URI versioning (``enableVersioning({ defaultVersion: '1' })``, ``@Controller({ path, version })``,
``@Version('2')``) found in the same repository.

A route is matched by method and path; ``:param`` segments match any segment. When no route matches
the full path, one whose path without prefix and version does is returned as ``heuristic``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tools.code_nav.consts import arg_value

if TYPE_CHECKING:
    from tools.mesh_index.workspace import Layout

ROUTE = re.compile(r"^\s*(GET|POST|PUT|PATCH|DELETE|OPTIONS|HEAD|ALL)\s+(/\S*)\s*$", re.I)
VERBS = {"Get": "GET", "Post": "POST", "Put": "PUT", "Patch": "PATCH", "Delete": "DELETE", "Options": "OPTIONS",
         "Head": "HEAD", "All": "ALL"}
OBJ_FIELD = re.compile(r"\b(path|version)\s*:\s*['\"`]([^'\"`]*)['\"`]")


@dataclass
class HttpRoute:
    verb: str
    path: str  # full path, with prefix and version
    bare: str  # controller + method path only
    file: str
    line: int
    symbol: str  # Controller.method
    repo: str


def parse_route(target: str) -> tuple[str, str] | None:
    m = ROUTE.match(target or "")
    return (m.group(1).upper(), m.group(2)) if m else None


def _join(*parts: str | None) -> str:
    segs = [s.strip("/") for s in parts if s and s.strip("/")]
    return "/" + "/".join(segs)


def _expr_text(expr: Any) -> tuple[str | None, str | None]:
    """(path, version) of a decorator argument: a string, or an object with ``path`` / ``version``."""
    if isinstance(expr, list) and expr and expr[0] == "s":
        return expr[1], None
    if isinstance(expr, list) and expr and expr[0] == "o":
        out: dict[str, str] = {}
        for entry in expr[1]:
            if isinstance(entry, list) and len(entry) >= 3 and entry[0] == "k" and isinstance(entry[1], str):
                val = entry[2]
                if isinstance(val, list) and val and val[0] == "s":
                    out[entry[1]] = val[1]
        return out.get("path"), out.get("version")
    if isinstance(expr, str):  # a method decorator's argument (string value or raw text)
        found = dict(OBJ_FIELD.findall(expr))
        return (found.get("path"), found.get("version")) if found else (expr, None)
    return None, None


def collect(facts: dict[str, dict[str, Any]], layout: Layout) -> list[HttpRoute]:
    prefixes: dict[str, tuple[str | None, str | None]] = {}
    for rel, f in facts.items():
        if "http_prefix" in f:
            prefixes.setdefault(layout.repo_of(rel), (f["http_prefix"][0], f["http_prefix"][1]))
    routes: list[HttpRoute] = []
    for rel, f in facts.items():
        mdecos = f.get("mdecos")
        if not mdecos:
            continue
        controllers: dict[str, tuple[str | None, str | None]] = {}
        for cls, info in f.get("classes", {}).items():
            for name, args in info.get("decorators", ()):
                if name == "Controller":
                    arg = args[0] if args else None
                    if isinstance(arg, list) and arg[:1] == ["r"]:  # a constant: @Controller(EVENTS_PATH)
                        arg = arg_value(["ref", ".".join(arg[1])], facts, layout, rel)
                    controllers[cls] = _expr_text(arg) if arg is not None else (None, None)
        repo = layout.repo_of(rel)
        prefix, default_version = prefixes.get(repo, (None, None))
        for cls, mname, line, decos in mdecos:
            if cls not in controllers:
                continue
            ctrl_path, ctrl_version = controllers[cls]
            version = next((arg_value(a[0], facts, layout, rel) for n, a in decos if n == "Version" and a),
                           None) or ctrl_version or default_version
            for name, args in decos:
                if name not in VERBS:
                    continue
                arg = arg_value(args[0], facts, layout, rel) if args else None
                if args and arg is None:
                    continue  # a path the index cannot evaluate: no route rather than a wrong one
                mpath = _expr_text(arg)[0] if arg is not None else None
                bare = _join(ctrl_path, mpath)
                full = _join(prefix, f"v{version}" if version else None, ctrl_path, mpath)
                routes.append(HttpRoute(VERBS[name], full, bare, rel, line, f"{cls}.{mname}", repo))
    return routes


def _matches(pattern: str, path: str) -> bool:
    a = [s for s in pattern.strip("/").split("/") if s]
    b = [s for s in path.strip("/").split("/") if s]
    return len(a) == len(b) and all(x.startswith(":") or x == "*" or x.lower() == y.lower() for x, y in zip(a, b,
                                                                                                        strict=True))


def find(routes: list[HttpRoute], verb: str, path: str) -> tuple[list[HttpRoute], bool]:
    """Routes answering ``verb path`` (exact), else those whose bare path does (heuristic: True)."""
    path = path.split("?", 1)[0]
    ok = [r for r in routes if r.verb in (verb, "ALL") and _matches(r.path, path)]
    if ok:
        return ok, False
    loose = [r for r in routes if r.verb in (verb, "ALL") and any(
        _matches(r.bare, "/" + "/".join(path.strip("/").split("/")[i:])) for i in range(0, 3))]
    return loose, True
