"""Find the rows of one request in every service: seed lookups, then expansion by the
correlation ids and trace ids of what was found (a bounded number of rounds). Each level (the
seed, then each round) sends the lookups of a service together, one round trip per service
(:meth:`tools.trace_request.reads.RequestReads.read_many`), values bound as arrays; a service
that failed is not read again in the call.

With ``trace_id`` as the way in, rows reached through a shared correlation id but carrying
another trace are left out (and listed): the caller asked for one trace. With the other
ways in, every row sharing a correlation id or trace id with the request belongs to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.config import Settings
from server.connections import Connections
from tools.outbox.fan_out import each_service
from tools.outbox.model import ServiceProblem
from tools.outbox.schema_discovery import SchemaCatalog, TableSchema
from tools.outbox.trace import Found, Tracer
from tools.trace_request import lookups
from tools.trace_request.context import parse_traceparent, uuid_trace_id
from tools.trace_request.indexes import unindexed
from tools.trace_request.inputs import RequestInput
from tools.trace_request.model import LookupNote
from tools.trace_request.reads import RequestReads

EXPAND_ROUNDS = 3
MAX_VALUES = 100
"""ids searched per round (of each kind)"""
MAX_ROWS_TOTAL = 200


@dataclass
class Hit:
    service: str
    kind: str
    found: Found
    link: str
    heuristic: bool = False

    @property
    def key(self) -> str:
        return f"{self.service}:{self.kind}:{self.found.row.id}"


@dataclass
class Planned:
    schema: TableSchema
    query: lookups.Query
    link: str
    heuristic: bool = False


@dataclass
class Collected:
    hits: dict[str, Hit] = field(default_factory=dict)
    tables: dict[str, dict[str, TableSchema]] = field(default_factory=dict)
    unavailable: list[ServiceProblem] = field(default_factory=list)
    skipped: list[LookupNote] = field(default_factory=list)
    unindexed: list[LookupNote] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    truncated: bool = False


class Collector:
    def __init__(self, connections: Connections, settings: Settings, catalog: SchemaCatalog,
                 reads: RequestReads | None = None) -> None:
        self.reads = reads if reads is not None else RequestReads(connections)
        self.connections = connections
        self.cap = settings.limits.payload_max_bytes
        self.settings = settings
        self.catalog = catalog
        self.tracer = Tracer(self.reads, settings, catalog)  # type: ignore[arg-type]  # reads stands in
        self.limit = min(settings.limits.max_rows, 100)
        self.out = Collected()
        self._noted: set[tuple[str, str, str]] = set()
        self._followed: set[str] = set()

    # -- helpers ----------------------------------------------------------------------------

    def trace_ids(self, hit: Hit) -> set[str]:
        cols = hit.found.row.columns
        names = self.settings.conventions.columns
        out = set()
        ctx = parse_traceparent(cols.get(names.traceparent))
        if ctx:
            out.add(ctx.trace_id)
        old = uuid_trace_id(cols.get(names.trace_id))
        if old:
            out.add(old)
        return out

    def correlation(self, hit: Hit) -> str | None:
        value = hit.found.row.columns.get(self.settings.conventions.columns.correlation_id)
        return str(value) if value else None

    def _note(self, kind: str, service: str, schema: TableSchema, role: str, note: str) -> None:
        col = getattr(schema.names, role)
        if (kind, service, f"{schema.name}.{col}") in self._noted:
            return
        self._noted.add((kind, service, f"{schema.name}.{col}"))
        target = self.out.skipped if kind == "skipped" else self.out.unindexed
        target.append(LookupNote(service=service, lookup=f"{schema.name}.{col}", note=note))

    def _plan(self, service: str, schema: TableSchema, role: str, query: lookups.Query | None, link: str,
              heuristic: bool = False) -> Planned | None:
        """The lookup of ``role`` in ``schema`` ready to run, or None (table or column missing: named)."""
        if not schema.exists:
            return None
        if query is None:
            self._note("skipped", service, schema, role, f"{schema.name} has no {getattr(schema.names, role)} "
                                                         "column in this service: not searched there")
            return None
        missing = unindexed(schema, role)
        if missing is not None:
            self._note("unindexed", service, schema, role, f"ran without an index ({missing.ddl})")
        return Planned(schema, query, link, heuristic)

    async def _run_all(self, service: str, planned: list[Planned | None]) -> list[Hit]:
        """Every planned lookup of ``service`` in one round trip."""
        todo = [p for p in planned if p is not None]
        results = await self.reads.read_many(service, [(p.query[0], p.query[1], self.limit) for p in todo])
        hits: list[Hit] = []
        for p, result in zip(todo, results, strict=True):
            if result.truncated or len(result.rows) >= self.limit:
                self.out.truncated = True
            hits += [Hit(service, p.schema.kind, self.tracer._found(service, p.schema, raw), p.link, p.heuristic)
                     for raw in result.rows]
        return hits

    async def _each(self, services: list[str], step: Any) -> list[Hit]:
        hits: list[Hit] = []

        down = {p.service for p in self.out.unavailable}

        async def one(service: str) -> None:
            if service not in self.out.tables or service in down:
                return  # not read again once it failed: the call stays within one deadline per service
            hits.extend(await step(service, self.out.tables[service]))

        problems = await each_service(services, one, named=False)
        self._down(problems)
        return hits

    def _down(self, problems: list[ServiceProblem]) -> None:
        known = {p.service for p in self.out.unavailable}
        self.out.unavailable.extend(p for p in problems if p.service not in known)

    # -- lookups ----------------------------------------------------------------------------

    async def schemas(self, services: list[str]) -> None:
        async def one(service: str) -> None:
            tables = await self.catalog.tables(service)
            if not any(t.indexes for t in tables.values() if t.exists):
                # the cached schema was read without its indexes: read them once (then cached too)
                tables = await self.catalog.tables(service, with_indexes=True)
            self.out.tables[service] = tables

        self._down(await each_service(services, one, named=False))

    def _plan_correlation(self, service: str, tables: dict[str, TableSchema], values: list[str]
                          ) -> list[Planned | None]:
        schema = tables["event_queue"]
        q = lookups.by_column(schema, "correlation_id", values, self.cap, self.limit)
        if q is None and schema.has("correlation_id"):
            return []  # no value fits the column's type
        return [self._plan(service, schema, "correlation_id", q, "correlation_id")]

    def _plan_trace(self, service: str, tables: dict[str, TableSchema], trace_ids: list[str],
                    searching_input: bool) -> list[Planned | None]:
        out: list[Planned | None] = []
        for kind in ("jobs_outbox", "event_queue"):
            schema = tables[kind]
            out.append(self._plan(service, schema, "traceparent",
                                  lookups.by_traceparent(schema, trace_ids, self.cap, self.limit), "trace_id"))
            # the old uuid "traceId" is searched for the trace asked for, and in tables that have no
            # traceparent (older schemas); ids found in traceparents are not looked up there again
            if schema.has("trace_id") and (searching_input or not schema.has("traceparent")):
                out.append(self._plan(service, schema, "trace_id",
                                      lookups.by_trace_uuid(schema, trace_ids, self.cap, self.limit), "trace_id"))
        return out

    async def level(self, services: list[str], corr: list[str], traces: list[str], *,
                    searching_input: bool = False) -> list[Hit]:
        """One level of the search: the correlation and trace lookups of every service, one round trip each."""

        async def step(service: str, tables: dict[str, TableSchema]) -> list[Hit]:
            planned: list[Planned | None] = []
            if corr:
                planned += self._plan_correlation(service, tables, corr)
            if traces:
                planned += self._plan_trace(service, tables, traces, searching_input)
            return await self._run_all(service, planned)

        return await self._each(services, step)

    async def by_entity(self, services: list[str], value: str, since_s: float) -> list[Hit]:
        async def step(service: str, tables: dict[str, TableSchema]) -> list[Hit]:
            return await self._run_all(service, [
                self._plan(service, tables[kind], "payload",
                           lookups.by_payload(tables[kind], value, since_s, self.cap, self.limit), "entity_id",
                           heuristic=True)
                for kind in ("jobs_outbox", "event_queue")])

        return await self._each(services, step)

    async def by_start(self, inp: RequestInput) -> list[Hit]:
        assert inp.start is not None
        start = inp.start

        async def step(service: str, tables: dict[str, TableSchema]) -> list[Hit]:
            if service != start.service:
                return []
            schema = tables[start.table]
            query = lookups.by_column(schema, "id", [start.id], self.cap, 1)
            if query is None and schema.has("id"):
                return []  # the id cannot be a value of that column (not a uuid): no row, and nothing to note
            hits = await self._run_all(service, [self._plan(service, schema, "id", query, "start")])
            if start.table == "job_audit":
                job_ids = [str(h.found.row.columns.get(schema.names.job_id)) for h in hits]
                jobs = tables["jobs_outbox"]
                query = lookups.by_column(jobs, "id", job_ids, self.cap, 1)
                if query is None and jobs.has("id"):
                    return []  # no audit row with that id, or its job_id is not a uuid: no job to read
                hits = await self._run_all(service, [self._plan(service, jobs, "id", query, "start")])
            return hits

        return await self._each([start.service], step)

    async def follow_outcomes(self) -> list[Hit]:
        """The jobs of the job-outcome rows found (the audit trigger's rows carry no correlation id nor
        context: their job id, at ``payload.after.job_id``, is their only link), reached as ``outcome``.
        A job whose row is gone (cleaned up) leaves its outcome an item of its own."""
        conv = self.settings.conventions
        todo: dict[str, list[str]] = {}
        for hit in self.out.hits.values():
            if hit.kind != "event_queue" or hit.key in self._followed:
                continue
            self._followed.add(hit.key)
            row = hit.found.row
            success, failure = self.tracer.outcome_types(hit.service, [row.columns.get(conv.columns.emitter)])
            if row.type in {*success, *failure}:
                todo.setdefault(hit.service, []).append(row.id)

        async def step(service: str, tables: dict[str, TableSchema]) -> list[Hit]:
            query = lookups.job_ids_of_outcomes(tables["event_queue"], conv.job_outcome_id_keys, todo[service])
            if query is None:
                return []
            (result,) = await self.reads.read_many(service, [(query[0], query[1], self.limit)])
            ids = sorted({str(v) for row in result.rows for v in row.get(lookups.OUTCOME_KEYS) or [] if v})
            jobs = tables["jobs_outbox"]
            found = lookups.by_column(jobs, "id", ids, self.cap, self.limit)
            if found is None:
                return []
            return await self._run_all(service, [self._plan(service, jobs, "id", found, "outcome")])

        return await self._each(sorted(todo), step) if todo else []

    # -- the whole search -------------------------------------------------------------------

    def _add(self, hits: list[Hit], inp: RequestInput) -> None:
        """Keep the new rows (by ``trace_id``, a row of another trace is left out), at most
        ``MAX_ROWS_TOTAL`` in all: a row turned away at the cap sets ``truncated``."""
        for hit in hits:
            if hit.key in self.out.hits:
                continue
            if inp.way == "trace_id":
                traces = self.trace_ids(hit)
                if traces and inp.value not in traces:
                    if hit.key not in self.out.left_out:
                        self.out.left_out.append(hit.key)
                    continue
            if len(self.out.hits) >= MAX_ROWS_TOTAL:
                self.out.truncated = True
                break
            self.out.hits[hit.key] = hit

    async def collect(self, inp: RequestInput) -> Collected:
        services = inp.services
        await self.schemas(services)
        if inp.way == "correlation_id":
            seed = await self.level(services, [inp.value], [])
        elif inp.way == "trace_id":
            seed = await self.level(services, [], [inp.value], searching_input=True)
        elif inp.way == "entity_id":
            seed = await self.by_entity(services, inp.value, inp.since_s)
        else:
            seed = await self.by_start(inp)
        self._add(seed, inp)
        self._add(await self.follow_outcomes(), inp)
        done_corr: set[str] = {inp.value} if inp.way == "correlation_id" else set()
        done_trace: set[str] = {inp.value} if inp.way == "trace_id" else set()
        for _ in range(EXPAND_ROUNDS):
            corr, traces = self._to_search(inp, done_corr, done_trace)
            if not (corr or traces) or len(self.out.hits) >= MAX_ROWS_TOTAL:
                break  # nothing left to follow, or the rows' cap is reached: another level adds nothing
            corr_now, traces_now = sorted(corr)[:MAX_VALUES], sorted(traces)[:MAX_VALUES]
            self._add(await self.level(services, corr_now, traces_now), inp)
            self._add(await self.follow_outcomes(), inp)
            done_corr.update(corr_now)  # ids past the first MAX_VALUES wait for the next round
            done_trace.update(traces_now)
        if any(self._to_search(inp, done_corr, done_trace)):
            self.out.truncated = True  # ids the rows carry were not searched: the rounds or the rows' cap ran out
        return self.out

    def _to_search(self, inp: RequestInput, done_corr: set[str], done_trace: set[str]) -> tuple[set[str], set[str]]:
        """The correlation ids and trace ids the rows found carry that were not searched yet (by ``trace_id``
        only correlation ids are followed)."""
        corr = {c for h in self.out.hits.values() if (c := self.correlation(h))} - done_corr
        if inp.way == "trace_id":
            return corr, set()
        return corr, set().union(*(self.trace_ids(h) for h in self.out.hits.values())) - done_trace
