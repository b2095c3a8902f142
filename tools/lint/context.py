"""What every lint check reads: the static index (through its public service), the conventions, the files.

The index is consumed through :class:`~tools.mesh_index.service.IndexService` (``linked()``,
``catalogue()``, ``package_dir_of()``) and an :class:`~tools.mesh_index.impact.ImpactEngine`
over it, so changes to the index's semantics flow into the checks. Files the index does not
record shapes of (modules, migrations, option types, lock files) are listed once by a
bounded walk and parsed on demand with the index's tree-sitter languages.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from server import workspace_files
from server.config import Conventions
from tools.lint.model import Evidence
from tools.mesh_index.impact import ImpactEngine
from tools.mesh_index.linked import Key, LinkedIndex, SiteRec
from tools.mesh_index.service import IndexService
from tools.mesh_index.workspace import MAX_FILE_BYTES, TS_EXTENSIONS
from tools.verify.tsparse import ParsedFile, parse_file

MAX_FILES = 50_000


class LintContext:
    def __init__(self, service: IndexService) -> None:
        self.service = service
        self.workspace: Path = service.workspace
        self.conventions: Conventions = service.full_conventions
        self.static = self.conventions.static
        self.lint = self.conventions.lint
        self.idx: LinkedIndex = service.linked()
        self.engine = ImpactEngine(self.idx)
        self.notes: list[str] = []
        self._texts: dict[str, str] = {}

    # -- files -------------------------------------------------------------------------------------
    @cached_property
    def source_files(self) -> list[str]:
        """Every TypeScript source (not ``.d.ts``) under the workspace, relative, sorted; skip_dirs left out."""
        skip = set(self.static.skip_dirs)
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.workspace):
            dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(TS_EXTENSIONS) and not name.endswith(".d.ts"):
                    out.append((Path(dirpath) / name).relative_to(self.workspace).as_posix())
                    if len(out) >= MAX_FILES:
                        self.notes.append(f"only the first {MAX_FILES} source files were read")
                        return sorted(out)
        return sorted(out)

    @cached_property
    def production_files(self) -> list[str]:
        return [f for f in self.source_files if not self.is_test(f)]

    def is_test(self, rel: str) -> bool:
        probe = "/" + rel
        return any(m in probe for m in self.static.test_path_markers)

    def text(self, rel: str) -> str:
        if rel not in self._texts:
            try:  # the guarded reader: a file over the cap, a FIFO or a symlink out reads as empty
                self._texts[rel] = workspace_files.read_text(self.workspace, rel, MAX_FILE_BYTES)
            except OSError:
                self._texts[rel] = ""
        return self._texts[rel]

    def files_containing(self, *needles: str, production: bool = True) -> list[str]:
        files = self.production_files if production else self.source_files
        return [f for f in files if any(n in self.text(f) for n in needles)]

    def parse(self, rel: str) -> ParsedFile | None:
        return parse_file(self.workspace / rel)

    def package_of(self, rel: str) -> str:
        """The repository / package folder holding ``rel`` (nearest package.json; else its top folder)."""
        found = self.service.package_dir_of(rel)
        return found or rel.split("/", 1)[0]

    # -- index helpers ------------------------------------------------------------------------------
    def resolve_qual(self, text: str) -> Key | None:
        """A qualified name (``Queue.MEMBER``) or alias of a declared value."""
        return self.idx.by_qual.get(text)

    def production_producers(self, kind: str) -> dict[str, list[SiteRec]]:
        out: dict[str, list[SiteRec]] = {}
        for (k, value), sites in self.idx.producers.items():
            if k == kind:
                live = [s for s in sites if not s.test_only]
                if live:
                    out[value] = live
        return out


def ev(site: SiteRec, note: str) -> Evidence:
    return Evidence(file=site.file, line=site.line, note=note)
