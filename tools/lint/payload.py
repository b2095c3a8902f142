"""payload-wrong-level: a handler reading job.data.<field> where <field> is not an envelope field.

The job data a worker receives is the outbox envelope (``{payload, emitter, emitterId, ...}``);
a business field read from it directly (``job.data.userId``, ``(job.data as any).userId``,
``const { userId } = job.data``) is ``undefined`` at run time. Reads are found by
:func:`tools.verify.facts.handler_facts` (the same facts as verify_flow's ``reads_envelope``);
envelope fields are ``job_envelope_fields`` plus ``[conventions.lint] envelope_extra_fields``.
"""

from __future__ import annotations

from tools.lint.context import LintContext, ev
from tools.lint.model import Evidence, Finding
from tools.verify.facts import handler_facts

_DIRECT = ("direct_queue",)


def check(ctx: LintContext) -> list[Finding]:
    allowed = set(ctx.static.job_envelope_fields) | set(ctx.lint.envelope_extra_fields)
    payload = ctx.static.job_payload_field
    findings: list[Finding] = []
    for handler in sorted(ctx.idx.handlers.values(), key=lambda h: h.key):
        if handler.site.test_only:
            continue
        kinds = {s.kind for job in handler.jobs for s in ctx.idx.producers.get(("job", job), ()) if not s.test_only}
        if kinds and kinds <= set(_DIRECT):
            continue  # pushed straight to the queue, not through the outbox: its data is not the envelope
        pf = ctx.parse(handler.key[0])
        if pf is None:
            continue
        facts = handler_facts(pf, handler.key[1], ctx.static)
        reads = [r for r in facts.envelope_reads if r.field not in allowed]
        if not reads:
            continue
        fields = sorted({r.field for r in reads})
        cast = any(" as " in r.text for r in reads)
        jobs = ", ".join(sorted(handler.jobs)) or "?"
        evidence = [ev(handler.site, f"handler {handler.key[1]} of {jobs}")]
        evidence += [Evidence(file=handler.key[0], line=r.line,
                              note=f"reads '{r.field}' from the envelope: {r.text.strip()[:120]}") for r in reads]
        findings.append(Finding(
            code="payload-wrong-level", severity="error", file=handler.key[0], line=reads[0].line,
            message=f"handler {handler.key[1]} reads {', '.join(fields)} from job.{ctx.static.job_data_field} (the "
                    f"envelope), which has no such field{' (hidden behind a cast)' if cast else ''}: the value is "
                    "undefined at run time",
            fix=f"read {', '.join(fields)} from job.{ctx.static.job_data_field}.{payload} instead",
            evidence=evidence, subject=f"handler:{handler.key[1]}",
        ))
    return findings
