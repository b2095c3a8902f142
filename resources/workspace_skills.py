"""The team's own skills: every ``SKILL.md`` under ``**/.agents/skills/`` or ``**/.claude/skills/``.

Teams write these in the Agent Skills format: a YAML front matter (``name``, ``description``
and whatever else they keep: ``paths`` globs, ``tags``, ``sources``, linking keys such as
``mesh_keys``, ``verified`` records, ...) then a markdown body. Unlike the bundled skills
(:mod:`resources.skills`, strictly validated), these are read leniently:

- unknown front-matter keys are kept as they are (``front_matter``);
- a missing ``name`` falls back to the folder name, a title with spaces is fine: the URI uses
  a slug of the folder, ``skill://workspace/<repo>/<slug>``;
- a file that cannot be read or whose front matter is not YAML is still listed, with
  ``error`` saying why, never dropped.

The walk is bounded (file count and size) and does not enter the folders the index skips.
Nothing here imports MCP.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

WORKSPACE_SKILL_PREFIX = "skill://workspace/"
SKILL_FILE_NAMES = ("SKILL.md", "skill.md")
SKILL_FOLDERS = (".agents", ".claude")
"""A ``SKILL.md`` counts when its path holds ``<one of these>/skills/``."""
MAX_SKILL_FILES = 500
MAX_SKILL_BYTES = 1_000_000
MAX_WALK_DIRS = 50_000


@dataclass(frozen=True)
class WorkspaceSkill:
    """One ``SKILL.md`` of the workspace, parsed leniently."""

    uri: str
    repo: str
    """The workspace folder it lives in (its first path part), ``.`` at the workspace root."""
    slug: str
    rel_path: str
    """Path relative to the workspace."""
    name: str
    description: str
    front_matter: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    body_line: int = 1
    """Line number (1-based) of the body's first line in the file."""
    text: str = ""
    error: str | None = None
    """Why the file could not be read or parsed (it is listed all the same)."""

    @property
    def tags(self) -> list[str]:
        return [str(t) for t in _as_list(self.front_matter.get("tags"))]

    @property
    def paths(self) -> list[str]:
        return [str(p) for p in _as_list(self.front_matter.get("paths")) if isinstance(p, str | int)]

    @property
    def title(self) -> str:
        title = self.front_matter.get("title")
        return str(title) if isinstance(title, str) and title.strip() else self.name


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()] if "," in value else [value]
    return [value]


def slugify(text: str) -> str:
    """A URI-safe slug: lower case, runs of other characters as one ``-``."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "skill"


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """(front matter source or None, body, body's first line number)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, text, 1
    for number in range(1, len(lines)):
        if lines[number].strip() in ("---", "..."):
            return "\n".join(lines[1:number]), "\n".join(lines[number + 1 :]), number + 2
    return None, text, 1


def parse_workspace_skill(text: str, *, rel_path: str, repo: str, slug: str) -> WorkspaceSkill:
    """Parse one SKILL.md leniently; problems go to ``error``, never raise."""
    folder = Path(rel_path).parent.name
    source, body, body_line = split_front_matter(text)
    error = None
    data: dict[str, Any] = {}
    if source is None:
        error = "no front matter: the file should start with a '---' line, YAML keys, then '---'"
    else:
        try:
            loaded = yaml.safe_load(source) if source.strip() else {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 2}" if mark is not None else ""
            error = f"front matter is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"
            loaded = {}
        if isinstance(loaded, dict):
            data = {str(k): v for k, v in loaded.items()}
        else:
            error = f"front matter is a {type(loaded).__name__}, expected 'key: value' lines"
    name = data.get("name")
    description = data.get("description")
    return WorkspaceSkill(
        uri=f"{WORKSPACE_SKILL_PREFIX}{slugify(repo) if repo != '.' else '_root'}/{slug}",
        repo=repo,
        slug=slug,
        rel_path=rel_path,
        name=str(name).strip() if isinstance(name, str | int) and str(name).strip() else folder,
        description=" ".join(str(description).split()) if isinstance(description, str) else "",
        front_matter=data,
        body=body,
        body_line=body_line,
        text=text,
        error=error,
    )


def _is_skill_path(rel_dir_parts: list[str]) -> bool:
    return any(
        part in SKILL_FOLDERS and rel_dir_parts[i + 1] == "skills" for i, part in enumerate(rel_dir_parts[:-1])
    )


@dataclass
class SkillDiscovery:
    skills: list[WorkspaceSkill]
    truncated: bool = False
    """The walk stopped at a bound before seeing everything."""


def discover_workspace_skills(
    workspace: Path, skip_dirs: list[str] | tuple[str, ...] = (), *, max_files: int = MAX_SKILL_FILES
) -> SkillDiscovery:
    """Every SKILL.md under ``<workspace>/**/.agents/skills/`` and ``**/.claude/skills/``, sorted by URI."""
    skip = {d for d in skip_dirs if d not in SKILL_FOLDERS}
    found: list[tuple[str, Path]] = []
    truncated = False
    walked = 0
    for dirpath, dirnames, filenames in os.walk(workspace):
        walked += 1
        if walked > MAX_WALK_DIRS:
            truncated = True
            break
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not os.path.islink(os.path.join(dirpath, d)))
        rel_dir = os.path.relpath(dirpath, workspace)
        parts = [] if rel_dir == "." else rel_dir.split(os.sep)
        if not _is_skill_path([*parts, ""]):
            continue
        for name in filenames:
            if name in SKILL_FILE_NAMES:
                found.append(("/".join([*parts, name]), Path(dirpath) / name))
        if len(found) >= max_files:
            truncated = True
            break
    skills: list[WorkspaceSkill] = []
    used: set[str] = set()
    for rel, path in sorted(found)[:max_files]:
        parts = rel.split("/")
        repo = parts[0] if not parts[0].startswith(".") else "."
        base = slugify(parts[-2])
        slug, n = base, 2
        while f"{repo}/{slug}" in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(f"{repo}/{slug}")
        skills.append(_read(path, rel, repo, slug))
    return SkillDiscovery(sorted(skills, key=lambda s: s.uri), truncated)


def _read(path: Path, rel: str, repo: str, slug: str) -> WorkspaceSkill:
    def unreadable(reason: str) -> WorkspaceSkill:
        return WorkspaceSkill(
            uri=f"{WORKSPACE_SKILL_PREFIX}{slugify(repo) if repo != '.' else '_root'}/{slug}", repo=repo,
            slug=slug, rel_path=rel, name=Path(rel).parent.name, description="", error=reason,
        )

    try:
        size = path.stat().st_size
        if size > MAX_SKILL_BYTES:
            return unreadable(f"file is {size} bytes, over the {MAX_SKILL_BYTES}-byte cap")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return unreadable("not UTF-8 text")
    except OSError as exc:
        return unreadable(f"cannot be read: {exc.strerror or exc}")
    return parse_workspace_skill(text, rel_path=rel, repo=repo, slug=slug)
