"""Does the audit trigger's ``INSERT INTO event_queue`` fit the table it writes to? Read live from ``pg_catalog``.

The trigger function of ``job_audit`` (``notify_job_audit_status_change`` by default) writes the
job-outcome row. When a migration makes an ``event_queue`` column ``NOT NULL`` without a default
(``"emitterId"`` in the reference system) before the trigger starts setting it, the trigger's
``INSERT`` raises on every COMPLETED/FAILED update of ``job_audit``: the worker swallows the
error and the audit row stays PROCESSING although the job ran.

:func:`check_audit_trigger` reads, in one read-only bounded transaction each:

1. every user trigger on the job_audit table, enabled, with its function's source
   (``pg_proc.prosrc``, cut at :data:`SOURCE_MAX_CHARS`) and language;
2. the columns of event_queue that an ``INSERT`` must set: ``NOT NULL``, no default, not an
   identity nor a generated column;
3. the enabled ``BEFORE INSERT`` row triggers of event_queue (they may fill a column the
   ``INSERT`` leaves out: then an omission is a doubt, not a proof).

The function's source is read with its comments removed; each literal ``INSERT INTO
<event_queue>`` (optionally schema-qualified, quoted or not) is checked: a column list that
leaves out a required column is a **problem**. An ``INSERT`` without a column list, a source
cut at the cap, or a function whose only writes are dynamic (``EXECUTE``) cannot be read:
it is reported as **unreadable**, never as fine. :meth:`AuditTriggerCheck.finding` says one of three
things: a cause found, could not be checked (and why: an unreadable write, or no trigger function of
job_audit holding a literal INSERT into event_queue, e.g. one writing through a helper called with
``PERFORM``, or no trigger at all), or checked and fine. Used by ``mesh-mcp doctor``
(:mod:`tools.outbox.doctor`) and by the trace of a job whose audit row was not closed
(:mod:`tools.outbox.trace`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from server.config import Settings
from server.connections import Connections

SOURCE_MAX_CHARS = 200_000
"""the most characters of one trigger function's source read (a longer one is reported unreadable)"""

MAX_TRIGGERS = 50

_TRIGGERS_SQL = """
SELECT t.tgname AS trigger_name, p.oid::regprocedure::text AS function, l.lanname AS language,
       left(p.prosrc, %s) AS source, length(p.prosrc) AS source_length
FROM pg_trigger t
JOIN pg_proc p ON p.oid = t.tgfoid
JOIN pg_language l ON l.oid = p.prolang
WHERE t.tgrelid = to_regclass(quote_ident(%s)) AND NOT t.tgisinternal AND t.tgenabled <> 'D'
ORDER BY t.tgname
"""

_REQUIRED_SQL = """
SELECT a.attname AS column_name, a.attnum AS position
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass(quote_ident(%s)) AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attnotnull AND d.oid IS NULL AND a.attidentity = '' AND a.attgenerated = ''
ORDER BY a.attnum
"""

# tgtype bits: 1 = ROW, 2 = BEFORE, 4 = INSERT
_FILLERS_SQL = """
SELECT t.tgname AS trigger_name
FROM pg_trigger t
WHERE t.tgrelid = to_regclass(quote_ident(%s)) AND NOT t.tgisinternal AND t.tgenabled <> 'D'
  AND (t.tgtype & 7) = 7
ORDER BY t.tgname
"""

_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
_INSERT = re.compile(rf"\bINSERT\s+INTO\s+(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)\s*(?P<paren>\()?", re.I)
_EXECUTE = re.compile(r"\bEXECUTE\b", re.I)


def _ident_value(token: str) -> str:
    """An SQL identifier as PostgreSQL resolves it: quoted kept as is, unquoted folded to lower case."""
    token = token.strip()
    if token.startswith('"') and token.endswith('"'):
        return token[1:-1].replace('""', '"')
    return token.lower()


def _column_list(text: str, start: int) -> list[str] | None:
    """The identifiers of the parenthesised column list opening at ``start`` (after the '('), or None."""
    depth, i, quoted = 1, start, False
    while i < len(text):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    else:
        return None
    inner = text[start:i]
    parts = [p.strip() for p in re.split(r',(?=(?:[^"]*"[^"]*")*[^"]*$)', inner)]
    if not parts or any(not re.fullmatch(_IDENT, p) for p in parts):
        return None
    return [_ident_value(p) for p in parts]


@dataclass(frozen=True)
class InsertRead:
    """One ``INSERT INTO event_queue`` of a function: its columns, or why they could not be read."""

    columns: list[str] | None
    why_unreadable: str | None = None


def inserts_into(source: str, table: str) -> list[InsertRead]:
    """Every literal ``INSERT INTO <table>`` of ``source`` (comments removed)."""
    text = _COMMENTS.sub(" ", source)
    out: list[InsertRead] = []
    for match in _INSERT.finditer(text):
        name = _ident_value(re.split(r"\s*\.\s*(?=[^.]*$)", match.group("name"))[-1])
        if name != table:
            continue
        if match.group("paren") is None:
            out.append(InsertRead(None, "the INSERT has no column list (values given by position)"))
            continue
        columns = _column_list(text, match.end())
        out.append(InsertRead(columns, None if columns is not None else "its column list could not be parsed"))
    return out


@dataclass(frozen=True)
class TriggerProblem:
    """A trigger function whose INSERT into event_queue leaves out required columns: it raises when it runs."""

    trigger: str
    function: str
    missing: list[str]


@dataclass(frozen=True)
class TriggerFinding:
    """What the live check says, one of three: ``cause`` (a trigger proven broken: ``text`` names it),
    ``unchecked`` (could not be checked: ``text`` says why) or ``fine`` (checked: every write fits)."""

    state: Literal["cause", "unchecked", "fine"]
    text: str


@dataclass
class AuditTriggerCheck:
    """What :func:`check_audit_trigger` found on one service database."""

    service: str
    audit_table: str
    event_table: str
    writers: list[str] = field(default_factory=list)
    """``trigger -> function`` of the job_audit triggers that insert into event_queue"""
    problems: list[TriggerProblem] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    """why a trigger function's inserts could not be checked (each names the function)"""
    fillers: list[str] = field(default_factory=list)
    """BEFORE INSERT row triggers of event_queue (may fill an omitted column)"""
    triggers: list[str] = field(default_factory=list)
    """``trigger -> function`` of every enabled user trigger of job_audit read"""

    @property
    def raising(self) -> bool:
        """The check proves the trigger raises: a required column is left out and no trigger may fill it."""
        return bool(self.problems) and not self.fillers

    def cause(self) -> str | None:
        """One sentence naming the broken trigger, or None when nothing is proven wrong."""
        if not self.problems:
            return None
        parts = [f"trigger {p.trigger} on {self.audit_table} runs {p.function}, whose INSERT INTO {self.event_table} "
                 f"leaves out {', '.join(_quoted(c) for c in p.missing)} (NOT NULL, no default)" for p in self.problems]
        sentence = "; ".join(parts) + ": it raises on every COMPLETED/FAILED update of " + self.audit_table
        if self.fillers:
            sentence += (f" unless the BEFORE INSERT trigger(s) {', '.join(self.fillers)} of {self.event_table} fill "
                         "it (not read)")
        return sentence

    def finding(self) -> TriggerFinding:
        """A cause found, could not be checked (and why), or checked and fine: never "fine" by default."""
        cause = self.cause()
        if cause:
            return TriggerFinding("cause", cause)
        if self.unreadable:
            return TriggerFinding("unchecked", "; ".join(self.unreadable))
        if not self.triggers:
            return TriggerFinding("unchecked", f"{self.audit_table} has no enabled trigger: nothing writes the "
                                               f"job-outcome row into {self.event_table}")
        if not self.writers:
            return TriggerFinding("unchecked", f"no trigger function of {self.audit_table} "
                                               f"({', '.join(self.triggers)}) holds a literal INSERT INTO "
                                               f"{self.event_table}: it writes through another function (PERFORM, "
                                               "SELECT) or dynamic SQL, or not at all (not read)")
        return TriggerFinding("fine", f"the INSERT INTO {self.event_table} of {', '.join(self.writers)} sets every "
                                      "NOT NULL column without a default")

    def migration(self, emitter_id_column: str, job_id_column: str) -> str:
        """The migration to add: replace the function so its INSERT sets each missing column."""
        if not self.problems:
            return ""
        functions = sorted({p.function for p in self.problems})
        columns = sorted({c for p in self.problems for c in p.missing})
        sets = []
        for col in columns:
            if col == emitter_id_column:
                sets.append(f"{_quoted(col)} = NEW.{job_id_column}::uuid (the job id, as the later trigger version "
                            "does)")
            else:
                sets.append(f"{_quoted(col)}")
        return (f"add a migration that replaces {', '.join(functions)} (CREATE OR REPLACE FUNCTION) so that its "
                f"INSERT INTO {self.event_table} sets {'; '.join(sets)}; or one that gives "
                f"{', '.join(_quoted(c) for c in columns)} a default. Then close the audit rows left PROCESSING "
                "(trace_job names them)")


def _quoted(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) else '"' + name.replace('"', '""') + '"'


async def check_audit_trigger(connections: Connections, settings: Settings, service: str) -> AuditTriggerCheck:
    """Read the job_audit triggers and the event_queue columns of ``service``; raises MeshError when it cannot."""
    tables = settings.conventions.tables
    result = AuditTriggerCheck(service=service, audit_table=tables.job_audit, event_table=tables.event_queue)
    triggers = await connections.read(service, _TRIGGERS_SQL, (SOURCE_MAX_CHARS, tables.job_audit),
                                      max_rows=MAX_TRIGGERS, catalog=True)
    required = await connections.read(service, _REQUIRED_SQL, (tables.event_queue,), max_rows=2000, catalog=True)
    fillers = await connections.read(service, _FILLERS_SQL, (tables.event_queue,), max_rows=MAX_TRIGGERS,
                                     catalog=True)
    needed = [str(r["column_name"]) for r in required.rows]
    result.fillers = [str(r["trigger_name"]) for r in fillers.rows]
    if triggers.truncated:
        result.unreadable.append(f"{tables.job_audit} has more than {MAX_TRIGGERS} triggers: only the first were read")
    for row in triggers.rows:
        trigger, function, source = str(row["trigger_name"]), str(row["function"]), row["source"] or ""
        result.triggers.append(f"{trigger} -> {function}")
        if row["language"] not in ("plpgsql", "sql"):
            if tables.event_queue in source:
                result.unreadable.append(f"{function} is written in {row['language']}: not read")
            continue
        inserts = inserts_into(source, tables.event_queue)
        if (row["source_length"] or 0) > SOURCE_MAX_CHARS:
            result.unreadable.append(f"{function}'s source is longer than {SOURCE_MAX_CHARS} characters: read in part")
        if not inserts:
            if _EXECUTE.search(_COMMENTS.sub(" ", source)) and tables.event_queue in source:
                result.unreadable.append(f"{function} writes through dynamic SQL (EXECUTE): not read")
            continue
        result.writers.append(f"{trigger} -> {function}")
        missing: list[str] = []
        for insert in inserts:
            if insert.columns is None:
                result.unreadable.append(f"{function}: {insert.why_unreadable}")
                continue
            missing += [c for c in needed if c not in insert.columns and c not in missing]
        if missing:
            result.problems.append(TriggerProblem(trigger=trigger, function=function, missing=missing))
    return result
