"""The user doc lists every verdict code with the meaning and next step the tools return."""

from __future__ import annotations

import typing

from tests.helpers import REPO_ROOT
from tools.outbox.model import VerdictCode
from tools.outbox.verdicts import CATALOGUE, EVIDENCE


def test_every_verdict_code_is_documented_as_returned() -> None:
    doc = (REPO_ROOT / "docs" / "runtime-diagnosis.md").read_text(encoding="utf-8")
    codes = typing.get_args(VerdictCode)
    assert set(codes) == set(CATALOGUE)
    for code in codes:
        meaning, next_step = CATALOGUE[code]
        assert f"| `{code}` | {meaning} | {next_step} |" in doc, code


def test_every_verdict_code_has_its_evidence_rule_documented() -> None:
    doc = (REPO_ROOT / "docs" / "runtime-diagnosis.md").read_text(encoding="utf-8")
    assert set(EVIDENCE) == set(CATALOGUE)
    for code, rule in EVIDENCE.items():
        assert f"| `{code}` | {rule} |" in doc, code
