"""Issue 32, attack 4: flooding the audit log does not re-open a replay.

The attack: after a replay (stopped before its confirmation, so the dead letter is still in the
DLQ), ~19,000 ``apply_remediation`` calls with invented plan ids write one ``apply_refused``
record each, more than the 8 MiB of the log's tail the guard used to read; the replayed entry
has since been trimmed from the stream (MAXLEN), so the stream look cannot see it either. The
same dead letter proposed again must not be planned for a replay, and the earlier plan (its
``.applied`` marker and nonce line deleted) must stop as already replayed.

The refusals go through the real tool (in-process MCP client) and the executor a few times, then
the rest of the 19,000 are appended as the same records (one fsync each through the tool would
take minutes), with a valid chain: ``mesh-mcp audit verify`` still passes on the flooded log.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from server.approval.audit import audit_log
from server.errors import NotFound
from tests.helpers import in_process_client
from tests.remediation.conftest import STREAM, Poison, approve, settings_for
from tests.remediation.test_double_replay import _forget_the_apply
from tests.remediation.test_negative import _apply, _propose

FLOOD = 19_000


def _flood(settings, count: int) -> None:
    """Append ``count`` copies of the log's last record (a refusal), each with its own plan id, chained."""
    path = audit_log(settings).path
    lines = path.read_bytes().splitlines()
    template = json.loads(lines[-1])
    assert template["event"] == "apply_refused"
    seq, prev = template["seq"], hashlib.sha256(lines[-1]).hexdigest()
    out = bytearray()
    for n in range(count):
        seq += 1
        plan_id = f"p-20261130-000000-{n:08x}"
        entry = {**template, "plan_id": plan_id, "detail": template["detail"].replace(template["plan_id"], plan_id),
                 "seq": seq, "prev": prev}
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()
        prev = hashlib.sha256(line).hexdigest()
        out += line + b"\n"
    with open(path, "ab") as fh:
        fh.write(out)


@pytest.mark.anyio
async def test_a_flood_of_refusals_does_not_reopen_a_replay(tmp_path, outbox_db, redis_url, redis_client):
    settings = settings_for(tmp_path, outbox_db, redis_url, limits={"replay_confirm_timeout_ms": 500})
    poison = Poison(redis_client, outbox_db, settings)
    plan = await _propose(settings)
    token = approve(settings, plan.plan_id)
    poison.fixed = True
    first = await _apply(settings, plan.plan_id, token)  # no consumer: stopped at the confirmation
    assert first.status == "stopped" and first.steps[2].action == "confirm_replay", first.summary_text()
    replayed = first.steps[1].output["replayed"][0]["new_id"]

    async with in_process_client(settings) as client:  # refusals through the tool, as an agent makes them
        for n in range(3):
            result = await client.call_tool("apply_remediation",
                                            {"plan_id": f"p-20261130-000000-f00d{n:04x}", "approval_token": "x"})
            assert result.is_error
    _flood(settings, FLOOD - 3)
    log = audit_log(settings)
    assert log.path.stat().st_size > 8 * 1024 * 1024  # more than the tail the guard used to read
    assert log.verify().ok and log.head().count > FLOOD
    redis_client.xdel(STREAM, replayed)  # trimmed from the stream since (MAXLEN): the stream look is blind
    length = redis_client.xlen(STREAM)

    with pytest.raises(NotFound) as info:  # proposed again: no second replay is planned
        await _propose(settings)
    assert f"was already replayed by plan {plan.plan_id} as {replayed}" in str(info.value)

    _forget_the_apply(settings, plan.plan_id)  # and the approved plan, made to look unused, stops
    again = await _apply(settings, plan.plan_id, token)
    assert again.status == "stopped" and again.steps[1].status == "drift", again.summary_text()
    assert "already replayed" in again.steps[1].detail
    assert redis_client.xlen(STREAM) == length
