"""Workspace skills: what listing, linking and checking cost on a big workspace, fresh and kept.

Generates a workspace of N files (bench/gen_workspace.py) plus one SKILL.md per domain (half
under ``.agents/skills``, half under ``.claude/skills``), dates it a minute back (the catalogue
trusts only mtimes older than two seconds), then prints medians of ``--runs``:

- the full discovery walk (what every listing cost before the catalogue kept it);
- ``SkillCatalog.current()`` on an unchanged tree (what ``resources/list`` pays now), and after
  one SKILL.md was edited in place (re-read of that file);
- ``check_skills`` with a fresh vocabulary (the whole tree read) and with the kept one.

Usage: ``python bench/skills_bench.py [--files 20000] [--runs 5] [--workspace DIR]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gen_workspace import generate
from resources.skill_catalog import SkillCatalog
from resources.workspace_skills import discover_workspace_skills
from server.config import load_settings
from tools.skills.check import check_skills
from tools.skills.vocab_cache import VocabularyCache


def add_skills(root: Path) -> int:
    repos = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("ms-"))
    for i, repo in enumerate(repos):
        folder = ".agents" if i % 2 == 0 else ".claude"
        path = root / repo / folder / "skills" / f"Runbook {i}" / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nname: runbook-{i}\ndescription: The runbook of {repo}.\npaths: [\"{repo}/src/**\"]\n"
                        f"mesh_keys: [jobs_outbox]\n---\n# {repo}\n\nRows of `jobs_outbox` and `event_outbox`.\n")
    return len(repos)


def age(root: Path, seconds: float = 60) -> None:
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.utime(os.path.join(dirpath, name), (past, past))
        os.utime(dirpath, (past, past))


def median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workspace", type=Path, help="an existing workspace (no generation)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workspace
        if root is None:
            root = Path(tmp) / "ws"
            generate(root, args.files)
            skills = add_skills(root)
        else:
            skills = len(discover_workspace_skills(root).skills)
        age(root)
        settings = load_settings(workspace=root, environ={}, overrides={"state_dir": str(Path(tmp) / "state")})
        skip = settings.conventions.static.skip_dirs
        found = discover_workspace_skills(root, skip)
        print(f"workspace {root}: {len(found.dirs)} folders walked, {len(found.skills)} skills ({skills} written)")
        walk = median_ms(lambda: discover_workspace_skills(root, skip), args.runs)
        print(f"full discovery walk:                {walk:8.1f} ms")
        catalog = SkillCatalog(root, skip)
        catalog.current()
        unchanged = median_ms(catalog.current, args.runs)
        print(f"catalogue, nothing changed:         {unchanged:8.1f} ms (walks so far: {catalog.walks})")
        edited = root / found.skills[0].rel_path

        def edit_and_list() -> None:
            edited.write_text(edited.read_text() + "\n")
            past = time.time() - 60  # an edit made a minute ago: its mtime is trusted
            os.utime(edited, (past, past))
            catalog.current()

        reread = median_ms(edit_and_list, args.runs)
        print(f"catalogue, one SKILL.md edited:     {reread:8.1f} ms "
              f"(re-reads: {catalog.reads}, walks: {catalog.walks})")
        age(root)
        fresh = median_ms(lambda: check_skills(settings, vocabulary=VocabularyCache()), max(1, args.runs // 2))
        print(f"check_skills, vocabulary built:     {fresh:8.1f} ms")
        kept = VocabularyCache()
        check_skills(settings, vocabulary=kept, catalog=catalog)
        reused = median_ms(lambda: check_skills(settings, vocabulary=kept, catalog=catalog), args.runs)
        print(f"check_skills, vocabulary kept:      {reused:8.1f} ms (builds: {kept.builds}, reuses: {kept.reuses})")

if __name__ == "__main__":
    main()
