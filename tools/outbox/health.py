"""``outbox_health``: per service and table, counts by status, oldest late rows, FAILED by type.

Verdicts use the thresholds of ``[limits]``:

| code | when | severity |
| --- | --- | --- |
| ``pending_in_outbox`` | jobs_outbox oldest due PENDING row older than ``pending_ageing_s`` | error |
| ``event_pending`` | event_queue oldest PENDING row older than ``pending_ageing_s`` | error |
| ``stuck_processing`` | oldest PROCESSING row older than ``processing_ageing_s`` (see below) | error |
| ``handler_failed`` | job_audit FAILED rows >= ``failed_alert_count`` | warning |
| ``push_failed`` | jobs_outbox / event_queue FAILED rows >= ``failed_alert_count`` | warning |
| ``table_missing`` | the table does not exist in the service database | error |
| ``slow`` | a query on the table hit the statement timeout: the database answers, slowly | warning |
| ``unavailable`` | the service database cannot be reached (or gave no reply within the deadline) | error |
| ``ok`` | none of the above for that table | ok |

A PROCESSING row's age is counted from the column its writer stamps when it enters the state:
``updated_at`` (the runner's claim) on jobs_outbox and event_queue; on job_audit ``started_at``
(the worker's upsert), else ``created_at``: the real worker never writes job_audit's ``updated_at``.
``processing_age_column`` says which.

Services are queried concurrently; a service that is down is reported as unavailable and
the others still answer. Slow is not down: a table whose query hit the statement timeout
is ``slow``, with the timeout and the index ``mesh-mcp doctor`` recommends for it.
"""

from __future__ import annotations

import anyio

from server.config import Settings
from server.connections import Connections
from server.errors import MeshError, StatementTimeout
from tools.outbox import queries
from tools.outbox.indexes import missing_indexes, recommended_indexes
from tools.outbox.model import HealthReport, HealthVerdict, ServiceHealth, TableHealth
from tools.outbox.schema_discovery import TABLE_KINDS, SchemaCatalog, TableSchema

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2, "ok": 3}

RUNNER_NEXT = "Check that the outbox runner of this service runs and reaches its database and Redis (its logs)."


async def table_health(
    connections: Connections, settings: Settings, service: str, schema: TableSchema
) -> TableHealth:
    kind = schema.kind
    health = TableHealth(table=kind, name=schema.name, exists=schema.exists)  # type: ignore[arg-type]
    if not schema.exists:
        health.verdicts.append(
            HealthVerdict(
                code="table_missing",
                severity="error",
                sentence=f"table {schema.name} does not exist in service '{service}'",
                next_step="check [conventions.tables] and the service's DSN (database and search_path)",
            )
        )
        return health
    st = settings.conventions.statuses
    limits = settings.limits
    counts = await connections.read(service, queries.status_counts_query(schema), max_rows=1000)
    health.counts = {str(r["status"]): int(r["n"]) for r in counts.rows}
    health.total = sum(health.counts.values())
    ages_sql, ages_params = queries.oldest_ages_query(schema, st.pending, st.processing)
    ages = (await connections.read(service, ages_sql, ages_params, max_rows=1)).rows[0]
    health.oldest_pending_age_s = round(ages["pending"], 3) if ages["pending"] is not None else None
    health.oldest_processing_age_s = round(ages["processing"], 3) if ages["processing"] is not None else None
    failed_count = health.counts.get(st.failed, 0)
    if failed_count:
        fsql, fparams = queries.failed_by_type_query(schema, st.failed, limits.max_count)
        failed = await connections.read(service, fsql, fparams, max_rows=limits.max_count)
        health.failed_by_type = {str(r["type"]): int(r["n"]) for r in failed.rows}
    pending_age = health.oldest_pending_age_s
    if pending_age is not None and pending_age > limits.pending_ageing_s and kind != "job_audit":
        what = "job" if kind == "jobs_outbox" else "event"
        health.verdicts.append(
            HealthVerdict(
                code="pending_in_outbox" if kind == "jobs_outbox" else "event_pending",
                severity="error",
                sentence=(
                    f"{schema.name}: the oldest due PENDING {what} is {pending_age:.0f}s old "
                    f"(> {limits.pending_ageing_s}s): the outbox runner is stopped or cannot reach "
                    + ("the database" if kind == "jobs_outbox" else "Redis")
                ),
                next_step=RUNNER_NEXT,
            )
        )
    processing_age = health.oldest_processing_age_s
    since = queries.processing_since_column(schema)
    health.processing_age_column = since
    if processing_age is not None and processing_age > limits.processing_ageing_s:
        if kind == "job_audit":
            who = ("a worker died while running a job, or the job ran but its audit row could not be closed (the "
                   "audit trigger raising on COMPLETED: mesh-mcp doctor checks it)")
            next_step = ("query_outbox(table='job_audit', status='" + st.processing + "') to list them, then "
                         "trace_job on each: it tells a dead worker (stuck_processing) from a job that finished but "
                         "whose audit row was not closed (audit_not_closed), with the next step for that job")
        else:
            who = "the runner died between claim and push"
            next_step = ("query_outbox(table='" + kind + "', status='" + st.processing + "') to list them, then "
                         + ("propose_remediation(symptom='requeue_stuck_job', service='" + service + "')"
                            if kind == "jobs_outbox" else "restart the service's outbox runner (it claims again)"))
        health.verdicts.append(
            HealthVerdict(
                code="stuck_processing",
                severity="error",
                sentence=(
                    f"{schema.name}: a row is PROCESSING for {processing_age:.0f}s since its {since} "
                    f"(> {limits.processing_ageing_s}s): {who}"
                ),
                next_step=next_step,
            )
        )
    if failed_count >= limits.failed_alert_count:
        top = ", ".join(f"{t} x{n}" for t, n in list(health.failed_by_type.items())[:5])
        if kind == "job_audit":
            health.verdicts.append(
                HealthVerdict(
                    code="handler_failed",
                    severity="warning",
                    sentence=f"{schema.name}: {failed_count} FAILED job(s) ({top}): handlers raised errors",
                    next_step="trace_job on one of them for error_message; fix, then "
                    "propose_remediation(symptom='retry_failed_job', queue=..., ids=[...]) for the jobs BullMQ "
                    "holds failed",
                )
            )
        else:
            health.verdicts.append(
                HealthVerdict(
                    code="push_failed",
                    severity="warning",
                    sentence=f"{schema.name}: {failed_count} FAILED row(s) ({top}): the runner gave up pushing them",
                    next_step=f"query_outbox(table='{kind}', status='{st.failed}') for lastError; after the fix, "
                    f"propose_remediation(symptom='requeue_stuck_job', service='{service}', ids=[...those ids]) "
                    "puts them back to PENDING",
                )
            )
    if not health.verdicts:
        health.verdicts.append(HealthVerdict(code="ok", severity="ok", sentence=f"{schema.name}: nothing late"))
    return health


async def slow_table(
    settings: Settings, catalog: SchemaCatalog, service: str, schema: TableSchema, exc: StatementTimeout
) -> TableHealth:
    """The ``slow`` verdict of a table whose query hit the statement timeout, with doctor's advice."""
    ddl = "; ".join(i.ddl for i in recommended_indexes(schema, settings.conventions)[:3])
    advice = (f"look for locks or load (pg_stat_activity, pg_locks); mesh-mcp doctor says which of the "
              f"recommended indexes is missing ({ddl})")
    try:
        with_indexes = (await catalog.tables(service, with_indexes=True))[schema.kind]
        missing = missing_indexes(with_indexes, settings.conventions)
        if missing:
            advice = "create the index mesh-mcp doctor recommends: " + "; ".join(i.ddl for i in missing[:3])
        else:
            advice = "every recommended index exists: look for locks or load on the database (pg_stat_activity)"
    except MeshError:
        pass
    health = TableHealth(table=schema.kind, name=schema.name, exists=True)  # type: ignore[arg-type]
    health.verdicts.append(HealthVerdict(
        code="slow", severity="warning",
        sentence=(f"{schema.name} of service '{service}': a health query hit the statement timeout of "
                  f"{exc.timeout_ms} ms; the database answers, but too slowly for this table to be counted"),
        next_step=f"{advice}; or raise [limits] statement_timeout_ms"))
    return health


async def service_health(
    connections: Connections, settings: Settings, catalog: SchemaCatalog, service: str
) -> ServiceHealth:
    try:
        tables = await catalog.tables(service)
        results: dict[str, TableHealth] = {}

        async def one(kind: str) -> None:
            try:
                results[kind] = await table_health(connections, settings, service, tables[kind])
            except StatementTimeout as exc:
                results[kind] = await slow_table(settings, catalog, service, tables[kind], exc)

        async with anyio.create_task_group() as tg:
            for kind in TABLE_KINDS:
                tg.start_soon(one, kind)
    except BaseExceptionGroup as group:
        first = group.exceptions[0]
        if isinstance(first, MeshError):
            return _unavailable(service, first)
        raise first from None
    except MeshError as exc:
        return _unavailable(service, exc)
    ordered = [results[k] for k in TABLE_KINDS]
    verdicts = [v for t in ordered for v in t.verdicts if v.code != "ok"]
    verdicts.sort(key=lambda v: SEVERITY_ORDER[v.severity])
    return ServiceHealth(service=service, available=True, tables=ordered, verdicts=verdicts)


def _unavailable(service: str, exc: MeshError) -> ServiceHealth:
    return ServiceHealth(
        service=service,
        available=False,
        error=str(exc),
        verdicts=[
            HealthVerdict(
                code="unavailable",
                severity="error",
                sentence=str(exc),
                next_step=f"check [services.{service}] postgres in mesh.toml and that the database is up",
            )
        ],
    )


async def outbox_health(
    connections: Connections, settings: Settings, catalog: SchemaCatalog, service: str | None = None
) -> HealthReport:
    """Health of ``service`` (or every configured service)."""
    services = connections.resolve_services(service)
    results: dict[str, ServiceHealth] = {}

    async def one(name: str) -> None:
        results[name] = await service_health(connections, settings, catalog, name)

    async with anyio.create_task_group() as tg:
        for name in services:
            tg.start_soon(one, name)
    ordered = [results[n] for n in services]
    limits = settings.limits
    return HealthReport(
        services=ordered,
        ok=all(v.severity not in ("error", "warning") for s in ordered for v in s.verdicts),
        thresholds={
            "pending_ageing_s": limits.pending_ageing_s,
            "processing_ageing_s": limits.processing_ageing_s,
            "failed_alert_count": limits.failed_alert_count,
        },
    )
