"""MCP adapters of the skills, the catalogue and the prompts.

- ``skill://<name>``: each bundled skill is a concrete resource (so ``resources/list``
  shows them with their descriptions) and the template ``skill://{name}`` answers any
  other name with a clear "unknown skill" error listing the known ones. Markdown,
  read-only.
- ``mesh://catalogue``: the static index's catalogue as JSON.
- Prompts ``diagnose_job``, ``diagnose_event``, ``remediate_dlq``: the instructions of
  :mod:`resources.prompts` plus the matching skill embedded as a resource.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.mcpserver.resources import FunctionResource, TextResource
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, Annotations, EmbeddedResource, TextResourceContents
from pydantic import Field

from resources import prompts as prompt_texts
from resources.catalogue import CATALOGUE_MIME_TYPE, CATALOGUE_URI, catalogue_json
from resources.skills import NAME_PATTERN, SKILL_MIME_TYPE, Skill, find_skill, load_skills
from resources.workspace_skills import WorkspaceSkill, discover_workspace_skills
from server.config import Settings
from server.errors import InvalidArgument, MeshError
from server.runtime import Runtime

log = logging.getLogger("mesh.resources")

FOR_EVERYONE = Annotations(audience=["user", "assistant"], priority=0.8)


def _skill_resource(skill: Skill) -> TextResource:
    return TextResource(
        uri=skill.uri,
        name=skill.name,
        title=skill.title,
        description=skill.description,
        mime_type=SKILL_MIME_TYPE,
        annotations=FOR_EVERYONE,
        meta={"tags": list(skill.tags)},
        text=skill.text,
    )


def _workspace_skill_resource(skill: WorkspaceSkill, path: Path) -> FunctionResource:
    """A workspace SKILL.md as a resource read from disk at each read (so edits show)."""

    def read() -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ResourceError(f"{skill.rel_path} cannot be read: {exc}") from None

    description = skill.description or "(no description in its front matter)"
    if skill.error:
        description = f"{description} [listed with a problem: {skill.error}]"
    return FunctionResource(
        uri=skill.uri,
        name=f"{skill.repo}/{skill.slug}",
        title=skill.title,
        description=description,
        mime_type=SKILL_MIME_TYPE,
        annotations=FOR_EVERYONE,
        meta={"source": "workspace", "repo": skill.repo, "path": skill.rel_path, "tags": skill.tags,
              "front_matter_keys": sorted(skill.front_matter), "error": skill.error},
        fn=read,
    )


def register_workspace_skills(server: MCPServer, settings: Settings) -> list[WorkspaceSkill]:
    """List every SKILL.md of the workspace (``skill://workspace/<repo>/<slug>``) beside the bundled ones."""
    if settings.workspace is None:
        return []
    found = discover_workspace_skills(settings.workspace, settings.conventions.static.skip_dirs)
    for skill in found.skills:
        server.add_resource(_workspace_skill_resource(skill, settings.workspace / skill.rel_path))
    if found.truncated:
        log.warning("workspace skill discovery stopped at its bound; some SKILL.md files are not listed")
    return found.skills


def _embedded(skill: Skill | None) -> list[Message]:
    if skill is None:
        return []
    contents = TextResourceContents(uri=skill.uri, mime_type=SKILL_MIME_TYPE, text=skill.text)
    return [UserMessage(EmbeddedResource(type="resource", resource=contents))]


def register(server: MCPServer, runtime: Runtime) -> None:
    """Register the skill resources, the catalogue resource and the three prompts."""
    skills = load_skills(strict=False)
    for skill in skills:
        server.add_resource(_skill_resource(skill))
    register_workspace_skills(server, runtime.settings)
    known = ", ".join(skill.name for skill in skills) or "(none)"

    @server.resource(
        "skill://{name}",
        name="skill",
        title="mesh-mcp skill (runbook)",
        description=f"A runbook for agents, as markdown. Known skills: {known}.",
        mime_type=SKILL_MIME_TYPE,
        annotations=FOR_EVERYONE,
    )
    def read_skill(name: str) -> str:
        if not NAME_PATTERN.match(name):
            raise ResourceNotFoundError(f"'{name}' is not a skill name (kebab-case expected); known skills: {known}")
        skill = find_skill(skills, name)
        if skill is None:
            raise ResourceNotFoundError(f"unknown skill '{name}'; known skills: {known} (resources/list shows them)")
        return skill.text

    @server.resource(
        CATALOGUE_URI,
        name="catalogue",
        title="Static catalogue of jobs, events, queues and streams",
        description=(
            "Every job, event, queue and stream of the workspace with producer and consumer counts and, "
            "for orphans, the reason (the same data as list_catalogue), as JSON."
        ),
        mime_type=CATALOGUE_MIME_TYPE,
        annotations=FOR_EVERYONE,
    )
    async def read_catalogue() -> str:
        try:
            return await catalogue_json(runtime)
        except MeshError as exc:
            raise ResourceError(str(exc)) from None

    def messages(build: Callable[[str, Settings], prompt_texts.PromptText], argument: str) -> list[Message]:
        """The prompt's instructions and its skill; an invalid argument is an invalid-params error."""
        try:
            text = build(argument, runtime.settings)
        except InvalidArgument as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return [UserMessage(text.text), *_embedded(find_skill(skills, text.skill))]

    @server.prompt(
        name="diagnose_job",
        title="Diagnose a background job",
        description=(
            "Walk through mesh-mcp's tools in the runbook's order (analyze_impact, query_outbox, trace_job, "
            "inspect_queue, propose_remediation) to find where a job stopped."
        ),
    )
    def diagnose_job(
        job: Annotated[str, Field(description="the jobs_outbox id (also the BullMQ job id) or the job type")],
    ) -> list[Message]:
        return messages(prompt_texts.diagnose_job, job)

    @server.prompt(
        name="diagnose_event",
        title="Diagnose an event",
        description=(
            "Walk through mesh-mcp's tools in the runbook's order (analyze_impact, query_outbox, trace_event, "
            "inspect_stream, list_pending, dlq_list, propose_remediation) to find where an event stopped."
        ),
    )
    def diagnose_event(
        event: Annotated[str, Field(description="the event_queue id or the event type")],
    ) -> list[Message]:
        return messages(prompt_texts.diagnose_event, event)

    @server.prompt(
        name="remediate_dlq",
        title="Remediate the dead letters of a stream",
        description=(
            "Follow the remediation runbook for a stream's dead letters: export, free the pending list, fix, "
            "replay, reconcile; every change is a proposed plan a human approves."
        ),
    )
    def remediate_dlq(
        stream: Annotated[str, Field(description="the source stream key (its dead-letter stream name is accepted)")],
    ) -> list[Message]:
        return messages(prompt_texts.remediate_dlq, stream)
