"""The runtime commands for humans (``mesh-mcp trace job|event``, ``health``, ``stream``, ``dlq``, ``queue``,
``rows``), run as a person runs them: a subprocess on real PostgreSQL and Redis.

Each answer carries the verdict and next step the library (what the MCP tool calls) gives; the tables stay
within ``COLUMNS`` and cut no id; the exit codes are the documented ones (0 ok, 1 a problem, 2 usage, 3 down).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT
from tests.outbox import sim

pytestmark = pytest.mark.anyio
STREAM = "stream:user:created"
GROUP = "pp-common"


def mesh(config: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    return subprocess.run([sys.executable, "-m", "server.cli", *args, "--config", str(config)], cwd=REPO_ROOT,
                          env={**env, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": str(columns), "NO_COLOR": "1"},
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def config(mesh_config, outbox_db: str, redis_url: str, tmp_path: Path) -> Path:
    return mesh_config({"services": {"user": {"postgres": outbox_db}}, "redis": {"url": redis_url},
                        "state_dir": str(tmp_path / "state")})


async def test_trace_job_gives_the_tools_verdict_as_a_table_with_a_legend(
        db, redis_client, config, outbox_settings, tools_for) -> None:
    job_id = sim.insert_job(db, age_s=900)
    sim.runner_push_job(db, redis_client, job_id, pushed_age_s=800)
    sim.worker_take(db, redis_client, job_id, "user-queue")
    sim.worker_fail(db, redis_client, job_id, "user-queue", "SMTP 421: service not available")
    async with tools_for(outbox_settings()) as tools:
        expected = (await tools.trace_job(job_id, service=None)).verdict
    assert expected.severity == "error"
    answers = {width: mesh(config, "trace", "job", job_id, columns=width) for width in (60, 200)}
    for width, run in answers.items():
        assert run.returncode == 1, run.stderr
        assert run.stderr == ""  # no warning, no traceback
        out = run.stdout
        assert max(len(line) for line in out.splitlines()) <= width, out
        squeezed = "".join(out.split())  # long lines are wrapped, never cut: every character is there
        for part in (f"{expected.code} ({expected.severity}) — {expected.sentence}", f"next: {expected.next_step}"):
            assert "".join(part.split()) in squeezed, (part, out)
        assert "legend: ok = healthy, broken = " in out and "unknown = " in out
        assert "[XX]" not in out and "[??]" not in out
        assert "…" not in out
        assert squeezed.count(job_id) >= 2
    as_json = mesh(config, "trace", "job", job_id, "--json")
    assert as_json.returncode == 1
    verdict = json.loads(as_json.stdout)["verdict"]
    assert (verdict["code"], verdict["sentence"], verdict["next_step"]) == (
        expected.code, expected.sentence, expected.next_step)


async def test_stream_dlq_and_trace_event_name_the_dead_letter(db, redis_client, config) -> None:
    event_id = sim.insert_event(db, age_s=60)
    sim.ensure_group(redis_client, STREAM, GROUP)
    [(stream, entry)] = sim.runner_push_event(db, redis_client, event_id)
    assert sim.consumer_read(redis_client, stream, GROUP, "c1") == [entry]
    sim.consumer_dead_letter(redis_client, stream, GROUP, entry, "geocoder said no")

    dlq = mesh(config, "dlq", "--stream", STREAM, columns=60)
    assert dlq.returncode == 1, dlq.stderr
    assert entry in dlq.stdout and "geocoder said no" in dlq.stdout
    assert max(len(line) for line in dlq.stdout.splitlines()) <= 60, dlq.stdout
    stream_run = mesh(config, "stream", STREAM, "--json")
    anomalies = {a["code"] for a in json.loads(stream_run.stdout)["anomalies"]}
    assert "dlq_not_empty" in anomalies and stream_run.returncode == 1
    text = mesh(config, "stream", STREAM).stdout
    assert "dlq_not_empty" in text and GROUP in text
    traced = mesh(config, "trace", "event", event_id, "--json")
    assert traced.returncode == 1 and json.loads(traced.stdout)["verdict"]["code"] == "in_dlq"


async def test_health_rows_and_queue_exit_codes(db, redis_client, config) -> None:
    fine = mesh(config, "health")
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert fine.stdout.startswith("outbox health: ok")
    job_id = sim.insert_job(db, age_s=3600)
    sick = mesh(config, "health", "--json")
    assert sick.returncode == 1 and json.loads(sick.stdout)["ok"] is False
    assert "pending_in_outbox" in sick.stdout
    rows = mesh(config, "rows", "user", "jobs_outbox", "--status", "PENDING")
    assert rows.returncode == 0 and job_id in rows.stdout and "PENDING" in rows.stdout
    sim.runner_push_job(db, redis_client, job_id)
    sim.worker_take(db, redis_client, job_id, "user-queue")
    sim.worker_fail(db, redis_client, job_id, "user-queue", "SMTP 421")
    queue = mesh(config, "queue", "user-queue", "--job-id", job_id)
    assert queue.returncode == 1 and "SMTP 421" in queue.stdout, queue.stdout + queue.stderr


def test_usage_and_unavailable_exit_codes(mesh_config, outbox_db: str, redis_url: str, down_dsn: str,
                                          tmp_path: Path) -> None:
    from server.demo.embedded import free_port

    good = mesh_config({"services": {"user": {"postgres": outbox_db}}, "redis": {"url": redis_url}})
    unknown = mesh(good, "stream", "stream:no-such-thing")
    assert unknown.returncode == 2 and "does not exist" in unknown.stderr
    assert mesh(good, "rows", "nobody", "jobs_outbox").returncode == 2
    assert mesh(good, "trace", "job").returncode == 2  # argparse: the id is missing
    down = mesh_config({"services": {"user": {"postgres": down_dsn}},
                        "redis": {"url": f"redis://127.0.0.1:{free_port()}/0"}}, name="down.toml")
    health = mesh(down, "health")
    assert health.returncode == 3 and "UNAVAILABLE" in health.stdout, health.stdout + health.stderr
    stream = mesh(down, "stream", STREAM)
    assert stream.returncode == 3 and "unavailable" in stream.stderr and "Traceback" not in stream.stderr
