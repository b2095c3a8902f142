"""consumer-never-matches: a started post-processor whose filter accepts nothing produced onto its streams.

Evidence: the post-processor (class, stream, group, filter), the types production code writes
onto the streams it reads, and the produced types its filter almost accepts (near-misses such
as ``...:failed`` accepted where the SQL trigger writes ``...:failure``), each with its site.
A post-processor whose filter the index cannot read, that accepts everything, or that nothing
starts is left out (the catalogue reports the last).
"""

from __future__ import annotations

import difflib

from tools.lint.context import LintContext, ev
from tools.lint.model import Evidence, Finding
from tools.mesh_index.linked import PostProcessorRec, SiteRec, norm

MAX_SHOWN = 5


def _ratio(a: str, b: str) -> float:
    if a and b and norm(a) == norm(b):
        return 1.0
    return difflib.SequenceMatcher(None, a, b).ratio()


def closeness(pp: PostProcessorRec, value: str) -> float:
    """How close ``value`` is to what the filter accepts (1.0: same up to case and separators)."""
    best = max((_ratio(a, value) for a in pp.accepts), default=0.0)
    for op, pattern in pp.patterns:
        n = len(pattern)
        sizes = range(max(1, n - 3), n + 4)
        if op == "endsWith":
            candidates = [value[-k:] for k in sizes]
        elif op == "startsWith":
            candidates = [value[:k] for k in sizes]
        else:
            candidates = [value[i:i + k] for k in sizes for i in range(0, max(1, len(value) - k + 1))]
        best = max([best, *(_ratio(pattern, c) for c in candidates)])
    return best


def describe_filter(pp: PostProcessorRec) -> str:
    parts = [f"'{v}'" for v in sorted(pp.accepts)]
    parts += [f"{op}('{p}')" for op, p in pp.patterns]
    return ", ".join(parts) or "(nothing)"


def check(ctx: LintContext) -> list[Finding]:
    produced = ctx.production_producers("event")
    findings: list[Finding] = []
    for pp in sorted(ctx.idx.post_processors.values(), key=lambda p: p.key):
        if not pp.started or pp.site.test_only or pp.accept_all or pp.filter_unknown:
            continue
        if not pp.accepts and not pp.patterns:
            continue
        on_streams: dict[str, list[SiteRec]] = {}
        for stream in pp.streams:
            for site in ctx.engine.stream_producers.get(stream, ()):
                if not site.test_only and site.value:
                    on_streams.setdefault(site.value, []).append(site)
        if any(pp.accepts_value(v) for v in on_streams):
            continue
        unknown = [s for s in ctx.idx.unresolved.get("event", ()) if not s.test_only
                   and set(filter(None, s.detail.get("stream", "").split(", "))) & set(pp.streams)]
        if unknown:
            continue  # a type the index cannot resolve is written onto its stream: it may be accepted
        elsewhere = {v: sites for v, sites in produced.items() if pp.accepts_value(v)}
        if any(not s.detail.get("stream") for sites in elsewhere.values() for s in sites):
            continue  # an accepted type is written onto a stream the index cannot name: it may be this one
        near = sorted(((closeness(pp, v), v) for v in produced if v not in elsewhere),
                      key=lambda t: (-t[0], t[1]))
        near = [(score, v) for score, v in near if score >= ctx.lint.near_miss_ratio][:MAX_SHOWN]
        if not on_streams and not near and not elsewhere:
            continue  # nothing is written where it reads and nothing resembles its filter: the catalogue says so
        streams = ", ".join(pp.streams) or "(stream not found)"
        group = ", ".join(pp.groups) or "?"
        evidence = [ev(pp.site, f"post-processor {pp.key[1]} reads {streams} (group {group}), "
                                f"accepts {describe_filter(pp)}")]
        for value in sorted(on_streams)[:MAX_SHOWN]:
            site = on_streams[value][0]
            evidence.append(ev(site, f"'{value}' is written onto {site.detail.get('stream', streams)} "
                                     f"({site.kind}); the filter rejects it"))
        for value in sorted(elsewhere)[:MAX_SHOWN]:
            site = elsewhere[value][0]
            evidence.append(ev(site, f"'{value}' (accepted) is written onto {site.detail.get('stream', '?')}, "
                                     f"not onto {streams}"))
        for score, value in near:
            site = produced[value][0]
            evidence.append(Evidence(file=site.file, line=site.line,
                                     note=f"near-miss: '{value}' is produced here ({site.kind}, onto "
                                          f"{site.detail.get('stream', '?')}; similarity {score:.2f})"))
        parts = [f"post-processor {pp.key[1]} (group {group} on {streams}) accepts {describe_filter(pp)}, "
                 f"which no production code writes onto {streams}"]
        if on_streams:
            parts.append(f"the {len(on_streams)} type(s) written there ({', '.join(sorted(on_streams)[:MAX_SHOWN])}) "
                         "are acknowledged and dropped")
        if elsewhere:
            parts.append(f"accepted type(s) {', '.join(sorted(elsewhere)[:MAX_SHOWN])} travel on other streams")
        if near:
            parts.append("it almost matches " + ", ".join(f"'{v}'" for _s, v in near))
        only_inferred = all(s.confidence == "heuristic" for sites in on_streams.values() for s in sites)
        heuristic = pp.stream_heuristic or (only_inferred and not near and not elsewhere)
        best = near[0][1] if near else (sorted(elsewhere)[0] if elsewhere else None)
        fix = (f"accept '{best}' in {pp.key[1]}'s filter (or make the producer write the accepted name)" if near
               else f"read the stream the accepted type travels on ({best})" if elsewhere
               else f"accept the types written onto {streams}, or read another stream")
        findings.append(Finding(
            code="consumer-never-matches", severity="warning" if pp.stream_heuristic else "error",
            file=pp.site.file, line=pp.site.line, message="; ".join(parts), fix=fix, evidence=evidence,
            heuristic=bool(heuristic), subject=f"post_processor:{pp.key[1]}",
            also_about=[*(f"stream:{s}" for s in pp.streams if not ctx.engine.stream_producers.get(s)),
                        *(f"event:{v}" for _s, v in near),
                        *(f"stream:{st}" for _s, v in near for site in produced[v]
                          for st in site.detail.get("stream", "").split(", ") if st)],
        ))
    return findings
