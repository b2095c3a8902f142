"""A skill's ``sources`` and ``verified`` records: do the sources still exist, and did they change?

The digest mesh-mcp computes (:func:`sources_digest`) is the first 16 hex characters of a
SHA-256 over every source in the order listed: for a file, its path relative to the workspace,
a newline, its bytes, a newline; for a folder, the same for each file under it in sorted path
order. When the newest ``verified`` record's digest equals it, nothing changed. When it does not
(the record may have been computed another way), git decides: a commit touching a source after
the record's time, or an uncommitted change, is evidence of a change; no such commit means
unchanged; with no git history the answer is ``unknown`` and said so.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

GIT_TIMEOUT_S = 5.0
MAX_SOURCE_FILES = 2_000


@dataclass(frozen=True)
class Source:
    id: str
    resource: str


@dataclass(frozen=True)
class SourceVerdict:
    code: str
    """``source_missing``, ``source_changed``, ``source_unverified`` or ``ok``."""
    resource: str
    message: str


def sources_of(front_matter: dict[str, Any]) -> list[Source]:
    """The ``sources`` entries that name a ``resource`` path (URLs are not ours to check)."""
    out = []
    for i, item in enumerate(front_matter.get("sources") or []):
        if isinstance(item, dict) and isinstance(item.get("resource"), str):
            resource = item["resource"].strip()
            if resource and "://" not in resource:
                out.append(Source(str(item.get("id") or i), resource))
        elif isinstance(item, str) and item.strip() and "://" not in item:
            out.append(Source(str(i), item.strip()))
    return out


def _files_of(root: Path, rel: str) -> list[str]:
    path = root / rel
    if path.is_file():
        return [rel]
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in ("node_modules", ".git", "dist"))
        for name in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
            if len(files) >= MAX_SOURCE_FILES:
                return sorted(files)
    return sorted(files)


def sources_digest(root: Path, sources: list[Source]) -> str:
    """mesh-mcp's digest of the sources (see the module docstring)."""
    digest = hashlib.sha256()
    for source in sources:
        for rel in _files_of(root, source.resource.rstrip("/")):
            digest.update(rel.encode() + b"\n")
            digest.update((root / rel).read_bytes() + b"\n")
    return digest.hexdigest()[:16]


def _latest_record(front_matter: dict[str, Any]) -> tuple[datetime, str] | None:
    best = None
    for item in front_matter.get("verified") or []:
        if not isinstance(item, dict) or not item.get("digest"):
            continue
        at = item.get("at")
        when = at if isinstance(at, datetime) else None
        if isinstance(at, str):
            try:
                when = datetime.fromisoformat(at.replace("Z", "+00:00"))
            except ValueError:
                when = None
        if when is None:
            continue
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        if best is None or when > best[0]:
            best = (when, str(item["digest"]))
    return best


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_change_since(root: Path, rel: str, since: datetime) -> str | bool | None:
    """A description of the change after ``since``, False if none, None if git cannot tell."""
    path = root / rel
    cwd = path if path.is_dir() else path.parent
    if _git(cwd, "rev-parse", "--is-inside-work-tree") is None:
        return None
    log = _git(cwd, "log", "-1", "--format=%h %cI", f"--since={since.isoformat()}", "--", str(path))
    if log is None:
        return None
    if log.strip():
        commit, _, when = log.strip().partition(" ")
        return f"commit {commit} on {when} touched it"
    status = _git(cwd, "status", "--porcelain", "--", str(path))
    if status:
        return "it has uncommitted changes"
    return False


def check_sources(root: Path, front_matter: dict[str, Any]) -> list[SourceVerdict]:
    """Missing sources, then (when a verification digest is recorded) whether they changed since."""
    sources = sources_of(front_matter)
    out = [SourceVerdict("source_missing", s.resource, f"sources[{s.id}] names {s.resource}, which does not exist")
           for s in sources if not (root / s.resource).exists()]
    record = _latest_record(front_matter)
    present = [s for s in sources if (root / s.resource).exists()]
    if record is None or not present:
        return out
    when, recorded = record
    if sources_digest(root, present) == recorded:
        return out
    unknown = []
    for source in present:
        change = _git_change_since(root, source.resource, when)
        if change is None:
            unknown.append(source.resource)
        elif change:
            out.append(SourceVerdict("source_changed", source.resource,
                                     f"changed after the last verification ({when.isoformat()}): {change}"))
    if unknown:
        out.append(SourceVerdict(
            "source_unverified", ", ".join(unknown),
            f"unknown whether these changed since {when.isoformat()}: the recorded digest {recorded} is not "
            "mesh-mcp's (sha256 of path + content of each source, first 16 hex) and they have no git history",
        ))
    return out
