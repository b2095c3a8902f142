"""contract-newer-than-pin (heuristic): a service using a contract member its pinned version lacks.

The contracts package is ``[conventions.static] messaging_package``; its versions come from its
changelog (``[conventions.lint] changelog_files``: ``## [1.4.0]`` / ``## v1.4.0`` sections). A
member (``Enum.MEMBER``) or value is *introduced* by the oldest section naming it. A service's
pinned version is read from its lock files (``package-lock.json`` ``packages`` /
``dependencies``, ``yarn.lock`` entries) or ``resolutions`` / ``overrides`` in its package.json;
a range without a lock is not judged. Uses are the index's production sites in the service
(producers, handlers, workers routing a job, post-processors accepting a type).
"""

from __future__ import annotations

import json
import re

from server import workspace_files
from tools.lint.context import LintContext
from tools.lint.model import Evidence, Finding

_HEADING = re.compile(r"^#{1,4}\s*\[?v?(\d+)\.(\d+)\.(\d+)\b")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")

Version = tuple[int, int, int]
MAX_TEXT_BYTES = 2_000_000
MAX_LOCK_BYTES = 64_000_000  # a package-lock.json of a large service is tens of MB


def _version(text: str) -> Version | None:
    m = _VERSION.match(text.strip().lstrip("=^~"))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _fmt(v: Version) -> str:
    return ".".join(map(str, v))


_ADDED = re.compile(r"\badd|\bnew\b|introduc|\bfeat", re.I)


def _read(ctx: LintContext, rel: str, max_bytes: int = MAX_TEXT_BYTES) -> str | None:
    """A workspace file's text through the guarded reader; None when missing, refused or over the cap."""
    try:
        return workspace_files.read_text(ctx.workspace, rel, max_bytes)
    except OSError:
        return None


def changelog(text: str) -> list[tuple[Version, int, str]]:
    """(version, line, text of the section's additions) in file order.

    A line counts as an addition when it, or the sub-heading it sits under (``### Added``,
    ``### Features``), says so (add / new / introduce / feat): a later fix that names an
    older member is not its birth.
    """
    sections: list[tuple[Version, int, list[str]]] = []
    heading = ""
    for i, line in enumerate(text.splitlines(), start=1):
        m = _HEADING.match(line)
        if m:
            sections.append(((int(m.group(1)), int(m.group(2)), int(m.group(3))), i, []))
            heading = ""
        elif line.lstrip().startswith("#"):
            heading = line
        elif sections and (_ADDED.search(line) or _ADDED.search(heading)):
            sections[-1][2].append(line)
    return [(v, line, "\n".join(body)) for v, line, body in sections]


def pinned(ctx: LintContext, package_dir: str, name: str) -> tuple[Version, str, int] | None:
    base = f"{package_dir}/" if package_dir else ""
    for lock in ctx.lint.lock_files:
        text = _read(ctx, base + lock, MAX_LOCK_BYTES)
        if text is None:
            continue
        if lock.endswith(".json"):
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):
                continue
            entry = (data.get("packages") or {}).get(f"node_modules/{name}") \
                or (data.get("dependencies") or {}).get(name)
            if isinstance(entry, dict) and (v := _version(str(entry.get("version", "")))):
                line = next((i for i, ln in enumerate(text.splitlines(), 1) if f'"node_modules/{name}"' in ln
                             or f'"{name}"' in ln), 1)
                return v, f"{package_dir}/{lock}".lstrip("/"), line
        else:
            lines = text.splitlines()
            for i, ln in enumerate(lines):
                if not ln.startswith((" ", "\t")) and (f'"{name}@' in ln or ln.startswith(f"{name}@")):
                    for follow in lines[i + 1:i + 6]:
                        m = re.match(r'\s+version:?\s+"?([^"\s]+)"?', follow)
                        if m and (v := _version(m.group(1))):
                            return v, f"{package_dir}/{lock}".lstrip("/"), i + 1
    manifest = _read(ctx, base + "package.json")
    try:
        data = json.loads(manifest or "")
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    for field in ("resolutions", "overrides"):
        value = (data.get(field) or {}).get(name) if isinstance(data.get(field), dict) else None
        if isinstance(value, str) and re.match(r"^v?\d+\.\d+\.\d+$", value.strip()):
            line = next((i for i, ln in enumerate((manifest or "").splitlines(), 1) if f'"{name}"' in ln
                         and field not in ln), 1)
            return _version(value), f"{package_dir}/package.json".lstrip("/"), line  # type: ignore[return-value]
    return None


def check(ctx: LintContext) -> list[Finding]:
    contracts_dir = ctx.static.messaging_package.strip("/")
    try:
        contracts_name = json.loads(_read(ctx, f"{contracts_dir}/package.json".lstrip("/")) or "").get("name")
    except (ValueError, RecursionError, AttributeError):
        return []
    sections: list[tuple[Version, int, str]] = []
    log_file = ""
    for name in ctx.lint.changelog_files:
        text = _read(ctx, f"{contracts_dir}/{name}".lstrip("/"))
        if text is not None:
            sections, log_file = changelog(text), f"{contracts_dir}/{name}"
            break
    if not sections or not contracts_name:
        return []
    introduced: dict[tuple[str, str], tuple[Version, int, str]] = {}  # key -> (version, line, member)
    for key, info in ctx.idx.declared.items():
        member = info.name.rsplit(".", 1)[-1]
        pattern = re.compile(rf"(?<![\w:-])(?:{re.escape(member)}|{re.escape(info.value)})(?![\w:-])")
        hits = [(v, line) for v, line, body in sections if pattern.search(body)]
        if hits:
            v, line = min(hits)
            introduced[key] = (v, line, info.name)
    if not introduced:
        return []
    uses: dict[str, list[tuple[tuple[str, str], str, int, str]]] = {}  # package -> (key, file, line, how)
    for key, sites in ctx.idx.producers.items():
        for s in sites:
            if not s.test_only and key in introduced:
                uses.setdefault(ctx.package_of(s.file), []).append((key, s.file, s.line, s.kind))
    for h in ctx.idx.handlers.values():
        for job in h.jobs:
            if not h.site.test_only and ("job", job) in introduced:
                uses.setdefault(ctx.package_of(h.site.file), []).append((("job", job), h.site.file, h.site.line,
                                                                         "handler"))
    for pp in ctx.idx.post_processors.values():
        for value in pp.accepts:
            if not pp.site.test_only and ("event", value) in introduced:
                uses.setdefault(ctx.package_of(pp.site.file), []).append((("event", value), pp.site.file,
                                                                          pp.site.line, "post-processor filter"))
    findings = []
    for package in sorted(uses):
        if package == contracts_dir:
            continue
        pin = pinned(ctx, package, contracts_name)
        if pin is None:
            continue
        version, lock_file, lock_line = pin
        seen: set[tuple[str, str]] = set()
        for key, file, line, how in sorted(uses[package], key=lambda u: (u[1], u[2], u[0])):
            added, log_line, member = introduced[key]
            if added <= version or key in seen:
                continue
            seen.add(key)
            findings.append(Finding(
                code="contract-newer-than-pin", severity="warning", file=file, line=line, heuristic=True,
                message=f"{package} uses {member} ('{key[1]}', {how}), which {contracts_name}'s changelog first names "
                        f"in {_fmt(added)}, but {package} pins {contracts_name} {_fmt(version)}: at run time the "
                        "member is undefined (heuristic: judged from the changelog)",
                fix=f"upgrade {contracts_name} to {_fmt(added)} or later in {package} (and its lock file)",
                evidence=[Evidence(file=file, line=line, note=f"uses {member} ({how})"),
                          Evidence(file=log_file, line=log_line, note=f"{member} appears in {_fmt(added)}"),
                          Evidence(file=lock_file, line=lock_line, note=f"pins {contracts_name} {_fmt(version)}")],
                subject=f"contract:{package}:{key[0]}:{key[1]}",
            ))
    return findings
