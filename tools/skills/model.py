"""Result models of check_skills and of the related-skills links the other tools return."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

FindingCode = Literal[
    "unreadable", "unknown_name", "path_unmatched", "path_unchecked", "repo_missing", "source_missing",
    "source_outside",
    "source_unverified", "unknown_command",
]
Severity = Literal["error", "warning", "info"]

FINDING_CODES: dict[str, str] = {
    "unreadable": "the SKILL.md cannot be read or its front matter is not YAML",
    "unknown_name": "a table, stream, type, class or identifier named in code that nothing in the workspace declares",
    "path_unmatched": "a path or glob that matches no file or folder of the workspace",
    "path_unchecked": "a paths glob too long or too costly to match (over the matching budget): not checked",
    "repo_missing": "a path whose first folder (a repository) is not in the workspace",
    "source_missing": "a sources[].resource that no longer exists",
    "source_outside": "a sources[].resource that is absolute or leaves the workspace: refused, not looked at",
    "source_unverified": "the recorded verification digest is not mesh-mcp's digest of the sources now: a source "
                         "changed or the record was computed another way (unknown; git is never run)",
    "unknown_command": "a command the skill tells people to run that no package, Makefile or mesh-mcp defines",
}


class SkillFinding(BaseModel):
    code: FindingCode
    severity: Severity
    file: str = Field(description="the SKILL.md, relative to the workspace")
    line: int = Field(description="1-based line in that file")
    name: str = Field(description="what is stale: the name, path, source or command as the skill writes it")
    message: str
    suggestion: str | None = Field(default=None, description="the closest existing name or path, if any")


class SkillCheck(BaseModel):
    uri: str
    name: str
    file: str
    findings: list[SkillFinding] = Field(default_factory=list)


class SkillsReport(BaseModel):
    skills: list[SkillCheck]
    errors: int
    warnings: int
    infos: int
    searched: str = Field(description="what the names were looked up in (files read, whether the walk was cut)")
    vocabulary_reused: bool = Field(
        default=False, description="the names were those read by an earlier call: no folder, source file or "
        "setting changed since (the server keeps them between calls)",
    )

    def summary_text(self) -> str:
        lines = [
            f"{len(self.skills)} skill(s) checked: {self.errors} error(s), {self.warnings} warning(s), "
            f"{self.infos} note(s). Looked up in: {self.searched}."
        ]
        for skill in self.skills:
            if not skill.findings:
                lines.append(f"- {skill.uri} ({skill.file}): clean")
                continue
            lines.append(f"- {skill.uri} ({skill.file}):")
            for f in skill.findings:
                hint = f" (did you mean {f.suggestion}?)" if f.suggestion else ""
                lines.append(f"  {f.severity} {f.code} {f.file}:{f.line} {f.name}: {f.message}{hint}")
        return "\n".join(lines)


class RelatedSkill(BaseModel):
    uri: str
    name: str
    why: str = Field(description="what links it: a paths glob matching a site's file, a key, a tag, or a mention")


class RelatedPage(NamedTuple):
    """The related skills a result shows, how many more were found, and what could not be looked at."""

    skills: list[RelatedSkill]
    more: int = 0
    note: str | None = None


def related_text(related: list[RelatedSkill], more: int = 0, note: str | None = None) -> str:
    """One line listing related skills for a tool's text ('' when there are none and nothing to say)."""
    parts = []
    if related:
        parts.append("Related skills: " + "; ".join(f"{r.uri} ({r.why})" for r in related))
        if more:
            parts.append(f"(+{more} more related skill(s) not listed: cap [limits] related_skills_max)")
    if note:
        parts.append(f"Related skills: {note}" if not related else note)
    return " ".join(parts)


def attach_related(result: BaseModel, page: RelatedPage) -> str:
    """Put ``page`` on a result (``related_skills``, ``related_skills_more`` and, where the model has
    it, ``related_skills_note``) and return the text line saying the same."""
    result.related_skills = page.skills  # type: ignore[attr-defined]
    result.related_skills_more = page.more  # type: ignore[attr-defined]
    if "related_skills_note" in type(result).model_fields:
        result.related_skills_note = page.note  # type: ignore[attr-defined]
    return related_text(page.skills, page.more, page.note)
