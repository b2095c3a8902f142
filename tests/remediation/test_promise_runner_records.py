"""Promise: every destructive runner backs up exactly what it is about to change, then does exactly
what the approved operation says, and reports it honestly (what it touched, how many records it
saved, what it could not do and what it had already done when it stopped). The transactional
runners (SQL, BullMQ, DEL across cluster slots) are in ``test_promise_runner_transactions.py``.

Each runner runs on a real Redis (the machine's) or PostgreSQL with a real backup file; the backup
records are read back from disk and compared field by field with the state they must restore. A
concurrent writer is played, as in ``test_races.py``, by a backup file that changes Redis while
the backup is written: the window between the backup and the change.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import redis

from server.approval.audit import audit_log
from server.connections import Connections
from tests.remediation.conftest import GROUP, STREAM
from tools.remediation.backups import BackupFile, read_backup
from tools.remediation.model import (
    Check,
    DelOp,
    EntryRef,
    ExportOp,
    PendingRef,
    Step,
    XAckOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)
from tools.remediation.runners import Drift, RunContext, run_step

pytestmark = pytest.mark.anyio

PLAN, SHA = "p-test", "0" * 64


class RacingBackup(BackupFile):
    """A backup file during whose ``nth`` write another client changes Redis (``race`` runs once)."""

    def __init__(self, path: Path, race: Any, nth: int = 1) -> None:
        super().__init__(path, PLAN, SHA)
        self.race, self.nth = race, nth

    def write(self, step: int, records: list[tuple[str, str, Any]]) -> int:
        count = super().write(step, records)
        self.nth -= 1
        if self.nth == 0:
            self.race()
        return count


def _step(op: Any, checks: list[Check] | None = None, number: int = 3) -> Step:
    return Step(number=number, action=op.op, description="", command="", target="", precondition="",
                checks=checks or [], backup="", reversible=True, operation=op)


async def _run(settings, op: Any, backups: BackupFile, checks: list[Check] | None = None) -> Any:
    connections = Connections(settings)
    try:
        ctx = RunContext(settings, connections, backups, {}, audit_log(settings), "test")
        return await run_step(ctx, _step(op, checks))
    finally:
        await connections.aclose()


def _backups(tmp_path: Path) -> BackupFile:
    return BackupFile(tmp_path / "b.jsonl", PLAN, SHA)


def _records(tmp_path: Path) -> list[tuple[int, str, str, Any]]:
    """(step, kind, target, data) of every backup record, after checking the common fields."""
    out = []
    for record in read_backup(tmp_path / "b.jsonl"):
        assert record["plan_id"] == PLAN and record["plan_sha256"] == SHA
        out.append((record["step"], record["kind"], record["target"], record["data"]))
    return out


def _pending_stream(client: redis.Redis, n: int = 3, idle_ms: int = 120_000) -> list[str]:
    """``n`` entries delivered to ``pp-dead`` and idle for ``idle_ms`` (set with XCLAIM ... IDLE)."""
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids = [client.xadd(STREAM, {"id": f"m{i}", "n": str(i)}).decode() for i in range(n)]
    client.xreadgroup(GROUP, "pp-dead", {STREAM: ">"})
    client.xclaim(STREAM, GROUP, "pp-dead", 0, ids, idle=idle_ms, justid=True)
    return ids


def _pending(client: redis.Redis) -> dict[str, tuple[str, int]]:
    return {p["message_id"].decode(): (p["consumer"].decode(), p["times_delivered"])
            for p in client.xpending_range(STREAM, GROUP, "-", "+", 100)}


def _pending_record(ids_consumer: tuple[str, str], data: Any, deliveries: int = 1) -> None:
    entry_id, consumer = ids_consumer
    assert data["stream"] == STREAM and data["group"] == GROUP and data["id"] == entry_id
    pending = data["pending"]
    assert pending["id"] == entry_id and pending["consumer"] == consumer
    assert pending["deliveries"] == deliveries and pending["idle_ms"] >= 100_000


# -- XCLAIM --------------------------------------------------------------------------------------

async def test_xclaim_backs_up_each_pending_entry_and_claims_them(settings, redis_client, tmp_path) -> None:
    ids = _pending_stream(redis_client)
    op = XClaimOp(stream=STREAM, group=GROUP, consumer="pp-live", min_idle_ms=60_000, ids=ids[:2])
    outcome = await _run(settings, op, _backups(tmp_path))
    assert outcome.detail == "claimed 2 entr(ies) to consumer pp-live"
    assert outcome.targets == ids[:2] and outcome.output == {"claimed": ids[:2]} and outcome.backup_records == 2
    records = _records(tmp_path)
    assert [(s, k, t) for s, k, t, _ in records] == [(3, "pending", f"{STREAM} {GROUP} {i}") for i in ids[:2]]
    for entry_id, (_, _, _, data) in zip(ids[:2], records, strict=True):
        _pending_record((entry_id, "pp-dead"), data)  # XCLAIM ... JUSTID does not count a delivery
    assert {i: c for i, (c, _) in _pending(redis_client).items()} == {ids[0]: "pp-live", ids[1]: "pp-live",
                                                                      ids[2]: "pp-dead"}


async def test_xclaim_honours_the_idle_time_at_the_claim_itself(settings, redis_client, tmp_path) -> None:
    """The dead consumer comes back and re-reads one entry between the backup and the XCLAIM: its idle
    time is reset, so XCLAIM's min-idle argument must leave it where it is (the last guard)."""
    ids = _pending_stream(redis_client, n=2)
    op = XClaimOp(stream=STREAM, group=GROUP, consumer="pp-live", min_idle_ms=60_000, ids=ids)
    backups = RacingBackup(tmp_path / "b.jsonl",
                           lambda: redis_client.xclaim(STREAM, GROUP, "pp-dead", 0, [ids[0]], justid=True))
    with pytest.raises(Drift) as info:
        await _run(settings, op, backups)
    assert str(info.value) == (f"claimed 1 of 2 entries to pp-live; not claimable (acknowledged or re-delivered "
                               f"meanwhile): {ids[0]}")
    assert _pending(redis_client)[ids[0]][0] == "pp-dead"  # the consumer that came back keeps it


async def test_xclaim_names_every_entry_it_could_not_claim(settings, redis_client, tmp_path) -> None:
    ids = _pending_stream(redis_client)
    redis_client.xack(STREAM, GROUP, ids[0], ids[2])
    op = XClaimOp(stream=STREAM, group=GROUP, consumer="pp-live", min_idle_ms=60_000, ids=ids)
    with pytest.raises(Drift) as info:
        await _run(settings, op, _backups(tmp_path))
    assert str(info.value).endswith(f"meanwhile): {ids[0]}, {ids[2]}")
    assert str(info.value).startswith("claimed 1 of 3 entries to pp-live;")
    # the backup says which were pending and which were not
    assert [d["pending"] is None for *_, d in _records(tmp_path)] == [True, False, True]


# -- XACK ----------------------------------------------------------------------------------------

async def test_xack_backs_up_the_pending_facts_and_the_entries(settings, redis_client, tmp_path) -> None:
    ids = _pending_stream(redis_client)
    op = XAckOp(stream=STREAM, group=GROUP, ids=ids[:2])
    outcome = await _run(settings, op, _backups(tmp_path))
    assert outcome.detail == f"acknowledged 2 entr(ies) in group {GROUP}"
    assert outcome.targets == ids[:2] and outcome.output == {"acked": 2} and outcome.backup_records == 4
    records = _records(tmp_path)
    assert [(s, k, t) for s, k, t, _ in records] == (
        [(3, "pending", f"{STREAM} {GROUP} {i}") for i in ids[:2]]
        + [(3, "stream_entry", f"{STREAM} {i}") for i in ids[:2]])
    for entry_id, (*_, data) in zip(ids[:2], records[:2], strict=True):
        _pending_record((entry_id, "pp-dead"), data)
    for n, (*_, data) in enumerate(records[2:]):
        assert data == {"key": STREAM, "id": ids[n], "fields": [["id", f"m{n}"], ["n", str(n)]]}
    assert list(_pending(redis_client)) == [ids[2]]


async def test_xack_of_entries_acknowledged_meanwhile_says_how_many(settings, redis_client, tmp_path) -> None:
    ids = _pending_stream(redis_client)
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: redis_client.xack(STREAM, GROUP, ids[1]))
    with pytest.raises(Drift) as info:
        await _run(settings, XAckOp(stream=STREAM, group=GROUP, ids=ids), backups)
    assert str(info.value) == "acknowledged 2 of 3 entries (the others were acknowledged meanwhile)"


# -- XDEL and export ---------------------------------------------------------------------------

async def test_xdel_backs_up_the_entries_it_deletes(settings, redis_client, tmp_path) -> None:
    ids = [redis_client.xadd(STREAM, {"id": f"m{i}", "bin": b"\xff\x00" if i else "x"}).decode() for i in range(3)]
    gone = "1-1"  # never existed: backed up as missing, not deleted
    outcome = await _run(settings, XDelOp(key=STREAM, ids=[ids[0], ids[1], gone]), _backups(tmp_path))
    assert outcome.detail == f"deleted 2 entr(ies) from {STREAM}"
    assert outcome.targets == [ids[0], ids[1], gone] and outcome.output == {"deleted": 2}
    assert outcome.backup_records == 3
    binary = {"base64": base64.b64encode(b"\xff\x00").decode()}  # not UTF-8: the exact bytes, as base64
    assert _records(tmp_path) == [
        (3, "stream_entry", f"{STREAM} {ids[0]}",
         {"key": STREAM, "id": ids[0], "fields": [["id", "m0"], ["bin", "x"]]}),
        (3, "stream_entry", f"{STREAM} {ids[1]}",
         {"key": STREAM, "id": ids[1], "fields": [["id", "m1"], ["bin", binary]]}),
        (3, "stream_entry", f"{STREAM} {gone}", {"key": STREAM, "id": gone, "fields": None, "missing": True}),
    ]
    assert [i.decode() for i, _ in redis_client.xrange(STREAM)] == [ids[2]]


async def test_export_saves_entries_and_pending_facts_and_changes_nothing(settings, redis_client, tmp_path) -> None:
    ids = _pending_stream(redis_client, n=2)
    before = redis_client.xrange(STREAM), _pending(redis_client)
    op = ExportOp(entries=[EntryRef(key=STREAM, id=ids[0]), EntryRef(key=STREAM, id="1-1")],
                  pending=[PendingRef(stream=STREAM, group=GROUP, id=ids[1])])
    outcome = await _run(settings, op, _backups(tmp_path))
    assert outcome.detail == "saved 3 record(s) to the backup" and outcome.backup_records == 3
    assert outcome.targets == [f"{STREAM} {ids[0]}", f"{STREAM} 1-1", f"{STREAM} {GROUP} {ids[1]}"]
    records = _records(tmp_path)
    assert records[0] == (3, "stream_entry", f"{STREAM} {ids[0]}",
                          {"key": STREAM, "id": ids[0], "fields": [["id", "m0"], ["n", "0"]]})
    assert records[1][3] == {"key": STREAM, "id": "1-1", "fields": None, "missing": True}
    assert records[2][:3] == (3, "pending", f"{STREAM} {GROUP} {ids[1]}")
    _pending_record((ids[1], "pp-dead"), records[2][3])
    assert (redis_client.xrange(STREAM), _pending(redis_client)) == before


# -- ZREM ----------------------------------------------------------------------------------------

async def test_zrem_backs_up_each_member_with_its_score(settings, redis_client, tmp_path) -> None:
    key = "retry:post-processor:pp-event"
    redis_client.zadd(key, {"a": 1.5, "b": 1700000000000, "c": 3})
    outcome = await _run(settings, ZRemOp(key=key, members=["a", "b", "gone"]), _backups(tmp_path))
    assert outcome.detail == f"removed 2 member(s) from {key}"
    assert outcome.targets == ["a", "b", "gone"] and outcome.output == {"removed": 2} and outcome.backup_records == 3
    assert _records(tmp_path) == [
        (3, "zset_member", f"{key} a", {"key": key, "member": "a", "score": 1.5}),
        (3, "zset_member", f"{key} b", {"key": key, "member": "b", "score": 1700000000000}),
        (3, "zset_member", f"{key} gone", {"key": key, "member": "gone", "score": None}),
    ]
    assert redis_client.zrange(key, 0, -1, withscores=True) == [(b"c", 3.0)]


# -- DEL -----------------------------------------------------------------------------------------

async def test_del_backs_up_restorable_keys_and_counts_the_ones_already_gone(settings, redis_client, tmp_path):
    redis_client.set("lock:a", "processing", ex=3600)
    redis_client.hset("h:b", mapping={"f": "v"})
    outcome = await _run(settings, DelOp(keys=["lock:a", "h:b", "gone"]), _backups(tmp_path))
    assert outcome.detail == "deleted 2 key(s) (1 already gone)"
    assert outcome.targets == ["lock:a", "h:b", "gone"] and outcome.output == {"deleted": 2}
    assert outcome.backup_records == 3
    records = _records(tmp_path)
    assert [(s, k, t) for s, k, t, _ in records] == [(3, "key", "lock:a"), (3, "key", "h:b"), (3, "key", "gone")]
    assert records[0][3]["value"] == "processing" and records[0][3]["type"] == "string"
    assert 3_500_000 < records[0][3]["pttl_ms"] <= 3_600_000
    assert records[1][3]["type"] == "hash" and records[1][3]["pttl_ms"] is None
    assert records[2][3] == {"key": "gone", "missing": True}
    # restorable: RESTORE from the backup gives the hash back
    redis_client.restore("h:b", 0, base64.b64decode(records[1][3]["dump_base64"]))
    assert redis_client.hgetall("h:b") == {b"f": b"v"}
    assert not redis_client.exists("lock:a")


async def test_del_refusing_a_changed_key_names_it(settings, redis_client, tmp_path) -> None:
    redis_client.set("lock:a", "processing")
    redis_client.set("lock:b", "processing")
    check = Check(kind="key_unchanged", args={"key": "lock:b", "digest": "f" * 64, "allow_missing": True})
    with pytest.raises(Drift) as info:
        await _run(settings, DelOp(keys=["lock:a", "lock:b"]), _backups(tmp_path), [check])
    assert str(info.value) == "key lock:b changed since the plan was approved; nothing was deleted"
    assert redis_client.get("lock:a") == b"processing"


async def test_del_aborted_by_a_concurrent_write_says_nothing_was_deleted(settings, redis_client, tmp_path):
    redis_client.set("lock:a", "processing")
    redis_client.set("lock:b", "processing")
    backups = RacingBackup(tmp_path / "b.jsonl", lambda: redis_client.set("lock:b", "taken again"))
    with pytest.raises(Drift) as info:
        await _run(settings, DelOp(keys=["lock:a", "lock:b"]), backups)
    assert str(info.value) == "a key changed between its backup and the DEL; nothing was deleted"
    assert redis_client.mget("lock:a", "lock:b") == [b"processing", b"taken again"]
