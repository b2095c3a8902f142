"""The JOB chain of a trace: from the jobs_outbox row to the job-outcome events and their delivery.

JOB: jobs_outbox row -> BullMQ job ``<prefix>:<target>:<id>`` -> completion guard
``job:completed:<id>`` -> job_audit row -> job-outcome rows of event_queue (every naming
variant of ``conventions.job_success_types`` / ``job_failure_types``) -> their stream
entries and per-group delivery (:mod:`tools.outbox.trace_event_chain`).

:meth:`JobChainTracer.trace_job` reads the SQL rows (the id of a job_audit row is followed to its
job; a job without any row is looked for through its outcome events, since COMPLETED rows are
purged), :meth:`JobChainTracer.finish_job` reads the Redis hops and asks
:func:`tools.outbox.trace_job_logic.job_findings` for the findings. An audit row left unclosed
while the completion guard exists asks the live check of the audit trigger once per service.
"""

from __future__ import annotations

from server.config import Settings
from server.connections import Connections
from server.errors import MeshError
from server.redis_settings import DEFAULT_INSTANCE
from tools.outbox.audit_trigger_check import TriggerFinding, check_audit_trigger
from tools.outbox.bull_liveness import queue_liveness
from tools.outbox.bull_state import bull_job_state
from tools.outbox.model import Hop, ServiceProblem, TraceReport, Verdict
from tools.outbox.query_outbox import typed_id, validate_text
from tools.outbox.rows import AUDIT_MISSING, hint_columns, hint_for
from tools.outbox.schema_discovery import SchemaCatalog
from tools.outbox.trace_event_chain import EventChainTracer
from tools.outbox.trace_job_logic import job_findings
from tools.outbox.trace_search import Found, ServiceRows
from tools.outbox.trace_streams import get_key
from tools.outbox.verdicts import overall, ranked
from tools.streams.keys import fill


class JobChainTracer(EventChainTracer):
    """Traces one job (``trace_job``), or finishes the trace of a job whose rows were read elsewhere."""

    def __init__(self, connections: Connections, settings: Settings, catalog: SchemaCatalog) -> None:
        super().__init__(connections, settings, catalog)
        self.trigger_findings: dict[str, TriggerFinding] = {}

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
                # a fresh tracer of the same class: the first search's outages are not this job's
                report = await type(self)(self.connections, self.settings, self.catalog).trace_job(
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
