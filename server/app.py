"""The MCP application, built by :func:`build_server` from a :class:`Settings`.

Capabilities register their tools, resources and prompts through a ``register(server,
runtime)`` function of their own module. Tools that change data are registered only
when remediation is enabled, so a read-only server does not even list them.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from mcp.types import Resource as MCPResource
from pydantic import BaseModel, Field, ValidationError

from server import __version__
from server.config import Settings
from server.output_models import ResultModel
from server.redaction import redact_settings
from server.runtime import Runtime
from server.schema_cache import SchemaCache
from server.sdk_tools import add_tool_with_output_schema, declared_output_model, load_output_model, registered_tools
from server.strict_args import harden_tools
from server.tool_listing import compact_listing
from server.tool_titles import apply_titles
from server.toolkit import READ_ONLY_LOCAL, mesh_tool, tool_result

INSTRUCTIONS = """\
mesh-mcp maps and diagnoses the asynchronous flows of a TypeScript microservice system:
a PostgreSQL transactional outbox (jobs_outbox, job_audit, event_queue), BullMQ queues and
Redis Streams consumer groups with dead-letter streams.
Work in the runbook's order: analyze_impact (static: who produces and consumes), then the
outbox tables (query_outbox, outbox_health, trace_job, trace_event), then Redis
(inspect_stream, list_pending, dlq_list, inspect_queue). Repairs are only ever proposed
(propose_remediation); a human approves them out of band. Skills are resources: skill://...
"""

REGISTRARS: tuple[str, ...] = (
    "tools.mesh_index.mcp_tools",
    "tools.verify.mcp_tools",
    "tools.outbox.mcp_tools",
    "tools.streams.mcp_tools",
    "tools.queues.mcp_tools",
    "tools.remediation.mcp_tools",
    "tools.skills.mcp_tools",
    "resources.mcp_resources",
    "tools.flow_map.mcp_tools",
    "tools.lint.mcp_tools",
    "tools.trace_request.mcp_tools",
    "resources.completions",
    "tools.plan_flow.mcp_tools",
    "tools.pictures.mcp_tools",  # last: it names its app on the tools registered before it
)
"""Modules exposing ``register(server, runtime)``, in listing order."""


def describe_invalid_arguments(tool: str, error: ValidationError) -> str:
    """One readable sentence per rejected argument, and what to do (no pydantic boilerplate)."""
    parts = []
    for err in error.errors():
        name = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            parts.append(f"'{name}' is required")
        elif err["type"] == "extra_forbidden":
            parts.append(f"'{name}' is not a parameter of {tool}")
        else:
            shown = repr(err.get("input"))
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            parts.append(f"'{name}': {message} (got {shown})")
    return (
        f"invalid arguments for {tool}: {'; '.join(parts)}. Fix them and call again "
        "(the tool's input schema gives each parameter's type and allowed values)."
    )


class MeshServer(MCPServer):
    """MCPServer whose argument-validation errors read as sentences, not pydantic dumps.

    It also lists resources that come and go while it runs (the workspace's own skills): each
    lister added by :meth:`add_resource_lister` is asked at every ``resources/list``. Tools whose
    output schema ``schema_cache`` holds are registered without generating it again.
    """

    def __init__(self, *args: Any, schema_cache: SchemaCache | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._resource_listers: list[Callable[[], Awaitable[list[MCPResource]]]] = []
        self.schema_cache = schema_cache or SchemaCache.disabled()

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> None:
        cached = self.schema_cache.output_schema(name or fn.__name__)
        if (cached is not None and kwargs.get("structured_output") is None
                and add_tool_with_output_schema(self, fn, cached, name=name, **kwargs)):
            return
        self.schema_cache.used.discard(name or fn.__name__)
        if isinstance(declared_output_model(fn), ResultModel):  # the SDK cannot read it: generate the schema here
            if kwargs.get("structured_output") is not None:
                raise TypeError(f"{name or fn.__name__}: a ResultModel return takes no structured_output")
            add_tool_with_output_schema(self, fn, None, name=name, **kwargs)
            return
        super().add_tool(fn, name=name, **kwargs)

    def add_resource_lister(self, lister: Callable[[], Awaitable[list[MCPResource]]]) -> None:
        """List ``await lister()`` after the registered resources at every resources/list."""
        self._resource_listers.append(lister)

    async def list_resources(self) -> list[MCPResource]:
        listed = await super().list_resources()
        for lister in self._resource_listers:
            listed.extend(await lister())
        return listed

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        load_output_model(self, name)  # a model named by path is imported on the tool's first call
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(describe_invalid_arguments(name, exc.__cause__)) from exc.__cause__
            raise


class ServerInfo(BaseModel):
    name: str = "mesh-mcp"
    version: str
    mode: str = Field(description="read-only or remediation")
    workspace: str | None
    tools: list[str]
    services: list[str]
    config: dict = Field(description="effective configuration, secrets redacted")
    approval: str = Field(default="", description="what the configured approval mode protects against")
    approval_gate: dict = Field(default_factory=dict, description="approval mode, trust file, approvers with "
                                "fingerprints, trust check, allow_unprotected_approvers")


def build_server(
    settings: Settings, *, auth: AuthSettings | None = None, token_verifier: TokenVerifier | None = None,
    cache_schemas: bool = True,
) -> MCPServer:
    """A fresh MCP server bound to ``settings`` (one Runtime per server).

    ``auth`` and ``token_verifier`` protect streamable HTTP mode (see :mod:`server.http_auth`);
    stdio and in-process sessions need neither. The tools' output schemas are read from, and
    written to, the state folder's cache (:mod:`server.schema_cache`) unless ``cache_schemas`` is
    false (every schema is then generated, and nothing written).
    """
    runtime = Runtime(settings)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Runtime]:
        try:
            yield runtime
        finally:
            await runtime.aclose()

    server = MeshServer(
        "mesh-mcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        auth=auth,
        token_verifier=token_verifier,
        schema_cache=SchemaCache.for_settings(settings) if cache_schemas else None,
    )
    server.runtime = runtime  # type: ignore[attr-defined]

    @server.tool(name="server_info", annotations=READ_ONLY_LOCAL)
    @mesh_tool
    async def server_info() -> Annotated[CallToolResult, ServerInfo]:
        """Version, mode (read-only or remediation), enabled tools and the redacted configuration."""
        from server.approval.tokens import describe_mode  # the approval gate's imports: not at start-up
        from server.approval.trust import gate_status

        tools = sorted(t.name for t in await server.list_tools())
        info = ServerInfo(
            version=__version__,
            mode="remediation" if settings.enable_remediation else "read-only",
            workspace=str(settings.workspace) if settings.workspace else None,
            tools=tools,
            services=sorted(settings.services),
            config=redact_settings(settings.model_dump(mode="json")),
            approval=describe_mode(settings),
            approval_gate=gate_status(settings).as_dict(),
        )
        text = (
            f"mesh-mcp {info.version}, {info.mode} mode, {len(tools)} tools; "
            f"workspace {info.workspace or '(none)'}; services: {', '.join(info.services) or '(none)'}"
        )
        if settings.enable_remediation:
            text += f"; approval: {info.approval}"
            if info.approval_gate.get("trust_check") == "failed":
                text += " Trust check FAILED: " + "; ".join(info.approval_gate["problems"])
        return tool_result(info, text)

    for module_name in REGISTRARS:
        module = importlib.import_module(module_name)
        module.register(server, runtime)
    harden_tools(server)
    apply_titles(server)
    server.schema_cache.store({
        tool.name: tool.fn_metadata.output_schema
        for tool in registered_tools(server) if tool.fn_metadata.output_schema is not None
    })
    compact_listing(server)
    return server
