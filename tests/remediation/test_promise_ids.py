"""Promise: plan ids are validated (path-like or malformed ids refused before any file is read),
and the planner refuses ids with control characters.

A refused plan id never reaches the file system: a valid plan planted where a path-like id
would lead (outside ``plans/``) is not loaded, and nothing is created there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from server.connections import Connections
from server.errors import InvalidArgument, NotFound
from tests.helpers import in_process_client
from tests.remediation.conftest import STREAM, approve, settings_for
from tools.remediation import store
from tools.remediation.executor import apply_plan
from tools.remediation.planner import Request, propose

pytestmark = pytest.mark.anyio

GOOD = "p-20261130-021033-0a1b2c3d"
BAD_PLAN_IDS = [
    "../p-20261130-021033-0a1b2c3d",
    "p-20261130-021033-0a1b2c3d/../../evil",
    "../evil",
    "/etc/passwd",
    "plans/p-20261130-021033-0a1b2c3d",
    "p-20261130-021033-0a1b2c3d.json",
    "p-20261130-021033-0a1b2c3d0",
    "p-20261130-021033-0a1b2c3",
    "xp-20261130-021033-0a1b2c3d",
    "p-20261130-021033-0A1B2C3D",
    "p-2026113-0021033-0a1b2c3d",
    "p-20261130-021033-0a1b2c3g",
    "p-20261130_021033-0a1b2c3d",
    "p-20261130-021033-0a1b\x002c3d",
    "p-20261130-021033-0a1b2c3d\nx",
    "p-20261130-021033-0a1b2c3d\x00",
    "",
    "p-",
]


@pytest.mark.parametrize("plan_id", BAD_PLAN_IDS)
def test_malformed_or_path_like_plan_ids_are_refused(plan_id: str) -> None:
    with pytest.raises(InvalidArgument, match="not a plan id"):
        store.validate_plan_id(plan_id)


def test_a_well_formed_plan_id_is_accepted() -> None:
    assert store.validate_plan_id(GOOD) == GOOD
    assert store.validate_plan_id(f"  {GOOD}\n") == GOOD  # pasted with blanks around it
    assert store.validate_plan_id(store.new_plan_id()).startswith("p-")


async def test_apply_never_reads_a_plan_outside_the_plans_folder(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    plans = store.plans_dir(settings)
    plans.mkdir(parents=True)
    (plans / f"{GOOD}.json").write_text("{}", encoding="utf-8")
    shutil.copy(plans / f"{GOOD}.json", plans.parent / "evil.json")  # where "../evil" would lead
    connections = Connections(settings)
    try:
        for plan_id in ("../evil", f"{GOOD}/../../evil", "../plans/" + GOOD):
            with pytest.raises(InvalidArgument, match="not a plan id"):
                await apply_plan(settings, connections, plan_id, "token")
        with pytest.raises(NotFound):  # well formed but unknown: a different, clear refusal
            await apply_plan(settings, connections, "p-20261130-021033-ffffffff", "token")
    finally:
        await connections.aclose()
    files = sorted(p.name for p in plans.parent.iterdir() if p.is_file() and not p.name.endswith(".lock"))
    # the audit log and the window counter of refusals of unknown plans (their .lock files are the portable locks)
    assert files == ["audit-refusals.json", "audit.log", "evil.json"]
    assert sorted(p.name for p in plans.iterdir()) == [f"{GOOD}.json"]  # no .applied marker anywhere


async def test_apply_remediation_tool_refuses_a_path_like_plan_id(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    async with in_process_client(settings) as client:
        for plan_id in ("../evil", "p-20261130-021033-0a1b2c3d/x"):
            result = await client.call_tool("apply_remediation", {"plan_id": plan_id, "approval_token": "x"})
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert result.is_error and "not a plan id" in text, text


def test_approve_refuses_a_path_like_plan_id(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    with pytest.raises(InvalidArgument, match="not a plan id"):
        approve(settings, "../evil")


CONTROL = ["\x00", "\x01", "\n", "\t", "\x1b", "\x1f", "\x7f"]


async def _propose(settings, request: Request):
    connections = Connections(settings)
    try:
        return await propose(settings, connections, request)
    finally:
        await connections.aclose()


@pytest.mark.parametrize("char", CONTROL)
async def test_the_planner_refuses_ids_with_control_characters(tmp_path: Path, redis_url: str, char: str) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    requests = [
        Request("retry_failed_job", None, None, None, "email-queue", [f"job{char}42"]),
        Request("dlq_replay", STREAM, None, None, None, [f"1700000000000-0{char}1"]),
        Request("dlq_replay", f"stream:event{char}created", None, None, None, None),
        Request("claim_dead_consumer", STREAM, f"pp{char}event", None, None, None),
        Request("retry_failed_job", None, None, None, f"email{char}queue", None),
    ]
    for request in requests:
        with pytest.raises(InvalidArgument, match="control character"):
            await _propose(settings, request)
    assert not store.plans_dir(settings).exists()  # nothing proposed, nothing written


async def test_the_planner_accepts_a_printable_job_id(tmp_path: Path, redis_url: str) -> None:
    """The control-character rule is not a blanket refusal: a printable id reaches the planner's lookup."""
    settings = settings_for(tmp_path, None, redis_url)
    with pytest.raises(NotFound):
        await _propose(settings, Request("retry_failed_job", None, None, None, "email-queue", ["job 42:é~"]))


@pytest.mark.parametrize("plan_id", ["../evil", f"{GOOD}/../../evil", "/tmp/x"])
def test_every_path_built_from_a_plan_id_validates_it(tmp_path: Path, redis_url: str, plan_id: str) -> None:
    settings = settings_for(tmp_path, None, redis_url)
    for build in (store.plan_path, store.applied_path, store.load_plan, store.application_record):
        with pytest.raises(InvalidArgument, match="not a plan id"):
            build(settings, plan_id)
