"""SARIF 2.1.0 output validated against the schema shipped in tests/lint (OASIS SARIF 2.1.0, rtm.5)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tools.lint.model import Evidence, Finding, LintReport
from tools.lint.rules import CODES, RULES
from tools.lint.sarif import to_sarif, write_sarif

SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())


def validate(document: dict) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(document)


def test_the_schema_really_rejects_a_broken_log() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]})  # a driver needs a name
    with pytest.raises(jsonschema.ValidationError):
        validate({"version": "2.0.0", "runs": []})


def test_sarif_of_the_fixture_is_valid_and_complete(report: LintReport, workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "lint.sarif"
    write_sarif(target, report.findings, workspace)
    document = json.loads(target.read_text())
    validate(document)
    [run] = document["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(CODES) and len({r["id"] for r in rules}) == len(RULES)
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == workspace.resolve().as_uri() + "/"
    results = run["results"]
    assert len(results) == len(report.findings)
    for result, finding in zip(results, report.findings, strict=True):
        assert result["ruleId"] == finding.code and rules[result["ruleIndex"]]["id"] == finding.code
        assert result["level"] == {"info": "note", "warning": "warning", "error": "error"}[finding.severity]
        assert result["partialFingerprints"]["meshLint/v1"] == finding.fingerprint
        assert result["properties"]["fix"] == finding.fix
        if finding.file.startswith("("):
            assert "locations" not in result
            continue
        [loc] = result["locations"]
        assert loc["physicalLocation"]["artifactLocation"] == {"uri": finding.file, "uriBaseId": "%SRCROOT%"}
        assert loc["physicalLocation"].get("region", {}).get("startLine", 0) == finding.line
        related = result.get("relatedLocations", [])
        assert [r["message"]["text"] for r in related] == [e.note for e in finding.evidence
                                                          if not e.file.startswith("(")]
        assert all((workspace / r["physicalLocation"]["artifactLocation"]["uri"]).is_file() for r in related)
    never = next(r for r in results if r["ruleId"] == "consumer-never-matches")
    assert any("near-miss: 'order:job:outbox:failure'" in r["message"]["text"] for r in never["relatedLocations"])


def test_sarif_of_a_finding_without_a_line_or_a_file(tmp_path: Path) -> None:
    finding = Finding(code="catalogue-orphan", severity="info", file="(catalogue)", line=0, message="m", fix="f",
                      evidence=[Evidence(file="a.ts", line=0, note="whole file"),
                                Evidence(file="(conventions)", line=0, note="a setting")],
                      subject="queue:x").finish()
    document = to_sarif([finding], tmp_path)
    validate(document)
    [result] = document["runs"][0]["results"]
    assert "locations" not in result and "[(conventions): a setting]" in result["message"]["text"]
    assert result["relatedLocations"] == [{"physicalLocation": {"artifactLocation": {"uri": "a.ts",
                                                                                     "uriBaseId": "%SRCROOT%"}},
                                           "id": 1, "message": {"text": "whole file"}}]
