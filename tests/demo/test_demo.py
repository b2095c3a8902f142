"""``mesh-mcp demo`` end to end: embedded services, seeded faults, diagnosis, cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from server.demo.command import diagnose_run, prepare, run_demo
from server.demo.embedded import EmbeddedServices, free_port, port_answers
from server.demo.report import DemoReport, render_text
from server.demo.services import DEMO_POSTGRES_ENV, DEMO_REDIS_ENV
from server.errors import InvalidArgument
from tests.helpers import REPO_ROOT

SEEDED_FAULTS = {
    "job_stuck_pending": "a job stuck PENDING",
    "job_stuck_processing": "a job stuck PROCESSING",
    "job_handler_failed": "a handler failure",
    "dlq_poison_pill": "a poison pill in the dead-letter stream",
    "dead_consumer": "a dead consumer holding pending entries",
    "trimmed_pending": "a pending entry whose message was trimmed",
    "stale_idempotency_lock": "a stale idempotency lock",
}
# the tool (and diagnosis code) that must report each fault
EXPECTED_EVIDENCE = {
    "job_stuck_pending": "trace_job: pending_in_outbox",
    "job_stuck_processing": "trace_job: stuck_processing",
    "job_handler_failed": "trace_job: handler_failed",
    "dlq_poison_pill": "inspect_stream: dlq_not_empty",
    "dead_consumer": "inspect_stream: dead_consumer",
    "trimmed_pending": "inspect_stream: trimmed_pending",
    "stale_idempotency_lock": "inspect_stream: stale_idempotency_lock",
}


@pytest.fixture(scope="module")
def private_redis_url() -> Iterator[str]:
    """A Redis of this module only: other test runs sharing the local server cannot race on it."""
    services = EmbeddedServices()
    try:
        yield services.start_redis().rsplit("/", 1)[0] + "/9"
    finally:
        services.stop()


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def assert_every_fault_named_and_found(report: DemoReport) -> None:
    assert {f.code for f in report.findings} == set(SEEDED_FAULTS)
    text = render_text(report)
    for finding in report.findings:
        assert SEEDED_FAULTS[finding.code] in text
        assert finding.found, (finding.code, finding.not_checked)
        assert any(line.startswith(EXPECTED_EVIDENCE[finding.code]) for line in finding.found_by), finding.found_by
    assert "7 seeded faults, 7 found by mesh-mcp" in text


def test_demo_json_end_to_end_on_embedded_services() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "demo", "--json"],
        capture_output=True, text=True, env=clean_env(), cwd=str(REPO_ROOT), timeout=120,
    )
    assert proc.stdout.strip(), proc.stderr
    report = DemoReport.model_validate(json.loads(proc.stdout))
    assert report.services["postgres"].startswith("embedded")
    assert report.services["redis"].startswith("embedded")
    assert_every_fault_named_and_found(report)
    assert set(report.seconds) == {"services", "seed", "diagnosis"}  # the speed goal lives in bench/demo_bench.py
    # the services and their data are gone
    root = Path(report.workspace).parent
    assert not root.exists()
    redis_port = int(report.services["redis"].rsplit(":", 1)[1].split("/")[0])
    assert not port_answers("127.0.0.1", redis_port)
    assert proc.returncode == (0 if report.ok else 1)
    assert report.missing_tools == [], f"tools missing from this build: {report.missing_tools}"
    assert report.ok


def test_demo_text_report_on_external_services(pg_admin_url: str, private_redis_url: str, tmp_path: Path) -> None:
    redis_url = private_redis_url
    env = {DEMO_POSTGRES_ENV: pg_admin_url, DEMO_REDIS_ENV: redis_url}
    run = prepare(tmp_path / "demo", env, remediation=False)
    try:
        keys = list(run.services.redis_keys)
        report = diagnose_run(run)
    finally:
        run.services.close()
    assert len(keys) >= 10
    assert_every_fault_named_and_found(report)
    text = render_text(report)
    for heading in ("1. What should happen", "2. What the outbox tables say", "3. What is broken",
                    "4. The plan to fix it"):
        assert heading in text
    assert text.index("Free the pending list") < text.index("Fix the causes") < text.index("Replay and requeue")
    # what the demo created is removed: its keys, its scratch database, its directory
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.exists(*keys) == 0
    finally:
        client.close()
    assert not (tmp_path / "demo").exists()
    scratch = report.services["postgres"].split("scratch database ")[1].rstrip(")")
    with psycopg.connect(pg_admin_url) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (scratch,)).fetchone() is None


def test_demo_refuses_a_redis_database_in_use(pg_admin_url: str, private_redis_url: str) -> None:
    redis_url = private_redis_url.rsplit("/", 1)[0] + "/8"
    client = redis.Redis.from_url(redis_url)
    try:
        client.set("someone:else", "1")
        with pytest.raises(InvalidArgument, match="holds 1 keys; the demo needs an empty one"):
            run_demo(environ={DEMO_POSTGRES_ENV: pg_admin_url, DEMO_REDIS_ENV: redis_url})
        assert client.get("someone:else") == b"1"
    finally:
        client.delete("someone:else")
        client.close()


def test_demo_needs_both_or_neither_variable(tmp_path: Path) -> None:
    redis_url = "redis://127.0.0.1:6379/9"  # refused before anything connects
    (tmp_path / "demo").mkdir()
    with pytest.raises(InvalidArgument, match="set both"):
        prepare(tmp_path / "demo", {DEMO_REDIS_ENV: redis_url}, remediation=False)
    assert not (tmp_path / "demo").exists()  # nothing left behind when setup fails


def test_http_without_serve_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "demo", "--http", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, env=clean_env(), cwd=str(REPO_ROOT), timeout=60,
    )
    assert proc.returncode == 2
    assert "--http only applies with --serve" in proc.stderr
