"""related_skills: the runbooks (workspace and bundled) that concern a target, and why.

A skill is related to a target when, in this order of strength:

1. one of its ``paths`` globs matches the file of one of the target's sites;
2. a list in its front matter (linking keys such as ``mesh_keys``, or ``tags``) holds one of the
   target's names (type value, member, queue, stream) or tables;
3. its body names one of them in code (a backticked span or a fenced line).

Names are compared exactly; nothing is inferred from a skill's title.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from resources.skills import Skill
from resources.workspace_skills import WorkspaceSkill
from tools.skills.model import RelatedSkill
from tools.skills.paths import GlobTooComplex, glob_matcher, normalise
from tools.skills.spans import code_spans

NOT_LINKING_KEYS = {"paths", "sources", "verified", "generated", "name", "description", "title"}


@dataclass
class TargetFacts:
    """What a result is about: its names (strongest first), its tables and its sites' files."""

    names: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    file_notes: dict[str, str] = field(default_factory=dict)
    """Why a file is one of the target's (``a site of user.send_welcome``), said after a glob match."""


_CACHED_BODY_CHARS = 262_144


@lru_cache(maxsize=128)
def _span_tokens_cached(body: str, first_line: int) -> tuple[tuple[frozenset[str], int], ...]:
    return _span_tokens(body, first_line)


def _span_tokens(body: str, first_line: int) -> tuple[tuple[frozenset[str], int], ...]:
    """Each code span's tokens (the span, and its words split at parentheses and commas) and its line."""
    return tuple(
        (frozenset({span.text, *span.text.replace("(", " ").replace(")", " ").replace(",", " ").split()}), span.line)
        for span in code_spans(body, first_line)
    )


def _mention(body: str, first_line: int, wanted: set[str]) -> tuple[str, int] | None:
    """The first name of ``wanted`` that a code span of ``body`` holds, and its line.

    A body's spans are found once and kept (at most 128 bodies of up to 256 KB): every tool result
    looks for its related skills in the same few runbooks, so they were parsed again on every call."""
    spans = _span_tokens_cached(body, first_line) if len(body) <= _CACHED_BODY_CHARS else _span_tokens(body, first_line)
    for tokens, line in spans:
        hit = sorted(tokens & wanted)
        if hit:
            return hit[0], line
    return None


def _workspace_reason(skill: WorkspaceSkill, facts: TargetFacts) -> tuple[int, str] | None:
    for glob in skill.paths:
        try:
            matcher = glob_matcher(normalise(glob))
            hit = next((f for f in facts.files if matcher.match(f)), None)
        except GlobTooComplex:  # over the matching budget: this glob links nothing
            continue
        if hit:
            note = f" ({facts.file_notes[hit]})" if hit in facts.file_notes else ""
            return 0, f"its paths glob {glob} matches {hit}{note}"
    names = [*facts.names, *facts.tables]
    for key, value in sorted(skill.front_matter.items()):
        if key in NOT_LINKING_KEYS or not isinstance(value, list):
            continue
        listed = {str(v) for v in value if isinstance(v, str | int)}
        hit = next((n for n in names if n in listed), None)
        if hit:
            return (1 if hit in facts.names else 3), f"its front matter '{key}' lists {hit}"
    found = _mention(skill.body, skill.body_line, set(facts.names))
    if found:
        return 2, f"it names `{found[0]}` ({skill.rel_path}:{found[1]})"
    found = _mention(skill.body, skill.body_line, set(facts.tables))
    if found:
        return 4, f"it names the table `{found[0]}` ({skill.rel_path}:{found[1]})"
    return None


def _bundled_reason(skill: Skill, facts: TargetFacts) -> tuple[int, str] | None:
    found = _mention(skill.body, 1, set(facts.names))
    if found:
        return 2, f"it names `{found[0]}`"
    hit = next((t for t in facts.tables if t in set(skill.tags)), None)
    if hit:
        return 3, f"it is tagged {hit}"
    found = _mention(skill.body, 1, set(facts.tables))
    if found:
        return 4, f"it is the runbook for flows through `{found[0]}`"
    return None


def rank_related(
    facts: TargetFacts, workspace_skills: Iterable[WorkspaceSkill], bundled: Iterable[Skill]
) -> list[RelatedSkill]:
    """Every related skill, strongest link first (workspace before bundled on a tie, then by URI)."""
    if not facts.names and not facts.tables and not facts.files:
        return []
    ranked: list[tuple[int, int, str, RelatedSkill]] = []
    for skill in workspace_skills:
        if skill.error and not skill.front_matter:
            continue
        reason = _workspace_reason(skill, facts)
        if reason:
            ranked.append((reason[0], 0, skill.uri, RelatedSkill(uri=skill.uri, name=skill.name, why=reason[1])))
    for bundled_skill in bundled:
        reason = _bundled_reason(bundled_skill, facts)
        if reason:
            ranked.append((reason[0], 1, bundled_skill.uri,
                           RelatedSkill(uri=bundled_skill.uri, name=bundled_skill.name, why=reason[1])))
    ranked.sort(key=lambda item: item[:3])
    return [item[3] for item in ranked]

