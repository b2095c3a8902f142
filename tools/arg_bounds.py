"""Bounds of tool arguments that the libraries enforce and the tools' input schemas advertise.

They live here, not in the libraries that use them, so that registering a tool (which reads them
into its argument model) does not import the library and its result models: ``mesh-mcp serve``
imports those on a tool's first call (:mod:`server.output_models`).
"""

from __future__ import annotations

MAX_OLDER_THAN_S = 10 * 365 * 86400
"""query_outbox ``older_than_s``: ten years."""

MAX_FAILURES = 100
"""inspect_queue ``failures``: failed jobs listed at most."""

MAX_IDLE_MS = 365 * 86_400_000
"""list_pending ``min_idle_ms``: one year."""

MAX_SINCE_S = 30 * 86400
"""trace_request ``since_s``: thirty days."""
