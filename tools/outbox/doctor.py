"""Doctor checks of the runtime diagnosis tools.

Per service: the outbox tables and the columns found (an older schema lacking optional
columns is a warning: the tools adapt), the audit trigger on job_audit and whether its INSERT into event_queue fits
the table (:mod:`tools.outbox.audit_trigger_check`: a left-out NOT NULL column is a failure), and the
recommended indexes that are missing, each with its ``CREATE INDEX CONCURRENTLY`` DDL
in the ``fix`` column, and the missing MCV statistics on (type, status) with their
``CREATE STATISTICS`` DDL (printed, never run). The Redis version and the commands the
traces use (XINFO, XPENDING with a range, LPOS) are checked by ``tools.streams.doctor``.
"""

from __future__ import annotations

from server.checks import Check
from server.errors import MeshError
from server.runtime import Runtime
from tools.outbox.audit_trigger_check import check_audit_trigger
from tools.outbox.indexes import missing_indexes, missing_statistics
from tools.outbox.mcp_tools import catalog_of
from tools.outbox.schema_discovery import TABLE_KINDS, TableSchema

_TRIGGER_SQL = """
SELECT t.tgname AS name
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = to_regclass(quote_ident(%s)) AND p.proname = %s AND NOT t.tgisinternal
"""


def _schema_check(service: str, tables: dict[str, TableSchema]) -> Check:
    found = []
    older = []
    broken = []
    for kind in TABLE_KINDS:
        schema = tables[kind]
        if not schema.exists:
            broken.append(f"table {schema.name} missing")
            continue
        found.append(f"{schema.name} ({len(schema.columns)} columns)")
        if schema.missing_required():
            broken.append(f"{schema.name} lacks required {', '.join(schema.missing_required())}")
        elif schema.missing_known():
            older.append(f"{schema.name} lacks {', '.join(schema.missing_known())}")
    detail = "; ".join(found) or "no outbox table"
    if broken:
        return Check(name=f"schema:{service}", status="fail", detail="; ".join(broken + found),
                     fix="check [conventions.tables] / [conventions.columns] and the DSN's database and search_path")
    if older:
        return Check(name=f"schema:{service}", status="warn",
                     detail=f"{detail}; older schema: {'; '.join(older)} (the tools adapt)",
                     fix="run the service's pending migrations to get these columns")
    return Check(name=f"schema:{service}", status="ok", detail=detail)


async def _trigger_fit_check(runtime: Runtime, service: str) -> Check:
    """The audit trigger is there: does its INSERT INTO event_queue fit the table (live, from pg_catalog)?"""
    conv = runtime.settings.conventions
    name = f"trigger:{service}"
    try:
        found = await check_audit_trigger(runtime.connections, runtime.settings, service)
    except MeshError as exc:
        return Check(name=name, status="warn", detail=f"{conv.audit_trigger} is on {conv.tables.job_audit}, but its "
                     f"INSERT could not be checked against {conv.tables.event_queue}: {exc}")
    if found.problems:
        return Check(name=name, status="fail" if found.raising else "warn", detail=str(found.cause()),
                     fix=found.migration(conv.columns.emitter_id, conv.columns.job_id))
    if not found.writers and not found.unreadable:
        return Check(name=name, status="warn",
                     detail=f"{conv.audit_trigger} fires on {conv.tables.job_audit}, but no trigger function of "
                            f"{conv.tables.job_audit} holds a literal INSERT INTO {conv.tables.event_queue}: whether "
                            "its outcome row fits the table was not checked",
                     fix="read the trigger function (\\sf in psql), or check [conventions.tables] event_queue")
    if found.unreadable:
        return Check(name=name, status="warn",
                     detail=f"{conv.audit_trigger} fires on {conv.tables.job_audit}, but not every INSERT INTO "
                            f"{conv.tables.event_queue} could be checked: {'; '.join(found.unreadable)}",
                     fix=f"read the trigger function (\\sf in psql) against the NOT NULL columns of "
                         f"{conv.tables.event_queue}")
    return Check(name=name, status="ok",
                 detail=f"{conv.audit_trigger} fires on {conv.tables.job_audit} and its INSERT INTO "
                        f"{conv.tables.event_queue} sets every NOT NULL column without a default "
                        f"({'; '.join(found.writers)})")


async def _service_checks(runtime: Runtime, service: str) -> list[Check]:
    settings = runtime.settings
    catalog = catalog_of(runtime)
    try:
        tables = await catalog.tables(service, with_indexes=True)
    except MeshError as exc:
        return [Check(name=f"schema:{service}", status="warn", detail=f"not checked: {exc}",
                      fix=f"fix the connection of [services.{service}] first")]
    checks = [_schema_check(service, tables)]
    audit = tables["job_audit"]
    if audit.exists:
        trig = await runtime.connections.read(
            service, _TRIGGER_SQL, (audit.name, settings.conventions.audit_trigger), max_rows=10
        )
        if trig.rows:
            checks.append(await _trigger_fit_check(runtime, service))
        else:
            checks.append(Check(
                name=f"trigger:{service}", status="warn",
                detail=f"no trigger on {audit.name} runs {settings.conventions.audit_trigger}(): finished jobs emit "
                       "no outcome event, so trace_job reports success_not_cleaned",
                fix="check the common migrations of the service, or [conventions] audit_trigger"))
    missing = []
    stats = []
    for kind in TABLE_KINDS:
        missing.extend(missing_indexes(tables[kind], settings.conventions))
        stats.extend(missing_statistics(tables[kind]))
    if not missing and not stats:
        checks.append(Check(name=f"indexes:{service}", status="ok",
                            detail="every recommended index and statistics object is present"))
    for index in missing:
        checks.append(Check(
            name=f"index:{service}:{index.table}", status="warn",
            detail=f"missing index on {index.table} ({index.label}): slow {index.serves} on big tables",
            fix=index.ddl))
    for st in stats:
        checks.append(Check(
            name=f"stats:{service}:{st.table}", status="warn",
            detail=f"no MCV statistics on {st.table} ({', '.join(st.columns)}): query_outbox with type and status "
                   f"can read every row of the type; after creating them run ANALYZE {st.table}",
            fix=st.ddl))
    return checks


async def checks(runtime: Runtime) -> list[Check]:
    """Schema, trigger and index checks per service."""
    out: list[Check] = []
    for service in sorted(runtime.settings.services):
        out.extend(await _service_checks(runtime, service))
    return out

