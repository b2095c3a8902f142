"""Promise: a plan file is the plan that was proposed, and a plan is applied at most once.

What ``tools/remediation/store.py`` guarantees, checked on real files in a scratch state folder:

- plans live at ``<state_dir>/plans/<plan_id>.json``, files 0600 in a 0700 folder (whatever the
  umask), written once: a second save of the same id is refused, the first file is kept;
- only a sealed plan is saved; loading re-validates the file, and a missing, damaged or edited
  file is refused with a sentence that says which and what to do;
- :func:`store.check_integrity` refuses a plan whose content no longer matches its sha256, or
  a step whose command or SQL parameters are not what its operation renders to, naming the step;
- :func:`store.claim_application` creates ``<plan_id>.applied`` exclusively: the first claim
  wins (also between two processes racing), every later one is refused with the status and
  start time of the first; :func:`store.finish_application` completes that record in place;
- plan ids are UTC ``p-YYYYMMDD-HHMMSS-<8 hex>``.
"""

from __future__ import annotations

import json
import locale
import multiprocessing
import os
import re
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from server.config import Settings, load_settings
from server.errors import InvalidArgument, NotFound, RemediationRefused
from tools.remediation import store
from tools.remediation.model import BlastRadius, Plan, SqlRow, SqlUpdateOp, Step, XDelOp
from tools.remediation.operations import render, render_params

PLAN_ID = "p-20261130-021033-0a1b2c3d"
DLQ = "stream:event:created-dlq"


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """A umask that lets group and others read new files: the 0600 / 0700 modes must not come from it."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # a state folder whose parents do not exist yet: the store makes the whole path
    return load_settings(environ={}, overrides={"state_dir": str(tmp_path / "deep" / "state")})


def _plan(settings: Settings, plan_id: str = PLAN_ID, **changes) -> Plan:
    """A sealed two-step plan (an XDEL and a guarded SQL update), as the planner builds one."""
    xdel = XDelOp(key=DLQ, ids=["1700000000000-0"])
    update = SqlUpdateOp(service="event", table="event_queue", set_status="PENDING", expect_status="FAILED",
                         rows=[SqlRow(id="e-1", updated_at="2026-11-30T02:10:00+00:00")])
    conv = settings.conventions
    steps = [
        Step(number=1, action="xdel_dlq", description="delete the dead letter", command=render(xdel, conv),
             params=render_params(xdel), target=DLQ, precondition="the entry is still there", backup=None,
             reversible=False, operation=xdel),
        Step(number=2, action="reconcile_sql", description="set the event back to PENDING",
             command=render(update, conv), params=render_params(update), target="event.event_queue",
             precondition="the row is still FAILED", backup="the row", reversible=True, operation=update),
    ]
    now = datetime(2026, 11, 30, 2, 10, 33, tzinfo=UTC)
    plan = Plan(
        plan_id=plan_id, symptom="dlq_replay", created_at=now.isoformat(),
        expires_at=(now + timedelta(hours=1)).isoformat(), inputs={"stream": "stream:event:created"},
        summary="replay one dead letter", steps=steps,
        blast_radius=BlastRadius(messages=1, rows=1, keys=0, streams=["stream:event:created"]),
        candidates_found=1, truncated=False, approval_mode="local", approval_note="local mode",
        approve_command=f"mesh-mcp approve {plan_id}",
    ).sealed()
    return plan.model_copy(update=changes) if changes else plan


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _aware_utc(text: str, before: datetime, after: datetime) -> datetime:
    moment = datetime.fromisoformat(text)
    assert moment.utcoffset() == timedelta(0), f"{text} is not a UTC time"
    assert before <= moment <= after
    return moment


# -- where plans live, and how they are written ---------------------------------------------


def test_a_plan_is_saved_once_at_its_documented_place_private(settings: Settings) -> None:
    plan = _plan(settings)
    path = store.save_plan(settings, plan)
    assert path == settings.resolved_state_dir / "plans" / f"{PLAN_ID}.json" == store.plan_path(settings, PLAN_ID)
    assert store.plans_dir(settings) == path.parent
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.count("\n") > 20  # indented JSON, one field a line, for a human to read
    assert store.load_plan(settings, PLAN_ID) == plan == store.load_plan_file(path)


def test_a_saved_plan_is_never_overwritten(settings: Settings) -> None:
    store.save_plan(settings, _plan(settings))
    before = store.plan_path(settings, PLAN_ID).read_bytes()
    with pytest.raises(FileExistsError):
        store.save_plan(settings, _plan(settings, summary="another plan under the same id").sealed())
    assert store.plan_path(settings, PLAN_ID).read_bytes() == before
    other = "p-20261130-021034-0a1b2c3e"  # a second plan in the same (now existing) folder
    store.save_plan(settings, _plan(settings, other))
    assert sorted(p.name for p in store.plans_dir(settings).iterdir()) == [f"{PLAN_ID}.json", f"{other}.json"]


@pytest.mark.parametrize("seal", ["", "0" * 64])
def test_only_a_sealed_plan_is_saved(settings: Settings, seal: str) -> None:
    with pytest.raises(ValueError, match=r"^only sealed plans are saved$"):
        store.save_plan(settings, _plan(settings, plan_sha256=seal))
    assert not store.plans_dir(settings).exists()


def test_a_plan_with_a_bad_id_is_not_saved(settings: Settings) -> None:
    with pytest.raises(InvalidArgument, match="not a plan id"):
        store.save_plan(settings, _plan(settings, "../evil").sealed())
    assert not settings.resolved_state_dir.exists()


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The process's locale switched to C (ASCII) after start, as on a host whose locale is not UTF-8."""
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getpreferredencoding(False) == "ANSI_X3.4-1968"
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)


def test_a_plan_file_is_utf8_whatever_the_locale(settings: Settings, ascii_locale: None) -> None:
    """A plan file is copied to another machine for ``approve --plan-file``: it reads the same everywhere."""
    plan = _plan(settings, summary="replay one dead letter: entité introuvable — «e-1»").sealed()
    path = store.save_plan(settings, plan)
    assert "entité introuvable — «e-1»".encode() in path.read_bytes()
    assert store.load_plan(settings, PLAN_ID) == plan == store.load_plan_file(path)


# -- loading: missing, damaged, edited ------------------------------------------------------


def test_an_unknown_plan_is_not_found_with_where_it_was_looked_for(settings: Settings) -> None:
    with pytest.raises(NotFound) as info:
        store.load_plan(settings, f" {PLAN_ID}\n")
    assert str(info.value) == (
        f"no plan {PLAN_ID} in {store.plans_dir(settings)}: propose_remediation creates plans (and mesh-mcp "
        "approve must use the same --config/--workspace as the server)")
    with pytest.raises(NotFound) as info:
        store.load_plan_file(settings.resolved_state_dir / "copy.json")
    assert str(info.value) == f"no plan file {settings.resolved_state_dir / 'copy.json'}"


@pytest.mark.parametrize(("damage", "problems"), [
    (lambda data: data.pop("steps"), 1),
    (lambda data: data.update(steps="none", truncated="maybe"), 2),
    (lambda data: data.update(surprise=True), 1),  # an unknown field is refused, not ignored
])
def test_a_damaged_plan_file_is_refused_with_its_problem_count(settings: Settings, damage, problems: int) -> None:
    path = store.save_plan(settings, _plan(settings))
    data = json.loads(path.read_text(encoding="utf-8"))
    damage(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    for load in (lambda: store.load_plan(settings, PLAN_ID), lambda: store.load_plan_file(path)):
        with pytest.raises(RemediationRefused) as info:
            load()
        assert str(info.value) == (
            f"plan file {path} is not a valid plan ({problems} problem(s)): it was edited or damaged; "
            "propose the remediation again")


def test_a_file_that_is_not_json_is_refused(settings: Settings) -> None:
    path = store.save_plan(settings, _plan(settings))
    path.write_text(path.read_text(encoding="utf-8")[:-40], encoding="utf-8")  # cut short
    with pytest.raises(RemediationRefused, match=r"is not a valid plan \(1 problem\(s\)\)"):
        store.load_plan(settings, PLAN_ID)


# -- integrity: the hash, and every step's command and parameters -----------------------------


def test_an_intact_plan_passes_the_integrity_check(settings: Settings) -> None:
    store.check_integrity(_plan(settings), settings.conventions)


def test_a_plan_edited_after_it_was_proposed_is_refused(settings: Settings) -> None:
    edited = _plan(settings, summary="replay every dead letter")  # seal kept: the hash no longer matches
    with pytest.raises(RemediationRefused) as info:
        store.check_integrity(edited, settings.conventions)
    assert str(info.value) == (
        f"plan {PLAN_ID} was edited after it was proposed (its content no longer matches its sha256): "
        "propose the remediation again")


def _step_mismatch(number: int) -> str:
    return (f"plan {PLAN_ID} step {number}: the command shown differs from the operation that would run (edited "
            "plan, or [conventions] changed since it was proposed): propose it again")


def _resealed_with_step(settings: Settings, number: int, **changes) -> Plan:
    """An edit made by someone who also recomputed the sha256: only the rendering check can see it."""
    plan = _plan(settings)
    steps = [s.model_copy(update=changes) if s.number == number else s for s in plan.steps]
    return plan.model_copy(update={"steps": steps}).sealed()


def test_a_step_whose_command_is_not_its_operation_is_refused(settings: Settings) -> None:
    shown = _resealed_with_step(settings, 1, command=f"XDEL {DLQ} 1699999999999-0")  # params unchanged
    with pytest.raises(RemediationRefused) as info:
        store.check_integrity(shown, settings.conventions)
    assert str(info.value) == _step_mismatch(1)


def test_a_step_whose_sql_parameters_are_not_its_operation_is_refused(settings: Settings) -> None:
    plan = _plan(settings)
    params = [[*plan.steps[1].params[0][:1], "e-2", *plan.steps[1].params[0][2:]]]  # command unchanged
    edited = _resealed_with_step(settings, 2, params=params)
    with pytest.raises(RemediationRefused) as info:
        store.check_integrity(edited, settings.conventions)
    assert str(info.value) == _step_mismatch(2)


def test_changed_conventions_make_the_shown_command_stale(settings: Settings) -> None:
    renamed = load_settings(environ={}, overrides={
        "state_dir": str(settings.resolved_state_dir), "conventions": {"columns": {"status": "state"}}})
    assert render(_plan(settings).steps[1].operation, renamed.conventions) != _plan(settings).steps[1].command
    with pytest.raises(RemediationRefused) as info:
        store.check_integrity(_plan(settings), renamed.conventions)
    assert str(info.value) == _step_mismatch(2)


def test_a_plan_is_expired_from_its_expiry_instant_on_the_current_clock(settings: Settings) -> None:
    """Without an explicit time the current UTC time is used (the executor's and approve's call)."""
    now = datetime.now(UTC)
    assert store.is_expired(_plan(settings, expires_at=(now - timedelta(seconds=5)).isoformat())) is True
    assert store.is_expired(_plan(settings, expires_at=(now + timedelta(hours=1)).isoformat())) is False


# -- a plan runs once: the claim and its record ---------------------------------------------


def test_no_record_before_the_first_claim(settings: Settings) -> None:
    assert store.application_record(settings, PLAN_ID) is None


def test_the_claim_records_who_started_when(settings: Settings) -> None:
    before = datetime.now(UTC)
    store.claim_application(settings, PLAN_ID, "local:alice")
    after = datetime.now(UTC)
    path = store.applied_path(settings, PLAN_ID)
    assert path == settings.resolved_state_dir / "plans" / f"{PLAN_ID}.applied"
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    record = store.application_record(settings, PLAN_ID)
    assert record is not None and set(record) == {"status", "approver", "started_at"}
    assert record["status"] == "applying" and record["approver"] == "local:alice"
    _aware_utc(record["started_at"], before, after)
    assert json.loads(path.read_text(encoding="utf-8")) == record  # the file is that JSON object


def test_a_second_claim_is_refused_with_the_first_ones_status_and_start(settings: Settings) -> None:
    store.claim_application(settings, PLAN_ID, "local:alice")
    first = store.applied_path(settings, PLAN_ID).read_bytes()
    started = store.application_record(settings, PLAN_ID)["started_at"]
    with pytest.raises(RemediationRefused) as info:
        store.claim_application(settings, PLAN_ID, "local:bob")
    assert str(info.value) == (
        f"plan {PLAN_ID} was already applied (applying, started {started}): a plan runs once. Propose the "
        "remediation again to see the current state")
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert store.applied_path(settings, PLAN_ID).read_bytes() == first  # bob's claim changed nothing
    store.finish_application(settings, PLAN_ID, "completed", "done")
    with pytest.raises(RemediationRefused, match=re.escape(f"already applied (completed, started {started})")):
        store.claim_application(settings, PLAN_ID, "local:bob")


@pytest.mark.parametrize(("content", "shown"), [
    ("{\"status\": \"appl", "unknown, started ?"),  # cut short: the status cannot be read
    ("{}", "unknown, started ?"),  # valid JSON without the fields
    ("[]", "unknown, started ?"),
    ("{\"status\": \"completed\"}", "completed, started ?"),
])
def test_a_damaged_record_still_blocks_a_second_run(settings: Settings, content: str, shown: str) -> None:
    path = store.applied_path(settings, PLAN_ID)
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RemediationRefused) as info:
        store.claim_application(settings, PLAN_ID, "local:bob")
    assert f"was already applied ({shown}): a plan runs once." in str(info.value)
    assert path.read_text(encoding="utf-8") == content


def test_an_unreadable_record_reads_as_unknown(settings: Settings) -> None:
    path = store.applied_path(settings, PLAN_ID)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe not json")
    assert store.application_record(settings, PLAN_ID) == {"status": "unknown"}


def test_finishing_completes_the_record_in_place(settings: Settings) -> None:
    store.claim_application(settings, PLAN_ID, "local:alice")
    claimed = store.application_record(settings, PLAN_ID)
    before = datetime.now(UTC)
    store.finish_application(settings, PLAN_ID, "stopped", "step 2 drifted: the row is no longer FAILED")
    after = datetime.now(UTC)
    path = store.applied_path(settings, PLAN_ID)
    record = json.loads(path.read_text(encoding="utf-8"))
    assert set(record) == {"status", "approver", "started_at", "finished_at", "summary"}
    assert record["status"] == "stopped" and record["approver"] == "local:alice"
    assert record["started_at"] == claimed["started_at"]
    assert record["summary"] == "step 2 drifted: the row is no longer FAILED"
    _aware_utc(record["finished_at"], before, after)
    assert _mode(path) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left behind


def test_a_long_summary_is_cut_at_2000_characters(settings: Settings) -> None:
    store.claim_application(settings, PLAN_ID, "local:alice")
    store.finish_application(settings, PLAN_ID, "completed", "x" * 1999 + "yz" + "w" * 500)
    assert store.application_record(settings, PLAN_ID)["summary"] == "x" * 1999 + "y"


def test_finishing_without_a_claim_still_writes_a_private_record(settings: Settings) -> None:
    """The marker was deleted while the plan ran: the outcome is written anyway and blocks a rerun."""
    store.claim_application(settings, PLAN_ID, "local:alice")
    store.applied_path(settings, PLAN_ID).unlink()
    store.finish_application(settings, PLAN_ID, "failed", "step 1 failed")
    record = store.application_record(settings, PLAN_ID)
    assert {k: record[k] for k in ("status", "summary")} == {"status": "failed", "summary": "step 1 failed"}
    assert "approver" not in record
    assert _mode(store.applied_path(settings, PLAN_ID)) == 0o600
    with pytest.raises(RemediationRefused, match=r"already applied \(failed, started \?\)"):
        store.claim_application(settings, PLAN_ID, "local:bob")


@pytest.mark.parametrize("plan_id", ["../evil", f"{PLAN_ID}/../../evil", f"{PLAN_ID}\n.json", "p-\x1b[2J"])
def test_no_claim_or_record_for_a_path_like_or_control_character_id(settings: Settings, plan_id: str) -> None:
    for call in (lambda: store.claim_application(settings, plan_id, "local:alice"),
                 lambda: store.finish_application(settings, plan_id, "completed", "done"),
                 lambda: store.application_record(settings, plan_id)):
        with pytest.raises(InvalidArgument, match="not a plan id"):
            call()
    assert not settings.resolved_state_dir.exists()


def _claim_in_a_process(state_dir: str, approver: str, start: float, results) -> None:
    os.umask(0o022)
    settings = load_settings(environ={}, overrides={"state_dir": state_dir})
    while time.time() < start:  # every process claims at the same instant
        pass
    try:
        store.claim_application(settings, PLAN_ID, approver)
    except RemediationRefused as exc:
        results.put((approver, f"refused: {exc}"))
    else:
        results.put((approver, "claimed"))


def test_processes_racing_for_one_plan_only_one_claims_it(settings: Settings) -> None:
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    start = time.time() + 1.0
    approvers = [f"local:p{i}" for i in range(6)]
    procs = [ctx.Process(target=_claim_in_a_process, args=(str(settings.resolved_state_dir), a, start, results))
             for a in approvers]
    for proc in procs:
        proc.start()
    outcomes = dict(results.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    winners = [a for a, outcome in outcomes.items() if outcome == "claimed"]
    assert len(winners) == 1, outcomes
    assert store.application_record(settings, PLAN_ID)["approver"] == winners[0]
    for approver, outcome in outcomes.items():
        if approver != winners[0]:
            assert outcome.startswith(f"refused: plan {PLAN_ID} was already applied ("), outcome


# -- plan ids ---------------------------------------------------------------------------------


def test_a_new_plan_id_names_the_utc_second_and_8_random_hex(monkeypatch: pytest.MonkeyPatch) -> None:
    moment = datetime(2026, 11, 30, 2, 10, 33, 999_999, tzinfo=UTC)
    ids = {store.new_plan_id(moment) for _ in range(20)}
    assert len(ids) == 20  # random part differs
    for plan_id in ids:
        assert plan_id.startswith("p-20261130-021033-") and len(plan_id) == 26
        assert store.validate_plan_id(plan_id) == plan_id
    # without a time: now, in UTC even when the machine's local zone is not UTC
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: another calendar day than UTC
    time.tzset()
    try:
        before = datetime.now(UTC).replace(microsecond=0)
        plan_id = store.new_plan_id()
        after = datetime.now(UTC)
    finally:
        monkeypatch.undo()
        time.tzset()
    stamp = datetime.strptime(plan_id[2:17], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    assert before <= stamp <= after, (plan_id, before)
