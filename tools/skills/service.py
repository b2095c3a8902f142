"""The skills known to a running server and the related-skills links the other tools attach.

Workspace skills are discovered on first use and again when older than ``REFRESH_S`` (a bounded
walk), so a SKILL.md edited while the server runs is linked with its new content.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from resources.skills import Skill, load_skills
from resources.workspace_skills import WorkspaceSkill, discover_workspace_skills
from server.config import Settings
from tools.skills.model import RelatedSkill
from tools.skills.related import TargetFacts, related_skills

REFRESH_S = 30.0


class SkillLinks:
    """Finds the skills related to a tool's result (see :mod:`tools.skills.related`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._bundled: list[Skill] = load_skills(strict=False)
        self._workspace: list[WorkspaceSkill] = []
        self._at = 0.0
        self._lock = threading.Lock()

    def workspace_skills(self) -> list[WorkspaceSkill]:
        if self.settings.workspace is None:
            return []
        with self._lock:
            if time.monotonic() - self._at > REFRESH_S:
                found = discover_workspace_skills(self.settings.workspace, self.settings.conventions.static.skip_dirs)
                self._workspace, self._at = found.skills, time.monotonic()
            return self._workspace

    def tables_of(self, kind: str) -> list[str]:
        tables = self.settings.conventions.tables
        if kind == "job":
            return [tables.jobs_outbox, tables.job_audit]
        if kind == "event":
            return [tables.event_queue]
        return []

    def related(self, facts: TargetFacts) -> list[RelatedSkill]:
        return related_skills(facts, self.workspace_skills(), self._bundled)

    def for_impact(self, result: Any) -> list[RelatedSkill]:
        """Skills related to an ``ImpactResult``: its matches, routes and sites."""
        facts = TargetFacts()
        for match in result.matches:
            facts.names.extend([match.value, match.name, match.name.rsplit(".", 1)[-1], *match.aliases])
            facts.tables.extend(t for t in self.tables_of(match.kind) if t not in facts.tables)
        facts.names.extend(route.name for route in result.routes)
        facts.files = sorted({site.file for site in [*result.producers, *result.consumers]})
        return self.related(facts)

    def for_flow(self, report: Any) -> list[RelatedSkill]:
        """Skills related to a verify_flow ``FlowReport``: its type and the files of its evidence."""
        target = report.target
        facts = TargetFacts(
            names=[target.value, target.name, target.name.rsplit(".", 1)[-1], *target.aliases],
            tables=self.tables_of(target.kind),
        )
        facts.files = sorted({ev.file for check in report.checks for ev in check.evidence if ev.file})
        return self.related(facts)


def get_skill_links(runtime: Any) -> SkillLinks:
    """The runtime's :class:`SkillLinks`, built once."""
    return runtime.service("skill_links", lambda: SkillLinks(runtime.settings))
