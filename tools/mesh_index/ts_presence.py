"""Is there any TypeScript source in the workspace? Asked before a static command builds (and writes) an index.

A wrong ``--workspace`` (a typo, the parent folder in CI) must not pass as "no finding" / "files 0", nor
leave a ``.mesh/`` folder there. The walk is bounded and stops at the first source file; it skips the
folders the index skips (``node_modules``, ...) and never follows a symlink.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from server.errors import MeshError
from tools.mesh_index.workspace import TS_EXTENSIONS

MAX_ENTRIES = 200_000
"""Directory entries looked at before giving up the search (then the command goes on: not proven empty)."""


def has_typescript(root: Path, skip_dirs: Iterable[str], max_entries: int = MAX_ENTRIES) -> bool | None:
    """True at the first TypeScript file; False when the whole tree was walked without one; None past the cap."""
    skip = set(skip_dirs)
    stack = [str(root)]
    seen = 0
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > max_entries:
                        return None
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in skip and entry.name != ".git":
                            stack.append(entry.path)
                    elif entry.name.endswith(TS_EXTENSIONS) and not entry.name.endswith(".d.ts"):
                        return True
        except OSError:
            continue  # an unreadable folder: the others may still hold sources
    return False


def require_typescript(workspace: Path, skip_dirs: Iterable[str]) -> None:
    """Raise a ``MeshError`` (exit 2) when ``workspace`` holds no TypeScript source at all."""
    if not Path(workspace).is_dir():
        raise MeshError(f"workspace '{workspace}' is not a directory: pass --workspace DIR (a folder of repositories)")
    if has_typescript(Path(workspace), skip_dirs) is False:
        raise MeshError(
            f"workspace '{workspace}' holds no TypeScript source (no .ts, .tsx, .mts or .cts file outside "
            "node_modules and the other skipped folders): is --workspace the folder of the repositories? "
            "Nothing was indexed and nothing written there")
