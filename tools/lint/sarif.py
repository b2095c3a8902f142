"""SARIF 2.1.0 for code-scanning UIs: one rule per lint code, one result per finding.

Each result has the finding's file:line as its location (relative to ``%SRCROOT%``, the
workspace), the evidence chain as ``relatedLocations`` (each with its note), the fix and the
heuristic flag in ``properties``, and the baseline fingerprint in ``partialFingerprints``.
Evidence that is not a file of the workspace (a setting) is kept in the message only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server import __version__
from tools.lint.model import Finding
from tools.lint.rules import RULES

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"info": "note", "warning": "warning", "error": "error"}
ROOT = "%SRCROOT%"


def _is_file(path: str) -> bool:
    return bool(path) and not path.startswith("(")


def _location(file: str, line: int, note: str | None = None, ident: int | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": file, "uriBaseId": ROOT}}
    if line >= 1:
        physical["region"] = {"startLine": line}
    loc: dict[str, Any] = {"physicalLocation": physical}
    if ident is not None:
        loc["id"] = ident
    if note:
        loc["message"] = {"text": note}
    return loc


def _rule_name(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("-"))


def _result(finding: Finding, rule_index: int) -> dict[str, Any]:
    related = [_location(e.file, e.line, e.note, i) for i, e in enumerate(finding.evidence, start=1)
               if _is_file(e.file)]
    settings = [e for e in finding.evidence if not _is_file(e.file)]
    text = finding.message + "".join(f" [{e.file}: {e.note}]" for e in settings) + f" Fix: {finding.fix}"
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": text},
        "partialFingerprints": {"meshLint/v1": finding.fingerprint},
        "properties": {"fix": finding.fix, "heuristic": finding.heuristic, "subject": finding.subject,
                       "severity": finding.severity},
    }
    if _is_file(finding.file):
        result["locations"] = [_location(finding.file, finding.line)]
    if related:
        result["relatedLocations"] = related
    return result


def to_sarif(findings: list[Finding], workspace: Path) -> dict[str, Any]:
    index = {rule.code: i for i, rule in enumerate(RULES)}
    rules = [{
        "id": rule.code,
        "name": _rule_name(rule.code),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.description},
        "help": {"text": rule.help},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"precision": "medium" if rule.heuristic else "high", "heuristic": rule.heuristic,
                       "tags": ["mesh-mcp", "flows"]},
    } for rule in RULES]
    root = Path(workspace).resolve().as_uri().rstrip("/") + "/"
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "mesh-mcp lint", "version": __version__, "rules": rules,
                                "informationUri": "https://modelcontextprotocol.io"}},
            "originalUriBaseIds": {ROOT: {"uri": root}},
            "results": [_result(f, index[f.code]) for f in findings],
            "columnKind": "unicodeCodePoints",
        }],
    }


def write_sarif(path: Path, findings: list[Finding], workspace: Path) -> None:
    Path(path).write_text(json.dumps(to_sarif(findings, workspace), indent=2, ensure_ascii=False) + "\n")


