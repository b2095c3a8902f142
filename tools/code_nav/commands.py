"""``mesh-mcp search QUERY``, ``dependents TARGET``, ``grpc TARGET`` and ``docs QUERY``: the code-navigation
tools for humans, as tables (``--json`` for machines). Exit status 0 with results, 1 when nothing was
found, 2 on an error (one line)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from server.cli_support import add_common_flags, print_json, print_table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="declared symbols by name (smart_search)")
    add_common_flags(p)
    p.add_argument("query")
    p.add_argument("--scope", help="repository or folder of the workspace")
    p.add_argument("--include-body", action="store_true", help="print each symbol's source")
    p.add_argument("--fuzzy", action="store_true", help="add a bounded full-text search")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--offset", type=int, default=0)

    p = sub.add_parser("dependents", help="who declares or imports a package, symbol or file (find_dependents)")
    add_common_flags(p)
    p.add_argument("target")
    p.add_argument("--granularity", choices=["symbol", "package", "file"], default="symbol")
    p.add_argument("--include-tests", action="store_true")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)

    p = sub.add_parser("grpc", help="a gRPC service or method: proto, handlers, clients, outbox writes")
    add_common_flags(p)
    p.add_argument("target")
    p.add_argument("--base", help="git revision: list wire-format breaking changes of the .proto files since it")
    p.add_argument("--include-tests", action="store_true")

    p = sub.add_parser("docs", help="sections of the workspace's Markdown ranked by QUERY (search_docs)")
    add_common_flags(p)
    p.add_argument("query")
    p.add_argument("--max-sections", type=int, default=3)


def _run(args: argparse.Namespace, fn: Callable[[Any], Any]) -> Any:
    from tools.mesh_index.commands import ProgressBar, make_service

    service = make_service(args)
    try:
        service.refresh(ProgressBar())
        return fn(service)
    finally:
        service.close()


def cmd_search(args: argparse.Namespace) -> int:
    from tools.code_nav.symbol_search import smart_search

    r = _run(args, lambda s: smart_search(s, args.query, args.scope, args.include_body, args.fuzzy, args.limit,
                                          args.offset, tuple(s.conventions.test_path_markers)))
    if args.json:
        print_json(r)
    else:
        print_table(["kind", "name", "match", "where", "signature"],
                    [[h.kind, h.name, h.match, f"{h.file}:{h.line}", h.signature] for h in r.hits], max_width=70)
        for t in r.text_hits:
            print(f"text {t.file}:{t.line}: {t.text}")
        print(f"{len(r.hits)} of {r.page.total} symbol(s)" + "".join(f"\nnote: {n}" for n in r.notes))
    return 0 if r.hits or r.text_hits else 1


def cmd_dependents(args: argparse.Namespace) -> int:
    from tools.code_nav.dependents import find_dependents

    r = _run(args, lambda s: find_dependents(s, args.target, args.granularity, args.include_tests, args.limit,
                                             args.offset))
    if args.json:
        print_json(r)
        return 0
    print(f"{r.target} ({r.resolved}) declared at {r.declared_at}" + (f", version {r.version}" if r.version else ""))
    if r.declaring:
        print_table(["package", "package.json", "section", "range", "includes current"],
                    [[d.package, f"{d.file}:{d.line}", d.section, d.range,
                      {True: "yes", False: "NO", None: "unknown"}[d.satisfied]] for d in r.declaring])
    if r.granularity == "package":
        print_table(["package", "folder", "files"], [[p.package, p.dir, p.files] for p in r.packages])
    else:
        print_table(["file", "imports", "from", "via"],
                    [[f"{i.file}:{i.line}", ", ".join(i.names), i.spec, i.via or ""] for i in r.importers],
                    max_width=70)
    print(f"{r.page.total} dependent(s)" + "".join(f"\nnote: {n}" for n in r.notes))
    return 0 if r.page.total or r.declaring else 1


def cmd_grpc(args: argparse.Namespace) -> int:
    from tools.code_nav.grpc import analyze_grpc

    r = _run(args, lambda s: analyze_grpc(s, args.target, args.base, args.include_tests))
    if args.json:
        print_json(r)
        return 0
    rows = []
    for rep in r.rpcs:
        name = f"{rep.rpc.service}.{rep.rpc.method}" if rep.rpc else ""
        if rep.rpc:
            rows.append([name, "proto", f"{rep.rpc.at.file}:{rep.rpc.at.line}",
                         f"{rep.rpc.request} -> {rep.rpc.response}"])
        rows += [[name, "handler", f"{h.at.file}:{h.at.line}", h.at.symbol or ""] for h in rep.handlers]
        rows += [[name, "client", f"{c.at.file}:{c.at.line}", f"{c.at.symbol} this.{c.client_field}.{c.method}"]
                 for c in rep.clients]
        rows += [[name, f"writes {w.kind}", f"{w.at.file}:{w.at.line}", w.value or ""] for w in rep.writes]
    print_table(["rpc", "what", "where", "detail"], rows, max_width=70)
    if r.base is not None:
        print(f"\nbreaking changes since {r.base}: {len(r.breaking)}")
        if r.breaking:
            print_table(["kind", "where", "what"], [[b.kind, f"{b.file}:{b.line}", b.message] for b in r.breaking],
                        max_width=90)
    for n in r.notes:
        print(f"note: {n}")
    return 0 if r.rpcs else 1


def cmd_docs(args: argparse.Namespace) -> int:
    from server.cli_support import settings_from_args
    from server.errors import MeshError
    from tools.code_nav.doc_search import search_docs

    settings = settings_from_args(args)
    if settings.workspace is None:
        raise MeshError("no workspace: pass --workspace DIR or set workspace in mesh.toml")
    r = search_docs(settings.workspace, tuple(settings.conventions.static.skip_dirs), args.query, args.max_sections)
    if args.json:
        print_json(r)
    else:
        print(r.summary_text())
    return 0 if r.sections else 1
