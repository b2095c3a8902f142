"""The MCP App: one ``ui://`` HTML resource drawing flow, trace, request and mesh results.

``app.html`` (next to this module) is the whole app: its own small SVG renderer (layers from the
nodes and edges the tools already compute), the host bridge of MCP Apps (SEP-1865: JSON-RPC over
``postMessage``: ``ui/initialize``, ``ui/notifications/initialized``, then the host's
``ui/notifications/tool-result``), a click panel (file:line, state, next step). It loads nothing:
its Content-Security-Policy (a ``<meta http-equiv>`` and the resource's ``_meta.ui.csp`` with no
domains) allows no network, and it calls no tool. ``page(view)`` is the same file with a view
embedded, the standalone ``--format html`` page.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

APP_URI = "ui://mesh/graph.html"
APP_MIME_TYPE = "text/html;profile=mcp-app"
APP_TOOLS = ("flow_map", "trace_job", "trace_event", "trace_request", "visualize_mesh")
"""The tools whose results the app draws (they name it in ``_meta.ui.resourceUri``)."""
CSP_META = {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
_DATA_SLOT = '<script type="application/json" id="mesh-data">null</script>'


@cache
def app_html() -> str:
    return resources.files("tools.pictures").joinpath("app.html").read_text(encoding="utf-8")


def page(view: dict[str, Any]) -> str:
    """The app with ``view`` embedded: a standalone page (no host needed, no network)."""
    data = json.dumps(view, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return app_html().replace(_DATA_SLOT, f'<script type="application/json" id="mesh-data">{data}</script>', 1)
