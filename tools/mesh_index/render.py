"""Short human-readable texts of impact results and catalogues (MCP text content, CLI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the models call these renderers (summary_text): types only here
    from tools.mesh_index.model import Catalogue, ImpactResult, IndexInfo, Site


MAX_LINES = 15


def site_line(s: Site) -> str:
    extra = [f"{k}={v}" for k, v in s.detail.items() if k in ("queue", "stream", "group", "via", "handler_class",
                                                                 "worker_class", "emitter", "raw", "reason") and v]
    flags = []
    if s.confidence == "heuristic":
        flags.append("heuristic")
    if s.test_only:
        flags.append("test-only")
    value = f" '{s.value}'" if s.value else ""
    tail = f" [{'; '.join(extra)}]" if extra else ""
    mark = f" ({', '.join(flags)})" if flags else ""
    return f"  {s.kind}{value} {s.file}:{s.line} {s.symbol or ''}{tail}{mark}".rstrip()


def _section(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return [f"{title}: none"]
    out = [f"{title} ({len(lines)}):", *lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        out.append(f"  … {len(lines) - MAX_LINES} more in the structured result")
    return out


def index_line(info: IndexInfo) -> str:
    stale = f", {len(info.stale_files)} stale file(s)" if info.stale_files else ""
    skipped = f", {len(info.skipped_files)} over the size cap not indexed" if info.skipped_files else ""
    return f"index: {info.files} files, {info.parse_errors} with parse errors, built {info.indexed_at}{stale}{skipped}"


def impact_text(r: ImpactResult) -> str:
    if not r.matches:
        lines = [f"'{r.target}' matches no job, event, websocket type, queue or stream."]
        if r.suggestions:
            lines.append("closest names: " + ", ".join(r.suggestions))
        lines.append(index_line(r.index))
        return "\n".join(lines)
    lines = [f"{r.target}: {len(r.matches)} match(es)"]
    lines += [f"  {m.kind} {m.name} = '{m.value}'" + (f" ({m.defined_at.file}:{m.defined_at.line})"
                                                       if m.defined_at else " (not declared, observed in code)")
              for m in r.matches]
    lines += _section("producers", [site_line(s) for s in r.producers])
    lines += _section("consumers", [site_line(s) for s in r.consumers])
    lines += _section("routes", [f"  {rt.kind} {rt.name} ({rt.producers} producer(s), {rt.consumers} consumer(s); "
                                 f"{'; '.join(rt.via)})" for rt in r.routes])
    lines += _section("follow-ups", [f"  depth {f.depth}: {f.from_value} -> {f.kind} '{f.value}' via {f.via} "
                                     f"({f.confidence}) {f.site.file}:{f.site.line}" for f in r.followups])
    if r.unresolved:
        lines += _section("unresolved", [site_line(s) for s in r.unresolved])
    lines += [f"note: {n}" for n in r.notes]
    lines.append(index_line(r.index))
    return "\n".join(lines)


def catalogue_text(c: Catalogue) -> str:
    counts = ", ".join(f"{n} {k}" for k, n in sorted(c.counts.items())) or "nothing"
    lines = [f"catalogue: {counts}; {c.orphans} orphan(s)"]
    orphans = [f"  {e.kind} {e.name} = '{e.value}': {'; '.join(e.reasons)}" for e in c.entries if e.orphan]
    lines += _section("orphans", orphans)
    failing = [
        f"  {e.kind} {e.name} = '{e.value}': {', '.join(e.failing_checks)}" for e in c.entries if e.failing_checks
    ]
    lines += _section("failing verify_flow checks", failing)
    if c.page is not None and (cut := c.page.text("entries")):
        lines.append(cut)
    lines.append(index_line(c.index))
    return "\n".join(lines)
