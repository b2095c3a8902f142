"""The checklist of an event type (stable ids in :data:`tools.verify.model.EVENT_CHECKS`).

Producers and post-processors come from the static index; whether a ``createEvent`` call
sits in a transaction is read from its file by :mod:`tools.verify.facts_producers`. The
streams an event travels on are those the index saw for its producers (or its routes);
when they cannot be seen, the consumers that explicitly accept the type stand in for them.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.mesh_index.model import Site
from tools.verify.checks_common import judge_producers
from tools.verify.checks_job import check_declared
from tools.verify.facts_producers import transaction_context
from tools.verify.inputs import (
    EVENT_PRODUCER_KINDS,
    ConsumerView,
    FlowInputs,
    at,
    describe,
    evidence,
)
from tools.verify.model import Check, Evidence

SQL_KINDS = frozenset({"sql_trigger", "sql_insert"})


def _check(check_id: str, status: str, detail: str, ev: list[Evidence], hint: str | None = None) -> Check:
    return Check(id=check_id, status=status, detail=detail, evidence=ev, hint=hint if status != "pass" else None)


def _consumer_evidence(c: ConsumerView, note: str) -> Evidence:
    return evidence(c.site, f"{c.cls} on {c.stream} group {c.group or '?'}: {note}")


def _streams(inp: FlowInputs) -> tuple[set[str], list[Site]]:
    """Streams the event is sent to, and the producers whose target streams are not visible."""
    streams: set[str] = set()
    blind: list[Site] = []
    for site in inp.production(inp.event_producers()):
        named = [s.strip() for s in (site.detail.get("stream") or site.detail.get("streams") or "").split(",")]
        named = [s for s in named if s]
        streams.update(named)
        if not named:
            blind.append(site)
    streams.update(r.name for r in inp.routes if r.kind == "stream")
    return streams, blind


def _member(inp: FlowInputs) -> str:
    return inp.match.name


def check_has_producer(inp: FlowInputs) -> Check:
    return judge_producers(
        inp.event_producers(),
        [u for u in inp.unresolved if u.kind in EVENT_PRODUCER_KINDS and not u.test_only],
        nothing="no code or SQL trigger writes it",
        hint="Write the event from production code with `EventQueueEntity.createEvent(...)` saved in the same DB "
        "transaction as the change it reports (or a trigger calling the event function in a migration).",
        dynamic_hint="Use event-type members as createEvent types so producers can be checked statically.",
    )


def check_producer_in_transaction(inp: FlowInputs) -> Check:
    prod = inp.production(inp.event_producers())
    if not prod:
        return _check("producer_in_transaction", "unknown", "no production producer to inspect", [])
    calls = list(inp.conv.create_event_calls)
    passes: list[Evidence] = []
    fails: list[Evidence] = []
    unknowns: list[Evidence] = []
    for site in prod:
        if site.kind in SQL_KINDS:
            passes.append(evidence(site, "SQL trigger: runs in the transaction of the statement that fires it"))
            continue
        if site.kind != "create_event":
            unknowns.append(evidence(site, f"{site.kind} producer: the write is not visible here"))
            continue
        pf = inp.parse(site.file)
        if pf is None:
            unknowns.append(evidence(site, "file unreadable"))
            continue
        fact = transaction_context(pf, site.line, calls, inp.conv)
        where = at(site, fact.line, fact.note) if fact.line else evidence(site, fact.note)
        if fact.status == "in_transaction":
            passes.append(where)
        elif fact.status == "after_commit":
            fails.append(evidence(site, "event created after the commit"))
            fails.append(where)
        else:
            unknowns.append(where)
    if fails:
        return _check(
            "producer_in_transaction", "fail",
            f"the event at {fails[0].file}:{fails[0].line} is written after the transaction commits",
            fails,
            "Create and save the event before commitTransaction(), with the transaction's manager, so the change "
            "and its event commit together.",
        )
    if unknowns:
        return _check(
            "producer_in_transaction", "unknown",
            f"no transaction visible around {unknowns[0].file}:{unknowns[0].line} ({unknowns[0].note})",
            unknowns + passes,
            "Write the event inside the service's transaction (dataSource.transaction(...) or a query runner).",
        )
    return _check("producer_in_transaction", "pass", "every producer writes the event inside a transaction", passes)


def _consumers_on(inp: FlowInputs, streams: set[str]) -> list[ConsumerView]:
    return [c for stream in sorted(streams) for c in inp.stream_consumers.get(stream, [])]


def check_stream_has_consumer(inp: FlowInputs) -> Check:
    streams, blind = _streams(inp)
    if streams:
        empty = sorted(s for s in streams if not inp.stream_consumers.get(s))
        if empty:
            ev = [evidence(p, "producer") for p in inp.production(inp.event_producers())][:5]
            if empty[0] in inp.declared_streams:
                ev.append(evidence(inp.declared_streams[empty[0]], f"stream '{empty[0]}' declared"))
            return _check(
                "stream_has_consumer", "fail",
                f"no consumer group reads {', '.join(repr(s) for s in empty)}: events sent there are never handled",
                ev,
                f"Add a post-processor bound to {empty[0]} (stream and group) that accepts {_member(inp)}, or stop "
                "sending the event there.",
            )
        consumers = _consumers_on(inp, streams)
        return _check(
            "stream_has_consumer", "pass",
            f"{', '.join(sorted(streams))} read by " + ", ".join(sorted({f"{c.cls} ({c.group})" for c in consumers})),
            [_consumer_evidence(c, "reads the stream") for c in consumers],
        )
    if inp.type_consumers:
        first = inp.type_consumers[0]
        return _check(
            "stream_has_consumer", "pass",
            f"{first.cls} consumes it on {first.stream} (the producers' target streams are not visible)",
            [_consumer_evidence(c, "accepts the type") for c in inp.type_consumers],
        )
    ev = [evidence(p, "producer: target streams not visible") for p in blind][:5]
    if inp.dynamic_consumers:
        ev += [_consumer_evidence(c, "filter not visible statically") for c in inp.dynamic_consumers][:5]
        return _check(
            "stream_has_consumer", "unknown",
            "the producers' target streams are not visible and some post-processors' filters are dynamic", ev,
        )
    return _check(
        "stream_has_consumer", "fail", "no post-processor consumes this event type", ev,
        f"Add a post-processor on the event's stream whose filter accepts {_member(inp)}.",
    )


def check_consumer_accepts_type(inp: FlowInputs) -> Check:
    streams, _ = _streams(inp)
    value = inp.match.value
    if not streams:
        if inp.type_consumers:
            return _check(
                "consumer_accepts_type", "pass", f"{inp.type_consumers[0].cls} lets '{value}' through",
                [_consumer_evidence(c, "filter accepts the type") for c in inp.type_consumers],
            )
        return _check(
            "consumer_accepts_type", "unknown", "the streams the event is sent to are not visible", [],
        )
    candidates = _consumers_on(inp, streams)
    if not candidates:
        return _check("consumer_accepts_type", "unknown", "no consumer on the event's streams to inspect", [])
    accepting = [c for c in candidates if c.accepts == "yes"]
    if accepting:
        return _check(
            "consumer_accepts_type", "pass", f"{accepting[0].cls} lets '{value}' through",
            [_consumer_evidence(c, "filter accepts the type") for c in accepting],
        )
    dynamic = [c for c in candidates if c.accepts == "unknown"]
    if dynamic:
        return _check(
            "consumer_accepts_type", "unknown",
            f"the filter of {dynamic[0].cls} ({describe(dynamic[0].site)}) is not a static list",
            [_consumer_evidence(c, "filter not visible statically") for c in dynamic],
        )
    first = candidates[0]
    shown = ", ".join(first.accepted)[:200] or "nothing"
    return _check(
        "consumer_accepts_type", "fail",
        f"{first.cls} on {first.stream} drops '{value}' (its filter accepts only {shown})",
        [_consumer_evidence(c, "accepts only " + (", ".join(c.accepted)[:200] or "nothing")) for c in candidates],
        f"Add {_member(inp)} to the types {first.cls} accepts (its shouldProcess filter or handled-types list), "
        "or send the event to a stream whose consumer handles it.",
    )


EVENT_CHECK_FUNCTIONS: tuple[Callable[[FlowInputs], Check], ...] = (
    check_declared,
    check_has_producer,
    check_producer_in_transaction,
    check_stream_has_consumer,
    check_consumer_accepts_type,
)


def run_event_checks(inp: FlowInputs) -> list[Check]:
    return [fn(inp) for fn in EVENT_CHECK_FUNCTIONS]
