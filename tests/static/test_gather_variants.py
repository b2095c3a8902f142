"""Variants of the gather workspace a name-matcher gets wrong (the reviewer's reproductions).

Chained scatter-gather config: aggregation 1's trigger is aggregation 0's successEvent, and the
deletion subclass passes that value to ``super(...)``. The service's lookup compares ``agg.trigger``
(``aggregations.find((agg) => agg.trigger === trigger)``), so each subclass chooses the entry whose
*trigger* holds its value: the deletion subclass never writes the fan-out's failure. When the
predicate is not one the index reads, a value found in different fields makes the subclass's
writes candidates (with the reason), never producers.

No audit trigger: the function is renamed and attached to another table, so the job outcome names
come from [conventions] only; the common success post-processor's ``getEventForJob(...)`` write
is then a candidate with the reason, never a producer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Conventions
from tests.static.gather_fixture import IDENTIFIERS, make_gather, make_twin, rename_path, rename_value
from tools.mesh_index.service import IndexService

CONFIG = "ws-service/config/default.json"
DELETION = "ws-service/src/gather/post-deletion.gather-post-processor.ts"
SERVICE = "ws-service/src/gather/scatter-gather.service.ts"
MIGRATIONS = "*CreateOutboxTables.ts"


def _ident(name: str, twin: bool) -> str:
    return IDENTIFIERS.get(name, name) if twin else name


def _vary(ws: Path, twin: bool, opaque_lookup: bool = False) -> Path:
    path = (lambda rel: ws / rename_path(rel)) if twin else (lambda rel: ws / rel)
    cfg = path(CONFIG)
    data = json.loads(cfg.read_text(encoding="utf-8"))
    trigger, success = _ident("trigger", twin), _ident("successEvent", twin)
    aggs = next(v[_ident("aggregations", twin)] for v in data.values()
                if isinstance(v, dict) and _ident("aggregations", twin) in v)
    aggs[1][trigger] = aggs[0][success]  # chained: the deletion runs once the fan-out succeeded
    cfg.write_text(json.dumps(data, indent=2), encoding="utf-8")
    sub = path(DELETION)
    old, new = (f"{_ident('SocialEventType', twin)}.{_ident(k, twin)}" for k in ("POST_DELETED",
                                                                                 "FEED_FANOUT_SUCCESSFULL"))
    assert old in sub.read_text(encoding="utf-8")
    sub.write_text(sub.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    if opaque_lookup:  # a predicate the index does not read: the key field is not known
        svc = path(SERVICE)
        text = svc.read_text(encoding="utf-8")
        item = _ident("agg", twin)
        assert f"{item}.{trigger} === " in text
        svc.write_text(text.replace(f"{item}.{trigger} === ", f"Object.values({item}).includes(").replace(
            f"{trigger});", f"{trigger}));"), encoding="utf-8")
    for mig in ws.rglob(MIGRATIONS):  # the audit function renamed and attached elsewhere: not found
        text = mig.read_text(encoding="utf-8")
        assert "notify_job_audit_status_change" in text and "ON job_audit\n" in text
        mig.write_text(text.replace("notify_job_audit_status_change", "audit_changed_fn").replace(
            "ON job_audit\n", "ON job_audit_archive\n"), encoding="utf-8")
    return ws


def _index(root: Path, ws: Path) -> IndexService:
    svc = IndexService(ws, Conventions(), root / "state")
    svc.refresh()
    return svc


@pytest.fixture(scope="module")
def chained(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("chained")
    svc = _index(root, _vary(make_gather(root), False))
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def chained_twin(tmp_path_factory) -> Iterator[IndexService]:
    root = tmp_path_factory.mktemp("chained_twin")
    svc = _index(root, _vary(make_twin(root), True))
    yield svc
    svc.close()


def _owners(svc: IndexService, value: str, field: str = "producers") -> list[tuple[str, str]]:
    r = svc.analyze_impact(value)
    return sorted(((s.symbol or "").split(".")[0], s.kind) for s in getattr(r, field)
                  if s.kind in ("repository_create", "ws_send") and "GatherPostProcessor" in (s.symbol or ""))


OWN = {
    "social.feed_fanout_successfull": "FeedFanoutGatherPostProcessor",
    "social.feed_fanout_failed": "FeedFanoutGatherPostProcessor",
    "social.deletion_completed": "PostDeletionGatherPostProcessor",
    "social.deletion_failed": "PostDeletionGatherPostProcessor",
}


def test_a_chained_config_binds_each_subclass_by_the_lookups_key_field(chained: IndexService) -> None:
    for value, sub in OWN.items():
        assert _owners(chained, value) == [(sub, "repository_create")], value
        assert not _owners(chained, value, "candidates"), value


def _writes(svc: IndexService, value: str, field: str, rename=lambda s: s) -> list[tuple[str, int, str]]:
    return sorted((rename(s.file), s.line, ".".join(rename(p) for p in (s.symbol or "").split(".")))
                  for s in getattr(svc.analyze_impact(value), field) if s.kind in ("repository_create", "ws_send"))


def test_the_renamed_twin_of_the_chained_config_agrees(chained: IndexService, chained_twin: IndexService) -> None:
    def rename(s: str) -> str:
        return IDENTIFIERS.get(s, rename_path(s))

    values = [*OWN, *(f"ws.{v}" for v in OWN)]
    for value in values:
        for field in ("producers", "candidates"):
            assert _writes(chained, value, field, rename) == _writes(chained_twin, rename_value(value), field), (
                value, field)


def test_an_unknown_key_field_with_the_value_in_several_fields_is_a_candidate(tmp_path: Path) -> None:
    svc = _index(tmp_path, _vary(make_gather(tmp_path), False, opaque_lookup=True))
    try:
        r = svc.analyze_impact("social.feed_fanout_failed")
        assert [s.symbol for s in r.producers if s.kind == "repository_create"] == [
            "FeedFanoutGatherPostProcessor.fail"]  # its value is in the trigger field only
        cands = [s for s in r.candidates if s.kind == "repository_create"]
        assert [s.symbol for s in cands] == ["PostDeletionGatherPostProcessor.fail"]
        assert "field the lookup compares is not known" in cands[0].detail["reason"]
    finally:
        svc.close()


def test_outcome_names_from_conventions_make_the_job_to_event_write_a_candidate(chained: IndexService) -> None:
    r = chained.analyze_impact("order.fallback_place_order_feedback")
    assert not [s for s in r.producers if s.kind == "create_event"]
    cand = [s for s in r.candidates if s.kind == "create_event"]
    assert [s.symbol for s in cand] == ["JobOutboxSuccessPostProcessor.process"]
    assert "[conventions]" in cand[0].detail["reason"] and "was not found" in cand[0].detail["reason"]
