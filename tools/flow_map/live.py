"""``live=true``: one bounded read per hop of the picture, through the existing read-only helpers.

- job type: per service database, one SELECT (read-only transaction, statement timeout, row
  cap of :meth:`Connections.read`) of the jobs_outbox rows of that type counted by status with
  the age of the oldest of each, plus the job_audit rows of that job type FAILED in the last
  hour. Verdicts: ``pending_in_outbox`` (oldest due PENDING older than ``[limits]
  pending_ageing_s``), ``stuck_processing`` (a claim older than ``processing_ageing_s``),
  ``handler_failed`` (job_audit FAILED in the last hour);
- event type: the same count on event_queue (``event_pending``, ``stuck_processing``);
- queue: :func:`tools.queues.bull.inspect_queue` (counts by state, oldest waiting job):
  ``handler_failed`` when jobs sit in ``failed``, ``pushed_not_consumed`` when the oldest
  waiting job is older than ``pending_ageing_s``;
- stream: :func:`tools.streams.inspect.inspect_stream` (length, per group lag, pending,
  oldest pending idle, dead consumers, dead-letter count, anomalies), whose anomalies map to
  the trace verdicts (``dead_consumer``, ``in_pel``, ``trimmed``, ``in_dlq``,
  ``idempotency_lock_stale``, ``pushed_not_consumed``); a post-processor node shows its
  group's figures.

At most :data:`MAX_CONCURRENT` hops are read at once and at most :data:`MAX_LIVE_HOPS` per
picture (the others say "not read"). A service database or Redis that cannot be reached leaves
its hops ``unknown`` (grey) and is named in the hop's ``unavailable`` and in the result; the
other hops still answer.
"""

from __future__ import annotations

from typing import Any

import anyio

from server.config import Settings
from server.errors import MeshError, NotFound, ServiceUnavailable
from server.lazy_modules import LazyModule
from server.runtime import Runtime
from tools.flow_map.model import FlowNode, GroupLive, LiveState
from tools.outbox.fan_out import each_service
from tools.outbox.model import ServiceProblem
from tools.outbox.schema_discovery import SchemaCatalog, TableSchema
from tools.queues.bull import inspect_queue
from tools.streams.inspect import inspect_stream
from tools.streams.inspect_models import StreamReport

sql = LazyModule("psycopg.sql")

ANOMALY_VERDICT = {
    "dead_consumer": ("dead_consumer", "error"),
    "stuck_pending": ("in_pel", "warning"),
    "trimmed_pending": ("trimmed", "error"),
    "no_group": ("pushed_not_consumed", "error"),
    "lag_growing": ("pushed_not_consumed", "warning"),
    "dlq_not_empty": ("in_dlq", "error"),
    "stale_idempotency_lock": ("idempotency_lock_stale", "error"),
}
RANK = {"ok": 0, "unknown": 1, "warning": 2, "error": 3}
MAX_LIVE_HOPS = 60
MAX_CONCURRENT = 8  # hops read at the same time (each opens its own database connection or Redis round trips)


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def outbox_counts_query(schema: TableSchema, audit: TableSchema | None, value: str,
                        failed: str) -> tuple[sql.Composed, list[Any]]:
    """Rows of ``value`` by status with the oldest age (created) and oldest claim (updated), plus the
    job_audit rows FAILED in the last hour (``finished_at``, else ``updated_at``, else ``created_at``)
    as status ``AUDIT_FAILED_1H`` when ``audit`` is given. Identifiers come from the schema (config),
    values are bound."""
    status = _ident(schema.col("status") or "status")
    created = _ident(schema.col("created_at") or "created_at")
    updated = _ident(schema.col("updated_at") or schema.col("created_at") or "created_at")
    tcol = _ident(schema.col("type") or "type")
    query = sql.SQL(
        "SELECT {s}::text AS status, count(*)::bigint AS n, "
        "EXTRACT(EPOCH FROM (now() - min({c})))::float8 AS oldest_s, "
        "EXTRACT(EPOCH FROM (now() - min({u})))::float8 AS oldest_claim_s "
        "FROM {t} WHERE {ty} = %s GROUP BY {s}"
    ).format(s=status, c=created, u=updated, t=_ident(schema.name), ty=tcol)
    params: list[Any] = [value]
    if audit is not None and audit.exists and audit.col("job_type") and audit.col("status"):
        when = [c for c in (audit.col("finished_at"), audit.col("updated_at"), audit.col("created_at")) if c]
        if when:
            query = query + sql.SQL(
                " UNION ALL SELECT 'AUDIT_FAILED_1H', count(*)::bigint, NULL, NULL FROM {t} "
                "WHERE {ty} = %s AND {s} = %s AND COALESCE({w}) >= now() - interval '1 hour'"
            ).format(t=_ident(audit.name), ty=_ident(audit.col("job_type") or "job_type"),
                     s=_ident(audit.col("status") or "status"), w=sql.SQL(", ").join(_ident(c) for c in when))
            params += [value, failed]
    return query, params


class LiveReader:
    """Reads the live state of the hops of one picture (see the module docstring)."""

    def __init__(self, runtime: Runtime, catalog: SchemaCatalog) -> None:
        self.runtime = runtime
        self.settings: Settings = runtime.settings
        self.catalog = catalog
        self.problems: dict[str, ServiceProblem] = {}

    def _down(self, service: str, error: str) -> None:
        self.problems.setdefault(service, ServiceProblem(service=service, error=error))

    async def overlay(self, nodes: list[FlowNode]) -> list[ServiceProblem]:
        """Set ``live`` on every type, queue and stream node (and the post-processors of a stream)."""
        hops = [n for n in nodes if n.kind in ("job", "event", "queue", "stream")][:MAX_LIVE_HOPS]
        consumers = {n.id: n for n in nodes if n.role == "code" and n.groups}
        streams: dict[str, StreamReport | None] = {}

        limiter = anyio.CapacityLimiter(MAX_CONCURRENT)

        async def one(node: FlowNode) -> None:
            async with limiter:
                await read(node)

        async def read(node: FlowNode) -> None:
            if node.kind in ("job", "event"):
                node.live = await self.outbox_hop(node)
            elif node.kind == "queue":
                node.live = await self.queue_hop(node)
            else:
                node.live, streams[node.id] = await self.stream_hop(node)

        async with anyio.create_task_group() as tg:
            for node in hops:
                tg.start_soon(one, node)
        for node in [n for n in nodes if n.kind in ("job", "event", "queue", "stream")][MAX_LIVE_HOPS:]:
            node.live = LiveState(status="unknown", sentence="not read (too many hops)", source="-")
        self._group_states(nodes, consumers, streams)
        return sorted(self.problems.values(), key=lambda p: p.service)

    # -- PostgreSQL ----------------------------------------------------------------------------------
    async def outbox_hop(self, node: FlowNode) -> LiveState:
        conv, limits = self.settings.conventions, self.settings.limits
        st = conv.statuses
        kind = "jobs_outbox" if node.kind == "job" else "event_queue"
        table = getattr(conv.tables, kind)
        services = list(self.settings.services)
        if not services:
            return LiveState(status="unknown", sentence="no service database configured", source=table)
        by_service: dict[str, dict[str, int]] = {}
        ages: dict[str, tuple[float | None, float | None]] = {}
        missing: list[str] = []

        async def read(service: str) -> None:
            tables = await self.catalog.tables(service)
            schema = tables[kind]
            if not schema.exists:
                missing.append(service)
                return
            audit = tables["job_audit"] if node.kind == "job" else None
            query, params = outbox_counts_query(schema, audit, node.value or "", st.failed)
            result = await self.runtime.connections.read(service, query, params, max_rows=50)
            counts: dict[str, int] = {}
            for row in result.rows:
                counts[str(row["status"])] = int(row["n"])
                if row["status"] in (st.pending, st.processing):
                    old = ages.get(str(row["status"]), (None, None))
                    ages[str(row["status"])] = (_max(old[0], row["oldest_s"]), _max(old[1], row["oldest_claim_s"]))
            by_service[service] = {k: v for k, v in counts.items() if v}

        problems = await each_service(services, read, named=False)
        for p in problems:
            self._down(p.service, p.error)
        down = [p.service for p in problems]
        if len(down) == len(services):
            return LiveState(status="unknown", sentence="could not be read: " + ", ".join(down), source=table,
                             unavailable=down)
        totals: dict[str, int] = {}
        for counts in by_service.values():
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
        verdicts: list[tuple[str, str]] = []
        pending_age = ages.get(st.pending, (None, None))[0]
        claim_age = ages.get(st.processing, (None, None))[1]
        if pending_age is not None and pending_age > limits.pending_ageing_s:
            verdicts.append(("pending_in_outbox" if node.kind == "job" else "event_pending", "error"))
        if claim_age is not None and claim_age > limits.processing_ageing_s:
            verdicts.append(("stuck_processing", "error"))
        if totals.get("AUDIT_FAILED_1H"):
            verdicts.append(("handler_failed", "error"))
        if totals.get(st.failed):
            verdicts.append(("pending_in_outbox" if node.kind == "job" else "event_pending", "warning"))
        known = [st.pending, st.processing, st.completed, st.failed]
        order = known + sorted(k for k in totals if k not in known and k != "AUDIT_FAILED_1H")
        sentence = " · ".join(f"{k} {totals[k]}" for k in order if totals.get(k)) or f"no {table} row"
        if "AUDIT_FAILED_1H" in totals:
            sentence += f"; job_audit FAILED last hour {totals['AUDIT_FAILED_1H']}"
        if missing:
            sentence += f" (no {table} in {', '.join(missing)})"
        if down:
            sentence += f" (not read: {', '.join(down)})"
        return _state(verdicts, sentence, table, counts=totals, by_service=by_service, unavailable=down)

    # -- Redis ---------------------------------------------------------------------------------------
    async def queue_hop(self, node: FlowNode) -> LiveState:
        limits = self.settings.limits
        source = f"{self.settings.conventions.bullmq_prefix}:{node.value}:*"
        try:
            report = await inspect_queue(self.runtime.connections, self.settings, node.value or "", failures=0)
        except ServiceUnavailable as exc:
            self._down("redis", str(exc))
            return LiveState(status="unknown", sentence="Redis could not be read", source=source,
                             unavailable=["redis"])
        except NotFound:
            return LiveState(status="ok", sentence="no BullMQ key (nothing pushed, or all removed)", source=source)
        except MeshError as exc:
            return LiveState(status="unknown", sentence=str(exc)[:120], source=source)
        c = report.counts
        waiting = c.get("wait", 0) + c.get("paused", 0) + c.get("prioritized", 0)
        counts = {"waiting": waiting, "active": c.get("active", 0), "delayed": c.get("delayed", 0),
                  "failed": c.get("failed", 0)}
        verdicts: list[tuple[str, str]] = []
        if counts["failed"]:
            verdicts.append(("handler_failed", "error"))
        old = report.oldest_waiting.age_ms if report.oldest_waiting else None
        if old is not None and old > limits.pending_ageing_s * 1000:
            verdicts.append(("pushed_not_consumed", "error"))
        sentence = " · ".join(f"{k} {v}" for k, v in counts.items()) + (" (paused)" if report.paused else "")
        return _state(verdicts, sentence, source, counts=counts)

    async def stream_hop(self, node: FlowNode) -> tuple[LiveState, StreamReport | None]:
        stream = node.value or ""
        try:
            report = await inspect_stream(self.runtime.connections, self.settings, stream)
        except ServiceUnavailable as exc:
            self._down("redis", str(exc))
            return LiveState(status="unknown", sentence="Redis could not be read", source=stream,
                             unavailable=["redis"]), None
        except NotFound:
            return LiveState(status="ok", sentence="stream absent (nothing pushed yet)", source=stream), None
        except MeshError as exc:
            return LiveState(status="unknown", sentence=str(exc)[:120], source=stream), None
        groups = [_group_live(g) for g in report.groups]
        dlq = report.dlq.length if report.dlq is not None else 0
        counts = {"length": report.length, "dead_letters": dlq}
        verdicts = [ANOMALY_VERDICT[a.code] for a in report.anomalies if a.code in ANOMALY_VERDICT
                    and (a.group is None or a.code == "dlq_not_empty")]
        sentence = f"len {report.length} · {len(groups)} group(s) · dlq {dlq}"
        return _state(verdicts, sentence, stream, counts=counts, groups=groups), report

    def _group_states(self, nodes: list[FlowNode], consumers: dict[str, FlowNode],
                      streams: dict[str, StreamReport | None]) -> None:
        """Give each post-processor node the figures of its group on the streams drawn."""
        by_value = {n.value: n for n in nodes if n.kind == "stream"}
        for node in consumers.values():
            states: list[LiveState] = []
            for stream_node in by_value.values():
                report = streams.get(stream_node.id)
                if stream_node.live is None:
                    continue
                if report is None:
                    if stream_node.live.status == "unknown":
                        states.append(LiveState(status="unknown", sentence="Redis could not be read",
                                                source=stream_node.value or "", unavailable=["redis"]))
                    continue
                for g in report.groups:
                    if g.name not in node.groups:
                        continue
                    live = _group_live(g)
                    verdicts = [ANOMALY_VERDICT[a.code] for a in report.anomalies
                                if a.group == g.name and a.code in ANOMALY_VERDICT]
                    lag = "?" if live.lag is None else f"{live.lag}{'~' if live.lag_estimated else ''}"
                    idle = live.oldest_pending_idle_ms
                    sentence = f"lag {lag} · pending {live.pending}" + (f" · idle {idle // 1000}s" if idle else "")
                    states.append(_state(verdicts, sentence, f"{report.stream} {g.name}", groups=[live],
                                         counts={"lag": live.lag or 0, "pending": live.pending}))
            if states:
                worst = max(states, key=lambda s: RANK[s.status])
                if len(states) > 1:
                    worst = worst.model_copy(update={
                        "groups": [g for s in states for g in s.groups],
                        "verdicts": list(dict.fromkeys(v for s in states for v in s.verdicts))})
                node.live = worst


def _group_live(g: Any) -> GroupLive:
    oldest = g.pending_summary.oldest
    return GroupLive(group=g.name, consumers=g.consumers, lag=g.lag, lag_estimated=g.lag_source == "estimated",
                     pending=g.pending, oldest_pending_idle_ms=oldest.idle_ms if oldest else None,
                     dead_consumers=[c.name for c in g.consumer_list if c.dead])


def _state(verdicts: list[tuple[str, str]], sentence: str, source: str, **fields: Any) -> LiveState:
    status = "ok"
    for _code, severity in verdicts:
        status = max(status, "error" if severity == "error" else "warning", key=lambda s: RANK[s])
    return LiveState(status=status, verdicts=list(dict.fromkeys(c for c, _s in verdicts)),  # type: ignore[arg-type]
                     sentence=sentence, source=source, **fields)


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)
