"""Linking SQL and mapping tables into producer sites, routes and job-outcome events.

SQL: every function definition is collected with its migration order (the timestamp a
migration file name starts with); only the **last definition** of each function counts.
``CREATE TRIGGER ... EXECUTE FUNCTION f('<type>', '<emitter>')`` becomes one ``sql_trigger``
site per type the function's ``INSERT INTO event_queue`` writes with those arguments; a
function whose inserts do not depend on its arguments (the audit trigger) gives sites at
the insert itself. Names computed from the emitter (``replace(NEW.emitter, 'ms-', '') ||
':job:outbox:success'``) are expanded for every known emitter and marked ``heuristic``. The known
emitters are those the code writes, ``[conventions] static.known_emitters`` and the repositories named
like a service (``[conventions] service_prefix``: :meth:`Conventions.is_service_name`).

Mapping tables: object literals with computed keys (or named ``*_MAPPING``) whose keys and
values resolve to typed values; each entry is a follow-up edge (job -> event -> websocket
message), and websocket messages count the entries mapping to them as producers.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tools.mesh_index.linked import MappingRec, OutcomeRec, SiteRec
from tools.mesh_index.sql_sites import evaluate, evaluate_list, sql_facts
from tools.mesh_index.symbols import Decl
from tools.mesh_index.workspace import migration_order

if TYPE_CHECKING:
    from tools.mesh_index.sites import Linker


def _order(path: str, symbol: str | None) -> int:
    order = migration_order(path)
    if not order and symbol:
        m = re.search(r"(\d{8,})", symbol.split(".")[0])
        order = int(m.group(1)) if m else 0
    return order


def _uses_argv(expr: Any) -> bool:
    return "argv" in json.dumps(expr)


def _raw(expr: Any) -> str:
    return json.dumps(expr)[:160]


def _render(linker: Linker, expr: Any, path: str) -> str | None:
    """Text of a SQL template string with its substitutions resolved; None when it is built from
    function parameters (the callers' ``queryRunner.query(f(...))`` are evaluated instead)."""
    if expr[0] == "s":
        return expr[1]
    out = []
    for part in expr[1] if expr[0] == "t" else []:
        if isinstance(part, str):
            out.append(part)
            continue
        if part[0] == "p":
            return None
        vals = linker.r.eval(part, path)
        out.append(vals[0].value if len(vals) == 1 else "${" + (".".join(part[1]) if part[0] == "r" else "?") + "}")
    return "".join(out)


class _Definitions:
    """The last definition of each SQL function, per repository and over the whole workspace."""

    def __init__(self) -> None:
        self.by_repo: dict[tuple[str, str], tuple[tuple[int, str], int, list[dict[str, Any]]]] = {}
        self.latest: dict[str, tuple[tuple[int, str], int, list[dict[str, Any]]]] = {}

    def add(self, repo: str, name: str, order: tuple[int, str], line: int, inserts: list[dict[str, Any]]) -> None:
        for table, key in ((self.by_repo, (repo, name)), (self.latest, name)):
            if key not in table or order >= table[key][0]:
                table[key] = (order, line, inserts)  # type: ignore[index]

    def get(self, repo: str, name: str) -> tuple[tuple[int, str], int, list[dict[str, Any]]] | None:
        return self.by_repo.get((repo, name)) or self.latest.get(name)


def _collect(linker: Linker, table: str):
    """(repo, path, order, item, symbol) of every SQL fact: .sql files, strings, evaluated query() calls."""
    tokens = ("insert", "trigger", "function")
    for path in linker.relevant:
        f = linker.facts[path]
        repo = linker.layout.repo_of(path)
        for item in f.get("sql", ()):
            yield repo, path, (_order(path, None), path), item, None
        for expr, line, symbol, parsed in f.get("sql_strings", ()):
            if parsed is None:
                text = _render(linker, expr, path)
                if text is None:
                    continue
                parsed = sql_facts(text, line, symbol, table)
            for item in parsed:
                yield repo, path, (_order(path, symbol), path), item, symbol
    for path, arg, line, symbol in linker.query_calls:
        for v in linker.r.eval(arg, path):
            if any(t in v.value.lower() for t in tokens):
                for item in sql_facts(v.value, line, symbol, table):
                    yield linker.layout.repo_of(path), path, (_order(path, symbol), path), _at_line(item, line), symbol


def _at_line(item: list[Any], line: int) -> list[Any]:
    """SQL built by a function call: every fact is placed at the call (the text has no place in this file)."""
    if item[0] == "fn":
        return ["fn", item[1], line, [{**ins, "line": line} for ins in item[3]]]
    if item[0] == "trg":
        return [*item[:5], line]
    return ["ins", line, {**item[2], "line": line}]


def link_sql(linker: Linker) -> None:
    conv = linker.conv
    table = conv.tables.event_queue
    defs = _Definitions()
    def_paths: dict[tuple[str, str], str] = {}
    triggers: dict[tuple[str, str, str, str], tuple[tuple[int, str], str, str, int, list[Any]]] = {}
    plain: list[tuple[str, int, dict[str, Any], str | None]] = []
    for repo, path, order, item, symbol in _collect(linker, table):
        if item[0] == "fn":
            _tag, name, line, inserts = item
            defs.add(repo, name, order, line, inserts)
            def_paths[(path, name)] = path
        elif item[0] == "trg":
            _tag, tname, ttable, fn, args, line = item
            key = (repo, tname, ttable, json.dumps(args))
            if key not in triggers or order >= triggers[key][0]:
                triggers[key] = (order, path, fn, line, args)
        elif item[0] == "ins":
            plain.append((path, item[1], item[2], symbol))
    emitters = _emitters(linker)
    attached: dict[str, list[str]] = {}
    for (repo, tname, ttable, _a), (_o, path, fn, line, args) in sorted(triggers.items(), key=lambda kv: kv[1][1:]):
        attached.setdefault(fn, []).append(ttable)
        definition = defs.get(repo, fn)
        if definition is None:
            # create_event_queue_record, or a domain variant (create_post_event_queue_record) defined elsewhere
            if (fn in linker.sc.sql_event_functions or table in fn) and args:
                _produce_sql(linker, path, line, tname, "sql_trigger", ["argv", 0], args, None, emitters,
                             {"function": fn, "table": ttable, "trigger": tname,
                              "reason": "function body not found; type taken from its first argument"}, True)
            continue
        for ins in definition[2]:
            if not _uses_argv(ins.get("type")):
                continue
            detail = {"function": fn, "table": ttable, "trigger": tname,
                      "defined_in": f"{definition[0][1]}:{ins['line']}"}
            _produce_sql(linker, path, line, tname, "sql_trigger", ins.get("type"), args,
                         ins.get("target_services"), emitters, detail, False, ins.get("emitter"))
    audit = conv.audit_trigger.lower()
    audits = {name for (_repo, name) in defs.by_repo
              if name == audit or conv.tables.job_audit in attached.get(name, [])}
    finals = {(order[1], line, name): inserts for (_repo, name), (order, line, inserts) in defs.by_repo.items()
              if name not in audits}
    for (path, _line, name), inserts in sorted(finals.items()):
        _function_inserts(linker, path, name, inserts, attached, emitters, outcome=False)
    for name in sorted(audits):
        _audit_outcomes(linker, defs, name, attached, emitters)
    for path, line, ins, symbol in plain:
        _produce_sql(linker, path, line, symbol, "sql_insert", ins.get("type"), [], ins.get("target_services"),
                     emitters, {}, False, ins.get("emitter"))
    if not linker.idx.outcomes:
        _outcomes_from_conventions(linker, emitters)


def _function_inserts(linker: Linker, path: str, name: str, inserts: list[dict[str, Any]],
                      attached: dict[str, list[str]], emitters: list[str], outcome: bool,
                      guessed: bool = False) -> None:
    """Sites of the inserts of a function that do not depend on trigger arguments.

    With ``outcome`` (the audit trigger, computed for one emitter) each site also becomes an
    outcome of that emitter's jobs; ``guessed`` marks a definition taken from another
    repository than the emitter's (heuristic)."""
    for ins in inserts:
        if _uses_argv(ins.get("type")):
            continue
        kind = "sql_trigger" if name in attached else "sql_insert"
        detail = {"function": name, "status": ins.get("status", ""),
                  "table": ",".join(dict.fromkeys(attached.get(name, [])))}
        sites = _produce_sql(linker, path, ins["line"], name, kind, ins.get("type"), [],
                             ins.get("target_services"), emitters, detail, False, ins.get("emitter"))
        if outcome:
            for site, heuristic, emitter in sites:
                linker.idx.outcomes.append(OutcomeRec(site, site.value or "", ins.get("status"),
                                                      emitter or (emitters[0] if emitters else None),
                                                      heuristic or guessed))


def _audit_outcomes(linker: Linker, defs: _Definitions, name: str, attached: dict[str, list[str]],
                    emitters: list[str]) -> None:
    """Outcome events of the audit trigger: for each emitter, the last definition in its own repository
    (where its jobs are written), else the workspace's last definition."""
    repos_of: dict[str, set[str]] = {}
    for key, sites in linker.idx.producers.items():
        if key[0] == "job":
            for s in sites:
                if s.detail.get("emitter") and not s.test_only:
                    repos_of.setdefault(s.detail["emitter"], set()).add(s.repo)
    done: set[tuple[str, int, str]] = set()
    for emitter in emitters or [""]:
        own = {r for (r, n) in defs.by_repo if n == name and r.split("/")[-1] == emitter}
        repos = repos_of.get(emitter, set()) | own
        chosen = [defs.by_repo[(r, name)] for r in sorted(repos) if (r, name) in defs.by_repo]
        guessed = not chosen  # no definition where this emitter's jobs are written: the workspace's last
        for (_order, path), _line, inserts in chosen or [defs.latest[name]]:
            key = (path, _line, emitter)
            if key not in done:
                done.add(key)
                _function_inserts(linker, path, name, inserts, attached, [emitter] if emitter else [], outcome=True,
                                  guessed=guessed)


def _outcomes_from_conventions(linker: Linker, emitters: list[str]) -> None:
    """No audit trigger in the workspace: job outcome names from [conventions] (heuristic, not producers)."""
    conv = linker.conv
    reason = (f"{conv.audit_trigger} was not found in the workspace's SQL; names from [conventions] "
              "job_success_types / job_failure_types")
    for names, status in ((conv.job_success_types, conv.statuses.completed),
                          (conv.job_failure_types, conv.statuses.failed)):
        for template in names:
            if "{domain}" in template:
                values = [(template.replace("{domain}", conv.domain_of(e)), e) for e in emitters]
            else:
                values = [(template, None)]
            for value, emitter in values:
                site = SiteRec("", "(conventions)", 0, conv.audit_trigger, "sql_trigger", "heuristic", False, value,
                               {"reason": reason, "status": status, **({"emitter": emitter} if emitter else {})})
                linker.idx.outcomes.append(OutcomeRec(site, value, status, emitter, True, names_guessed=True))


def _emitters(linker: Linker) -> list[str]:
    found = set(linker.known_emitters)
    for key, sites in linker.idx.producers.items():
        if key[0] != "job":
            continue
        for s in sites:
            if s.detail.get("emitter") and not s.test_only:
                found.add(s.detail["emitter"])
    for wrapper in linker.idx.wrappers.values():
        if wrapper.detail.get("emitter"):
            found.add(wrapper.detail["emitter"])
    for path in linker.relevant:
        repo = linker.layout.repo_of(path).split("/")[-1]
        if linker.conv.is_service_name(repo):
            found.add(repo)
    return sorted(found)


def _produce_sql(linker: Linker, path: str, line: int, symbol: str | None, kind: str, type_expr: Any,
                 argv: list[Any], targets_expr: Any, emitters: list[str], detail: dict[str, str],
                 force_heuristic: bool, emitter_expr: Any = None) -> list[tuple[Any, bool, str | None]]:
    """Producer sites of the values of ``type_expr`` (``TG_ARGV`` bound to the trigger's ``argv``).

    The emitter is the insert's ``emitter`` column when it evaluates to one value (a literal,
    ``TG_ARGV[1]``), else the emitter the value was computed for (``NEW.emitter``), else, when
    the function body is unknown, the trigger's second argument."""
    values = evaluate(type_expr, argv, emitters) if type_expr is not None else []
    values = [v for v in values if "${" not in v[0]]
    if not values:
        linker.unresolved("event", path, line, symbol, kind, ["?", _raw(type_expr)], **detail)
        return []
    targets = evaluate_list(targets_expr, argv, emitters)
    columns = {v for v, _h, _e in evaluate(emitter_expr, argv, [])} if emitter_expr is not None else set()
    written = next(iter(columns)) if len(columns) == 1 else ""
    trigger_emitter = evaluate(argv[1], [], []) if emitter_expr is None and len(argv) > 1 else []
    guessed = trigger_emitter[0][0] if trigger_emitter else ""
    out = []
    seen = linker.sql_seen
    for value, heuristic, emitter in values:
        known = seen.get((path, line, value, emitter))
        if known is not None:  # produced already (another emitter choosing the same definition)
            out.append(known)
            continue
        streams = sorted({linker.idx.stream_key(t) for t, _h, em in targets if em is None or em == emitter})
        conf = "heuristic" if heuristic or force_heuristic else "exact"
        site = linker.site(path, line, symbol, kind, conf, value, stream=", ".join(streams),
                           emitter=written or emitter or guessed, **detail)
        linker.produce(("event", value), site)
        for s in streams:
            linker.idx.add_route(("event", value), ("stream", s), f"SQL {kind} target_services")
        seen[(path, line, value, emitter)] = (site, heuristic, emitter)
        out.append((site, heuristic, emitter))
    return out


def link_mappings(linker: Linker) -> None:
    suffixes = linker.sc.mapping_table_suffixes
    for path in linker.relevant:
        for name, info in linker.facts[path].get("objects", {}).items():
            computed = any(e[0] == "k" and not isinstance(e[1], str) for e in info[1])
            if not (computed or any(name.endswith(s) for s in suffixes)) or all(e[0] == "..." for e in info[1]):
                continue  # not a table, or only merges other tables (their entries are linked already)
            entries = []
            for keys, values, line in linker.r.mapping_entries(Decl(path, name, "object")):
                for k in keys:
                    kk = linker.kind_of(k, None)
                    for v in values:
                        vk = linker.kind_of(v, None)
                        if vk is None or vk in ("queue", "stream"):
                            continue
                        entries.append(((kk or "key", k.value), (vk, v.value), line, v.heuristic or kk is None))
            if not entries:
                continue
            rec = MappingRec(name, linker.site(path, info[0], name, "mapping"), entries)
            linker.idx.mappings.append(rec)
            for from_key, to_key, line, heuristic in entries:
                linker.idx.mapping_from.setdefault(from_key, []).append((rec, to_key, line, heuristic))
    # an entry is not a producer: the code that reads the table and writes or sends is (its site has `via`)
