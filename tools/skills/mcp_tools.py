"""MCP adapter of check_skills: the workspace's own SKILL.md files checked against the code."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from resources.skill_catalog import get_skill_catalog
from server.output_models import ResultModel
from server.runtime import Runtime
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result


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
    ) -> Annotated[CallToolResult, ResultModel("tools.skills.model:SkillsReport")]:
        """Check the workspace's own runbooks (SKILL.md under .agents/skills/ or .claude/skills/) against the code.
        Use it before trusting one, or when code moves. Per skill, with file and line: names (tables, streams, types,
        classes) nothing in the code declares, with the closest existing one; paths and globs matching nothing;
        sources gone or changed since `verified`; commands nothing defines. Read a skill as skill://workspace/...
        """
        from tools.skills.check import check_skills as check_skills_lib
        from tools.skills.vocab_cache import VocabularyCache

        vocabulary = runtime.service("skills.vocabulary", VocabularyCache)
        report = await anyio.to_thread.run_sync(
            lambda: check_skills_lib(runtime.settings, name, vocabulary=vocabulary, catalog=get_skill_catalog(runtime))
        )
        return tool_result(report, report.summary_text())
