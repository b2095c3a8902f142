"""related_skills on trace_job, trace_event and trace_request, through real MCP sessions.

The workspace is a copy of tests/fixtures/workspace with the skills of tests/fixtures/trace_skills
laid over it: one linked only by its ``paths`` glob matching the handler of the traced job type
(it names nothing), one naming the job's queue, one listing the event type in ``mesh_keys``, one
about notifications (the saga of tests/trace_request), and one about geocoding that no user trace
may link. Rows go to a real PostgreSQL and keys to a real Redis (tests/outbox/sim.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from server.app import build_server
from server.config import Settings, load_settings
from tests.helpers import FIXTURES, REPO_ROOT
from tests.outbox import sim
from tests.outbox.conftest import apply_schema
from tests.trace_request import saga as sg
from tests.trace_request.conftest import dbs, service_dbs  # noqa: F401  (the three service databases of the saga)
from tools.mesh_index.service import get_index_service

pytestmark = pytest.mark.anyio

WELCOME = "skill://workspace/meta/welcome-worker"
QUEUE = "skill://workspace/meta/user-queue"
USER_CREATED = "skill://workspace/ms-user/user-created"
GEOCODING = "skill://workspace/meta/geocoding"
NOTIFICATIONS = "skill://workspace/meta/notifications"
HANDLER = "workers-runners/worker-user/src/handlers/send-welcome-email.handler.ts"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "workspace", root)
    shutil.copytree(FIXTURES / "trace_skills", root, dirs_exist_ok=True)
    return root


@pytest.fixture
def user_db(make_pg_db: Callable[[], str]) -> Iterator[tuple[str, psycopg.Connection]]:
    url = make_pg_db()
    apply_schema(url)
    with psycopg.connect(url, autocommit=True) as conn:
        yield url, conn


@pytest.fixture
def settings_for(workspace: Path, tmp_path: Path, redis_url: str) -> Callable[..., Settings]:
    def make(services: dict[str, str], **limits: Any) -> Settings:
        return load_settings(workspace=workspace, environ={}, overrides={
            "state_dir": str(tmp_path / "state"),
            "services": {name: {"postgres": url} for name, url in services.items()},
            "redis": {"url": redis_url},
            "limits": {"related_skills_index_wait_s": 120, **limits},  # a loaded machine: no flaky timeout
        })

    return make


def _pushed_job(conn: psycopg.Connection, r: Any) -> str:
    job_id = sim.insert_job(conn, type="users.send_welcome_email", target="user-queue", age_s=900)
    sim.runner_push_job(conn, r, job_id, pushed_age_s=800)
    return job_id


def _related(result: Any) -> dict[str, str]:
    assert not result.is_error, result.content[0].text
    return {r["uri"]: r["why"] for r in result.structured_content["related_skills"]}


async def test_trace_job_links_the_skill_of_its_sites_files_and_of_its_queue(user_db, redis_client,
                                                                            settings_for) -> None:
    url, conn = user_db
    job_id = _pushed_job(conn, redis_client)
    async with Client(build_server(settings_for({"user": url})), cache=None) as client:
        result = await client.call_tool("trace_job", {"job_id": job_id, "detail": "full"})
    related = _related(result)
    data = result.structured_content
    assert data["verdict"]["code"] == "pushed_not_consumed", "the trace itself is unchanged"
    assert list(related)[:2] == [WELCOME, QUEUE], "a paths glob on a site's file is the strongest link"
    assert related[WELCOME] == (f"its paths glob workers-runners/worker-user/src/handlers/** matches {HANDLER} "
                                "(a handler site of users.send_welcome_email)")
    assert related[QUEUE].startswith("it names `user-queue` (meta/.claude/skills/User Queue/SKILL.md:")
    assert GEOCODING not in related and USER_CREATED not in related and NOTIFICATIONS not in related
    assert "skill://trace-async-flow" in related, "bundled skills are linked too"
    assert data["related_skills_note"] is None
    text = result.content[0].text
    assert f"Related skills: {WELCOME} (" in text and QUEUE in text
    assert text.startswith(f"job {job_id}: pushed_not_consumed")


async def test_trace_event_links_by_its_type_key(user_db, redis_client, settings_for) -> None:
    url, conn = user_db
    event_id = sim.insert_event(conn, type="user.created", targets=["user:users"])
    sim.runner_push_event(conn, redis_client, event_id)
    async with Client(build_server(settings_for({"user": url})), cache=None) as client:
        result = await client.call_tool("trace_event", {"event_id": event_id, "service": "user", "detail": "full"})
    related = _related(result)
    assert next(iter(related)) == USER_CREATED
    assert related[USER_CREATED] == "its front matter 'mesh_keys' lists user.created"
    assert WELCOME not in related and QUEUE not in related and GEOCODING not in related
    assert USER_CREATED in result.content[0].text


async def test_the_list_is_capped_and_says_how_many_more(user_db, redis_client, settings_for) -> None:
    url, conn = user_db
    job_id = _pushed_job(conn, redis_client)
    async with Client(build_server(settings_for({"user": url}, related_skills_max=50)), cache=None) as client:
        every = _related(await client.call_tool("trace_job", {"job_id": job_id, "detail": "full"}))
    async with Client(build_server(settings_for({"user": url}, related_skills_max=1)), cache=None) as client:
        capped = await client.call_tool("trace_job", {"job_id": job_id, "detail": "full"})
    assert len(every) >= 3
    assert list(_related(capped)) == [WELCOME]
    assert capped.structured_content["related_skills_more"] == len(every) - 1
    assert f"(+{len(every) - 1} more related skill(s) not listed" in capped.content[0].text


async def test_without_the_index_in_time_names_still_link_and_it_is_said(user_db, redis_client,
                                                                         settings_for) -> None:
    url, conn = user_db
    job_id = _pushed_job(conn, redis_client)
    async with Client(build_server(settings_for({"user": url}, related_skills_index_wait_s=0)), cache=None) as c:
        never = await c.call_tool("trace_job", {"job_id": job_id, "detail": "full"})
    assert WELCOME not in _related(never) and QUEUE in _related(never)
    assert "related_skills_index_wait_s = 0" in never.structured_content["related_skills_note"]

    server = build_server(settings_for({"user": url}, related_skills_index_wait_s=0.3))
    index = get_index_service(server.runtime)  # type: ignore[attr-defined]
    async with Client(server, cache=None) as client:
        held = threading.Event()
        release = threading.Event()

        def busy_index() -> None:  # the index is busy (a cold build of a big workspace) for as long as we say
            with index._lock:
                held.set()
                release.wait(60)

        worker = threading.Thread(target=busy_index)
        worker.start()
        held.wait(10)
        try:
            late = await client.call_tool("trace_job", {"job_id": job_id, "detail": "full"})
        finally:
            release.set()
            worker.join(10)
        assert late.structured_content["verdict"]["code"] == "pushed_not_consumed", "the trace is not held up"
        note = late.structured_content["related_skills_note"]
        assert "the index was not ready within 0.3s" in note and "linked by names only" in note
        assert note in late.content[0].text
        assert QUEUE in _related(late) and WELCOME not in _related(late)


async def test_trace_request_links_the_skills_of_its_items(dbs, redis_client, settings_for) -> None:  # noqa: F811
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    settings = settings_for({name: url for name, (url, _conn) in dbs.items()})
    async with Client(build_server(settings), cache=None) as client:
        result = await client.call_tool("trace_request", {"correlation_id": s.correlation, "detail": "full"})
    related = _related(result)
    assert result.structured_content["verdict"]["code"] == "in_pel", "the request's verdict is unchanged"
    assert next(iter(related)) == NOTIFICATIONS
    assert related[NOTIFICATIONS] == "its front matter 'mesh_keys' lists notification:sent"
    assert WELCOME not in related and GEOCODING not in related and USER_CREATED not in related
    assert f"Related skills: {NOTIFICATIONS}" in result.content[0].text


def test_the_cli_prints_the_same_related_skills(dbs, redis_url, redis_client, workspace: Path,  # noqa: F811
                                                mesh_config, tmp_path: Path) -> None:
    """``mesh-mcp trace-request`` carries the tool's related_skills, in its JSON and in its text."""
    s = sg.build(dbs["event"][1], dbs["notification"][1], redis_client)
    config = mesh_config({
        "state_dir": str(tmp_path / "state"),
        "services": {name: {"postgres": url} for name, (url, _conn) in dbs.items()},
        "redis": {"url": redis_url}, "limits": {"related_skills_index_wait_s": 120},
    })
    base = [sys.executable, "-m", "server.cli", "trace-request", "--workspace", str(workspace),
            "--config", str(config), "--correlation-id", s.correlation]
    out = subprocess.run([*base, "--json", "--detail", "full"], capture_output=True, text=True, cwd=REPO_ROOT,
                         timeout=180, env={**os.environ, "MESH_STATE_DIR": str(tmp_path / "state")})
    assert out.returncode == 1, out.stderr  # in_pel: the verdict is not ok
    data = json.loads(out.stdout)
    related = {r["uri"]: r["why"] for r in data["related_skills"]}
    assert related[NOTIFICATIONS] == "its front matter 'mesh_keys' lists notification:sent"
    assert WELCOME not in related and GEOCODING not in related
    text = subprocess.run(base, capture_output=True, text=True, cwd=REPO_ROOT, timeout=180,
                          env={**os.environ, "MESH_STATE_DIR": str(tmp_path / "state")})
    assert f"Related skills: {NOTIFICATIONS}" in text.stdout, text.stdout
