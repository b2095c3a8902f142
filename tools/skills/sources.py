"""A skill's ``sources`` and ``verified`` records: do the sources still exist, and did they change?

The digest mesh-mcp computes (:func:`sources_digest`) is the first 16 hex characters of a
SHA-256 over every source in the order listed: for a file, its path relative to the workspace,
a newline, its bytes, a newline; for a folder, the same for each file under it in sorted path
order. When the newest ``verified`` record's digest equals it, nothing changed. When it does not,
the answer is ``source_unverified``: a source changed, or the record was computed another way.

No program is run: git is never asked (a workspace can lay out any folder as a repository whose
``.git/config`` runs a command, ``core.fsmonitor`` and the like), and every file is read through
the guarded reader (:mod:`server.workspace_files`). A ``resource`` that is absolute or leaves the
workspace with ``..`` is refused (``source_outside``) before anything is touched: no existence
probe, no digest of a file outside.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from server import workspace_files

MAX_SOURCE_FILES = 2_000
MAX_SOURCE_FILE_BYTES = 2_000_000
MAX_DIGEST_BYTES = 64_000_000


@dataclass(frozen=True)
class Source:
    id: str
    resource: str


@dataclass(frozen=True)
class SourceVerdict:
    code: str
    """``source_missing``, ``source_outside``, ``source_unverified`` or ``ok``."""
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
    """The files of a source (itself, or those under the folder), symlinked folders not entered."""
    path = root / rel
    if not path.is_dir() or path.is_symlink():
        return [rel]
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):  # followlinks=False: a linked folder is not entered
        dirnames[:] = sorted(d for d in dirnames if d not in ("node_modules", ".git", "dist"))
        for name in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
            if len(files) >= MAX_SOURCE_FILES:
                return sorted(files)
    return sorted(files)


def sources_digest(root: Path, sources: list[Source]) -> str | None:
    """mesh-mcp's digest of the sources (see the module docstring); None when they hold more than
    :data:`MAX_DIGEST_BYTES`. A file the guarded reader refuses (a symlink out, a FIFO, over the cap)
    counts as its path and the word ``refused``: the digest of such a source never matches."""
    digest = hashlib.sha256()
    total = 0
    for source in sources:
        for rel in _files_of(root, source.resource.rstrip("/")):
            digest.update(rel.encode() + b"\n")
            try:
                data = workspace_files.read_bytes(root, rel, MAX_SOURCE_FILE_BYTES)
            except OSError:
                data = b"\0refused"
            total += len(data)
            if total > MAX_DIGEST_BYTES:
                return None
            digest.update(data + b"\n")
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


def _exists(root: Path, rel: str) -> bool:
    return os.path.lexists(root / rel)


def _leaves_by_link(root: Path, rel: str) -> bool:
    """``rel`` (relative, no ``..`` out) resolves outside the workspace through a symlink on its way."""
    try:
        workspace_files.resolved_inside(root, rel)
    except workspace_files.UnsafeWorkspaceFile:
        return True
    return False


def check_sources(root: Path, front_matter: dict[str, Any]) -> list[SourceVerdict]:
    """Sources outside the workspace (refused, never looked at), missing sources, then (when a
    verification digest is recorded) whether the digest still matches."""
    out: list[SourceVerdict] = []
    inside: list[Source] = []
    for s in sources_of(front_matter):
        rel = workspace_files.relative_inside(root, s.resource)
        if rel is None or rel == "":
            out.append(SourceVerdict(
                "source_outside", s.resource,
                f"sources[{s.id}] names {s.resource}, which is not a path inside the workspace (absolute, or "
                "leaving it with '..'): not looked at; name a file or folder relative to the workspace root"))
        elif _leaves_by_link(root, rel):
            out.append(SourceVerdict(
                "source_outside", s.resource,
                f"sources[{s.id}] names {s.resource}, which leads out of the workspace through a symlink: not "
                "looked at; name a file or folder of the workspace itself"))
        else:
            inside.append(Source(s.id, rel))
    out += [SourceVerdict("source_missing", s.resource, f"sources[{s.id}] names {s.resource}, which does not exist")
            for s in inside if not _exists(root, s.resource)]
    record = _latest_record(front_matter)
    present = [s for s in inside if _exists(root, s.resource)]
    if record is None or not present:
        return out
    when, recorded = record
    ours = sources_digest(root, present)
    if ours == recorded:
        return out
    names = ", ".join(s.resource for s in present)
    out.append(SourceVerdict(
        "source_unverified", names,
        f"unknown whether these changed since {when.isoformat()}: the recorded digest {recorded} is not "
        f"mesh-mcp's digest of them now ({ours or 'not computed: over ' + str(MAX_DIGEST_BYTES) + ' bytes'}; "
        "sha256 of path + content of each source, first 16 hex). A source changed, or the record was computed "
        "another way; git history is not consulted (a workspace's git configuration can run programs). "
        "Re-check the skill, then record the new digest",
    ))
    return out
