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
from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.mcpserver.resources import FunctionResource, TextResource
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, Annotations, EmbeddedResource, TextResourceContents
from mcp.types import Resource as MCPResource
from pydantic import Field

from resources import prompts as prompt_texts
from resources.catalogue import CATALOGUE_MIME_TYPE, CATALOGUE_URI, catalogue_json
from resources.skill_catalog import get_skill_catalog
from resources.skills import NAME_PATTERN, SKILL_MIME_TYPE, Skill, find_skill, load_skills
from resources.workspace_skills import (
    MAX_SKILL_BYTES,
    WORKSPACE_SKILL_PREFIX,
    SkillDiscovery,
    WorkspaceSkill,
    discover_workspace_skills,
)
from server import workspace_files
from server.config import Settings
from server.errors import InvalidArgument, MeshError
from server.runtime import Runtime
from server.text_safety import one_line

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


def _workspace_skill_listing(skill: WorkspaceSkill) -> MCPResource:
    """How a workspace SKILL.md is listed: its front-matter name and description, problems said. Every
    text from the workspace is kept on one line with its control characters shown, not obeyed
    (:func:`server.text_safety.one_line`): a title is what a client prints in a list."""
    description = skill.description or "(no description in its front matter)"
    if skill.error:
        description = f"{description} [listed with a problem: {skill.error}]"
    return MCPResource(
        uri=skill.uri,
        name=one_line(f"{skill.repo}/{skill.slug}"),
        title=one_line(skill.title),
        description=one_line(description),
        mime_type=SKILL_MIME_TYPE,
        annotations=FOR_EVERYONE,
        _meta={"source": "workspace", "repo": one_line(skill.repo), "path": one_line(skill.rel_path),
               "tags": skill.tags,
               "front_matter_keys": sorted(skill.front_matter), "error": skill.error},
    )


def register_workspace_skills(server: MCPServer, runtime: Runtime) -> None:
    """Every SKILL.md of the workspace as ``skill://workspace/<repo>/<slug>``, as the files are now.

    ``resources/list`` asks the runtime's :class:`~resources.skill_catalog.SkillCatalog` each time
    (a skill added, removed or renamed while the server runs is listed or dropped at once; the
    catalogue walks again only when a folder changed), and reads go to the file on disk.
    """
    if runtime.settings.workspace is None:
        return
    add_lister = getattr(server, "add_resource_lister", None)
    if add_lister is None:  # a plain MCPServer: list what is there now
        for skill in discover_workspace_skills(runtime.settings.workspace,
                                               runtime.settings.conventions.static.skip_dirs).skills:
            server.add_resource(FunctionResource(uri=skill.uri, name=f"{skill.repo}/{skill.slug}",
                                                 mime_type=SKILL_MIME_TYPE, fn=_reader(runtime, skill.uri)))
        return

    def current() -> SkillDiscovery:
        catalog = get_skill_catalog(runtime)
        assert catalog is not None
        found = catalog.current()
        if found.truncated:
            log.warning("workspace skill discovery stopped at its bound; some SKILL.md files are not listed")
        return found

    async def listed() -> list[MCPResource]:
        found = await anyio.to_thread.run_sync(current)
        return [_workspace_skill_listing(skill) for skill in found.skills]

    add_lister(listed)

    @server.resource(
        f"{WORKSPACE_SKILL_PREFIX}{{repo}}/{{slug}}",
        name="workspace-skill",
        title="The team's own skill (SKILL.md of the workspace)",
        description="A SKILL.md under <repo>/**/.agents/skills/ or .claude/skills/ of the workspace, as markdown "
        "(resources/list names each one; '_root' is the workspace root). Read from disk at each read.",
        mime_type=SKILL_MIME_TYPE,
        annotations=FOR_EVERYONE,
    )
    async def read_workspace_skill(repo: str, slug: str) -> str:
        return await anyio.to_thread.run_sync(_reader(runtime, f"{WORKSPACE_SKILL_PREFIX}{repo}/{slug}"))


def _reader(runtime: Runtime, uri: str) -> Callable[[], str]:
    """Reads the SKILL.md behind ``uri`` as the catalogue knows it now (unknown URIs: a clear error)."""

    def read() -> str:
        catalog = get_skill_catalog(runtime)
        skills = catalog.current().skills if catalog is not None else []
        skill = next((s for s in skills if s.uri == uri), None)
        if skill is None:
            known = ", ".join(s.uri for s in skills) or "(none)"
            raise ResourceNotFoundError(f"no workspace skill {uri}; known: {known} (resources/list shows them)")
        try:  # the guarded reader: no symlink out of the workspace, no FIFO or device, capped
            return workspace_files.read_text(runtime.settings.workspace, skill.rel_path, MAX_SKILL_BYTES,
                                             errors="strict")
        except (OSError, UnicodeDecodeError) as exc:
            raise ResourceError(f"{skill.rel_path} cannot be read: {exc}") from None

    return read


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
    register_workspace_skills(server, runtime)
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
