"""The skills shipped with mesh-mcp: markdown runbooks with a small front matter.

A skill is one ``skills/<name>.md`` file that starts with a front matter block::

    ---
    name: trace-async-flow
    description: One line saying what it is for and when to use it.
    tags: [async, diagnosis]
    ---
    # The markdown body...

The front matter is a small YAML subset: ``key: value`` lines, inline lists
(``[a, b]``) or block lists (``- a`` lines under ``key:``), values optionally quoted.
:func:`parse_skill` validates it strictly (required keys, no unknown key, ``name``
equal to the file name, kebab-case names and tags) and raises :class:`SkillError`
naming the file and the line at fault. Nothing here imports MCP.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources as importlib_resources
from pathlib import Path

log = logging.getLogger("mesh.skills")

SKILL_URI_PREFIX = "skill://"
SKILL_MIME_TYPE = "text/markdown"

REQUIRED_KEYS = ("name", "description", "tags")
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
TAG_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 400
MAX_TAGS = 12
FENCE = "---"


class SkillError(ValueError):
    """A skill file is malformed; the message names the file (and line) and the fix."""


@dataclass(frozen=True)
class Skill:
    """One validated skill document."""

    name: str
    description: str
    tags: tuple[str, ...]
    body: str
    """The markdown after the front matter."""
    text: str
    """The whole file, front matter included (what ``skill://<name>`` returns)."""
    path: Path | None = None

    @property
    def uri(self) -> str:
        return f"{SKILL_URI_PREFIX}{self.name}"

    @property
    def title(self) -> str:
        """The first markdown heading of the body, else the name."""
        for line in self.body.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
        return self.name


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _inline_list(value: str, where: str) -> list[str]:
    inner = value.strip()[1:-1].strip()
    if not inner:
        return []
    items = [_unquote(part) for part in inner.split(",")]
    if any(not item for item in items):
        raise SkillError(f"{where}: empty item in list {value!r}")
    return items


def parse_front_matter(text: str, origin: str) -> tuple[dict[str, str | list[str]], str]:
    """Split ``text`` into (front matter mapping, body). Raises SkillError."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != FENCE:
        raise SkillError(f"{origin}: a skill must start with a '---' front matter line")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == FENCE)
    except StopIteration:
        raise SkillError(f"{origin}: the front matter is not closed by a '---' line") from None
    data: dict[str, str | list[str]] = {}
    current_list: str | None = None
    for number in range(1, end):
        raw = lines[number]
        where = f"{origin}:{number + 1}"
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        stripped = raw.strip()
        if stripped.startswith("- "):
            if current_list is None:
                raise SkillError(f"{where}: list item outside of a list key")
            items = data[current_list]
            assert isinstance(items, list)
            items.append(_unquote(stripped[2:]))
            continue
        key, sep, value = raw.partition(":")
        key = key.strip()
        if not sep or not key or raw[0].isspace():
            raise SkillError(f"{where}: expected 'key: value', got {raw!r}")
        if key in data:
            raise SkillError(f"{where}: key '{key}' appears twice")
        value = value.strip()
        current_list = None
        if not value:
            data[key] = []
            current_list = key
        elif value.startswith("[") and value.endswith("]"):
            data[key] = _inline_list(value, where)
        else:
            data[key] = _unquote(value)
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return data, body


def parse_skill(text: str, *, origin: str, expected_name: str | None = None, path: Path | None = None) -> Skill:
    """Parse and validate one skill document; raises :class:`SkillError`."""
    data, body = parse_front_matter(text, origin)
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise SkillError(f"{origin}: front matter misses {', '.join(missing)} (required: {', '.join(REQUIRED_KEYS)})")
    unknown = sorted(set(data) - set(REQUIRED_KEYS))
    if unknown:
        raise SkillError(f"{origin}: unknown front matter key(s) {', '.join(unknown)}")
    name, description, tags = data["name"], data["description"], data["tags"]
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > MAX_NAME_LENGTH:
        raise SkillError(f"{origin}: name {name!r} must be kebab-case (a-z, 0-9, '-'), at most {MAX_NAME_LENGTH} chars")
    if expected_name is not None and name != expected_name:
        raise SkillError(f"{origin}: name '{name}' differs from the file name '{expected_name}.md'")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{origin}: description must be a non-empty one-line string")
    if len(description) > MAX_DESCRIPTION_LENGTH:
        raise SkillError(f"{origin}: description is {len(description)} chars, at most {MAX_DESCRIPTION_LENGTH}")
    if not isinstance(tags, list) or not tags:
        raise SkillError(f"{origin}: tags must be a non-empty list such as [async, diagnosis]")
    if len(tags) > MAX_TAGS:
        raise SkillError(f"{origin}: {len(tags)} tags, at most {MAX_TAGS}")
    bad = [tag for tag in tags if not TAG_PATTERN.match(tag)]
    if bad:
        raise SkillError(f"{origin}: tag(s) {', '.join(map(repr, bad))} must be kebab-case")
    if len(set(tags)) != len(tags):
        raise SkillError(f"{origin}: duplicate tags")
    if not body.strip():
        raise SkillError(f"{origin}: the skill has no body after the front matter")
    return Skill(name=name, description=description, tags=tuple(tags), body=body, text=text, path=path)


def bundled_skills_dir() -> Path:
    """The folder of the ``skills`` package (installed or in the source tree)."""
    return Path(str(importlib_resources.files("skills")))


def load_skills(directory: Path | None = None, *, strict: bool = True) -> list[Skill]:
    """Every ``*.md`` skill of ``directory`` (default: the bundled ones), sorted by name.

    With ``strict`` a malformed file raises :class:`SkillError`; otherwise it is logged on
    stderr and skipped, so one bad document does not take the server down. Duplicate names
    always raise.
    """
    folder = directory if directory is not None else bundled_skills_dir()
    skills: dict[str, Skill] = {}
    for path in sorted(folder.glob("*.md")):
        try:
            skill = parse_skill(
                path.read_text(encoding="utf-8"), origin=str(path), expected_name=path.stem, path=path
            )
        except (SkillError, UnicodeDecodeError) as exc:
            if strict:
                raise SkillError(str(exc)) from None
            log.warning("skipping skill %s: %s", path, exc)
            continue
        if skill.name in skills:
            raise SkillError(f"{path}: skill name '{skill.name}' is already used by {skills[skill.name].path}")
        skills[skill.name] = skill
    return [skills[name] for name in sorted(skills)]


def find_skill(skills: list[Skill], name: str) -> Skill | None:
    """The skill called ``name`` or None."""
    return next((skill for skill in skills if skill.name == name), None)
