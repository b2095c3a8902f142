"""Reading the (untrusted) workspace for the code-navigation tools: bounded walks, safe reads, scopes.

Files are read only through the guarded reader :mod:`server.workspace_files` (inside the workspace,
regular files under a size cap, a FIFO never blocks, the opened descriptor's real path checked); walks do not follow
symlinked folders and stop at a file and folder budget; text shown to a client has its
control characters (terminal escapes) removed.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from server import workspace_files
from server.errors import InvalidArgument

MAX_READ = 2 * 1024 * 1024
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` without control characters (terminal escapes, bidi overrides); tabs and newlines kept."""
    return CONTROL.sub("", text)


def read_text(workspace: Path, rel: str, cap: int = MAX_READ) -> str | None:
    """The text of workspace file ``rel`` (None: missing, outside the workspace, not a regular file or over ``cap``)."""
    data = read_bytes(workspace, rel, cap)
    return None if data is None else data.decode("utf-8", "replace")


def read_bytes(workspace: Path, rel: str, cap: int = MAX_READ) -> bytes | None:
    """The bytes of workspace file ``rel`` (None: missing, outside the workspace, not a regular file or
    over ``cap``). Read through the one guarded reader (:mod:`server.workspace_files`): a symlink or a
    folder swapped for one is followed only inside the workspace, the opened descriptor checked again."""
    try:
        return workspace_files.read_bytes(workspace, rel, cap)
    except (OSError, ValueError):
        return None


@dataclass
class Walk:
    files: list[str] = field(default_factory=list)
    truncated: bool = False


def walk(workspace: Path, suffixes: tuple[str, ...], skip_dirs: Iterable[str], *, start: str = "",
         max_files: int = 5000, max_dirs: int = 50000) -> Walk:
    """Relative paths of the regular files ending with ``suffixes`` (case-insensitive), bounded."""
    skip = set(skip_dirs)
    out = Walk()
    stack = [start]
    seen_dirs = 0
    root = str(workspace)
    while stack:
        rel_dir = stack.pop()
        seen_dirs += 1
        if seen_dirs > max_dirs:
            out.truncated = True
            break
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip and entry.name != ".git" and entry.name != ".mesh":
                        stack.append(rel)
                elif entry.name.lower().endswith(suffixes) and entry.is_file(follow_symlinks=False):
                    out.files.append(rel)
                    if len(out.files) >= max_files:
                        out.truncated = True
                        return out
            except OSError:
                continue
    out.files.sort()
    return out


def confine(workspace: Path, scope: str | None, repos: Iterable[str] = ()) -> str | None:
    """The workspace-relative folder ``scope`` names (a repository or a folder), or None for all.

    Refuses a path leaving the workspace (absolute elsewhere, ``..``, a symlink out) with a clear error."""
    if scope is None or not scope.strip() or scope.strip() in (".", "/"):
        return None
    raw = scope.strip()
    ws = workspace.resolve()
    if os.path.isabs(raw):
        try:
            raw = str(Path(raw).resolve().relative_to(ws))
        except ValueError:
            raise InvalidArgument(f"scope {scope!r} is outside the workspace {ws}: give a repository name or a "
                                  "folder relative to the workspace") from None
        if raw == ".":
            return None
    rel = posixpath.normpath(raw.replace("\\", "/")).strip("/")
    if rel.startswith("..") or rel == "..":
        raise InvalidArgument(f"scope {scope!r} leaves the workspace: give a repository name or a folder inside it")
    if rel == ".":
        return None
    target = (ws / rel).resolve()
    try:
        target.relative_to(ws)
    except ValueError:
        raise InvalidArgument(f"scope {scope!r} resolves outside the workspace (symlink?)") from None
    if not target.is_dir():
        names = sorted(set(repos))
        if rel in names:
            return rel
        close = [n for n in names if rel.lower() in n.lower()][:5]
        raise InvalidArgument(f"scope {scope!r} is not a folder of the workspace" +
                              (f"; repositories like it: {', '.join(close)}" if close else
                               ": give a repository name or a folder relative to the workspace"))
    return rel


def in_scope(rel: str, scope: str | None) -> bool:
    return scope is None or rel == scope or rel.startswith(scope + "/")
