"""Result models of lint_flows: findings with stable codes and the chain of sites that proves them.

A finding's ``fingerprint`` depends on its code, file, subject and message-independent
facts only (never on line numbers), so a baseline keeps matching after unrelated edits
move the code.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from tools.lint.rules import SEVERITIES
from tools.mesh_index.model import IndexInfo
from tools.paging import Page

Severity = Literal["info", "warning", "error"]


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


class Evidence(BaseModel):
    """One site of the chain that proves a finding."""

    file: str = Field(description="path relative to the workspace ('(conventions)' for a configured name)")
    line: int = Field(description="1-based line (0 when the evidence is a whole file or a setting)")
    note: str = Field(description="what this site shows")


class Finding(BaseModel):
    code: str = Field(description="stable rule id (see docs/lint-flows.md)")
    severity: Severity
    file: str = Field(description="where to fix it, relative to the workspace")
    line: int
    message: str = Field(description="what is wrong, with the values involved")
    fix: str = Field(description="what to do, in one sentence")
    evidence: list[Evidence] = Field(default_factory=list, description="file:line sites proving the finding")
    heuristic: bool = Field(default=False, description="inferred (names, timing, changelogs): verify before acting")
    subject: str = Field(description="what the finding is about (kind:value, class, migration, key)")
    fingerprint: str = Field(default="", description="stable id used by baselines (no line numbers)")
    also_about: list[str] = Field(default_factory=list, exclude=True,
                                  description="other subjects this finding explains (their orphans are not repeated)")

    def finish(self) -> Finding:
        if not self.fingerprint:
            raw = "\x1f".join((self.code, self.file, self.subject))
            self.fingerprint = hashlib.sha1(raw.encode()).hexdigest()[:16]
        return self

    def sort_key(self) -> tuple[object, ...]:
        return (-severity_rank(self.severity), self.code, self.file, self.line, self.subject, self.message)


class LintSummary(BaseModel):
    total: int
    by_severity: dict[str, int]
    by_code: dict[str, int]
    baselined: int = Field(default=0, description="findings hidden because the baseline accepts them")
    below_min_severity: int = Field(default=0, description="findings hidden by min_severity")


class LintReport(BaseModel):
    """Answer of lint_flows."""

    findings: list[Finding]
    summary: LintSummary
    codes: list[str] = Field(description="codes that were checked")
    min_severity: Severity
    notes: list[str] = Field(default_factory=list, description="what could not be read, caveats")
    index: IndexInfo
    page: Page | None = Field(default=None, description="which findings this answer holds (the MCP tool pages them)")

    def summary_text(self) -> str:
        from tools.lint.render import report_text

        return report_text(self)
