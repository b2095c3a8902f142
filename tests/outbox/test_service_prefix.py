"""``[conventions] service_prefix``: the emitter -> domain rule (``ms-event`` -> ``event``) is one setting.

A workspace whose services are named ``svc-<domain>`` (a copy of a shared fixture with every ``ms-``
renamed, the fixtures themselves untouched), read with ``service_prefix = "svc-"``, gives the same
answers as the original with the default: the outcome types the runtime tracer searches, the shape
learnt from the audit trigger's ``replace``/``regexp_replace``, and the job-outcome events the static
index derives from the trigger. A removal of another prefix is not the rule: nothing is learnt from it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.config import Conventions
from tests.helpers import FIXTURES, copy_workspace
from tests.outbox import migration_chain as mc
from tests.outbox.test_learnt_outcome_shape import texts_of
from tools.mesh_index.outcome_shape import derive
from tools.mesh_index.service import IndexService
from tools.outbox.trace import Tracer

FN = "notify_job_audit_status_change"
SVC = Conventions(service_prefix="svc-")


def renamed(source: Path, target: Path) -> Path:
    """A copy of ``source`` where every ``ms-`` that starts a word (folders, emitters, SQL) is ``svc-``."""
    copy_workspace(source, target)
    for path in sorted(target.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            path.write_text(re.sub(r"\bms-", "svc-", text), encoding="utf-8", errors="surrogateescape")
        if re.match(r"ms-", path.name):
            path.rename(path.with_name("svc-" + path.name[3:]))
    return target


def test_the_rule_is_one_setting_read_through_one_helper() -> None:
    default = Conventions()
    assert default.service_prefix == "ms-"
    assert (default.domain_of("ms-event"), default.domain_of("event"), default.domain_of("ms-post-processors")) == (
        "event", "event", "post-processors")
    assert default.service_name("event") == default.service_name("ms-event") == "ms-event"
    assert default.is_service_name("ms-user") and not default.is_service_name("ws-service")
    assert (SVC.domain_of("svc-event"), SVC.domain_of("ms-event"), SVC.service_name("event")) == (
        "event", "ms-event", "svc-event")
    bare = Conventions(service_prefix="")
    assert bare.domain_of("event") == "event" and bare.service_name("event") == "event"
    assert not bare.is_service_name("event")  # no prefix: no repository is told apart as a service by its name
    with pytest.raises(ValidationError, match="service_prefix 'ms -' must be at most 64 printable"):
        Conventions(service_prefix="ms -")


def test_the_tracer_searches_the_same_outcome_types(make_settings) -> None:
    services = {"user": {"postgres": "postgresql://x@h/d"}}
    default = Tracer(None, make_settings(services=services), None)  # type: ignore[arg-type]
    svc = Tracer(None, make_settings(services=services, conventions={"service_prefix": "svc-"}),
                 None)  # type: ignore[arg-type]
    assert default.settings.emitter_of("user") == "ms-user" and svc.settings.emitter_of("user") == "svc-user"
    assert svc.outcome_types("user", ["svc-orders", None, "svc-user"]) == default.outcome_types(
        "user", ["ms-orders", None, "ms-user"]) == (
        ["job.outbox.success", "orders:job:outbox:success", "user:job:outbox:success"],
        ["job.outbox.failed", "orders:job:outbox:failure", "user:job:outbox:failure", "orders:job:outbox:failed",
         "user:job:outbox:failed"])


def _shape(texts: list[tuple[str, int, str]], prefix: str | None) -> list[tuple[str, dict, list[str]]]:
    shape = derive(texts, FN, service_prefix=prefix)
    assert shape is not None
    return [(Path(v.path).name, v.types, v.target_services) for v in shape.versions]


def test_the_trigger_shape_is_learnt_with_the_configured_prefix(tmp_path: Path) -> None:
    original = texts_of(mc.CHAIN_WORKSPACE)
    copy = texts_of(renamed(mc.CHAIN_WORKSPACE, tmp_path / "chain"))
    assert any("'^svc-'" in text for _p, _l, text in copy) and not any("ms-" in text for _p, _l, text in copy)
    learnt = _shape(original, None)
    assert [v[1]["COMPLETED"] for v in learnt] == [["job.outbox.success"], *[["{domain}:job:outbox:success"]] * 3]
    assert _shape(copy, "svc-") == learnt
    # the default prefix reads regexp_replace(NEW.emitter, '^svc-', '') as another removal: no {domain} type is learnt
    assert [v[1] for v in _shape(copy, None)] == [
        {"COMPLETED": ["job.outbox.success"], "FAILED": ["job.outbox.failed"]}, {}, {}, {}]


@pytest.mark.parametrize(("removal", "learns"), [
    ("regexp_replace(NEW.emitter, '^svc-', '')", True),
    ("regexp_replace(NEW.emitter, 'svc-', '')", True),
    ("regexp_replace(NEW.emitter, '^svc\\-', '')", True),
    ("replace(NEW.emitter, 'svc-', '')", True),
    ("regexp_replace(NEW.emitter, '^ms-', '')", False),
    ("regexp_replace(NEW.emitter, '^svc.', '')", False),  # '.' matches any character: not the literal prefix
    ("regexp_replace(NEW.emitter, '^[a-z]+-', '')", False),
    ("replace(NEW.emitter, '^svc-', '')", False),  # replace is literal: it removes the text '^svc-'
])
def test_only_the_removal_of_the_configured_prefix_is_the_domain_rule(removal: str, learns: bool) -> None:
    sql = f"""
      CREATE OR REPLACE FUNCTION {FN}() RETURNS trigger AS $$
      BEGIN
        INSERT INTO event_queue (type, emitter, payload, target_services)
        VALUES ({removal} || ':job:outbox:success', NEW.emitter, jsonb_build_object('after', to_jsonb(NEW)),
                ARRAY[NEW.emitter]);
        RETURN NEW;
      END; $$ LANGUAGE plpgsql;"""
    shape = derive([("svc-event/src/migrations/1-T.ts", 1, sql)], FN, service_prefix="svc-")
    assert shape is not None
    (version,) = shape.versions
    assert version.types == ({"COMPLETED": ["{domain}:job:outbox:success"], "FAILED": ["{domain}:job:outbox:success"]}
                             if learns else {})


def _outcomes(root: Path, conventions: Conventions, state: Path) -> list[tuple[str, str | None, str | None, bool]]:
    service = IndexService(root, conventions, cache_dir=state)
    try:
        service.refresh()
        recs = service.linked().outcomes
        return sorted({(r.value, r.status, conventions.domain_of(r.emitter) if r.emitter else None, r.heuristic)
                       for r in recs}, key=str)
    finally:
        service.close()


def test_the_static_index_derives_the_same_outcome_events(tmp_path: Path) -> None:
    source = FIXTURES / "realistic_workspace"
    copy = renamed(source, tmp_path / "ws")
    assert (copy / "svc-user").is_dir() and not (copy / "ms-user").exists()
    default = _outcomes(source, Conventions(), tmp_path / "s1")
    assert any(v.endswith(":job:outbox:success") and d == "user" for v, _s, d, _h in default)
    assert _outcomes(copy, SVC, tmp_path / "s2") == default
    # the renamed workspace read with the default prefix: its repositories are no longer services
    assert _outcomes(copy, Conventions(), tmp_path / "s3") != default
