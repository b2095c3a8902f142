"""The skills known to a running server and the related-skills links the other tools attach.

Workspace skills come from the runtime's :class:`~resources.skill_catalog.SkillCatalog` (the
same one ``resources/list`` reads): a SKILL.md added, edited or removed while the server runs is
linked as it is now. Each result shows at most ``[limits] related_skills_max`` skills and counts
the others (:class:`~tools.skills.model.RelatedPage`).
"""

from __future__ import annotations

from typing import Any

from resources.skill_catalog import get_skill_catalog
from resources.skills import Skill, load_skills
from resources.workspace_skills import WorkspaceSkill
from tools.skills.model import RelatedPage
from tools.skills.related import TargetFacts, rank_related


class SkillLinks:
    """Finds the skills related to a tool's result (see :mod:`tools.skills.related`)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self._bundled: list[Skill] = load_skills(strict=False)

    def workspace_skills(self) -> list[WorkspaceSkill]:
        catalog = get_skill_catalog(self.runtime)
        return catalog.current().skills if catalog is not None else []

    def tables_of(self, kind: str) -> list[str]:
        tables = self.settings.conventions.tables
        if kind == "job":
            return [tables.jobs_outbox, tables.job_audit]
        if kind == "event":
            return [tables.event_queue]
        return []

    def related(self, facts: TargetFacts, note: str | None = None) -> RelatedPage:
        """The related skills of ``facts``, capped at ``[limits] related_skills_max``, the rest counted."""
        ranked = rank_related(facts, self.workspace_skills(), self._bundled)
        cap = self.settings.limits.related_skills_max
        return RelatedPage(ranked[:cap], max(0, len(ranked) - cap), note)

    def for_impact(self, result: Any) -> RelatedPage:
        """Skills related to an ``ImpactResult``: its matches, routes and sites."""
        facts = TargetFacts()
        for match in result.matches:
            facts.names.extend([match.value, match.name, match.name.rsplit(".", 1)[-1], *match.aliases])
            facts.tables.extend(t for t in self.tables_of(match.kind) if t not in facts.tables)
        facts.names.extend(route.name for route in result.routes)
        facts.files = sorted({site.file for site in [*result.producers, *result.consumers]})
        return self.related(facts)

    def for_flow(self, report: Any) -> RelatedPage:
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
    return runtime.service("skill_links", lambda: SkillLinks(runtime))
