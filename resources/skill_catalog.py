"""The workspace's skills as they are now, re-read only when the files changed.

A running server lists, reads, links and checks the workspace's ``SKILL.md`` files through one
:class:`SkillCatalog`. Its answer is the last discovery (:func:`discover_workspace_skills`, a
bounded walk) as long as a cheap freshness check holds:

- every folder the last walk entered still has the mtime it had before it was listed (adding,
  removing or renaming a file or folder in a folder changes that folder's mtime, so a new
  ``.agents/skills/x/SKILL.md`` or a new ``.claude`` folder anywhere is seen): one ``stat`` per
  folder, no listing;
- every ``SKILL.md`` found still has its size and mtime (an edit in place).

When a folder changed the walk is done again; when only a SKILL.md changed, that file alone is
read again. In the server, where the static index keeps an inotify watch on every folder (the same
folders as this walk), the index's :meth:`watch_generation` says first whether anything at all
changed since the last check: when nothing did, no ``stat`` is made (the check was one ``stat``
per folder per call: 10 ms at 20,000 files). Mtimes less than two seconds older than the walk
prove nothing (a change in the same tick of a coarse file-system clock keeps the mtime): until
they are older, each call walks again.
``walks`` and ``reads`` count both, so callers (and tests) can see what was redone.
Nothing here imports MCP.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from resources.workspace_skills import (
    SKILL_FOLDERS,
    SkillDiscovery,
    discover_workspace_skills,
    file_stat,
    is_racy,
    read_skill_file,
)


class SkillCatalog:
    """The workspace skills of one workspace, kept fresh by :meth:`current`."""

    def __init__(self, workspace: Path, skip_dirs: list[str] | tuple[str, ...] = (),
                 changes: Callable[[], int | None] | None = None) -> None:
        """``changes``: a number that stays the same while nothing in the workspace's folders changes,
        None when it cannot tell (see :meth:`tools.mesh_index.service.IndexService.watch_generation`)."""
        self.workspace = Path(workspace)
        self.skip_dirs = tuple(skip_dirs)
        self._changes = changes
        self._checked_at: int | None = None  # the number ``changes`` gave when the last check held
        self._linked: list[str] = []  # the SKILL.md files that are symbolic links (stat'ed on every call)
        self.walks = 0
        """How many times the workspace was walked."""
        self.reads = 0
        """How many times one SKILL.md was read again without a walk."""
        self._found: SkillDiscovery | None = None
        self._lock = threading.Lock()

    def current(self) -> SkillDiscovery:
        """The skills as they are on disk now (walked again only when a folder changed)."""
        with self._lock:
            generation = self._changes() if self._changes is not None else None
            found = self._found
            quiet = found is not None and not found.racy and generation is not None and generation == self._checked_at
            self._checked_at = None
            if found is not None and quiet:  # the watches saw nothing change: only linked SKILL.md files are
                check = self._linked  # stat'ed (an edit of a link's target is outside the watched folders)
            elif found is None or found.racy or self._folders_changed(found):
                self.walks += 1
                self._found = found = discover_workspace_skills(self.workspace, self.skip_dirs)
                self._linked = self._links_of(found)
                check = []
            else:
                check = list(found.files)
            changed = [rel for rel in check if file_stat(self.workspace / rel) != found.files[rel]]
            if changed:
                self._found = found = self._reread(found, changed)
            if not found.racy:
                self._checked_at = generation
            return found

    def _links_of(self, found: SkillDiscovery) -> list[str]:
        """The SKILL.md files of ``found`` that are symbolic links."""
        return [rel for rel in found.files if os.path.islink(self.workspace / rel)]

    def seed(self, found: SkillDiscovery) -> None:
        """Start from ``found`` (made from another walk of the same folders) unless a walk was made already;
        :meth:`current` checks it as it checks its own."""
        with self._lock:
            if self._found is None:
                self._found = found
                self._linked = self._links_of(found)

    def _folders_changed(self, found: SkillDiscovery) -> bool:
        root = str(self.workspace)
        for rel_dir, mtime in found.dirs.items():
            try:
                if os.stat(f"{root}/{rel_dir}" if rel_dir else root).st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False

    def _reread(self, found: SkillDiscovery, changed: list[str]) -> SkillDiscovery:
        files = dict(found.files)
        by_path = {skill.rel_path: skill for skill in found.skills}
        started = time.time_ns()
        for rel in changed:
            old = by_path[rel]
            files[rel] = file_stat(self.workspace / rel)
            by_path[rel] = read_skill_file(self.workspace, rel, old.repo, old.slug)
            self.reads += 1
        skills = sorted(by_path.values(), key=lambda s: s.uri)
        racy = is_racy((files[rel][1] for rel in changed), started)
        return replace(found, skills=skills, files=files, racy=racy)


def get_skill_catalog(runtime: Any) -> SkillCatalog | None:
    """The runtime's :class:`SkillCatalog` (None when no workspace is configured), built once."""
    settings = runtime.settings
    if settings.workspace is None:
        return None
    skip = settings.conventions.static.skip_dirs
    # the index's watches cover this walk's folders unless a skill folder is skipped there (then the
    # walk enters folders the index does not watch: it checks them itself)
    watched = not any(d in SKILL_FOLDERS for d in skip)
    return runtime.service(
        "workspace_skills",
        lambda: SkillCatalog(settings.workspace, skip, (lambda: _index_generation(runtime)) if watched else None),
    )


def _index_generation(runtime: Any) -> int | None:
    """The static index's watch generation, when the server built one (this never builds it)."""
    index = runtime.existing("mesh_index")  # tools.mesh_index.service.SERVICE_KEY (not imported: no cycle)
    return index.watch_generation() if index is not None else None
