"""``analyze_grpc``: a proto service, method or package: its definition, the ``@GrpcMethod`` handlers,
the client call sites, what each handler writes to the outbox and, with ``base``, the wire-format
breaking changes of the ``.proto`` files since that git revision (read safely: see
:mod:`tools.code_nav.git_blobs`)."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from server.errors import InvalidArgument
from tools.code_nav.git_blobs import (
    RefusedRepository,
    Repository,
    check_rev,
    list_files,
    open_repository,
    resolve_commit,
    show_blob,
)
from tools.code_nav.grpc_graph import build_graph, select
from tools.code_nav.model import BreakingChange, GrpcResult, RpcReport
from tools.code_nav.outbox_writes import Writes
from tools.code_nav.proto import parse_proto
from tools.code_nav.proto_diff import compare

if TYPE_CHECKING:
    from tools.mesh_index.service import IndexService

MAX_RPCS = 200


def analyze_grpc(service: IndexService, target: str, base: str | None = None,
                 include_tests: bool = False) -> GrpcResult:
    target = (target or "").strip()
    if not target or len(target) > 300:
        raise InvalidArgument("target must name a gRPC service (EventService), a method (EventService.CreateEvent "
                              "or CreateEvent), a proto package or a .proto file (1-300 characters)")
    if base is not None:
        check_rev(base)
    g = build_graph(service, include_tests)
    notes: list[str] = []
    if g.truncated:
        notes.append(f"stopped after {len(g.protos)} .proto files: the answer may be partial")
    chosen = select(g, target)
    if not chosen:
        known = sorted({r.service for r in g.rpcs} | {h.service for h in g.handlers})[:15]
        notes.append(f"{target!r} names no gRPC service, method, package or .proto file of the workspace "
                     f"({len(g.protos)} .proto file(s), {len(g.handlers)} @GrpcMethod handler(s) and {len(g.calls)} "
                     f"client call(s) searched); services: {', '.join(known) or '(none found)'}")
    writes = Writes(service, include_tests)
    reports = []
    for svc, method, rpc in chosen[:MAX_RPCS]:
        handlers = g.handlers_of(svc, method)
        report = RpcReport(rpc=rpc, handlers=handlers, clients=g.calls_of(svc, method))
        for h in handlers:
            if h.at.symbol:
                report.writes.extend(writes.of(h.at.symbol))
        if rpc is None:
            notes.append(f"{svc}.{method}: no .proto declares it (handler or client only)")
        elif not handlers:
            notes.append(f"{svc}.{method}: no @GrpcMethod handler found (not implemented, or implemented "
                         "another way)")
        reports.append(report)
    if len(chosen) > MAX_RPCS:
        notes.append(f"{len(chosen)} rpcs match; the first {MAX_RPCS} are listed")
    breaking: list[BreakingChange] = []
    if base is not None:
        breaking, more = _breaking(service, g.protos, base, target, {r.rpc.at.file for r in reports if r.rpc})
        notes.extend(more)
    return GrpcResult(target=target, rpcs=reports, proto_files=len(g.protos), breaking=breaking, base=base,
                      notes=notes)


def _breaking(service: IndexService, protos: dict, base: str, target: str,
              files: set[str]) -> tuple[list[BreakingChange], list[str]]:
    """Compare the selected .proto files (all of them when the target selected none) with ``base``."""
    layout = service.layout()
    wanted = sorted(files) or sorted(protos)
    out: list[BreakingChange] = []
    notes: list[str] = []
    roots: dict[str, str | None] = {}
    repos: dict[str, Repository] = {}
    for rel in wanted:
        root = next((r for r in layout.git_roots if rel.startswith(r + "/")), "" if layout.root_is_repo else None)
        if root is None:
            notes.append(f"{rel}: not in a git repository; not compared")
            continue
        if root not in roots:
            try:
                repos[root] = open_repository(service.workspace, root)
            except RefusedRepository as exc:
                roots[root] = None
                notes.append(f"repository refused, git not run: {exc}; its .proto files not compared")
                continue
            roots[root] = resolve_commit(repos[root], base)
            if roots[root] is None:
                notes.append(f"base {base!r} is no commit of repository {root or '.'}: its .proto files not compared")
        commit = roots[root]
        if commit is None:
            continue
        inner = rel[len(root) + 1:] if root else rel
        old_text = show_blob(repos[root], commit, inner)
        if old_text is None:
            continue  # new since base: nothing to break
        out.extend(compare(rel, parse_proto(rel, old_text), protos[rel]))
    if not files:  # a whole-workspace comparison: files removed since base too
        for root, commit in roots.items():
            if commit is None:
                continue
            for inner in list_files(repos[root], commit, ".proto"):
                rel = posixpath.join(root, inner) if root else inner
                if rel not in protos:
                    out.append(BreakingChange(file=rel, line=1, kind="file_removed",
                                              message=f"{rel} existed at {base} and was removed"))
    if not roots and not notes:
        notes.append(f"no .proto file selected by {target!r} to compare with {base}")
    return out, notes
