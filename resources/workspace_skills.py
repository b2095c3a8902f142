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
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server import workspace_files
from server.lazy_modules import LazyModule

yaml = LazyModule("yaml")
"""PyYAML, imported when the first skill is parsed, not while ``mesh-mcp serve`` starts."""


def _safe_loader() -> Any:
    """libyaml's safe loader when PyYAML was built with it (about 20x faster), else the pure-Python one."""
    return getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
WORKSPACE_SKILL_PREFIX = "skill://workspace/"
SKILL_FILE_NAMES = ("SKILL.md", "skill.md")
SKILL_FOLDERS = (".agents", ".claude")
"""A ``SKILL.md`` counts when its path holds ``<one of these>/skills/``."""
MAX_SKILL_FILES = 500
MAX_SKILL_BYTES = 1_000_000
MAX_FRONT_MATTER_NODES = 50_000
MAX_FRONT_MATTER_DEPTH = 64
MAX_WALK_DIRS = 50_000
RACY_NS = 2_000_000_000
"""Mtimes this close to a walk are not trusted as freshness proof (coarse file-system clocks: up to 2 s)."""


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
            loaded = yaml.load(source, Loader=_safe_loader()) if source.strip() else {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 2}" if mark is not None else ""
            error = f"front matter is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"
            loaded = {}
        if isinstance(loaded, dict) and not _bounded(loaded):
            error = (f"front matter holds over {MAX_FRONT_MATTER_NODES} values once its YAML aliases are expanded "
                     "(or an alias refers to itself): not read")
        elif isinstance(loaded, dict):
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


def _bounded(value: Any) -> bool:
    """Whether ``value`` (loaded YAML) holds at most :data:`MAX_FRONT_MATTER_NODES` values and
    :data:`MAX_FRONT_MATTER_DEPTH` levels counted as if its aliases were copies: a few lines of
    nested aliases ("billion laughs") or an alias to itself would otherwise cost every later
    walk of the front matter (``str()`` of the tags) billions of steps."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_FRONT_MATTER_NODES or depth > MAX_FRONT_MATTER_DEPTH:
            return False
        if isinstance(item, dict):
            stack.extend((x, depth + 1) for pair in item.items() for x in pair)
        elif isinstance(item, list | tuple | set):
            stack.extend((x, depth + 1) for x in item)
    return True


def _is_skill_path(rel_dir_parts: list[str]) -> bool:
    return any(
        part in SKILL_FOLDERS and rel_dir_parts[i + 1] == "skills" for i, part in enumerate(rel_dir_parts[:-1])
    )


@dataclass
class SkillDiscovery:
    skills: list[WorkspaceSkill]
    truncated: bool = False
    """The walk stopped at a bound before seeing everything."""
    dirs: dict[str, int] = field(default_factory=dict)
    """Every folder walked (relative, ``""`` for the root) -> its mtime, read before it was listed: a
    file or folder added, removed or renamed in it changes it (see :mod:`resources.skill_catalog`)."""
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Every SKILL.md found (relative) -> (size, mtime_ns): an edit changes it."""
    racy: bool = False
    """A folder or file changed less than :data:`RACY_NS` before the walk: a change in the same clock
    tick would leave its mtime as recorded, so these mtimes prove nothing yet (walk again)."""


def _walk(workspace: Path, skip: set[str], max_files: int) -> tuple[list[tuple[str, Path]], dict[str, int], bool]:
    """(SKILL.md paths, folder mtimes, truncated): a bounded walk that enters no skipped folder nor link."""
    root = str(workspace)
    found: list[tuple[str, Path]] = []
    dirs: dict[str, int] = {}
    stack = [""]
    while stack:
        if len(dirs) >= MAX_WALK_DIRS:
            return found, dirs, True
        rel_dir = stack.pop()
        abs_dir = f"{root}/{rel_dir}" if rel_dir else root
        try:
            mtime = os.stat(abs_dir).st_mtime_ns  # before listing: a later change shows as a newer mtime
            with os.scandir(abs_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        dirs[rel_dir] = mtime
        parts = rel_dir.split("/") if rel_dir else []
        in_skills = _is_skill_path([*parts, ""])
        children = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip:
                        children.append(f"{rel_dir}/{entry.name}" if rel_dir else entry.name)
                elif in_skills and entry.name in SKILL_FILE_NAMES:
                    found.append(("/".join([*parts, entry.name]), Path(entry.path)))
            except OSError:
                continue
        if len(found) >= max_files:
            return found, dirs, True
        stack.extend(reversed(children))
    return found, dirs, False


def discover_workspace_skills(
    workspace: Path, skip_dirs: list[str] | tuple[str, ...] = (), *, max_files: int = MAX_SKILL_FILES
) -> SkillDiscovery:
    """Every SKILL.md under ``<workspace>/**/.agents/skills/`` and ``**/.claude/skills/``, sorted by URI."""
    skip = {d for d in skip_dirs if d not in SKILL_FOLDERS}
    started = time.time_ns()
    found, dirs, truncated = _walk(workspace, skip, max_files)
    return _discovery(workspace, found, dirs, truncated, started, max_files)


def discovery_from_walk(workspace: Path, skip_dirs: Iterable[str], skill_files: list[str], dirs: dict[str, int],
                        started_ns: int) -> SkillDiscovery | None:
    """What :func:`discover_workspace_skills` would find, from another walk of the same folders (the static
    index's: every folder it entered with its mtime read before listing it, and the SKILL.md files it met);
    None when that walk's folders are not this one's (a skill folder skipped there) or a bound was reached."""
    if any(d in SKILL_FOLDERS for d in skip_dirs) or len(dirs) >= MAX_WALK_DIRS or len(skill_files) >= MAX_SKILL_FILES:
        return None
    found = [(rel, workspace / rel) for rel in skill_files]
    return _discovery(workspace, found, dict(dirs), False, started_ns, MAX_SKILL_FILES)


def _discovery(workspace: Path, found: list[tuple[str, Path]], dirs: dict[str, int], truncated: bool, started: int,
               max_files: int) -> SkillDiscovery:
    skills: list[WorkspaceSkill] = []
    files: dict[str, tuple[int, int]] = {}
    used: set[str] = set()
    for rel, path in sorted(found)[:max_files]:
        parts = rel.split("/")
        repo = parts[0] if not parts[0].startswith(".") else "."
        base = slugify(parts[-2])
        slug, n = base, 2
        while f"{repo}/{slug}" in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(f"{repo}/{slug}")
        files[rel] = file_stat(path)
        skills.append(read_skill_file(workspace, rel, repo, slug))
    racy = is_racy([*dirs.values(), *(mtime for _size, mtime in files.values())], started)
    return SkillDiscovery(sorted(skills, key=lambda s: s.uri), truncated, dirs, files, racy)


def is_racy(mtimes: Iterable[int], started_ns: int) -> bool:
    """Whether any of ``mtimes`` is too close to (or after) ``started_ns`` to prove a later change would show."""
    return any(mtime >= started_ns - RACY_NS for mtime in mtimes)


def file_stat(path: Path) -> tuple[int, int]:
    """(size, mtime_ns) of a file, (-1, -1) when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def read_skill_file(workspace: Path, rel: str, repo: str, slug: str) -> WorkspaceSkill:
    """The skill at ``rel``, read through the guarded reader (:mod:`server.workspace_files`): a symlink
    leaving the workspace, a FIFO, a device or a file over the cap is an unreadable skill, never read."""
    def unreadable(reason: str) -> WorkspaceSkill:
        return WorkspaceSkill(
            uri=f"{WORKSPACE_SKILL_PREFIX}{slugify(repo) if repo != '.' else '_root'}/{slug}", repo=repo,
            slug=slug, rel_path=rel, name=Path(rel).parent.name, description="", error=reason,
        )

    try:  # a BOM is not part of the front matter
        text = workspace_files.read_text(workspace, rel, MAX_SKILL_BYTES, encoding="utf-8-sig", errors="strict")
    except UnicodeDecodeError:
        return unreadable("not UTF-8 text")
    except workspace_files.UnsafeWorkspaceFile as exc:
        return unreadable(f"refused: {exc.reason}")
    except OSError as exc:
        return unreadable(f"cannot be read: {exc.strerror or exc}")
    return parse_workspace_skill(text, rel_path=rel, repo=repo, slug=slug)
