"""status-precondition (heuristic): an UPDATE whose status condition cannot hold when its code runs.

The outbox runner claims a row (``PENDING`` -> ``PROCESSING``) before it pushes it, and marks it
``COMPLETED`` right after the push; so code that runs *because* of the push (a job handler or
worker, a post-processor) never sees its row in a state the runner has already left:

| runs in | table | impossible ``WHERE status = ...`` |
| --- | --- | --- |
| handler, worker | jobs_outbox | pending |
| post-processor | jobs_outbox | pending, processing |
| post-processor | event_queue | pending |

SQL is read from the string literals of the consumer classes the index knows (handlers,
workers, post-processors); tables and statuses come from ``[conventions]``. A status given as a
bound parameter is not judged. Heuristic: the rule rests on the runner's order, not on the
row the statement targets.
"""

from __future__ import annotations

import re

from tools.lint.context import LintContext
from tools.lint.model import Evidence, Finding
from tools.verify.tsparse import CLASS_NODES, line_of, walk

_UPDATE = re.compile(r"\bupdate\s+(?:\w+\.)?\"?(\w+)\"?\s+set\b.*?\bwhere\b(.*)", re.I | re.S)


def _rules(ctx: LintContext) -> dict[str, dict[str, list[str]]]:
    t, s = ctx.conventions.tables, ctx.conventions.statuses
    return {
        "handler": {t.jobs_outbox: [s.pending]},
        "worker": {t.jobs_outbox: [s.pending]},
        "post_processor": {t.jobs_outbox: [s.pending, s.processing], t.event_queue: [s.pending]},
    }


def _conditions(where: str, column: str) -> list[str]:
    col = rf"(?:\w+\.)?\"?{re.escape(column)}\"?"
    found = re.findall(rf"{col}\s*=\s*'(\w+)'", where, re.I)
    for group in re.findall(rf"{col}\s+in\s*\(([^)]*)\)", where, re.I):
        found += re.findall(r"'(\w+)'", group)
    return found


def check(ctx: LintContext) -> list[Finding]:
    rules = _rules(ctx)
    roles: dict[tuple[str, str], str] = {}
    for key, rec in ctx.idx.handlers.items():
        if not rec.site.test_only:
            roles[key] = "handler"
    for key, rec in ctx.idx.workers.items():
        if not rec.site.test_only:
            roles[key] = "worker"
    for key, rec in ctx.idx.post_processors.items():
        if not rec.site.test_only and rec.started:
            roles[key] = "post_processor"
    tables = {t for r in rules.values() for t in r}
    column = ctx.conventions.columns.status
    files = sorted({f for f, _c in roles})
    findings = []
    for rel in files:
        text = ctx.text(rel).lower()
        if "update" not in text or not any(t.lower() in text for t in tables):
            continue
        pf = ctx.parse(rel)
        if pf is None:
            continue
        for cls in walk(pf.root):
            if cls.type not in CLASS_NODES:
                continue
            name = pf.text(cls.child_by_field_name("name"))
            role = roles.get((rel, name))
            if role is None:
                continue
            for node in walk(cls):
                if node.type not in ("string", "template_string"):
                    continue
                match = _UPDATE.search(pf.text(node))
                if match is None:
                    continue
                table = match.group(1)
                bad = [st for st in _conditions(match.group(2), column)
                       if st in rules[role].get(table, []) or st.upper() in rules[role].get(table, [])]
                if not bad:
                    continue
                statement = " ".join(pf.text(node).strip("`'\"").split())[:160]
                findings.append(Finding(
                    code="status-precondition", severity="warning", file=rel, line=line_of(node), heuristic=True,
                    message=f"{role.replace('_', '-')} {name} runs UPDATE {table} ... WHERE {column} = "
                            f"'{bad[0]}', but it runs after the outbox runner has moved the row past '{bad[0]}' "
                            "(it claims a row before pushing it and completes it right after): the UPDATE matches "
                            "no row (heuristic)",
                    fix=f"match the status the row has when {name} runs (or drop the {column} condition)",
                    evidence=[Evidence(file=rel, line=line_of(node), note=statement),
                              Evidence(file=rel, line=line_of(cls), note=f"{name} is a {role.replace('_', '-')} "
                                                                         "(runs after the push)")],
                    subject=f"status:{name}:{table}:{bad[0]}",
                ))
    return findings
