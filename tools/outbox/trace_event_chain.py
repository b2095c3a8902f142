"""The EVENT chain of a trace: an event_queue row, then its entry in each target stream and its delivery.

EVENT: event_queue row -> one entry per ``target_services`` stream -> per consumer group:
delivered, pending (and for how long, on which consumer), acknowledged, dead-lettered,
with the retry bookkeeping and idempotency lock (read by :mod:`tools.outbox.trace_streams`).

A PENDING, PROCESSING or FAILED row is judged from the row alone, and so is a COMPLETED row
without ``target_services``. An event whose stream could not be read is ``inconclusive``
(naming that Redis), never ``ok``. The job chain (:mod:`tools.outbox.trace_job_chain`) follows
each job-outcome event through the same :meth:`EventChainTracer.event_chain`.
"""

from __future__ import annotations

from server.errors import InvalidArgument
from tools.outbox.model import Hop, TraceReport, Verdict
from tools.outbox.query_outbox import typed_id, validate_text
from tools.outbox.trace_redis import TraceRedis, redis_name
from tools.outbox.trace_search import Found, ServiceRows
from tools.outbox.trace_streams import redis_now_ms, stream_hops
from tools.outbox.verdicts import overall, ranked, verdict


class EventChainTracer(TraceRedis):
    """Traces one event (``trace_event``) and the delivery of any event row (``event_chain``)."""

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
                lost[stream] = redis_name(instance)
                continue
            offset = await self.clock_offset(row.service, instance, stream)
            result = await self._redis(stream_hops, instance, self.settings, stream, row.id,
                                       around, now_ms, label, found.times.processed_ms or found.times.updated_ms,
                                       offset)
            if result is None:
                hops.append(self._redis_unknown(f"{label}stream_entry", stream))
                lost[stream] = redis_name(instance)
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
