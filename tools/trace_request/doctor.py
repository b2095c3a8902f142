"""Doctor checks of ``trace_request``: the indexes its lookups need, per service (DDL printed, never run)."""

from __future__ import annotations

from server.checks import Check
from server.errors import MeshError
from server.runtime import Runtime
from tools.outbox.mcp_tools import catalog_of
from tools.outbox.schema_discovery import TABLE_KINDS
from tools.trace_request.indexes import missing


async def checks(runtime: Runtime) -> list[Check]:
    """One warning per missing trace_request index (correlation_id, traceparent trace id, traceId)."""
    out: list[Check] = []
    for service in sorted(runtime.settings.services):
        try:
            tables = await catalog_of(runtime).tables(service, with_indexes=True)
        except MeshError:
            continue  # the outbox doctor already names the service's connection problem
        for kind in TABLE_KINDS:
            for index in missing(tables[kind]):
                out.append(Check(
                    name=f"trace_request_index:{service}:{index.table}", status="warn",
                    detail=f"missing index on {index.table} ({index.label}): slow {index.serves} on big tables",
                    fix=index.ddl))
    return out
