"""Which outbox tables and columns each service's database really has.

Older schemas lack ``traceparent``, ``correlation_id`` or ``"emitterId"``; the tools
select only what exists instead of failing. Tables are resolved like the tools' own
queries resolve them (``to_regclass`` through the ``search_path``), so the answer matches
what a ``SELECT`` would see. Results are cached per service for ``ttl_s`` seconds (a
migration is picked up after that, or at once with :meth:`SchemaCatalog.invalidate`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from server.config import ColumnNames, Settings
from server.connections import Connections, ReadResult
from server.errors import MeshError

TABLE_KINDS = ("jobs_outbox", "event_queue", "job_audit")
"""Logical names of the three tables (the real names come from ``conventions.tables``)."""

REQUIRED_ROLES: dict[str, tuple[str, ...]] = {
    "jobs_outbox": ("id", "status", "type", "created_at"),
    "event_queue": ("id", "status", "type", "created_at"),
    "job_audit": ("id", "job_id", "status", "created_at"),
}
"""Column roles (fields of ``ColumnNames``) a table needs for the tools to work on it."""

CATALOG_MAX_ROWS = 10_000
"""the most rows one catalog read takes (the columns, or the indexes, of the three outbox tables)"""

_COLUMNS_SQL = """
SELECT t.name AS table_name, a.attname AS column_name,
       format_type(a.atttypid, a.atttypmod) AS data_type, a.attnum AS position
FROM unnest(%s::text[]) AS t(name)
JOIN pg_attribute a ON a.attrelid = to_regclass(quote_ident(t.name))
WHERE a.attnum > 0 AND NOT a.attisdropped
ORDER BY t.name, a.attnum
"""

_INDEXES_SQL = """
SELECT t.name AS table_name, i.indexrelid::regclass::text AS index_name,
       pg_get_indexdef(i.indexrelid) AS definition,
       array(SELECT pg_get_indexdef(i.indexrelid, k, true)
             FROM generate_series(1, i.indnkeyatts) AS k ORDER BY k) AS key_columns,
       i.indpred IS NOT NULL AS partial
FROM unnest(%s::text[]) AS t(name)
JOIN pg_index i ON i.indrelid = to_regclass(quote_ident(t.name))
ORDER BY t.name, index_name
"""


@dataclass(frozen=True)
class IndexInfo:
    name: str
    definition: str
    key_columns: tuple[str, ...]
    partial: bool


_STATISTICS_SQL = """
SELECT t.name AS table_name, s.stxname AS name,
       array(SELECT a.attname::text FROM unnest(s.stxkeys) AS k(n)
             JOIN pg_attribute a ON a.attrelid = s.stxrelid AND a.attnum = k.n) AS columns,
       s.stxkind::text[] AS kinds
FROM unnest(%s::text[]) AS t(name)
JOIN pg_statistic_ext s ON s.stxrelid = to_regclass(quote_ident(t.name))
ORDER BY t.name, s.stxname
"""


@dataclass(frozen=True)
class StatisticsInfo:
    """An extended statistics object (``CREATE STATISTICS``) of the table."""

    name: str
    columns: tuple[str, ...]
    kinds: tuple[str, ...]
    """'m' mcv, 'f' functional dependencies, 'd' ndistinct, 'e' expressions"""


@dataclass(frozen=True)
class TableSchema:
    """One outbox table as found in a service database."""

    kind: str
    name: str
    exists: bool
    columns: dict[str, str] = field(default_factory=dict)
    """column name -> SQL type, in table order"""
    names: ColumnNames = field(default_factory=ColumnNames)
    indexes: tuple[IndexInfo, ...] = ()
    statistics: tuple[StatisticsInfo, ...] = ()

    def col(self, role: str) -> str | None:
        """The real column name for ``role`` (a ``ColumnNames`` field) if the table has it."""
        name = getattr(self.names, role)
        return name if name in self.columns else None

    @property
    def type_role(self) -> str:
        """The role of the column holding the job or event type: ``job_type`` in job_audit, else ``type``."""
        return "job_type" if self.kind == "job_audit" else "type"

    def has(self, role: str) -> bool:
        return self.col(role) is not None

    def type_of(self, role: str) -> str | None:
        name = self.col(role)
        return self.columns.get(name) if name else None

    def missing_required(self) -> list[str]:
        return [getattr(self.names, r) for r in REQUIRED_ROLES[self.kind] if not self.has(r)]

    def missing_known(self) -> list[str]:
        """Known columns (of ``ColumnNames``) this kind of table usually has but this one lacks."""
        return [getattr(self.names, r) for r in EXPECTED_ROLES[self.kind] if not self.has(r)]


EXPECTED_ROLES: dict[str, tuple[str, ...]] = {
    "jobs_outbox": (
        "id", "status", "attempts", "last_error", "type", "emitter", "emitter_id", "target", "payload",
        "scheduled_at", "created_at", "updated_at", "trace_id", "traceparent",
    ),
    "event_queue": (
        "id", "status", "attempts", "last_error", "type", "emitter", "emitter_id", "payload", "version",
        "target_services", "correlation_id", "trace_id", "traceparent", "processed_at", "created_at", "updated_at",
    ),
    "job_audit": (
        "id", "job_id", "job_type", "status", "worker_id", "emitter", "current_attempt", "started_at",
        "finished_at", "result_payload", "error_message", "error_stack", "created_at", "updated_at",
    ),
}
"""Columns target-system.md documents per table (the newest schema)."""


class SchemaCatalog:
    """Per-service cache of :class:`TableSchema` for the three tables."""

    def __init__(self, connections: Connections, settings: Settings, ttl_s: float = 300.0) -> None:
        self.connections = connections
        self.settings = settings
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, dict[str, TableSchema]]] = {}

    def invalidate(self, service: str | None = None) -> None:
        if service is None:
            self._cache.clear()
        else:
            self._cache.pop(service, None)

    async def _catalog(self, service: str, query: str, tables: list[str]) -> ReadResult:
        """One catalog read, whole: not cut by ``[limits] max_rows``; more than :data:`CATALOG_MAX_ROWS` rows
        (columns or indexes of three tables) is refused rather than read in part."""
        result = await self.connections.read(service, query, (tables,), max_rows=CATALOG_MAX_ROWS, catalog=True)
        if result.truncated:
            raise MeshError(f"service '{service}': the catalog of {', '.join(tables)} has more than "
                            f"{CATALOG_MAX_ROWS} rows (columns or indexes); its schema cannot be read whole")
        return result

    async def tables(self, service: str, *, with_indexes: bool = False) -> dict[str, TableSchema]:
        """``kind -> TableSchema`` for ``service`` (connects; raises ServiceUnavailable when down).

        ``with_indexes`` also reads the tables' indexes and extended statistics (for the doctor).
        """
        cached = self._cache.get(service)
        if cached and not with_indexes and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        names = self.settings.conventions.tables
        real = {kind: getattr(names, kind) for kind in TABLE_KINDS}
        result = await self._catalog(service, _COLUMNS_SQL, list(real.values()))
        columns: dict[str, dict[str, str]] = {name: {} for name in real.values()}
        for row in result.rows:
            columns[row["table_name"]][row["column_name"]] = row["data_type"]
        indexes: dict[str, list[IndexInfo]] = {name: [] for name in real.values()}
        statistics: dict[str, list[StatisticsInfo]] = {name: [] for name in real.values()}
        if with_indexes:
            stats = await self._catalog(service, _STATISTICS_SQL, list(real.values()))
            for row in stats.rows:
                statistics[row["table_name"]].append(
                    StatisticsInfo(name=row["name"], columns=tuple(row["columns"]), kinds=tuple(row["kinds"]))
                )
            idx = await self._catalog(service, _INDEXES_SQL, list(real.values()))
            for row in idx.rows:
                indexes[row["table_name"]].append(
                    IndexInfo(
                        name=row["index_name"],
                        definition=row["definition"],
                        key_columns=tuple(row["key_columns"]),
                        partial=bool(row["partial"]),
                    )
                )
        schemas = {
            kind: TableSchema(
                kind=kind,
                name=name,
                exists=bool(columns[name]),
                columns=columns[name],
                names=self.settings.conventions.columns,
                indexes=tuple(indexes[name]),
                statistics=tuple(statistics[name]),
            )
            for kind, name in real.items()
        }
        self._cache[service] = (time.monotonic(), schemas)
        return schemas

    async def table(self, service: str, kind: str) -> TableSchema:
        return (await self.tables(service))[kind]

