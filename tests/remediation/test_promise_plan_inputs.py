"""Promise: every input of ``propose_remediation`` is validated with a clear error, before anything is read.

:func:`tools.remediation.planner.validate_request` per symptom: the symptom itself, key names,
the service, the ids (count against ``[limits] max_plan_messages`` at, under and over the cap;
length at 256 / 257 characters; control characters at the edges of the refused ranges, 31 / 32,
126 / 127; duplicates after stripping; their format per symptom). A refused request writes no
plan file. The approval command and note a plan prints are checked here too (pure functions).
"""

from __future__ import annotations

import shlex
import uuid
from pathlib import Path

import pytest

from server.config import load_settings
from server.errors import InvalidArgument
from tests.remediation.conftest import STREAM, settings_for
from tools.remediation.model import SYMPTOMS
from tools.remediation.plan_base import MAX_ID_CHARS, Request
from tools.remediation.planner import (
    approval_note,
    approve_command,
    default_approver_flag,
    plan_instance,
    validate_request,
)

U1, U2 = str(uuid.uuid4()), str(uuid.uuid4())


@pytest.fixture
def cfg(tmp_path: Path):
    return settings_for(tmp_path, "postgresql://postgres@127.0.0.1:5432/postgres", "redis://127.0.0.1:1/0",
                        limits={"max_plan_messages": 3})


def req(symptom: str, stream=None, group=None, service=None, queue=None, ids=None) -> Request:
    return Request(symptom, stream, group, service, queue, ids)


def refused(settings, request: Request) -> str:
    with pytest.raises(InvalidArgument) as info:
        validate_request(settings, request)
    return str(info.value)


def test_unknown_symptom_names_every_known_one(cfg) -> None:
    assert refused(cfg, req("fix_everything")) == (
        f"unknown symptom 'fix_everything': use one of {', '.join(SYMPTOMS)}")
    assert len(SYMPTOMS) == 6


@pytest.mark.parametrize("name", ["stream", "group", "queue"])
def test_key_names_are_checked(cfg, name: str) -> None:
    for bad, words in (("", "is empty"), (" ", "is empty"), ("a\x1fb", "control characters"),
                       ("a\x7fb", "control characters"), ("x" * 1025, "longer than")):
        message = refused(cfg, req("retry_failed_job", **{name: bad, **({} if name == "queue" else {"queue": "q"})}))
        assert message.startswith(name) and words in message, message


def test_unknown_service_lists_the_configured_ones(cfg, tmp_path: Path) -> None:
    assert refused(cfg, req("reconcile_outbox", service="nope", ids=[U1])) == (
        "unknown service 'nope': configured services are event")
    bare = settings_for(tmp_path, None, "redis://127.0.0.1:1/0")
    assert refused(bare, req("requeue_stuck_job", service="event")) == (
        "unknown service 'event': configured services are (none configured)")
    several = settings_for(tmp_path, None, "redis://127.0.0.1:1/0", services={
        "orders": {"postgres": "postgresql://127.0.0.1:1/o"}, "billing": {"postgres": "postgresql://127.0.0.1:1/b"}})
    assert refused(several, req("requeue_stuck_job", service="event")) == (
        "unknown service 'event': configured services are billing, orders")


def test_ids_count_at_under_and_over_the_cap(cfg) -> None:
    ids = [f"{i}-0" for i in range(1, 5)]
    assert validate_request(cfg, req("dlq_replay", stream=STREAM, ids=ids[:3])).ids == ids[:3]  # at the cap
    assert validate_request(cfg, req("dlq_replay", stream=STREAM, ids=ids[:2])).ids == ids[:2]
    assert refused(cfg, req("dlq_replay", stream=STREAM, ids=ids)) == (
        "4 ids given; a plan holds at most 3 ([limits] max_plan_messages)")
    assert refused(cfg, req("dlq_replay", stream=STREAM, ids=[])) == (
        "ids is empty: omit it to take every matching item, or list some ids")


def test_ids_are_stripped_and_duplicates_refused_after_stripping(cfg) -> None:
    checked = validate_request(cfg, req("retry_failed_job", queue="q", ids=[" 41 ", "42\n"]))
    assert checked.ids == ["41", "42"]
    assert refused(cfg, req("retry_failed_job", queue="q", ids=["41", " 41"])) == "ids holds duplicates"
    assert refused(cfg, req("retry_failed_job", queue="q", ids=["41", "  "])) == (
        "id '' is empty, too long or holds control characters")


def test_id_length_at_the_limit_and_one_over(cfg) -> None:
    assert MAX_ID_CHARS == 256
    assert validate_request(cfg, req("retry_failed_job", queue="q", ids=["j" * 256])).ids == ["j" * 256]
    message = refused(cfg, req("retry_failed_job", queue="q", ids=["j" * 257]))
    assert message == f"id {'j' * 40!r} is empty, too long or holds control characters"


@pytest.mark.parametrize("code", [0, 1, 9, 10, 27, 31, 127])
def test_control_characters_in_ids_are_refused(cfg, code: int) -> None:
    message = refused(cfg, req("retry_failed_job", queue="q", ids=[f"job{chr(code)}1"]))
    assert message.endswith("is empty, too long or holds control characters")


@pytest.mark.parametrize("code", [32, 33, 126, 128, 233])
def test_printable_characters_next_to_the_refused_ranges_are_accepted(cfg, code: int) -> None:
    job = f"job{chr(code)}1"
    assert validate_request(cfg, req("retry_failed_job", queue="q", ids=[job])).ids == [job]


@pytest.mark.parametrize("symptom", ["dlq_replay", "claim_dead_consumer", "clear_stale_lock"])
def test_stream_symptoms_need_a_stream_and_stream_entry_ids(cfg, symptom: str) -> None:
    assert refused(cfg, req(symptom)) == (
        f"symptom {symptom} needs stream: the source stream key, e.g. stream:event:created")
    assert refused(cfg, req(symptom, stream=STREAM, ids=["1-0", U1])) == (
        f"ids must be stream entry ids (<ms>-<seq>) for {symptom}: {U1!r}")
    for good in ("0-0", "1700000000000-12", f"{'9' * 20}-{'9' * 20}"):
        assert validate_request(cfg, req(symptom, stream=STREAM, ids=[good])).ids == [good]
    for bad in ("1700000000000", "-1-0", "1-0-0", "a-0", f"{'9' * 21}-0", "1-"):
        assert bad in refused(cfg, req(symptom, stream=STREAM, ids=[bad]))


@pytest.mark.parametrize("symptom", ["reconcile_outbox", "requeue_stuck_job"])
def test_outbox_symptoms_need_a_service_and_row_uuids(cfg, symptom: str) -> None:
    assert refused(cfg, req(symptom, ids=[U1])) == (
        f"symptom {symptom} needs service: the microservice whose database holds the outbox tables")
    assert refused(cfg, req(symptom, service="event", ids=[U1, "1-0"])) == (
        f"ids must be row UUIDs for {symptom}: '1-0'")
    upper = U2.upper()
    assert validate_request(cfg, req(symptom, service="event", ids=[U1, upper])).ids == [U1, upper]
    for bad in (U1[:-1], U1 + "0", U1.replace("-", ""), "g" + U1[1:]):
        assert repr(bad) in refused(cfg, req(symptom, service="event", ids=[bad]))


def test_reconcile_needs_ids_requeue_does_not(cfg) -> None:
    assert refused(cfg, req("reconcile_outbox", service="event")) == (
        "reconcile_outbox needs ids: the event_queue / jobs_outbox ids whose replay was confirmed, or the job ids "
        "whose audit row or outbox row was left behind (trace_job names them); reconciling marks rows COMPLETED or "
        "deletes them, so it is never done in bulk")
    assert validate_request(cfg, req("requeue_stuck_job", service="event")).ids is None


def test_retry_needs_a_queue(cfg) -> None:
    assert refused(cfg, req("retry_failed_job")) == (
        "symptom retry_failed_job needs queue: the BullMQ queue name (the jobs_outbox target)")


def test_a_valid_request_comes_back_whole(cfg) -> None:
    checked = validate_request(cfg, req("claim_dead_consumer", stream=STREAM, group="g", ids=["1-0"]))
    assert checked == Request("claim_dead_consumer", STREAM, "g", None, None, ["1-0"])
    checked = validate_request(cfg, req("requeue_stuck_job", service="event", queue="q"))
    assert checked == Request("requeue_stuck_job", None, None, "event", "q", None)


def test_plan_instance_is_the_stream_s_then_the_queue_s_then_the_default(tmp_path: Path) -> None:
    from server.connections import Connections

    settings = settings_for(tmp_path, None, "redis://127.0.0.1:1/0", redis={
        "url": "redis://127.0.0.1:1/0",
        "instances": {"jobs": {"url": "redis://127.0.0.1:1/1", "queues": ["email-*"]},
                      "events": {"url": "redis://127.0.0.1:1/2", "streams": ["stream:audit:*"]}},
    })
    connections = Connections(settings)
    assert plan_instance(connections, req("dlq_replay", stream="stream:audit:x", queue="email-q")) == "events"
    assert plan_instance(connections, req("retry_failed_job", queue="email-q")) == "jobs"
    assert plan_instance(connections, req("retry_failed_job", queue="other")) == "default"
    assert plan_instance(connections, req("reconcile_outbox", service="event")) == "default"


def test_the_approve_command_reaches_the_same_config_and_state(tmp_path: Path) -> None:
    state = tmp_path / "my state"
    settings = settings_for(tmp_path, None, "redis://127.0.0.1:1/0", state_dir=str(state))
    pid = "p-20261130-021033-0a1b2c3d"
    assert approve_command(settings, pid) == f"MESH_STATE_DIR={shlex.quote(str(state))} mesh-mcp approve {pid}"
    workspace = load_settings(environ={}, overrides={"workspace": str(tmp_path)})
    assert approve_command(workspace, pid) == f"mesh-mcp approve {pid} --workspace {shlex.quote(str(tmp_path))}"
    config = tmp_path / "mesh.toml"
    config.write_text(f'state_dir = "{state}"\n', encoding="utf-8")
    from_file = load_settings(environ={}, config_file=config)
    assert from_file.config_file is not None
    assert approve_command(from_file, pid) == f"mesh-mcp approve {pid} --config {shlex.quote(str(config))}"


def test_the_approver_flag_only_when_signature_mode_needs_it(tmp_path: Path) -> None:
    import getpass

    me = getpass.getuser()
    local = settings_for(tmp_path, None, "redis://127.0.0.1:1/0")
    assert default_approver_flag(local) is None
    assert "Approval: " in approval_note(local)

    def signed(approvers: dict[str, str]):
        return settings_for(tmp_path, None, "redis://127.0.0.1:1/0",
                            approval={"mode": "signature", "approvers": approvers})

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x"
    assert default_approver_flag(signed({"zed": key, "amy": key})) == "amy"  # the first by name
    assert default_approver_flag(signed({me: key, "amy": key})) is None  # this user is listed
    assert default_approver_flag(signed({})) is None
    pid = "p-20261130-021033-0a1b2c3d"
    assert approve_command(signed({"zed": key}), pid).endswith(f"mesh-mcp approve {pid} --approver zed")


def _signature_settings(tmp_path: Path, **approval):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from server.approval.keys import public_key_text

    key = public_key_text(Ed25519PrivateKey.generate().public_key())
    return settings_for(tmp_path, None, "redis://127.0.0.1:1/0", approval={
        "mode": "signature", "approvers": {"zed": key}, "trust_file": str(tmp_path / "no-trust.toml"), **approval})



def test_the_approval_note_names_the_approvers_and_a_failing_trust_check(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from server.approval.keys import approver_keys, fingerprint, public_key_text
    from server.approval.tokens import describe_mode
    from server.approval.trust import gate_status

    settings = _signature_settings(tmp_path)
    fp = fingerprint(approver_keys(settings)["zed"])
    problems = gate_status(settings).problems
    assert problems  # no trust file there
    assert approval_note(settings) == (
        f"Approval: {describe_mode(settings)} Approvers: zed ({fp}). Warning: the trust check fails, so an agent "
        "running as the server's OS user could add its own approver key "
        f"({'; '.join(problems)}): apply_remediation will refuse until it is fixed.")
    allowed = _signature_settings(tmp_path, allow_unprotected_approvers=True)
    assert approval_note(allowed).endswith(
        f"({'; '.join(problems)}): the server applies anyway (--allow-unprotected-approvers).")
    local = settings_for(tmp_path, None, "redis://127.0.0.1:1/0")
    assert approval_note(local) == f"Approval: {describe_mode(local)}"
    two = _signature_settings(tmp_path, approvers={"amy": public_key_text(Ed25519PrivateKey.generate().public_key()),
                                                   "zed": settings.approval.approvers["zed"]})
    fps = {who: fingerprint(key) for who, key in approver_keys(two).items()}
    assert f" Approvers: amy ({fps['amy']}), zed ({fps['zed']}). Warning:" in approval_note(two)


def test_the_approval_note_names_every_trust_problem(tmp_path: Path) -> None:
    from server.approval.trust import gate_status

    settings = _signature_settings(tmp_path)
    (tmp_path / "no-trust.toml").write_text(f'[approvers]\nother = "{settings.approval.approvers["zed"]}"\n',
                                            encoding="utf-8")
    problems = gate_status(settings).problems
    assert len(problems) >= 2, problems  # the file's approvers differ from the server's (and more)
    assert f"its own approver key ({problems[0]}; {problems[1]}" in approval_note(settings)
