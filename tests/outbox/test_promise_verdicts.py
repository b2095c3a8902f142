"""Promise: a trace's verdict is the first finding of the worst severity present, never ``ok`` while a
real finding exists; each code's default next step comes from the catalogue."""

from __future__ import annotations

import pytest

from tools.outbox.verdicts import CATALOGUE, GROUP_PRIORITY, SEVERITY_RANK, overall, ranked, verdict


def test_verdict_uses_the_catalogue_next_step_unless_given() -> None:
    v = verdict("in_dlq", "error", "dead-lettered", hop="group")
    assert (v.code, v.severity, v.sentence, v.hop) == ("in_dlq", "error", "dead-lettered", "group")
    assert v.next_step == CATALOGUE["in_dlq"][1]
    assert verdict("in_dlq", "error", "x", "do this").next_step == "do this"
    assert verdict("ok", "ok", "fine").hop is None


def test_overall_is_ok_only_without_real_findings() -> None:
    assert overall([], "all good").model_dump() == verdict("ok", "ok", "all good").model_dump()
    only_ok = [verdict("ok", "info", "hop fine")]
    assert overall(only_ok, "all good").code == "ok" and overall(only_ok, "all good").sentence == "all good"
    info = verdict("in_pel", "info", "still processing")
    assert overall([info], "all good") is info  # an info finding is still a finding, not ok


def test_overall_is_the_first_finding_of_the_worst_severity() -> None:
    w1 = verdict("in_pel", "warning", "w1")
    e1 = verdict("pushed_not_consumed", "error", "e1")
    e2 = verdict("in_dlq", "error", "e2")
    i1 = verdict("pending_in_outbox", "info", "i1")
    assert overall([w1, e1, e2, i1], "ok") is e1
    assert overall([i1, w1], "ok") is w1
    assert overall([verdict("ok", "ok", "x"), i1], "ok") is i1


def test_ranked_is_worst_first_keeping_chain_order_and_drops_ok() -> None:
    w1, e1, i1, e2, w2 = (verdict("in_pel", "warning", "w1"), verdict("in_dlq", "error", "e1"),
                          verdict("pending_in_outbox", "info", "i1"), verdict("trimmed", "error", "e2"),
                          verdict("dead_consumer", "warning", "w2"))
    assert ranked([w1, e1, verdict("ok", "ok", "fine"), i1, e2, w2]) == [e1, e2, w1, w2, i1]
    assert ranked([]) == []


def test_severity_and_group_rankings() -> None:
    assert sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__) == ["error", "warning", "info", "ok"]
    order = sorted(GROUP_PRIORITY, key=GROUP_PRIORITY.__getitem__)
    assert order[:3] == ["in_dlq", "dead_consumer", "idempotency_lock_stale"] and order[-1] == "ok"


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_every_code_has_a_meaning_and_a_next_step(code: str) -> None:
    meaning, next_step = CATALOGUE[code]
    assert meaning.endswith(".") and next_step
