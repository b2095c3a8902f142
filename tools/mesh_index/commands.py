"""``mesh-mcp index``, ``mesh-mcp impact TARGET`` and ``mesh-mcp catalogue [--orphans]``.

Tables for humans on stdout (``--json`` for machines), a progress bar on stderr while
files are parsed. Exit status: 0 on success; ``impact`` returns 1 when the target matches
nothing (the closest names are printed); errors print one line and return 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from server.cli_support import fail, print_json, print_table, print_text, settings_from_args
from server.errors import MeshError
from server.text_safety import TerminalWriter, carriage_return
from tools.mesh_index.early_parse import early_walk, start_before_settings, start_parsing_early

if TYPE_CHECKING:  # the service and the result models are imported once the workers parse (cmd_index)
    from tools.mesh_index.model import Site
    from tools.mesh_index.service import IndexService


def make_service(args: argparse.Namespace, settings: Any = None) -> IndexService:
    settings = settings if settings is not None else settings_from_args(args)
    if settings.workspace is None:
        raise MeshError("no workspace: pass --workspace DIR (a folder of repositories) or set workspace in mesh.toml")
    from tools.mesh_index.service import service_for_settings
    from tools.mesh_index.ts_presence import require_typescript

    require_typescript(settings.workspace, settings.conventions.static.skip_dirs)  # before anything is written

    return service_for_settings(settings)


class ProgressBar:
    """A one-line progress bar on stderr; when stderr is not a terminal, a line every 10% of large runs."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = 0.0
        self.last_decile = -1
        self.shown = False

    def __call__(self, done: int, total: int, path: str) -> None:
        if total <= 0:
            return
        if self.tty:
            now = time.monotonic()
            if done < total and now - self.last < 0.1:
                return
            self.last = now
            filled = int(self.width * done / total)
            bar = "#" * filled + "." * (self.width - filled)
            cr = carriage_return() if isinstance(self.stream, TerminalWriter) else "\r"
            self.stream.write(f"{cr}indexing [{bar}] {done}/{total} files")
            if done >= total:
                self.stream.write("\n")
        else:
            if total < 200:
                return
            decile = int(10 * done / total)
            if decile == self.last_decile and done < total:
                return
            self.last_decile = decile
            self.stream.write(f"indexing: {done}/{total} files\n")
        self.shown = True
        self.stream.flush()


def cmd_index(args: argparse.Namespace) -> int:
    full = bool(getattr(args, "full", False))
    from tools.mesh_index.quick_index import inputs_fingerprint, print_answer, quick_answer, record_inputs

    fingerprint = None if full else inputs_fingerprint(args)
    answer = quick_answer(args, fingerprint)  # nothing changed since the last build: no settings, no index
    if answer is not None:
        print_answer(answer, bool(args.json))
        return 0
    early = start_before_settings(args, full)  # the workers parse while the settings load
    try:
        settings = settings_from_args(args)
        if settings.workspace is not None:
            from tools.mesh_index.ts_presence import require_typescript

            require_typescript(settings.workspace, settings.conventions.static.skip_dirs)
        early = start_parsing_early(settings, full)  # keeps, cancels or starts the early parse
        service = make_service(args, settings)
        found = early_walk(service.workspace) if early else None
        if found is not None:
            service.walk_coming(lambda: found)  # the early parse's walk: not walked twice
        try:
            info = service.refresh(ProgressBar(), full=full)
            counts, orphans = service.summary()  # only counts are printed: no verify checks
        finally:
            service.close()
        if fingerprint is not None and inputs_fingerprint(args) == fingerprint:  # (not edited meanwhile)
            record_inputs(fingerprint, service.cache_dir, service.manifest_key())
    finally:
        if early:
            from tools.mesh_index.indexer import cancel_early

            cancel_early()  # nothing left when the refresh collected it
    if args.json:
        print_json({"index": info.model_dump(mode="json"), "counts": counts, "orphans": orphans})
        return 0
    rows = [["workspace", info.workspace], ["files", info.files], ["re-parsed", info.reparsed],
            ["parse errors", info.parse_errors], ["duration", f"{info.duration_s:.2f} s"],
            ["cache", info.cache or "(none)"]]
    rows += [[f"{kind}s", n] for kind, n in sorted(counts.items())]
    rows.append(["orphans", orphans])
    print_table(["index", "value"], rows, max_width=100)
    for path in info.parse_error_files[:10]:
        print(f"parse error: {path}")
    return 0


def _site_rows(sites: list[Site]) -> list[list[str]]:
    rows = []
    for s in sites:
        where = s.detail.get("queue") or s.detail.get("stream") or s.detail.get("via") or ""
        flags = ",".join(f for f, on in (("heuristic", s.confidence == "heuristic"), ("test", s.test_only)) if on)
        rows.append([s.kind, s.value or "", f"{s.file}:{s.line}", s.symbol or "", where, flags])
    return rows


def cmd_impact(args: argparse.Namespace) -> int:
    service = make_service(args)
    try:
        service.refresh(ProgressBar())
        result = service.analyze_impact(args.target, depth=args.depth, include_tests=args.include_tests,
                                        direction=getattr(args, "direction", "downstream"),
                                        limit=getattr(args, "limit", None), offset=getattr(args, "offset", 0))
    finally:
        service.close()
    if args.json:
        from tools.detail import shaped
        from tools.mesh_index.summary import summarise_impact

        items = settings_from_args(args).limits.summary_items
        print_json(shaped(result, args.detail, summarise_impact, items))
        return 0 if result.matches or result.nodes else 2  # an unknown name: exit 2, as map, verify, runtime
    if not result.matches and not result.nodes:
        closest = f"; closest names: {', '.join(result.suggestions)}" if result.suggestions else ""
        return fail(f"'{args.target}' matches no job, event, websocket type, queue, stream, class or config key"
                    f"{closest}")
    if result.matches:
        print_table(["kind", "name", "value", "defined at"],
                    [[m.kind, m.name, m.value,
                      f"{m.defined_at.file}:{m.defined_at.line}" if m.defined_at else "(observed)"]
                     for m in result.matches], max_width=90)
    for n in result.nodes:
        print_text(f"{n.kind} {n.name} ({n.role}) {n.file or ''}{':' + str(n.line) if n.line else ''}: its consumer "
                   "sites are what it consumes, its producer sites what it emits")
    headers = ["kind", "value", "where", "symbol", "queue/stream/via", "flags"]
    for title, sites in (("producers", result.producers), ("consumers", result.consumers),
                         ("candidates (value not resolved)", result.candidates)):
        if title.startswith("candidates") and not sites:
            continue
        print(f"\n{title} ({len(sites)})")
        if sites:
            print_table(headers, _site_rows(sites), max_width=80)
    print(f"\nroutes ({len(result.routes)})")
    if result.routes:
        print_table(["kind", "name", "producers", "consumers", "via"],
                    [[r.kind, r.name, r.producers, r.consumers, "; ".join(r.via)] for r in result.routes])
    print(f"\nfollow-ups ({len(result.followups)})")
    if result.followups:
        print_table(["depth", "from", "next", "via", "confidence", "where"],
                    [[f.depth, f.from_value, f"{f.kind} {f.value}", f.via, f.confidence, f"{f.site.file}:{f.site.line}"]
                     for f in result.followups], max_width=70)
    if result.direction != "downstream":
        print(f"\nupstream ({len(result.upstream)})")
        if result.upstream:
            print_table(["depth", "from", "writes", "via", "confidence", "where"],
                        [[f.depth, f.from_value, f"{f.kind} {f.value}", f.via, f.confidence,
                          f"{f.site.file}:{f.site.line}"] for f in result.upstream], max_width=70)
    if result.unresolved:
        print(f"\nunresolved ({len(result.unresolved)})")
        print_table(["kind", "where", "symbol", "expression", "reason"],
                    [[s.kind, f"{s.file}:{s.line}", s.symbol or "", s.detail.get("raw", ""), s.detail.get("reason", "")]
                     for s in result.unresolved], max_width=70)
    for note in result.notes:
        print_text(f"note: {note}")
    from tools.mesh_index.render import index_line

    print_text(index_line(result.index))
    return 0


def cmd_catalogue(args: argparse.Namespace) -> int:
    service = make_service(args)
    try:
        service.refresh(ProgressBar())
        catalogue = service.catalogue(kind=args.kind, orphans_only=args.orphans)
    finally:
        service.close()
    if args.json:
        print_json(catalogue)
        return 0
    print_table(["kind", "name", "value", "producers", "consumers", "orphan reasons", "failing checks"],
                [[e.kind, e.name, e.value, e.producers, e.consumers, "; ".join(e.reasons),
                  ", ".join(e.failing_checks)]
                 for e in catalogue.entries], max_width=70)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(catalogue.counts.items())) or "nothing"
    print_text(f"\n{counts}; {catalogue.orphans} orphan(s)")
    from tools.mesh_index.render import index_line

    print_text(index_line(catalogue.index))
    return 0
