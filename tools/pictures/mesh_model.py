"""Result model of ``visualize_mesh``: services, queues, streams, websocket outputs and gRPC methods as nodes
and edges.

A *service* is a repository of the meta-workspace (the index's ``Site.repo``). Edges are aggregated
per service and route: one edge per (service, queue or stream, direction) with the number of code
sites behind it and the types that travel on it. gRPC edges (:mod:`tools.pictures.mesh_grpc`) go from a
client service to a gRPC method node, from it to the handler's service, and from it to the queues and
streams its handler writes to. The node and edge shapes (``id``, ``label``,
``kind``; ``source``, ``target``, ``label``) are the ones the MCP App draws.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

MeshKind = Literal["service", "queue", "stream", "websocket", "grpc", "folded"]
EdgeKind = Literal["flow", "grpc_call", "grpc_handler", "grpc_write"]


class MeshNode(BaseModel):
    id: str = Field(description="stable id (same thing, same id, in every picture)")
    kind: MeshKind
    label: str
    name: str = Field(description="service (repository), queue name, stream key, gRPC Service.Method, or what was "
                      "folded")
    produces: int = Field(default=0, description="code sites writing to it (routes) / it writes (services) / its "
                          "handlers' outbox writes (gRPC methods)")
    consumes: int = Field(default=0, description="code sites reading it (routes) / it reads (services) / client "
                          "calls (gRPC methods)")
    types: list[str] = Field(default_factory=list, description="job, event or websocket types that travel here (gRPC "
                             "methods: the types their handlers write)")
    trouble: list[str] = Field(default_factory=list, description="what is wrong, one sentence each")
    sites: list[str] = Field(default_factory=list, description="file:line of its sites (zoomed in only; capped)")
    members: list[str] = Field(default_factory=list, description="folded node: the names folded into it")


class MeshEdge(BaseModel):
    source: str
    target: str
    label: str = Field(description="what travels (types, or a count of them)")
    sites: int = Field(description="code sites behind the edge")
    types: list[str] = Field(default_factory=list)
    confidence: Literal["exact", "heuristic", "candidate"] = Field(
        default="exact", description="heuristic: the index guessed a site; candidate: a gRPC link matched by name "
        "only (drawn dashed either way)")
    kind: EdgeKind = Field(default="flow", description="flow (a service and a queue, stream or websocket output), "
                           "grpc_call (client service -> method), grpc_handler (method -> handler service), grpc_write "
                           "(method -> a queue or stream its handler writes to)")


class MeshGraph(BaseModel):
    format: Literal["mermaid", "json", "html"]
    service: str | None = Field(default=None, description="the service zoomed into, if any")
    max_services: int
    services: list[str] = Field(description="every service of the workspace (also those folded or left out)")
    nodes: list[MeshNode]
    edges: list[MeshEdge]
    counts: dict[str, int] = Field(description="services, queues, streams, websocket types, edges, folded")
    folded: int = Field(default=0, description="services and routes folded into '+N more' nodes")
    grpc: str = Field(description="what the picture holds of gRPC (methods, calls, handlers, writes), or why none")
    notes: list[str] = Field(default_factory=list)
    mermaid: str | None = Field(default=None, description="format=mermaid: the picture")
    html: str | None = Field(default=None, description="format=html: a standalone page (no network)")

    def data(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
