r"""The job-outcome row the workspace's audit trigger really writes, learnt from its migrations.

Every definition of ``[conventions] audit_trigger`` (``notify_job_audit_status_change``) found in
the SQL strings of the index's files is read, in migration order (a database runs the last one it
applied, so the earlier ones matter too). Of each version's ``INSERT INTO event_queue``:

- the outcome types per status, as templates (``{domain}:job:outbox:success``: ``{domain}`` is the
  emitter with ``[conventions] service_prefix`` (``ms-``) removed by ``replace(NEW.emitter, 'ms-', '')``
  or ``regexp_replace(NEW.emitter, '^ms-', '')``, the regular expression read as the literal it matches,
  so ``'^svc\.'`` is the prefix ``svc.``; another removal is not that rule: nothing is learnt from it;
  ``{emitter}`` the emitter);
  variables assigned in ``IF NEW.status = '...'`` branches are followed per branch;
- the JSON paths of the job id in ``payload`` (``jsonb_build_object('after', to_jsonb(NEW))`` gives
  ``after.job_id``: the job_audit row's job id column; ``jsonb_build_object('jobId', NEW.job_id)``
  gives ``jobId``);
- whether ``"emitterId"`` is the job id (``NEW.job_id::uuid``);
- the ``target_services`` (``{emitter}``, ``{type}`` for the outcome type itself, or literals).

What cannot be resolved is left out of the version (never guessed); with no definition found the
answer is None and the callers keep the ``[conventions]`` defaults (the real shape).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from server.conventions import Conventions
from tools.mesh_index.sql_sites import split_top
from tools.mesh_index.workspace import migration_order

_FUNC = re.compile(r"create\s+(?:or\s+replace\s+)?function\s+([\w.\"]+)\s*\(", re.I)
_DOLLAR = re.compile(r"\$(\w*)\$")
_INSERT = re.compile(r"insert\s+into\s+([\w.\"]+)\s*\(([^)]*)\)\s*values\s*\(", re.I)
_STATUS = re.compile(r"\b(?:if|elsif)\s+new\.status\s*=\s*'(\w+)'", re.I)
_ASSIGN = re.compile(r"^([a-z_]\w*)\s*:=\s*(.+)$", re.I | re.S)
_LEAD = re.compile(r"^.*\b(?:then|else|begin|declare)\b", re.I | re.S)
_CAST = re.compile(r"::\s*[\w\" ]+(\[\])?")
MAX_TEXT = 200_000


@dataclass
class OutcomeVersion:
    path: str
    line: int
    order: int
    types: dict[str, list[str]] = field(default_factory=dict)
    """status (COMPLETED, FAILED) -> type templates"""
    id_paths: list[str] = field(default_factory=list)
    emitter_id_is_job_id: bool = False
    target_services: list[str] = field(default_factory=list)


@dataclass
class OutcomeShape:
    versions: list[OutcomeVersion]
    """oldest first: the last is the latest definition"""

    def _all(self, status: str) -> list[str]:
        out: list[str] = []
        for version in reversed(self.versions):
            out += [t for t in version.types.get(status, []) if t not in out]
        return out

    def success_types(self, completed: str = "COMPLETED") -> list[str]:
        return self._all(completed)

    def failure_types(self, failed: str = "FAILED") -> list[str]:
        return self._all(failed)

    def id_paths(self) -> list[str]:
        out: list[str] = []
        for version in reversed(self.versions):
            out += [p for p in version.id_paths if p not in out]
        return out


def _strip(raw: str) -> str:
    s = _CAST.sub("", raw.strip()).strip()
    while s.startswith("(") and s.endswith(")"):
        s = s[1:-1].strip()
    return s


_REGEX_META = set(".[]()*+?{}|$^\\")


def _regex_literal(pattern: str) -> str | None:
    r"""The text a regular expression matches when it is a plain literal (``ms\-`` -> ``ms-``), else None."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum():
                return None  # \d, \w, ...: a class, not a literal
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in _REGEX_META:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _removes_prefix(fn: str, pattern: str, prefix: str) -> bool:
    """Whether ``fn(NEW.emitter, pattern, '')`` is the service-prefix rule for ``prefix``: ``replace`` of the
    prefix itself, or ``regexp_replace`` of a literal regular expression (anchored with ``^`` or not) matching it."""
    if not prefix:
        return False
    if fn.lower() == "replace":
        return pattern == prefix
    return _regex_literal(pattern.removeprefix("^")) == prefix


def _template(raw: str, env: dict[str, dict[str | None, list[str]]], status: str | None,
              prefix: str) -> list[str]:
    """The string values of a SQL expression as templates ({emitter}, {domain}); [] when unknown.
    ``prefix``: ``[conventions] service_prefix`` (the removal that turns the emitter into its domain)."""
    s = _strip(raw)
    parts = split_top(s, "||")
    if len(parts) > 1:
        out = [""]
        for part in parts:
            values = _template(part, env, status, prefix)
            if not values:
                return []
            out = [a + b for a in out for b in values]
        return out
    if len(s) >= 2 and s[0] == s[-1] == "'":
        return [s[1:-1].replace("''", "'")]
    low = s.lower()
    if low == "new.emitter":
        return ["{emitter}"]
    m = re.fullmatch(r"(regexp_replace|replace)\s*\((.*)\)", s, re.I | re.S)
    if m:
        args = split_top(m.group(2))
        if len(args) == 3 and _template(args[0], env, status, prefix) == ["{emitter}"]:
            pattern, repl = (_template(a, env, status, prefix) for a in args[1:])
            if len(pattern) == 1 and repl == [""] and _removes_prefix(m.group(1), pattern[0], prefix):
                return ["{domain}"]
        return []
    if re.fullmatch(r"[a-z_]\w*", low) and low in env:
        branches = env[low]
        if status is not None and status in branches:
            return branches[status]
        return [v for values in branches.values() for v in values]
    return []


def _paths(raw: str, job_col: str) -> list[str]:
    """JSON paths holding the job id in a payload expression."""
    s = _strip(raw)
    low = s.lower()
    if re.fullmatch(r"(to_jsonb|to_json|row_to_json)\s*\(\s*new\s*\)", low) or low == "new":
        return [job_col]
    if low == f"new.{job_col}":
        return [""]
    m = re.fullmatch(r"(jsonb_build_object|json_build_object)\s*\((.*)\)", s, re.I | re.S)
    if not m:
        return []
    args = split_top(m.group(2))
    out = []
    for key, value in zip(args[::2], args[1::2], strict=False):
        k = _strip(key)
        if not (len(k) >= 2 and k[0] == k[-1] == "'"):
            continue
        for sub in _paths(value, job_col):
            out.append(k[1:-1] + (f".{sub}" if sub else ""))
    return out


def _version(body: str, path: str, line: int, order: int, table: str, job_col: str,
             prefix: str) -> OutcomeVersion | None:
    version = OutcomeVersion(path=path, line=line, order=order)
    env: dict[str, dict[str | None, list[str]]] = {}
    status: str | None = None
    found = False
    for stmt in split_top(body, ";"):
        cond = _STATUS.search(stmt)
        if cond:
            status = cond.group(1).upper()
        elif re.search(r"\belse\b|\bend\s+if\b", stmt, re.I):
            status = None if re.search(r"\bend\s+if\b", stmt, re.I) else status and "ELSE"
        clean = _LEAD.sub("", stmt, count=1).strip()
        ins = _INSERT.search(clean)
        if ins:
            if ins.group(1).replace('"', "").split(".")[-1].lower() != table:
                continue
            found = True
            cols = [c.strip().strip('"').lower() for c in ins.group(2).split(",")]
            values = split_top(clean[ins.end():clean.rfind(")")])
            row = dict(zip(cols, values, strict=False))
            statuses = [status] if status not in (None, "ELSE") else ["COMPLETED", "FAILED"]
            for st in statuses:
                for value in _template(row.get("type", ""), env, st, prefix):
                    if value and value not in version.types.setdefault(st, []):
                        version.types[st].append(value)
            for p in _paths(row.get("payload", ""), job_col):
                if p and p not in version.id_paths:
                    version.id_paths.append(p)
            version.emitter_id_is_job_id |= _strip(row.get("emitterid", "")).lower() == f"new.{job_col}"
            targets = _strip(row.get("target_services", ""))
            if targets.lower().startswith("array[") and targets.endswith("]"):
                type_raw = _strip(row.get("type", ""))
                for item in split_top(targets[6:-1]):
                    value = ("{type}" if _strip(item) == type_raw
                             else next(iter(_template(item, env, statuses[0], prefix)), None))
                    if value and value not in version.target_services:
                        version.target_services.append(value)
            continue
        assign = _ASSIGN.match(clean)
        if assign:
            values = _template(assign.group(2), env, status, prefix)
            if values:
                env.setdefault(assign.group(1).lower(), {})[status if status != "ELSE" else None] = values
    version.types = {k: v for k, v in version.types.items() if v}
    return version if found else None


def derive(texts: Iterable[tuple[str, int, str]], function: str, table: str = "event_queue",
           job_col: str = "job_id", service_prefix: str | None = None) -> OutcomeShape | None:
    """The shape of ``function``'s versions in ``texts`` (``(path, line, sql text)``), oldest first.
    ``service_prefix``: the emitter prefix its domain removal must remove (None: the ``[conventions]`` default)."""
    prefix = Conventions().service_prefix if service_prefix is None else service_prefix
    versions = []
    for path, line, text in texts:
        if function not in text.lower() or len(text) > MAX_TEXT:
            continue
        for m in _FUNC.finditer(text):
            if m.group(1).replace('"', "").split(".")[-1].lower() != function:
                continue
            d = _DOLLAR.search(text, m.end())
            end = text.find(d.group(0), d.end()) if d else -1
            if d is None or end < 0:
                continue
            found = _version(text[d.end():end], path, line + text.count("\n", 0, m.start()),
                             migration_order(path), table, job_col, prefix)
            if found is not None:
                versions.append(found)
    versions.sort(key=lambda v: (v.order, v.path, v.line))
    return OutcomeShape(versions) if versions else None


def sql_texts(facts: dict[str, dict]) -> list[tuple[str, int, str]]:
    """``(path, line, text)`` of the plain SQL strings of the index's per-file facts."""
    out = []
    for path, f in facts.items():
        for expr, line, _symbol, _parsed in f.get("sql_strings", ()):
            if isinstance(expr, list) and expr and expr[0] == "s" and isinstance(expr[1], str):
                out.append((path, int(line), expr[1]))
    return out
