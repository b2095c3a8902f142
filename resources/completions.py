"""``completion/complete`` for prompt arguments and resource-template arguments.

What a client can offer while a human (or a model) types an argument:

- ``job`` (prompt diagnose_job), ``event`` (diagnose_event), ``stream`` (remediate_dlq) and
  ``queue``: the job types, event types, stream keys and queue names of the static index's
  catalogue (values and qualified names);
- ``target`` (``mesh://flow/{target}``): every job, event, websocket type, queue and stream;
- ``service``: the services of ``[services.<name>]`` in the configuration;
- ``name`` (``skill://{name}``): the bundled skill names;
- ``repo`` and ``slug`` (``skill://workspace/{repo}/{slug}``): the repositories holding a SKILL.md of
  the workspace, and the slugs of the skills (of the repository already chosen, when it is given).

Candidates starting with the typed value come first, then those containing it (case-insensitive),
at most :data:`MAX_VALUES` (the protocol's cap), with ``total`` and ``has_more``. Without a
workspace the index kinds complete to nothing (the prompt still works with any text).
"""

from __future__ import annotations

import logging

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from resources.skill_catalog import get_skill_catalog
from resources.skills import load_skills
from resources.workspace_skills import WORKSPACE_SKILL_PREFIX
from server.errors import MeshError
from server.runtime import Runtime
from tools.mesh_index.service import get_index_service

log = logging.getLogger("mesh.completions")

MAX_VALUES = 100
"""completion/complete returns at most 100 values (MCP specification)."""

INDEX_KINDS: dict[str, tuple[str, ...]] = {
    "job": ("job",),
    "event": ("event",),
    "stream": ("stream",),
    "queue": ("queue",),
    "target": ("job", "event", "ws_event", "queue", "stream"),
}
"""Argument name -> catalogue kinds whose names complete it."""


def rank(candidates: list[str], typed: str) -> Completion:
    """Candidates starting with ``typed``, then containing it (case-insensitive), capped at MAX_VALUES."""
    needle = typed.lower()
    unique = list(dict.fromkeys(candidates))
    starts = sorted(c for c in unique if c.lower().startswith(needle))
    contains = sorted(c for c in unique if needle in c.lower() and not c.lower().startswith(needle))
    found = starts + contains
    return Completion(values=found[:MAX_VALUES], total=len(found), has_more=len(found) > MAX_VALUES)


async def index_names(runtime: Runtime, kinds: tuple[str, ...]) -> list[str]:
    """Values and qualified names of the catalogue entries of ``kinds`` ([] without a workspace)."""
    try:
        service = get_index_service(runtime)
    except MeshError:
        return []

    def read() -> list[str]:
        service.refresh()
        entries = service.catalogue(kind=None, orphans_only=False).entries
        return [name for e in entries if e.kind in kinds for name in (e.value, e.name)]

    try:
        return await anyio.to_thread.run_sync(read)
    except MeshError as exc:
        log.warning("completion: the index could not be read: %s", exc)
        return []


async def workspace_skill_parts(runtime: Runtime, part: str, repo: str | None) -> list[str]:
    """The ``repo`` (or ``slug``, of ``repo`` when given) of every SKILL.md of the workspace ([] without one)."""
    catalog = get_skill_catalog(runtime)
    if catalog is None:
        return []
    skills = (await anyio.to_thread.run_sync(catalog.current)).skills
    if part == "repo":
        return [s.repo for s in skills]
    return [s.slug for s in skills if repo is None or s.repo == repo]


def register(server: MCPServer, runtime: Runtime) -> None:
    """Install the completion handler (one per server) on ``server``."""
    skill_names = [skill.name for skill in load_skills(strict=False)]

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        name = argument.name
        if name in ("service", "services"):
            return rank(list(runtime.settings.services), argument.value)
        workspace_skill = isinstance(ref, ResourceTemplateReference) and ref.uri.startswith(WORKSPACE_SKILL_PREFIX)
        if workspace_skill and name in ("repo", "slug"):
            chosen = (context.arguments or {}).get("repo") if context is not None else None
            return rank(await workspace_skill_parts(runtime, name, chosen), argument.value)
        if name == "name" and isinstance(ref, ResourceTemplateReference) and ref.uri.startswith("skill://"):
            return rank(skill_names, argument.value)
        kinds = INDEX_KINDS.get(name)
        if kinds is None:
            return None
        return rank(await index_names(runtime, kinds), argument.value)
