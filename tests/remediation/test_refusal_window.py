"""Refusals of unknown plan ids are audited within a bound: a few in full per window, the rest counted.

An agent looping on invented plan ids used to write one ``apply_refused`` record per call: the audit log
grew without bound. Now, per window (``[approval] refusal_window_s``, set to 1 s here so the test waits a
real second), the first ``[approval] refusal_full_records`` (5 by default) refusals of plans that do not
exist are recorded in full, the others are counted on disk and written as one ``refusals_coalesced`` record
once the window is over. None is lost, the chain stays intact, and refusals of plans that *do* exist are
never coalesced. Both bounds are settings of the user's config: a workspace's ``mesh.toml`` cannot set them
(tests/safety/test_promise_workspace_config.py), and a value out of range is a configuration error naming it.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from server.approval import refusal_window
from server.approval.audit import audit_log
from server.approval.cli import approve_plan
from server.config import Settings, load_settings
from server.errors import ConfigError, RemediationRefused
from tests.helpers import in_process_client
from tests.remediation.conftest import approve, settings_for
from tests.remediation.test_negative import _apply, _propose

pytestmark = pytest.mark.anyio

FLOOD = 40
FULL_RECORDS = 5
"""The default of ``[approval] refusal_full_records``."""


def invented(n: int) -> str:
    return f"p-20261205-000000-{n:08x}"


def records(settings: Any, event: str | None = None) -> list[dict[str, Any]]:
    return [r for r in audit_log(settings).read() if event is None or r["event"] == event]


@pytest.fixture
def settings(tmp_path: Path, outbox_db: str, redis_url: str) -> Settings:
    """The remediation settings with a window of 1 s (``[approval] refusal_window_s``), the default full records."""
    return settings_for(tmp_path, outbox_db, redis_url, approval={"refusal_window_s": 1})


@pytest.fixture
def short_window(settings: Settings) -> int:
    return settings.approval.refusal_window_s


async def test_a_flood_of_unknown_plan_ids_is_recorded_five_times_then_counted(settings, short_window) -> None:
    async with in_process_client(settings) as client:  # as an agent makes them: through the tool
        texts = []
        for n in range(FLOOD):
            result = await client.call_tool("apply_remediation", {"plan_id": invented(n), "approval_token": "x"})
            assert result.is_error
            texts.append(result.content[0].text)

        refused = records(settings, "apply_refused")
        assert [(r["plan_id"], r["result"], r["unknown_plan"], r["window_n"]) for r in refused] == [
            (invented(n), "NotFound", True, n + 1) for n in range(FULL_RECORDS)]
        assert len(records(settings)) == FULL_RECORDS  # not FLOOD
        assert all("no plan" in t for t in texts)  # every caller still gets the refusal
        assert all("refusals_coalesced" not in t for t in texts[:5])
        assert all("counted in the next refusals_coalesced record" in t for t in texts[5:])

        time.sleep(short_window + 0.1)  # the window ends; the next refusal writes its count first
        result = await client.call_tool("apply_remediation", {"plan_id": invented(FLOOD), "approval_token": "x"})
        assert result.is_error

    summary, after = records(settings)[-2:]
    counted = FLOOD - FULL_RECORDS
    assert (summary["event"], summary["result"], summary["count"]) == ("refusals_coalesced", "coalesced", counted)
    assert summary["by_event"] == {"apply_refused": counted}
    assert summary["sample_plan_ids"] == [invented(n) for n in range(5, 5 + refusal_window.SAMPLE_IDS)]
    assert summary["first"] <= summary["last"] and summary["window_start"] == refused[0]["window_start"]
    assert summary["detail"].startswith(f"{counted} more refusal(s) of unknown plan ids between ")
    assert (after["event"], after["plan_id"], after["window_n"]) == ("apply_refused", invented(FLOOD), 1)
    assert audit_log(settings).verify().ok


async def test_refusals_of_real_plans_are_never_coalesced_and_an_apply_writes_the_count_first(
        settings, poison, short_window) -> None:
    plan = await _propose(settings)
    for n in range(FULL_RECORDS + 3):  # the window's full records are used up, 3 counted
        with pytest.raises(Exception, match="no plan"):
            await _apply(settings, invented(n), "x")
    for _ in range(3):  # a real plan, a bad token: each refusal is its own record
        with pytest.raises(RemediationRefused):
            await _apply(settings, plan.plan_id, "not-a-token")
    real = [r for r in records(settings, "apply_refused") if r["plan_id"] == plan.plan_id]
    assert len(real) == 3 and not any(r.get("unknown_plan") for r in real)

    time.sleep(short_window + 0.1)
    token = approve(settings, plan.plan_id)  # an approval writes the ended window's count before its own record
    events = [r["event"] for r in records(settings)]
    assert events[-2:] == ["refusals_coalesced", "approved"]
    assert records(settings, "refusals_coalesced")[0]["count"] == 3
    report = await _apply(settings, plan.plan_id, token, dry_run=True)
    assert report.status == "dry_run_ok"
    assert [r["event"] for r in records(settings)].count("refusals_coalesced") == 1  # written once
    assert audit_log(settings).verify().ok


async def test_approve_of_unknown_plans_shares_the_bound(settings, short_window) -> None:
    out = io.StringIO()
    for n in range(3):  # mesh-mcp approve without a terminal, and at a terminal, for plans that do not exist
        with pytest.raises(RemediationRefused, match="not an interactive terminal"):
            approve_plan(settings, invented(n), is_tty=False, ask=input, ask_secret=input, out=out)
        with pytest.raises(RemediationRefused, match="no plan"):
            approve_plan(settings, invented(100 + n), is_tty=True, ask=input, ask_secret=input, out=out)
    for n in range(3):
        with pytest.raises(Exception, match="no plan"):
            await _apply(settings, invented(200 + n), "x")
    full = records(settings)
    assert [(r["event"], r["result"]) for r in full] == [
        ("approval_refused", "not_a_terminal"), ("approval_refused", "plan_unusable"),
        ("approval_refused", "not_a_terminal"), ("approval_refused", "plan_unusable"),
        ("approval_refused", "not_a_terminal")]
    time.sleep(short_window + 0.1)
    refusal_window.flush_due(audit_log(settings), refusal_window.RefusalBound.of(settings))
    (summary,) = records(settings, "refusals_coalesced")
    assert summary["by_event"] == {"approval_refused": 1, "apply_refused": 3} and summary["count"] == 4
    assert not refusal_window.counter_path(audit_log(settings)).exists()  # written out: the counter is gone


async def test_a_damaged_counter_is_reported_and_the_refusal_still_recorded(settings) -> None:
    log = audit_log(settings)
    with pytest.raises(Exception, match="no plan"):
        await _apply(settings, invented(0), "x")
    refusal_window.counter_path(log).write_text("{ not json")
    with pytest.raises(Exception, match="no plan"):
        await _apply(settings, invented(1), "x")
    first, problem, second = records(settings)
    assert (first["event"], second["event"], second["plan_id"], second["window_n"]) == (
        "apply_refused", "apply_refused", invented(1), 1)
    assert problem["event"] == "refusals_coalesced" and "could not be used (JSONDecodeError" in problem["detail"]
    assert log.verify().ok


async def test_a_symlinked_counter_is_never_followed(settings, tmp_path) -> None:
    log = audit_log(settings)
    with pytest.raises(Exception, match="no plan"):
        await _apply(settings, invented(0), "x")  # the state folder exists now
    victim = tmp_path / "bashrc"
    victim.write_text("keep me")
    counter = refusal_window.counter_path(log)
    counter.unlink()
    counter.symlink_to(victim)
    for n in range(1, 3):
        with pytest.raises(Exception, match="no plan"):
            await _apply(settings, invented(n), "x")
    assert victim.read_text() == "keep me"
    events = [(r["event"], r.get("plan_id")) for r in records(settings)]
    assert events == [("apply_refused", invented(0)), ("refusals_coalesced", None), ("apply_refused", invented(1)),
                      ("apply_refused", invented(2))]
    assert "could not be used (StateFileError" in records(settings, "refusals_coalesced")[0]["detail"]
    assert not counter.is_symlink() and log.verify().ok


async def test_refusal_full_records_sets_how_many_are_recorded_in_full(tmp_path, outbox_db, redis_url) -> None:
    settings = settings_for(tmp_path, outbox_db, redis_url, approval={"refusal_window_s": 1, "refusal_full_records": 2})
    for n in range(6):
        with pytest.raises(Exception, match="no plan"):
            await _apply(settings, invented(n), "x")
    assert [(r["plan_id"], r["window_n"]) for r in records(settings)] == [(invented(0), 1), (invented(1), 2)]
    time.sleep(settings.approval.refusal_window_s + 0.1)
    refusal_window.flush_due(audit_log(settings), refusal_window.RefusalBound.of(settings))
    *in_full, summary = records(settings)
    assert len(in_full) == 2 and (summary["event"], summary["count"]) == ("refusals_coalesced", 4)
    assert summary["sample_plan_ids"] == [invented(n) for n in range(2, 6)]
    assert "(2 recorded in full in the window of 1 s from " in summary["detail"]
    assert audit_log(settings).verify().ok


def test_the_defaults_are_one_minute_and_five_records() -> None:
    approval = load_settings(environ={}).approval
    assert (approval.refusal_window_s, approval.refusal_full_records) == (60, FULL_RECORDS)


@pytest.mark.parametrize(("key", "value", "bounds"), [
    ("refusal_window_s", 0, "greater than or equal to 1"), ("refusal_window_s", 3601, "less than or equal to 3600"),
    ("refusal_full_records", 0, "greater than or equal to 1"),
    ("refusal_full_records", 101, "less than or equal to 100")])
def test_a_bound_out_of_range_is_a_configuration_error_naming_the_key(
        tmp_path: Path, key: str, value: int, bounds: str) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text(f"[approval]\n{key} = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config_file=config, environ={})
    assert str(info.value).startswith(f"{config}: invalid value for 'approval.{key}': Input should be {bounds}")
