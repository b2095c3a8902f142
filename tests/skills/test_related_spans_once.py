"""Related skills are looked up on every static, trace and map result: a runbook's code spans are
found once per body, not on every call (they were 95% of a repeated analyze_impact's server time)."""

from __future__ import annotations

from resources.skills import load_skills
from tools.skills import related
from tools.skills.related import TargetFacts, rank_related


def test_a_runbooks_spans_are_parsed_once_for_many_lookups(monkeypatch) -> None:
    calls = []
    real = related.code_spans
    monkeypatch.setattr(related, "code_spans", lambda body, first=1: calls.append(1) or real(body, first))
    related._span_tokens_cached.cache_clear()
    bundled = load_skills(strict=False)
    facts = TargetFacts(names=["jobs_outbox", "no.such.name"], tables=["event_queue"])
    first = rank_related(facts, [], bundled)
    parsed_once = len(calls)
    for _ in range(20):
        assert rank_related(facts, [], bundled) == first
    assert first and parsed_once <= 2 * len(bundled) and len(calls) == parsed_once
