"""The ``mesh://catalogue`` document: the static index's catalogue as JSON.

It is the catalogue ``list_catalogue`` returns (every job, event, websocket message,
queue and stream with producer and consumer counts, orphan reasons and the ids of the
failing ``verify_flow`` checks), from the shared static index service of
``tools.mesh_index``. Like the tool, each read refreshes the index first (only files
changed since the last build are re-parsed), so the document matches the workspace on
disk; the work runs in a worker thread so the server keeps answering. Nothing here
imports MCP.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread

from server.runtime import Runtime
from tools.mesh_index.model import Catalogue
from tools.mesh_index.service import get_index_service

CATALOGUE_URI = "mesh://catalogue"
CATALOGUE_MIME_TYPE = "application/json"


async def catalogue_data(runtime: Runtime) -> dict[str, Any]:
    """The catalogue as JSON-ready data; raises MeshError when there is no workspace."""
    service = get_index_service(runtime)

    def build() -> Catalogue:
        service.refresh()
        return service.catalogue(kind=None, orphans_only=False)

    catalogue = await anyio.to_thread.run_sync(build)
    return catalogue.model_dump(mode="json")


async def catalogue_json(runtime: Runtime) -> str:
    """The catalogue document as indented JSON text."""
    return json.dumps(await catalogue_data(runtime), indent=2, ensure_ascii=False)
