"""Evaluating a producer's type when it is read from a table: pairing and the jobs of a worker.

- ``type: JOBS[kind], target: QUEUES[kind]`` (the same key in two tables): each job value
  goes with the queues of its own keys (:func:`paired_lookup`), not with every queue;
- inside a worker, ``getEventForJob(job.name)`` is read for the jobs that worker routes
  (:func:`eval_for_jobs`), not for every entry of ``JOB_TO_EVENT_MAPPING``.
"""

from __future__ import annotations

from typing import Any

from tools.mesh_index.symbols import Decl, Resolver, Val


def paired_lookup(r: Resolver, type_expr: Any, target_expr: Any, path: str) -> dict[str, list[Val]]:
    """``type: JOBS[kind], target: QUEUES[kind]`` (same key): each job value -> the queues of its keys."""
    if not (type_expr and target_expr and type_expr[0] == "x" and target_expr[0] == "x"
            and type_expr[2] == target_expr[2]):
        return {}
    types, targets = r.resolve_decl(type_expr[1], path), r.resolve_decl(target_expr[1], path)
    if not (isinstance(types, Decl) and isinstance(targets, Decl) and types.kind == targets.kind == "object"):
        return {}
    by_key: dict[str, list[Val]] = {}
    for keys, values, _line in r.mapping_entries(targets):
        for k in keys:
            by_key.setdefault(k.value, []).extend(values)
    out: dict[str, list[Val]] = {}
    for keys, values, _line in r.mapping_entries(types):
        for v in values:
            out.setdefault(v.value, []).extend(q for k in keys for q in by_key.get(k.value, ()))
    return out


def _params(r: Resolver, expr: Any, path: str, out: set[str]) -> set[str]:
    """Names of the function parameters an expression reads (``job`` of ``job.name``): ``p`` nodes, and
    references whose head names nothing of the file (a parameter seen past the local-resolution depth)."""
    if isinstance(expr, list) and expr and not isinstance(expr[0], str):  # a list of expressions (call arguments)
        for item in expr:
            _params(r, item, path, out)
    elif isinstance(expr, list) and expr:
        if expr[0] == "p" and isinstance(expr[1], str):
            out.add(expr[1].split(".")[0])
        elif expr[0] == "r" and isinstance(expr[1], list):
            if expr[1] and expr[1][0] != "this" and r.symbol(path, expr[1][0]) is None:
                out.add(expr[1][0])
        else:
            for item in expr[1:]:
                _params(r, item, path, out)
    return out


def _as_params(expr: Any, names: set[str]) -> Any:
    """``expr`` with references to ``names`` turned into parameter reads (so that a binding applies)."""
    if not isinstance(expr, list) or not expr:
        return expr
    if not isinstance(expr[0], str):
        return [_as_params(item, names) for item in expr]
    if expr[0] == "r" and isinstance(expr[1], list) and expr[1] and expr[1][0] in names:
        return ["p", ".".join(expr[1])]
    if expr[0] in ("p", "s", "num", "?"):
        return expr
    return [expr[0], *(_as_params(item, names) for item in expr[1:])]


def eval_for_jobs(r: Resolver, expr: Any, path: str, jobs: list[str]) -> list[Val]:
    """Values of ``expr`` with every parameter it reads bound to the job types ``jobs`` (empty if none)."""
    names = _params(r, expr, path, set()) if expr is not None else set()
    if not names:
        return []
    bound: list[Any] = ["vals", [Val(j) for j in jobs]]
    return r.eval(_as_params(expr, names), path, {n: (bound, path) for n in names})


def reads_params(r: Resolver, expr: Any, path: str) -> bool:
    """Whether ``expr`` reads a function parameter (what :func:`eval_for_jobs` binds)."""
    return bool(_params(r, expr, path, set())) if expr is not None else False
