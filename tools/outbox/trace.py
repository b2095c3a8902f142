"""``trace_job`` and ``trace_event``: follow one item along its chain and name the broken link.

JOB: jobs_outbox row -> BullMQ job ``<prefix>:<target>:<id>`` -> completion guard
``job:completed:<id>`` -> job_audit row -> job-outcome rows of event_queue (every naming
variant of ``conventions.job_success_types`` / ``job_failure_types``) -> their stream
entries and per-group delivery.

EVENT: event_queue row -> one entry per ``target_services`` stream -> per consumer group:
delivered, pending (and for how long, on which consumer), acknowledged, dead-lettered,
with the retry bookkeeping and idempotency lock.

Every hop records what was observed; *findings* name problems in chain order and the
verdict is the first one of the worst severity (see :mod:`tools.outbox.verdicts`).
With ``service=None`` every service is searched and the first one holding the item is
traced; services that cannot be reached are listed in ``unavailable``. When Redis is
down the SQL hops are still reported and the Redis hops are marked unknown; an event whose
stream could not be read is ``inconclusive`` (naming that Redis), never ``ok``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.config import Settings
from server.connections import Connections
from server.errors import InvalidArgument, MeshError, ServiceUnavailable
from server.redis_routing import RedisSource, redis_source
from server.redis_settings import DEFAULT_INSTANCE
from tools.outbox import queries
from tools.outbox.audit_trigger_check import TriggerFinding, check_audit_trigger
from tools.outbox.bull_liveness import queue_liveness
from tools.outbox.bull_state import bull_job_state
from tools.outbox.fan_out import each_service
from tools.outbox.model import Hop, OutboxRow, ServiceProblem, TraceReport, Verdict
from tools.outbox.query_outbox import typed_id, validate_text
from tools.outbox.rows import AUDIT_MISSING, RowTimes, hint_columns, hint_for, shape_row, times_of
from tools.outbox.schema_discovery import SchemaCatalog, TableSchema
from tools.outbox.trace_job_logic import job_findings
from tools.outbox.trace_streams import get_key, redis_now_ms, stream_hops
from tools.outbox.verdicts import overall, ranked, verdict
from tools.streams.keys import fill


@dataclass
class Found:
    row: OutboxRow
    times: RowTimes


@dataclass
class ServiceRows:
    service: str
    tables: dict[str, TableSchema]
    job: Found | None = None
    audit: Found | None = None
    event: Found | None = None
    outcomes: list[Found] = field(default_factory=list)
    success_types: set[str] = field(default_factory=set)
    failure_accepted: set[str] = field(default_factory=set)
    audit_by_row_id: Found | None = None


def _redis_name(instance: str) -> str:
    """How a Redis instance is named in ``unavailable`` and in sentences."""
    return "redis" if instance == DEFAULT_INSTANCE else f"redis:{instance}"


CLOCK_SQL = "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS now_ms"


class Tracer:
    """Runs traces with one Settings / Connections / SchemaCatalog."""

    def __init__(self, connections: Connections, settings: Settings, catalog: SchemaCatalog) -> None:
        self.connections = connections
        self.settings = settings
        self.catalog = catalog
        self.unavailable: list[ServiceProblem] = []
        self.redis_ok = True
        self.offsets: dict[str, int] = {}
        self.redis_down: set[str] = set()
        self.redis_used: list[str] = []
        self.trigger_findings: dict[str, TriggerFinding] = {}
        self.failure_accepted: list[str] = []
        """failure event types the failure post-processor accepts, for the last outcome_types() asked"""

    # -- SQL ------------------------------------------------------------------------------

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

    # -- Redis ----------------------------------------------------------------------------

    async def _redis(self, coro_fn: Any, instance: str, *args: Any, **kwargs: Any) -> Any:
        """Run a Redis step on ``instance`` (its read client is the first argument).

        When that instance is down, record it once and return None.
        """
        if instance in self.redis_down:
            return None
        if instance not in self.redis_used:
            self.redis_used.append(instance)
        try:
            async with self.connections.redis_errors(instance):
                return await coro_fn(self.connections.redis_reader(instance), *args, **kwargs)
        except ServiceUnavailable as exc:
            self.redis_ok = False
            self.redis_down.add(instance)
            self.unavailable.append(ServiceProblem(service=_redis_name(instance), error=str(exc)))
            return None

    def sources(self) -> list[RedisSource]:
        return [redis_source(self.settings, i) for i in self.redis_used]

    def _redis_unknown(self, name: str, ref: str) -> Hop:
        return Hop(name=name, ref=ref, found=False, state="unknown", healthy=None,
                   detail="Redis is unavailable: this hop could not be observed")

    async def clock_offset(self, service: str, instance: str, key: str) -> int:
        """Redis ``TIME`` minus the database's ``now()`` in ms, measured once per call and service.

        The database is read between two Redis ``TIME`` calls and compared with their middle,
        so the round trips do not count as offset. 0 when either cannot be read.
        """
        if service in self.offsets:
            return self.offsets[service]
        before = await self._redis(redis_now_ms, instance, key)
        if before is None:
            return 0
        try:
            result = await self.connections.read(service, CLOCK_SQL, max_rows=1)
        except MeshError:
            return 0  # the row was read a moment ago; without the offset the window is just not shifted
        after = await self._redis(redis_now_ms, instance, key)
        if after is None:
            return 0
        self.offsets[service] = (before + after) // 2 - int(result.rows[0]["now_ms"])
        return self.offsets[service]

    # -- events -----------------------------------------------------------------------------

    async def event_chain(self, found: Found, hop_name: str, label: str) -> tuple[list[Hop], list[Verdict]]:
        """Hops and findings of one event_queue row and its delivery."""
        st = self.settings.conventions.statuses
        limits = self.settings.limits
        row = found.row
        ref = f"{row.service}.event_queue {row.id}"
        age = row.age_s or 0.0
        since = row.updated_age_s if row.updated_age_s is not None else age
        last_error = row.columns.get(self.settings.conventions.columns.last_error)
        hops = [Hop(name=hop_name, ref=ref, found=True, state=row.status, healthy=row.status == st.completed,
                    detail=row.hint or f"{row.type} {row.status}", row=row)]
        if row.status == st.pending:
            late = age > limits.pending_ageing_s
            return hops, [verdict(
                "event_pending", "error" if late else "info",
                f"event {row.id} ({row.type}) is PENDING for {age:.0f}s"
                + (f" (> {limits.pending_ageing_s}s): the outbox runner is stopped or Redis is unreachable"
                   if late else ": waiting for the outbox runner"), hop=hop_name)]
        if row.status == st.processing:
            if since > limits.processing_ageing_s:
                return hops, [verdict(
                    "stuck_processing", "error",
                    f"event {row.id} is PROCESSING for {since:.0f}s (> {limits.processing_ageing_s}s): the runner "
                    "died between claim and push",
                    "restart the outbox runner and read its logs; trace_event shows whether the entry reached its "
                    "streams (no remediation symptom re-pushes a PROCESSING event)", hop_name)]
            return hops, [verdict("event_pending", "info", f"event {row.id} is being pushed (PROCESSING {since:.0f}s)",
                                  hop=hop_name)]
        if row.status == st.failed:
            return hops, [verdict(
                "event_pending", "error",
                f"event {row.id} is FAILED: the outbox runner gave up pushing it"
                + (f" ({str(last_error)[:300]})" if last_error else ""),
                "fix the cause in the runner logs, then propose_remediation(symptom='requeue_stuck_job', "
                f"service='{row.service}', ids=['{row.id}']) puts it back to PENDING", hop_name)]
        targets = row.columns.get(self.settings.conventions.columns.target_services)
        if not isinstance(targets, list) or not targets:
            return hops, [verdict("not_found", "error",
                                  f"event {row.id} is COMPLETED but has no target_services: it was pushed nowhere",
                                  "check the producer's target_services", hop_name)]
        around = [t for t in (found.times.created_ms, found.times.processed_ms, found.times.updated_ms) if t]
        findings: list[Verdict] = []
        lost: dict[str, str] = {}  # stream -> the Redis (as named in unavailable) that could not be read
        for target in targets:
            stream = f"{self.settings.conventions.stream_prefix}{target}"
            instance = self.connections.redis_instance_for_stream(stream)
            now_ms = await self._redis(redis_now_ms, instance, stream)
            if now_ms is None:
                hops.append(self._redis_unknown(f"{label}stream_entry", stream))
                lost[stream] = _redis_name(instance)
                continue
            offset = await self.clock_offset(row.service, instance, stream)
            result = await self._redis(stream_hops, instance, self.settings, stream, row.id,
                                       around, now_ms, label, found.times.processed_ms or found.times.updated_ms,
                                       offset)
            if result is None:
                hops.append(self._redis_unknown(f"{label}stream_entry", stream))
                lost[stream] = _redis_name(instance)
                continue
            hops.extend(result[0])
            findings.extend(result[1])
        if lost:
            # a delivery that could not be observed is not "acknowledged by every group": never ok
            down = ", ".join(dict.fromkeys(lost.values()))
            findings.append(verdict(
                "inconclusive", "warning",
                f"event {row.id} was pushed, but {down} could not be read for {', '.join(lost)}: whether its consumer "
                "groups got it is not known (see unavailable)",
                f"fix the access to {down} and trace again", f"{label}stream_entry"))
        return hops, findings

    async def trace_event(self, service: str | None, event_id: str) -> TraceReport:
        event_id = validate_text("event_id", event_id, 100) or ""

        async def fetch(rows: ServiceRows) -> None:
            schema = rows.tables["event_queue"]
            typed = typed_id(schema, event_id)
            if typed is None and service is not None:
                raise InvalidArgument(f"event_id {event_id!r} is not a UUID, and {schema.name}.id is a uuid column")
            found = await self._rows(rows.service, schema, "id", typed)
            rows.event = found[0] if found else None

        searched, results = await self._search(service, fetch)
        hit = next((r for r in results if r.event is not None), None)
        if hit is None or hit.event is None:
            return self._not_found("event", event_id, service, searched, "event_queue")
        hops, findings = await self.event_chain(hit.event, "event_queue", "")
        ok_sentence = f"event {event_id} was pushed and acknowledged by every consumer group of its streams"
        return TraceReport(kind="event", id=event_id, service=hit.service, searched_services=self.searched(searched),
                           verdict=overall(findings, ok_sentence, hops), clock_offsets_ms=dict(self.offsets),
                           findings=ranked(findings), hops=hops,
                           unavailable=self.unavailable, redis_sources=self.sources())

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

    # -- jobs -------------------------------------------------------------------------------

    async def audit_trigger_finding(self, service: str) -> TriggerFinding:
        """What the live check of the audit trigger of ``service`` says (once per service): a cause, could not
        be checked (and why), or fine."""
        if service not in self.trigger_findings:
            try:
                found = await check_audit_trigger(self.connections, self.settings, service)
                self.trigger_findings[service] = found.finding()
            except MeshError as exc:
                self.trigger_findings[service] = TriggerFinding("unchecked", f"the check failed: {exc}")
                self.unavailable.append(ServiceProblem(
                    service=service, error=f"the audit trigger could not be checked: {exc}"))
        return self.trigger_findings[service]

    async def trace_job(self, service: str | None, job_id: str) -> TraceReport:
        job_id = validate_text("job_id", job_id, 100) or ""

        async def fetch(rows: ServiceRows) -> None:
            jobs = rows.tables["jobs_outbox"]
            found = await self._rows(rows.service, jobs, "id", typed_id(jobs, job_id))
            rows.job = found[0] if found else None
            audit = await self._rows(rows.service, rows.tables["job_audit"], "job_id", job_id)
            rows.audit = audit[0] if audit else None
            if rows.job is None and rows.audit is None:
                # perhaps the id of a job_audit row (what query_outbox shows as its id): find its job
                audit_schema = rows.tables["job_audit"]
                by_id = await self._rows(rows.service, audit_schema, "id", typed_id(audit_schema, job_id))
                rows.audit_by_row_id = by_id[0] if by_id else None
            if rows.job is not None:
                status = rows.audit.row.status if rows.audit else AUDIT_MISSING
                rows.job.row.hint = hint_for(rows.job.row, rows.job.times, self.settings.conventions.statuses,
                                             self.settings.limits, audit_status=status, column=hint_columns(jobs))

        searched, results = await self._search(service, fetch)
        hit = next((r for r in results if r.job is not None or r.audit is not None), None)
        via_audit = next((r for r in results if r.audit_by_row_id is not None), None)
        if hit is None and via_audit is not None and via_audit.audit_by_row_id is not None:
            audit_col = via_audit.tables["job_audit"].col("job_id")
            real_id = via_audit.audit_by_row_id.row.columns.get(audit_col) if audit_col else None
            note = (f"{job_id} is the id of a job_audit row of service '{via_audit.service}', not a job id: "
                    f"its job_id is {real_id}; traced that job (pass job_id='{real_id}' next time)")
            if real_id and str(real_id) != job_id:
                report = await Tracer(self.connections, self.settings, self.catalog).trace_job(
                    via_audit.service, str(real_id))
                report.id_note = note
                return report
        if hit is None:
            # no row anywhere: look for evidence that the job existed and finished (purged rows)
            for rows in results:
                try:
                    await self._outcomes(rows, job_id)
                except MeshError as exc:
                    self.unavailable.append(ServiceProblem(service=rows.service, error=str(exc)))
            hit = next((r for r in results if r.outcomes), None)
        else:
            await self._outcomes(hit, job_id)
        return await self.finish_job(hit, job_id, service, searched)

    async def finish_job(self, hit: ServiceRows | None, job_id: str, service: str | None, searched: list[str]
                         ) -> TraceReport:
        """The Redis hops and the verdict of a job whose SQL rows (job, audit, outcomes) are in ``hit``."""
        conv = self.settings.conventions
        bull = None
        queue = None
        if hit is not None and hit.job is not None:
            queue = hit.job.row.columns.get(conv.columns.target)
        if queue:
            bull = await self._redis(bull_job_state, self.connections.redis_instance_for_queue(str(queue)), conv,
                                     str(queue), job_id,
                                     list_scan_max=self.settings.limits.bull_list_scan_max,
                                     value_max_bytes=self.settings.limits.payload_max_bytes)
            overdue = bull.overdue_ms() if bull is not None else None
            if bull is not None and (bull.stalled or (overdue is not None
                                                      and overdue > self.settings.limits.delayed_overdue_ms)):
                bull.liveness = await self._redis(queue_liveness, self.connections.redis_instance_for_queue(str(queue)),
                                                  conv, str(queue))
        guard_instance = self.connections.redis_instance_for_queue(str(queue)) if queue else DEFAULT_INSTANCE
        guard = await self._redis(get_key, guard_instance, fill(conv.job_completed_key, job_id=job_id),
                                  self.settings.limits.payload_max_bytes)
        trigger_finding = None
        audit = hit.audit.row if hit and hit.audit else None
        if (audit is not None and audit.status != conv.statuses.completed and audit.status != conv.statuses.failed
                and guard and guard.get("exists")):
            trigger_finding = await self.audit_trigger_finding(audit.service)
        outcome_chains: list[tuple[Found, list[Hop], list[Verdict]]] = []
        for outcome in (hit.outcomes if hit else []):
            hops, findings = await self.event_chain(outcome, "outcome_event", "outcome_event.")
            outcome_chains.append((outcome, hops, findings))
        hops, findings = job_findings(
            self.settings,
            job_id=job_id,
            job=hit.job.row if hit and hit.job else None,
            job_times=hit.job.times if hit and hit.job else None,
            audit=hit.audit.row if hit and hit.audit else None,
            queue=str(queue) if queue else None,
            bull=bull,
            bull_known=self.redis_ok,
            guard=guard,
            outcomes=[(o.row, h, f) for o, h, f in outcome_chains],
            success_types=hit.success_types if hit else set(),
            failure_accepted=hit.failure_accepted if hit else set(),
            searched=self.searched(searched),
            unavailable=[p.service for p in self.unavailable if p.service in searched],
            redis_known=self.redis_ok,
            trigger=trigger_finding,
            service=hit.service if hit else service,
        )
        ok_sentence = f"job {job_id} ran, succeeded, and its outbox row was cleaned up"
        return TraceReport(kind="job", id=job_id, service=hit.service if hit else service,
                           searched_services=self.searched(searched), verdict=overall(findings, ok_sentence, hops),
                           clock_offsets_ms=dict(self.offsets),
                           findings=ranked(findings), hops=hops, unavailable=self.unavailable,
                           redis_sources=self.sources())
