"""``visualize_mesh``: the mesh graph of the index, rendered in the format asked for."""

from __future__ import annotations

from tools.flow_map.service import engine_for
from tools.mesh_index.service import IndexService
from tools.pictures.app import page
from tools.pictures.mesh import build_mesh
from tools.pictures.mesh_grpc import grpc_facts
from tools.pictures.mesh_model import MeshGraph
from tools.pictures.mesh_render import mesh_mermaid
from tools.pictures.view import mesh_view


def visualize(index: IndexService, fmt: str = "mermaid", service: str | None = None,
              max_services: int = 40) -> MeshGraph:
    """The mesh with its gRPC edges (refreshes nothing: call ``index.refresh()`` first)."""
    graph = build_mesh(engine_for(index), fmt, service, max_services, grpc_facts(index))
    if fmt == "mermaid":
        graph.mermaid = mesh_mermaid(graph)
    elif fmt == "html":
        graph.html = page(mesh_view(graph))
    return graph
