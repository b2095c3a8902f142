"""Migrations only a test set-up runs: a repository's copy of another service's migrations.

A worker may carry a copy of a service's migrations that only its test set-up runs (a
``global-setup`` migrating a scratch database). Who runs a repository's migrations is read
from the files of that repository that name them: strings naming a migrations folder
(``join(__dirname, '../src/database/migrations/*.ts')``, a DataSource's ``migrations:
['dist/migrations/*.js']``) and imports of a migration file. When at least one file does and
every such file is a test file (``test_path_markers``) or a test set-up script
(``test_setup_markers``), and the folder is a copy (a file of the same name sits in the
migrations of another package that production runs or nothing names), the package's
migrations are test-only: their triggers and inserts are test-only producers (``test_only``,
the reason in ``detail.reason``), not a second production producer. Otherwise nothing is
concluded (they stay production): a service's own migrations that its tests also run are not
a copy.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker

MIGRATION_DIR = "/migrations/"


def test_only_migrations(linker: Linker) -> dict[str, str]:
    """Migration files (relative paths) that only test set-up runs -> the reason."""
    layout = linker.layout

    def unit(rel: str) -> str:  # the package (else repository) a file belongs to
        return layout.package_dir_of(rel) or layout.repo_of(rel)

    migrations: dict[str, list[str]] = {}  # package -> migration files
    for path in linker.relevant:
        if MIGRATION_DIR in "/" + path and not linker.test_only(path):
            migrations.setdefault(unit(path), []).append(path)
    if not migrations:
        return {}
    runners: dict[str, list[str]] = {}  # package -> files naming its migrations
    for path, f in linker.facts.items():
        repo = unit(path)
        if repo not in migrations or MIGRATION_DIR in "/" + path:
            continue
        named = bool(f.get("migration_refs"))
        if not named:
            own = set(migrations[repo])
            named = any("migration" in spec and layout.resolve(path, spec) in own
                        for _local, _name, spec in f.get("imports", ()))
        if named:
            runners.setdefault(repo, []).append(path)
    markers = linker.sc.test_setup_markers
    by_name: dict[str, list[str]] = {}
    for files in migrations.values():
        for p in files:
            by_name.setdefault(posixpath.basename(p), []).append(p)
    candidates = {repo for repo in migrations
                  if runners.get(repo) and all(linker.test_only(p) or any(m in p for m in markers)
                                               for p in runners[repo])}
    out: dict[str, str] = {}
    for repo in sorted(candidates):
        twins = {p: next((o for o in by_name.get(posixpath.basename(p), ()) if unit(o) not in candidates), None)
                 for p in migrations[repo]}
        if not any(twins.values()):
            continue  # not a copy of another service's migrations: its own, run by a test set-up too
        who = ", ".join(sorted(runners[repo])[:3])
        for p, twin in twins.items():
            copy = f"a copy of {twin}, " if twin else "in a copy of another service's migrations, "
            out[p] = f"{copy}run only by test set-up ({who}): a test-only producer"
    return out
