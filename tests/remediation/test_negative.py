"""What apply_remediation refuses, and how it stops: nothing is lost in any of these."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from server.approval.audit import audit_log
from server.approval.keys import create_approver_key, load_approver_key
from server.approval.tokens import TokenRefused, mint_token
from server.connections import Connections
from server.errors import RemediationRefused
from tests.remediation.conftest import GROUP, STREAM, Poison, approve, settings_for
from tests.remediation.redis_proc import ThrowawayRedis
from tests.remediation.target_sim import ConsumerThread, LiveConsumer, new_event, push_event
from tools.remediation import store
from tools.remediation.backups import read_backup
from tools.remediation.executor import apply_plan
from tools.remediation.model import DelOp
from tools.remediation.operations import render
from tools.remediation.planner import Request, propose

DLQ = f"{STREAM}-dlq"


async def _propose(settings, symptom: str = "dlq_replay", **kw):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, Request(symptom, kw.get("stream", STREAM), kw.get("group"),
                                                            kw.get("service"), None, kw.get("ids")))
    finally:
        await connections.aclose()


async def _apply(settings, plan_id: str, token: str, **kw):
    connections = Connections(settings)
    try:
        return await apply_plan(settings, connections, plan_id, token, **kw)
    finally:
        await connections.aclose()


async def _refusal(settings, plan_id: str, token: str) -> str:
    with pytest.raises(RemediationRefused) as info:
        await _apply(settings, plan_id, token)
    return getattr(info.value, "reason", str(info.value))


def _untouched(client: redis.Redis, poison: Poison) -> None:
    assert client.xlen(DLQ) == 1
    assert client.exists(f"retry:post-processor:{GROUP}:{poison.message_id}:attempt")


@pytest.mark.anyio
async def test_missing_tampered_expired_other_plan_tokens_change_nothing(settings, poison, redis_client) -> None:
    plan = await _propose(settings)
    other = await _propose(settings)
    token = approve(settings, plan.plan_id)
    assert await _refusal(settings, plan.plan_id, "") == "missing"
    flipped = token[:10] + ("A" if token[10] != "A" else "B") + token[11:]
    assert await _refusal(settings, plan.plan_id, flipped) in ("bad_mac", "malformed")
    assert await _refusal(settings, other.plan_id, token) == "other_plan"
    stale, _ = mint_token(settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256,
                          plan_expires_at=datetime.now(UTC) + timedelta(hours=1), approver="local:test",
                          now=time.time() - 3600)
    assert await _refusal(settings, plan.plan_id, stale) == "expired"
    _untouched(redis_client, poison)
    refusals = [r for r in audit_log(settings).read() if r["event"] == "apply_refused"]
    assert [r["result"] for r in refusals] == ["missing", refusals[1]["result"], "other_plan", "expired"]
    assert all(token not in str(r) for r in audit_log(settings).read())
    # none of the refusals used the token up: it still works
    poison.fixed = True
    with ConsumerThread(poison.processor):
        assert (await _apply(settings, plan.plan_id, token)).status == "completed"


@pytest.mark.anyio
async def test_reused_token_is_refused(settings, poison, redis_client) -> None:
    plan = await _propose(settings)
    token = approve(settings, plan.plan_id)
    poison.fixed = True
    dry = await _apply(settings, plan.plan_id, token, dry_run=True)
    assert dry.status == "dry_run_ok" and all(s.status == "would_run" for s in dry.steps)
    assert redis_client.xlen(DLQ) == 1  # a dry run changes nothing and does not use the token
    with ConsumerThread(poison.processor):
        assert (await _apply(settings, plan.plan_id, token)).status == "completed"
    assert await _refusal(settings, plan.plan_id, token) == "reused"


@pytest.mark.anyio
async def test_plan_edited_after_approval(settings, poison, redis_client) -> None:
    plan = await _propose(settings)
    token = approve(settings, plan.plan_id)
    path = store.plan_path(settings, plan.plan_id)
    original = path.read_text()
    # 1. a careless edit: the content no longer matches the plan's own hash
    path.write_text(original.replace('"XDEL ', '"FLUSHALL ', 1) if '"XDEL ' in original
                    else original.replace(plan.summary, plan.summary + " (edited)"))
    with pytest.raises(RemediationRefused, match="edited after it was proposed"):
        await _apply(settings, plan.plan_id, token)
    # 2. a consistent edit (operation, command and hash all redone): the token names the old hash
    index = next(i for i, s in enumerate(plan.steps) if s.action == "delete_retry_keys")
    op = DelOp(keys=[*plan.steps[index].operation.keys, "some:other:key"])
    step = plan.steps[index].model_copy(update={"operation": op, "command": render(op, settings.conventions)})
    steps = list(plan.steps)
    steps[index] = step
    forged = plan.model_copy(update={"steps": steps}).sealed()
    path.write_text(forged.model_dump_json())
    assert await _refusal(settings, plan.plan_id, token) == "plan_changed"
    _untouched(redis_client, poison)


@pytest.mark.anyio
async def test_signature_from_a_key_not_in_config_is_refused(tmp_path: Path, outbox_db, redis_url, redis_client):
    alice = create_approver_key(tmp_path / "alice.key", "alice", "correct horse battery", scrypt_n=2**10)
    create_approver_key(tmp_path / "mallory.key", "mallory", "mallory pass phrase", scrypt_n=2**10)
    trust = tmp_path / "trust.toml"
    trust.write_text(f'[approvers]\nalice = "{alice}"\n')
    settings = settings_for(tmp_path, outbox_db, redis_url, approval={"trust_file": str(trust)})
    assert settings.approval.mode == "signature"
    poison = Poison(redis_client, outbox_db, settings)
    plan = await _propose(settings)
    _, mallory_key = load_approver_key(tmp_path / "mallory.key", "mallory pass phrase")
    expires = datetime.fromisoformat(plan.expires_at)
    for approver, reason in (("mallory", "unknown_approver"), ("alice", "bad_signature")):
        token, _ = mint_token(settings, plan_id=plan.plan_id, plan_sha256=plan.plan_sha256, plan_expires_at=expires,
                              approver=approver, private_key=mallory_key)
        assert await _refusal(settings, plan.plan_id, token) == reason
    _untouched(redis_client, poison)
    # alice, through `mesh-mcp approve` with her passphrase, is accepted
    token = approve(settings, plan.plan_id, key_path=tmp_path / "alice.key",
                    ask_secret=lambda prompt: "correct horse battery")
    # a valid token, but the trust file is the test user's own (or the server runs as root): refused
    with pytest.raises(RemediationRefused, match="approver set is not protected"):
        await _apply(settings, plan.plan_id, token, dry_run=True)
    allowed = settings_for(tmp_path, outbox_db, redis_url,
                           approval={"trust_file": str(trust), "allow_unprotected_approvers": True})
    report = await _apply(allowed, plan.plan_id, token, dry_run=True)
    assert report.status == "dry_run_ok" and report.approver == "alice"
    assert "--allow-unprotected-approvers" in (report.approval_warning or "")
    assert "--allow-unprotected-approvers" in report.summary_text()


@pytest.mark.anyio
async def test_message_acknowledged_between_propose_and_apply_stops_before_any_change(
    tmp_path: Path, outbox_db, topology
) -> None:
    redis_url, redis_client = topology.redis, topology.client  # the machine's Redis, then a cluster
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"dead_consumer_idle_ms": 1000})
    redis_client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    message_id = push_event(redis_client, STREAM, new_event())
    redis_client.xreadgroup(GROUP, "pp-dead", {STREAM: ">"})  # it crashed while processing:
    lock = f"idempotency:post-processor:{GROUP}:{message_id}"
    redis_client.set(lock, "processing", ex=86400)  # its lock stayed
    time.sleep(1.1)
    with LiveConsumer(redis_client, STREAM, GROUP, "pp-live"):  # a live consumer at work
        plan = await _propose(settings, "claim_dead_consumer")
    assert [s.action for s in plan.steps] == ["export", "delete_stale_locks", "xclaim"]
    token = approve(settings, plan.plan_id)
    redis_client.xack(STREAM, GROUP, message_id)  # meanwhile, the message was acknowledged
    report = await _apply(settings, plan.plan_id, token)
    assert report.status == "stopped"
    assert [s.status for s in report.steps] == ["drift", "not_run", "not_run"]
    assert "no longer pending" in report.steps[0].detail
    assert redis_client.get(lock) == b"processing"  # nothing deleted
    assert report.backup_file is None  # nothing even backed up: the pre-flight stopped it
    assert [r["result"] for r in audit_log(settings).read() if r["event"] == "step"] == ["drift"]


@pytest.mark.anyio
async def test_redis_dies_mid_plan(tmp_path: Path) -> None:
    server = ThrowawayRedis(tmp_path)
    try:
        settings = settings_for(tmp_path, None, server.url)
        client = redis.Redis.from_url(server.url)
        poison = Poison(client, None, settings)
        plan = await _propose(settings)
        assert [s.action for s in plan.steps] == ["export", "replay", "confirm_replay", "xdel_dlq",
                                                  "delete_retry_keys"]
        token = approve(settings, plan.plan_id)
        poison.fixed = True
        consumer = ConsumerThread(poison.processor).__enter__()

        async def kill_after_confirm(number: int) -> None:
            if number == 3:
                consumer.__exit__(None, None, None)
                server.kill()

        report = await _apply(settings, plan.plan_id, token, after_step=kill_after_confirm)
    finally:
        server.kill()
    assert report.status == "stopped"
    assert [s.status for s in report.steps] == ["done", "done", "done", "failed", "not_run"]
    assert "unavailable" in report.steps[3].detail
    assert "Steps done: 1, 2, 3" in report.summary
    records = read_backup(Path(report.backup_file))
    saved = [r for r in records if r["kind"] == "stream_entry" and r["data"]["key"] == DLQ]
    assert saved and dict(saved[0]["data"]["fields"])["messageId"] == poison.message_id
    steps = [(r["step"], r["result"]) for r in audit_log(settings).read() if r["event"] == "step"]
    assert steps == [(1, "done"), (2, "done"), (3, "done"), (4, "failed")]
    with pytest.raises(TokenRefused):  # the token was used; a new plan must be approved
        await _apply(settings, plan.plan_id, token)


@pytest.mark.anyio
async def test_preconditions_that_cannot_be_checked_close_the_plan(settings, outbox_db) -> None:
    import uuid

    import psycopg

    event_id = str(uuid.uuid4())
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("INSERT INTO event_queue (id, status, type, emitter) VALUES (%s, 'FAILED', 't', 'ms-event')",
                     (event_id,))
    plan = await _propose(settings, "reconcile_outbox", service="event", ids=[event_id])
    token = approve(settings, plan.plan_id)
    with psycopg.connect(outbox_db, autocommit=True) as conn:
        conn.execute("ALTER TABLE event_queue RENAME TO event_queue_old")  # a migration ran meanwhile
    report = await _apply(settings, plan.plan_id, token)
    assert report.status == "stopped" and "could not be checked" in report.summary
    assert "event_queue" in report.summary and [s.status for s in report.steps] == ["not_run"]
    assert store.application_record(settings, plan.plan_id)["status"] == "stopped"  # closed, not "applying"
    assert audit_log(settings).read()[-1]["event"] == "apply_finished"
    with psycopg.connect(outbox_db) as conn:
        assert conn.execute("SELECT status FROM event_queue_old WHERE id = %s", (event_id,)).fetchone() == ("FAILED",)
