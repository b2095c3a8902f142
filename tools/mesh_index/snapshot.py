"""A JSON snapshot of a :class:`~tools.mesh_index.linked.LinkedIndex`.

A new process whose workspace did not change (same files, same hashes, same package and
tsconfig files, same conventions) loads this instead of every file's facts and relinking:
it is what makes a warm ``mesh-mcp impact`` or a server restart cheap. Sites shared by
several records are written once and referenced by position. Derived tables
(``mapping_from``, ``handlers_by_job``, ``workers_by_queue``) are rebuilt on load.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tools.mesh_index.linked import (
    HandlerRec,
    LinkedIndex,
    MappingRec,
    OutcomeRec,
    PostProcessorRec,
    SiteRec,
    TypeInfo,
    WorkerRec,
)
from tools.mesh_index.workspace import Discovery

FORMAT = 6  # 5: candidates; 6: outcome names guessed


def config_mtimes(workspace: Path, found: Discovery) -> dict[str, int]:
    """mtime of every package.json and tsconfig.json of the workspace."""
    out = {}
    for rel in [*found.packages, *found.tsconfigs]:
        try:
            out[rel] = os.stat(workspace / rel).st_mtime_ns
        except OSError:
            continue
    return out


def digest(signature: str, emitters: list[str], files: dict[str, tuple[int, int, str]], configs: dict[str, int],
           git_roots: list[str]) -> str:
    """What a linked index depends on: every file's hash, the package/tsconfig files, the conventions."""
    h = hashlib.sha1(signature.encode(), usedforsecurity=False)
    h.update(json.dumps(sorted(emitters)).encode())
    for rel in sorted(files):
        h.update(f"{rel}\0{files[rel][2]}\n".encode())
    for rel in sorted(configs):
        h.update(f"{rel}\0{configs[rel]}\n".encode())
    h.update("\n".join(git_roots).encode())
    return h.hexdigest()


class _Sites:
    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.ids: dict[int, int] = {}

    def ref(self, s: SiteRec | None) -> int | None:
        if s is None:
            return None
        i = self.ids.get(id(s))
        if i is None:
            i = self.ids[id(s)] = len(self.rows)
            self.rows.append([s.repo, s.file, s.line, s.symbol, s.kind, s.confidence, s.test_only, s.value, s.detail])
        return i


def dump(idx: LinkedIndex, parse_error_files: list[str]) -> dict[str, Any]:
    """The index as JSON-ready data."""
    st = _Sites()
    ref = st.ref
    data = {
        "format": FORMAT,
        "declared": [[k[0], k[1], t.name, ref(t.defined_at), t.aliases, t.test_only] for k, t in idx.declared.items()],
        "by_qual": [[q, k[0], k[1]] for q, k in idx.by_qual.items()],
        "by_member": [[m, sorted(ks)] for m, ks in idx.by_member.items()],
        "producers": [[k[0], k[1], [ref(s) for s in sites]] for k, sites in idx.producers.items()],
        "candidates": [[k[0], k[1], [ref(s) for s in sites]] for k, sites in idx.candidates.items()],
        "routes_out": [[k[0], k[1], [[r[0], r[1], via] for r, via in routes.items()]]
                       for k, routes in idx.routes_out.items()],
        "handlers": [[*h.key, ref(h.site), h.jobs, h.confidence, [list(w) for w in h.routed_by]]
                     for h in idx.handlers.values()],
        "workers": [[*w.key, ref(w.site), w.queues, [list(h) for h in w.handlers], w.switch_jobs, w.queue_raw]
                    for w in idx.workers.values()],
        "post_processors": [[*p.key, ref(p.site), p.streams, p.groups, p.accepts, [list(x) for x in p.patterns],
                             p.accept_all, p.filter_unknown, p.binding, p.stream_heuristic, p.started]
                            for p in idx.post_processors.values()],
        "mappings": [[m.name, ref(m.site), [[*f, *t, line, h] for f, t, line, h in m.entries]] for m in idx.mappings],
        "outcomes": [[ref(o.site), o.value, o.status, o.emitter, o.heuristic, o.names_guessed]
                     for o in idx.outcomes],
        "unresolved": [[kind, [ref(s) for s in sites]] for kind, sites in idx.unresolved.items()],
        "class_producers": [[*key, [[k[0], k[1], ref(s)] for k, s in items]]
                            for key, items in idx.class_producers.items()],
        "wrappers": [[*key, ref(s)] for key, s in idx.wrappers.items()],
        "collaborators": [[*key, [list(c) for c in cs]] for key, cs in idx.collaborators.items()],
        "collaborator_values": [[list(k), list(o), v] for (k, o), v in idx.collaborator_values.items()],
        "emitters": idx.emitters,
        "stream_prefix": idx.stream_prefix,
        "parse_error_files": parse_error_files,
    }
    data["sites"] = st.rows
    return data


def load(data: dict[str, Any]) -> tuple[LinkedIndex, list[str]]:
    """The index and the files with parse errors, from :func:`dump` data."""
    if data.get("format") != FORMAT:
        raise ValueError("snapshot format mismatch")
    sites = [SiteRec(*row) for row in data["sites"]]

    def site(i: int | None) -> SiteRec | None:
        return None if i is None else sites[i]

    idx = LinkedIndex(stream_prefix=data["stream_prefix"], emitters=list(data["emitters"]))
    for kind, value, name, at, aliases, test_only in data["declared"]:
        idx.declared[(kind, value)] = TypeInfo(kind, value, name, site(at), list(aliases), test_only)
    idx.by_qual = {q: (k, v) for q, k, v in data["by_qual"]}
    idx.by_member = {m: {(k, v) for k, v in keys} for m, keys in data["by_member"]}
    idx.producers = {(k, v): [sites[i] for i in ids] for k, v, ids in data["producers"]}
    idx.candidates = {(k, v): [sites[i] for i in ids] for k, v, ids in data["candidates"]}
    idx.routes_out = {(k, v): {(r0, r1): list(via) for r0, r1, via in routes} for k, v, routes in data["routes_out"]}
    for path, name, at, jobs, conf, routed in data["handlers"]:
        rec = HandlerRec((path, name), sites[at], list(jobs), conf, [tuple(w) for w in routed])
        idx.handlers[rec.key] = rec
        for job in rec.jobs:
            idx.handlers_by_job.setdefault(job, []).append(rec)
    for path, name, at, queues, handlers, switch, raw in data["workers"]:
        rec = WorkerRec((path, name), sites[at], list(queues), [tuple(h) for h in handlers], list(switch), raw)
        idx.workers[rec.key] = rec
        for q in rec.queues:
            idx.workers_by_queue.setdefault(q, []).append(rec)
    for path, name, at, streams, groups, accepts, patterns, all_, unknown, binding, guessed, started \
            in data["post_processors"]:
        idx.post_processors[(path, name)] = PostProcessorRec(
            (path, name), sites[at], list(streams), list(groups), dict(accepts), [tuple(p) for p in patterns],
            all_, unknown, binding, guessed, started)
    for name, at, entries in data["mappings"]:
        rec = MappingRec(name, sites[at], [((f0, f1), (t0, t1), line, h) for f0, f1, t0, t1, line, h in entries])
        idx.mappings.append(rec)
        for from_key, to_key, line, heuristic in rec.entries:
            idx.mapping_from.setdefault(from_key, []).append((rec, to_key, line, heuristic))
    idx.outcomes = [OutcomeRec(sites[at], value, status, emitter, h, bool(g))
                    for at, value, status, emitter, h, g in data["outcomes"]]
    idx.unresolved = {kind: [sites[i] for i in ids] for kind, ids in data["unresolved"]}
    idx.class_producers = {(p, n): [((k, v), sites[i]) for k, v, i in items]
                           for p, n, items in data["class_producers"]}
    idx.wrappers = {(p, n): sites[i] for p, n, i in data["wrappers"]}
    idx.collaborators = {(p, n): [tuple(c) for c in cs] for p, n, cs in data["collaborators"]}
    idx.collaborator_values = {(tuple(k), tuple(o)): list(v) for k, o, v in data["collaborator_values"]}
    return idx, list(data["parse_error_files"])
