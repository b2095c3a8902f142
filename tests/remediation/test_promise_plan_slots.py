"""Promise: on a Redis Cluster a plan never holds a transaction across slots, and says where it spans slots.

:func:`tools.remediation.slots.review` on plans built from typed operations (no server needed:
the slot of a key is CRC16 of its hash tag, computed by redis-py as a cluster client does; the
cluster end-to-end tests are ``tests/topologies/test_cluster_remediation.py``). A BullMQ retry
whose queue keys fall in several slots is refused with the setting to change; a ``del`` step
over several slots is noted as running slot by slot; steps over several slots are noted with
each step's slots.
"""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from server.errors import RemediationRefused
from tools.remediation import slots
from tools.remediation.model import (
    BullRetryOp,
    ConfirmOp,
    DelOp,
    EntryRef,
    ExportOp,
    PendingRef,
    SqlRow,
    SqlUpdateOp,
    Step,
    XAckOp,
    XAddOp,
    XClaimOp,
    XDelOp,
    ZRemOp,
)


def _step(number: int, op, action: str = "a") -> Step:
    return Step(number=number, action=action, description="", command="", target="", precondition="", backup=None,
                reversible=True, operation=op)


def test_slot_of_is_the_crc16_slot() -> None:
    for key in ("stream:event:created", "{bull}:q:1", "a", ""):
        assert slots.slot_of(key) == key_slot(key.encode())
    assert slots.slot_of("{x}:1") == slots.slot_of("{x}:2")


def test_slot_groups_keep_first_seen_order() -> None:
    a1, a2, b = "{a}:1", "{a}:2", "{b}:1"
    assert slots.slot_of(a1) != slots.slot_of(b)
    assert slots.slot_groups([a1, b, a2]) == [[a1, a2], [b]]
    assert slots.slot_groups([]) == []


def test_step_keys_of_every_operation() -> None:
    bull = BullRetryOp(queue="q", prefix="bull", job_ids=["7"], target_list="wait", push="LPUSH", marker=True,
                       events_maxlen=10)
    cases = [
        (ExportOp(entries=[EntryRef(key="s-dlq", id="1-0")], pending=[PendingRef(stream="s", group="g", id="1-0")]),
         ["s-dlq", "s"]),
        (XClaimOp(stream="s", group="g", consumer="c", min_idle_ms=1, ids=["1-0"]), ["s"]),
        (XAckOp(stream="s", group="g", ids=["1-0"]), ["s"]),
        (XAddOp(stream="s", maxlen=None, messages=[]), ["s"]),
        (ConfirmOp(stream="s", group="g", replay_step=1, timeout_ms=1), ["s"]),
        (DelOp(keys=["k1", "k2"]), ["k1", "k2"]),
        (XDelOp(key="s-dlq", ids=["1-0"]), ["s-dlq"]),
        (ZRemOp(key="z", members=["m"]), ["z"]),
        (bull, sorted({"bull:q:failed", "bull:q:7", "bull:q:wait", "bull:q:marker", "bull:q:events"})),
        (SqlUpdateOp(service="s", table="t", set_status="A", expect_status="B", rows=[SqlRow(id="x")]), []),
    ]
    for op, keys in cases:
        assert slots.step_keys(_step(1, op)) == keys, op


def test_a_bullmq_retry_over_several_slots_is_refused() -> None:
    op = BullRetryOp(queue="mail", prefix="bull", job_ids=["42"], target_list="wait", push="LPUSH", marker=False,
                     events_maxlen=10)
    assert len(slots.bull_job_slots(op, "42")) > 1
    with pytest.raises(RemediationRefused) as info:
        slots.review([_step(1, op)], [])
    assert str(info.value) == (
        "refused on a Redis Cluster: the keys of BullMQ queue 'mail' under prefix 'bull' are in different slots, "
        "so job 42 cannot be retried in one WATCH/MULTI transaction (BullMQ itself needs them in one slot on a "
        "cluster). Use a hash-tagged prefix, e.g. [conventions] bullmq_prefix = \"{bull}\", as the BullMQ workers do")


def test_a_hash_tagged_bullmq_retry_is_one_slot_and_needs_no_note() -> None:
    op = BullRetryOp(queue="mail", prefix="{bull}", job_ids=["42", "43"], target_list="paused", push="RPUSH",
                     marker=True, events_maxlen=10)
    assert slots.bull_job_slots(op, "42") == {slots.slot_of("{bull}")}
    notes: list[str] = []
    slots.review([_step(1, op)], notes)
    assert notes == []


def test_a_delete_over_several_slots_runs_slot_by_slot_and_steps_over_slots_are_named() -> None:
    keys = ["{a}:1", "{b}:1", "{a}:2"]
    sa, sb = slots.slot_of("{a}:1"), slots.slot_of("{b}:1")
    steps = [
        _step(1, ExportOp(entries=[EntryRef(key="{a}:s", id="1-0")]), "export"),
        _step(2, SqlUpdateOp(service="s", table="t", set_status="A", expect_status="B", rows=[SqlRow(id="x")])),
        _step(3, DelOp(keys=keys), "delete_retry_keys"),
    ]
    notes: list[str] = ["earlier"]
    slots.review(steps, notes)
    assert notes[0] == "earlier"
    assert notes[1] == (
        "Redis Cluster: step 3 (delete_retry_keys) deletes 3 key(s) in 2 slots; it runs slot by slot, each slot's "
        "keys backed up, read back and deleted in its own WATCH/MULTI transaction. A key that changes stops the "
        "step at its slot: slots before it stay done and the report names the keys deleted")
    assert notes[2] == (
        f"Redis Cluster: the steps touch keys in 2 different slots (step 1: slot(s) {sa}; step 3: slot(s) "
        f"{', '.join(str(s) for s in sorted({sa, sb}))}). No transaction spans steps: each step re-checks its own "
        "preconditions right before it runs, and the first drift stops the plan")
    assert len(notes) == 3


def test_steps_in_one_slot_get_no_note() -> None:
    notes: list[str] = []
    slots.review([_step(1, ExportOp(entries=[EntryRef(key="{a}:s", id="1-0")])), _step(2, DelOp(keys=["{a}:1"])),
                  _step(3, XDelOp(key="{a}:s", ids=["1-0"]))], notes)
    assert notes == []
    slots.review([], notes)
    assert notes == []


def _retry(queue: str, job: str, prefix: str = "bull") -> BullRetryOp:
    return BullRetryOp(queue=queue, prefix=prefix, job_ids=[job], target_list="wait", push="LPUSH", marker=False,
                       events_maxlen=10)


def test_the_slots_of_a_bullmq_retry_are_those_of_its_keys() -> None:
    keys = ["bull:mail:failed", "bull:mail:42", "bull:mail:wait", "bull:mail:events"]
    assert slots.bull_job_slots(_retry("mail", "42"), "42") == {key_slot(k.encode()) for k in keys}


def test_a_queue_name_with_a_hash_tag_keeps_a_retry_in_one_slot() -> None:
    op = _retry("{mail}", "42")
    assert slots.bull_job_slots(op, "42") == {key_slot(b"mail")}
    notes: list[str] = []
    slots.review([_step(1, op)], notes)  # not refused
    assert notes == []


def test_a_retry_over_exactly_two_slots_is_refused() -> None:
    """A queue whose failed and wait keys collide in one slot, and a job id tagged into that slot: the
    job's keys span exactly two slots (the events key is the other), which one transaction cannot hold."""
    queue = next(f"q{i}" for i in range(1_000_000)
                 if key_slot(f"bull:q{i}:failed".encode()) == key_slot(f"bull:q{i}:wait".encode()))
    shared = key_slot(f"bull:{queue}:failed".encode())
    assert key_slot(f"bull:{queue}:events".encode()) != shared
    job = next(f"{{t{i}}}" for i in range(1_000_000) if key_slot(f"t{i}".encode()) == shared)
    op = _retry(queue, job)
    assert len(slots.bull_job_slots(op, job)) == 2
    with pytest.raises(RemediationRefused, match=f"so job {job} cannot be retried in one WATCH/MULTI"):
        slots.review([_step(1, op)], [])
