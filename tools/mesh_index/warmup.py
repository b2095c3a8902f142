"""``mesh-mcp serve`` loads the static index in the background from its first moment.

A new server process on a built index pays, on its first ``analyze_impact``, the snapshot
load and the freshness walk of the workspace (0.3 s at 20,000 files). ``serve`` builds the
index service before it imports the MCP SDK and starts that refresh in a daemon thread
(:func:`start_warm_up`); once the server is built the service becomes the runtime's shared
one (:func:`adopt`). The first call finds the refresh done or underway: it waits for it on
the service's lock and never answers from a half-loaded or unchecked index. Skipped when no
workspace is configured, when ``limits.index_warm_at_start`` is false, and when the workspace
has never been indexed (the first call then builds the index itself, with progress).
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from tools.mesh_index.cache import FILE_NAME

log = logging.getLogger("mesh.index")

WARM_UP_SWITCH_INTERVAL_S = 0.0002


def start_warm_up(settings: Any) -> Any | None:
    """The IndexService of ``settings`` with its refresh started in a daemon thread (or None)."""
    if settings.workspace is None or not settings.limits.index_warm_at_start:
        return None
    if not (settings.resolved_state_dir / FILE_NAME).is_file():
        return None
    from tools.mesh_index.service import service_for_settings

    service = service_for_settings(settings, watch=settings.limits.index_watch)

    def run() -> None:
        # The walk makes tens of thousands of system calls, each releasing the GIL; while the main
        # thread imports (CPU-bound), getting it back takes up to the switch interval (5 ms) each
        # time. A shorter interval while the warm-up runs lets it finish during the start-up.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, WARM_UP_SWITCH_INTERVAL_S))
        try:
            service.refresh()
        except Exception as exc:  # the first call refreshes again and reports the error itself
            log.warning("background refresh of the static index at start-up failed: %s", exc)
        finally:
            sys.setswitchinterval(interval)

    threading.Thread(target=run, name="mesh-index-warm-up", daemon=True).start()
    return service


def adopt(runtime: Any, service: Any | None) -> None:
    """Hand the warmed-up service to the server's runtime (nothing when there was none)."""
    if service is not None:
        from tools.mesh_index.service import adopt_index_service

        adopt_index_service(runtime, service)
