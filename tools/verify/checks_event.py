"""The checklist of an event type (stable ids in :data:`tools.verify.model.EVENT_CHECKS`).

Producers and post-processors come from the static index; whether a ``createEvent`` call
sits in a transaction is read from its file by :mod:`tools.verify.facts_producers`. The
streams an event travels on are those the index saw for its producers (or its routes);
when they cannot be seen, the consumers that explicitly accept the type stand in for them.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.mesh_index.model import Site
from tools.verify.checks_job import check_declared
from tools.verify.facts_producers import transaction_context
from tools.verify.inputs import FlowInputs, at, describe, evidence, site_class
from tools.verify.model import Check, Evidence

SQL_KINDS = frozenset({"sql_trigger", "sql_insert"})
TYPE_LIST_KEYS = ("accepts", "accepted_types", "types", "handled_types", "event_types")
FILTER_KEYS = ("filter", "accepts_all")


def _check(check_id: str, status: str, detail: str, ev: list[Evidence], hint: str | None = None) -> Check:
    return Check(id=check_id, status=status, detail=detail, evidence=ev, hint=hint if status != "pass" else None)


def accepted_types(site: Site) -> set[str] | None:
    """The event types a post-processor lets through: a set, ``{"*"}`` for all, ``None`` when not visible."""
    detail = site.detail
    mode = (detail.get("filter") or "").lower()
    if mode in ("all", "none", "*") or (detail.get("accepts_all") or "").lower() in ("true", "1", "yes"):
        return {"*"}
    if mode in ("dynamic", "unknown", "unresolved"):
        return None
    for key in TYPE_LIST_KEYS:
        if key in detail:
            return {t.strip() for t in detail[key].split(",") if t.strip()}
    return None


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
    hint = (
        "Write the event from production code with `EventQueueEntity.createEvent(...)` saved in the same DB "
        "transaction as the change it reports (or a trigger calling the event function in a migration)."
    )
    sites = inp.event_producers()
    prod = inp.production(sites)
    exact = [p for p in prod if p.confidence == "exact"]
    if exact:
        return _check(
            "has_producer", "pass", f"{len(exact)} production producer(s), first at {describe(exact[0])}",
            [evidence(p, f"{p.kind} producer") for p in exact],
        )
    if prod:
        return _check(
            "has_producer", "unknown", "only heuristic producers were found (the type is built at run time)",
            [evidence(p, f"{p.kind} producer (heuristic)") for p in prod],
        )
    tests = [p for p in sites if p.test_only]
    if tests:
        return _check(
            "has_producer", "fail", f"only test code produces it ({describe(tests[0])})",
            [evidence(p, f"test-only {p.kind}") for p in tests], hint,
        )
    return _check("has_producer", "fail", "no code or SQL trigger writes this event", [], hint)


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


def _consumers_on(inp: FlowInputs, streams: set[str]) -> list[Site]:
    out: list[Site] = []
    for stream in sorted(streams):
        out.extend(s for s in inp.stream_consumers.get(stream, []) if not s.test_only)
    return out


def check_stream_has_consumer(inp: FlowInputs) -> Check:
    streams, blind = _streams(inp)
    accepting = [p for p in inp.post_processors() if _accepts(p, inp.match.value) is True]
    if streams:
        empty = sorted(s for s in streams if not [c for c in inp.stream_consumers.get(s, []) if not c.test_only])
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
            f"{', '.join(sorted(streams))} read by {site_class(consumers[0], 'class')} and {len(consumers) - 1} more",
            [evidence(c, f"consumer on {c.detail.get('stream', '?')} group {c.detail.get('group', '?')}")
             for c in consumers],
        )
    if accepting:
        return _check(
            "stream_has_consumer", "pass",
            f"{site_class(accepting[0], 'class')} consumes it on {accepting[0].detail.get('stream', '?')} "
            "(the producers' target streams are not visible)",
            [evidence(c, f"accepts the type on {c.detail.get('stream', '?')}") for c in accepting],
        )
    ev = [evidence(p, "producer: target streams not visible") for p in blind][:5]
    if any(accepted_types(p) is None for p in inp.post_processors()):
        return _check("stream_has_consumer", "unknown", "target streams not visible, consumers' filters dynamic", ev)
    return _check(
        "stream_has_consumer", "fail", "no post-processor consumes this event type", ev,
        f"Add a post-processor on the event's stream whose filter accepts {_member(inp)}.",
    )


def _accepts(site: Site, value: str) -> bool | None:
    types = accepted_types(site)
    if types is None:
        return None
    return "*" in types or value in types


def check_consumer_accepts_type(inp: FlowInputs) -> Check:
    streams, _ = _streams(inp)
    value = inp.match.value
    candidates = _consumers_on(inp, streams) if streams else inp.post_processors()
    accepting = [c for c in candidates if _accepts(c, value) is True]
    if accepting:
        return _check(
            "consumer_accepts_type", "pass",
            f"{site_class(accepting[0], 'class')} lets '{value}' through",
            [evidence(c, "filter accepts the type") for c in accepting],
        )
    if not candidates:
        return _check("consumer_accepts_type", "unknown", "no consumer to inspect", [])
    dynamic = [c for c in candidates if _accepts(c, value) is None]
    if dynamic:
        return _check(
            "consumer_accepts_type", "unknown",
            f"the filter of {site_class(dynamic[0], 'class')} ({describe(dynamic[0])}) is not a static list",
            [evidence(c, "filter not visible statically") for c in dynamic],
        )
    first = candidates[0]
    shown = ", ".join(sorted(accepted_types(first) or []))[:200]
    return _check(
        "consumer_accepts_type", "fail",
        f"{site_class(first, 'class')} on {first.detail.get('stream', '?')} drops '{value}' (accepts only {shown})",
        [evidence(c, f"filter accepts: {', '.join(sorted(accepted_types(c) or []))[:200]}") for c in candidates],
        f"Add {_member(inp)} to the types {site_class(first, 'class')} accepts (its shouldProcess filter or "
        "handled-types list), or send the event to a stream whose consumer handles it.",
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
