"""How verify_flow gets the static index: the runtime's shared service, or one built for the CLI."""

from __future__ import annotations

import sys
from typing import Any

from server.config import Settings
from server.errors import InvalidArgument
from server.runtime import Runtime


def _progress(done: int, total: int, label: str) -> None:
    if total:
        sys.stderr.write(f"\rindexing {done}/{total} files")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def open_index(settings: Settings, *, progress: bool = False) -> Any:
    """A refreshed IndexService for ``settings.workspace`` (the CLI's own instance; cache under the state dir)."""
    from tools.mesh_index.service import IndexService

    if settings.workspace is None:
        raise InvalidArgument("no workspace configured: pass --workspace DIR or set workspace in mesh.toml")
    service = IndexService(settings.workspace, settings.conventions.static, cache_dir=settings.resolved_state_dir)
    service.refresh(progress=_progress if progress else None)
    return service


def runtime_index(runtime: Runtime) -> Any:
    """The server's shared IndexService (built on first use by the static index capability)."""
    from tools.mesh_index.service import get_index_service

    if runtime.settings.workspace is None:
        raise InvalidArgument(
            "no workspace configured: start the server with --workspace DIR or set workspace in mesh.toml"
        )
    return get_index_service(runtime)
