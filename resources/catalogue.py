"""The ``mesh://catalogue`` document: the static index's catalogue as JSON.

It is the same catalogue that ``list_catalogue`` returns (every job, event, queue and
stream with producer and consumer counts and, for orphans, the reason), built by the
static index service of ``tools.mesh_index``. The index is built on first use and
refreshed by the service itself; building runs in a worker thread so the server keeps
answering. Nothing here imports MCP.
"""

from __future__ import annotations

import importlib
import inspect
import json
from typing import Any

import anyio.to_thread
import pydantic_core

from server.errors import MeshError
from server.runtime import Runtime

CATALOGUE_URI = "mesh://catalogue"
CATALOGUE_MIME_TYPE = "application/json"
INDEX_SERVICE_MODULE = "tools.mesh_index.service"


def _index_service(runtime: Runtime) -> Any:
    try:
        module = importlib.import_module(INDEX_SERVICE_MODULE)
    except ImportError as exc:
        raise MeshError(
            f"the static index is not available in this build ({INDEX_SERVICE_MODULE}: {exc}); "
            "use analyze_impact or upgrade mesh-mcp"
        ) from None
    return module.get_index_service(runtime)


async def catalogue_data(runtime: Runtime) -> Any:
    """The catalogue as JSON-ready data; raises MeshError when there is no workspace or index."""
    if runtime.settings.workspace is None:
        raise MeshError(
            "no workspace is configured, so there is no catalogue: start the server with --workspace DIR "
            "or set workspace in mesh.toml"
        )
    service = _index_service(runtime)
    method = service.catalogue
    if inspect.iscoroutinefunction(method):
        result = await method(kind=None, orphans_only=False)
    else:
        result = await anyio.to_thread.run_sync(lambda: method(kind=None, orphans_only=False))
        if inspect.isawaitable(result):
            result = await result
    return pydantic_core.to_jsonable_python(result, fallback=str)


async def catalogue_json(runtime: Runtime) -> str:
    """The catalogue document as indented JSON text."""
    return json.dumps(await catalogue_data(runtime), indent=2, ensure_ascii=False, default=str)
