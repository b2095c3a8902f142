"""The SQL side of a trace: find an item's rows in each service, and say so when it is nowhere.

:class:`TraceSearch` holds what every layer of the tracer (:mod:`tools.outbox.trace`) shares:
the connections, settings and schema catalog, and ``unavailable``, the services (and Redis
instances, see :mod:`tools.outbox.trace_redis`) that could not be read. It reads the rows of one
id (:meth:`TraceSearch._rows`, each shaped with its hint), the job-outcome rows of event_queue in
every naming variant of ``conventions.job_success_types`` / ``job_failure_types``
(:meth:`TraceSearch.outcome_types`), and fans a search out to one service or all of them
(:meth:`TraceSearch._search`). When no service holds the item, :meth:`TraceSearch._not_found` is
the answer: ``not_found``, or ``inconclusive`` when a service could not be searched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.config import Settings
from server.connections import Connections
from tools.outbox import queries
from tools.outbox.fan_out import each_service
from tools.outbox.model import Hop, OutboxRow, ServiceProblem, TraceReport
from tools.outbox.rows import RowTimes, hint_columns, hint_for, shape_row, times_of
from tools.outbox.schema_discovery import SchemaCatalog, TableSchema
from tools.outbox.verdicts import verdict


@dataclass
class Found:
    """One row a trace read, shaped, with its times."""

    row: OutboxRow
    times: RowTimes


@dataclass
class ServiceRows:
    """What one service holds of the traced item (its tables, then the rows found in them)."""

    service: str
    tables: dict[str, TableSchema]
    job: Found | None = None
    audit: Found | None = None
    event: Found | None = None
    outcomes: list[Found] = field(default_factory=list)
    success_types: set[str] = field(default_factory=set)
    failure_accepted: set[str] = field(default_factory=set)
    audit_by_row_id: Found | None = None


class TraceSearch:
    """Reads the SQL rows of one trace with one Settings / Connections / SchemaCatalog."""

    def __init__(self, connections: Connections, settings: Settings, catalog: SchemaCatalog) -> None:
        self.connections = connections
        self.settings = settings
        self.catalog = catalog
        self.unavailable: list[ServiceProblem] = []
        self.failure_accepted: list[str] = []
        """failure event types the failure post-processor accepts, for the last outcome_types() asked"""

    async def _rows(self, service: str, schema: TableSchema, role: str, value: Any, limit: int = 1) -> list[Found]:
        if not schema.exists or not schema.has(role) or value is None:
            return []
        cap = self.settings.limits.payload_max_bytes
        query, params = queries.rows_by_column(schema, role, [value], cap, limit)
        result = await self.connections.read(service, query, params, max_rows=limit)
        return [self._found(service, schema, raw) for raw in result.rows]

    def _found(self, service: str, schema: TableSchema, raw: dict[str, Any], audit_status: str | None = None) -> Found:
        row = shape_row(service, schema, raw, self.settings.limits.payload_max_bytes)
        times = times_of(raw)
        row.hint = hint_for(row, times, self.settings.conventions.statuses, self.settings.limits,
                            audit_status=audit_status, column=hint_columns(schema))
        return Found(row, times)

    def outcome_types(self, service: str, emitters: list[str | None]) -> tuple[list[str], list[str]]:
        """Success and failure event types of a job of ``service``, every naming variant."""
        conv = self.settings.conventions
        domains: list[str] = []
        for emitter in [*emitters, self.settings.emitter_of(service)]:
            if emitter:
                domain = conv.domain_of(emitter)
                if domain not in domains:
                    domains.append(domain)

        def expand(templates: list[str]) -> list[str]:
            out: list[str] = []
            for template in templates:
                for domain in domains if "{domain}" in template else [""]:
                    value = template.replace("{domain}", domain)
                    if value not in out:
                        out.append(value)
            return out

        self.failure_accepted = expand(conv.job_failure_accepted_types)
        return expand(conv.job_success_types), expand(conv.job_failure_types)

    async def _outcomes(self, rows: ServiceRows, job_id: str) -> None:
        schema = rows.tables["event_queue"]
        if not schema.exists or not schema.has("type") or not schema.has("payload"):
            return
        emitters = []
        for found in (rows.job, rows.audit):
            if found is not None:
                col = found.row.columns
                emitters.append(col.get(schema.names.emitter))
        success, failure = self.outcome_types(rows.service, emitters)
        rows.success_types = set(success)
        rows.failure_accepted = set(self.failure_accepted)
        cap = self.settings.limits.payload_max_bytes
        query, params = queries.outcome_events_query(schema, self.settings.conventions, success + failure, job_id,
                                                     cap, 10)
        result = await self.connections.read(rows.service, query, params, max_rows=10)
        rows.outcomes = [self._found(rows.service, schema, raw) for raw in result.rows]

    async def _search(self, service: str | None, fetch: Any) -> tuple[list[str], list[ServiceRows]]:
        services = self.connections.resolve_services(service)
        found: dict[str, ServiceRows] = {}

        async def one(name: str) -> None:
            rows = ServiceRows(service=name, tables=await self.catalog.tables(name))
            await fetch(rows)
            found[name] = rows

        self.unavailable.extend(await each_service(services, one, named=service is not None))
        return services, [found[n] for n in services if n in found]

    def searched(self, services: list[str]) -> list[str]:
        """The services really searched: those that answered every step."""
        down = {p.service for p in self.unavailable}
        return [s for s in services if s not in down]

    def _not_found(self, kind: str, item_id: str, service: str | None, services: list[str], table: str
                   ) -> TraceReport:
        retention = self.settings.conventions.retention_s
        searched = self.searched(services)
        down = [p for p in self.unavailable if p.service in services]
        where = ", ".join(searched) or "no service"
        if down:
            why = "; ".join(f"{p.service}: {p.error}" for p in down)
            sentence = (f"no {table} row with id {item_id} in {where}, but {len(down)} service(s) could not be "
                        f"searched ({why}): the {kind} may be there")
            v = verdict("inconclusive", "warning", sentence,
                        f"fix the access to {', '.join(p.service for p in down)} and trace again, or pass service=...",
                        table)
        else:
            sentence = (
                f"no {table} row with id {item_id} in {where}. COMPLETED rows older than the retention "
                f"({retention}s) are purged, so an old finished {kind} leaves no row; a recent one was never written "
                "to these databases"
            )
            v = verdict("not_found", "warning", sentence, hop=table)
        hop = Hop(name=table, ref=f"{table} {item_id}", found=False, state="absent", healthy=None, detail=sentence)
        return TraceReport(kind=kind, id=item_id, service=service, searched_services=searched,  # type: ignore[arg-type]
                           verdict=v, findings=[v], hops=[hop], unavailable=self.unavailable)
