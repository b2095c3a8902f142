"""MCP adapter of check_skills: the workspace's own SKILL.md files checked against the code."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from resources.skill_catalog import get_skill_catalog
from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result
from tools.skills.check import check_skills as check_skills_lib
from tools.skills.model import SkillsReport
from tools.skills.vocab_cache import VocabularyCache


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register ``check_skills`` on ``server``."""

    @server.tool(name="check_skills", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def check_skills(
        name: Annotated[
            str | None,
            Field(
                default=None,
                min_length=1,
                max_length=300,
                description="one skill: its front-matter name, folder slug or skill://workspace/... URI "
                "(default: every SKILL.md of the workspace)",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SkillsReport]:
        """Check the team's own runbooks (SKILL.md under .agents/skills/ or .claude/skills/) against the code.

        Use it before trusting a workspace skill, or in review when code moves. Per skill, with file and line:
        names in code spans or SQL (tables, streams, job/event types, classes, identifiers) that nothing in the
        workspace's code, migrations or config declares, with the closest existing name (`event_outbox` ->
        `event_queue`); paths and `paths` globs matching nothing (a repository that is not there is said so);
        `sources[].resource` paths gone, or changed since the last `verified` record; commands (npm/yarn/pnpm
        scripts, make targets, mesh-mcp commands) that nothing defines. A name is flagged only when it has the
        shape of its kind and appears nowhere in the code. Read the skills themselves as skill://workspace/...
        resources.
        """
        vocabulary = runtime.service("skills.vocabulary", VocabularyCache)
        report = await anyio.to_thread.run_sync(
            lambda: check_skills_lib(runtime.settings, name, vocabulary=vocabulary, catalog=get_skill_catalog(runtime))
        )
        return tool_result(report, report.summary_text())
