"""Queue states written by the real BullMQ (npm ``bullmq`` 5.76, tests/js/bullmq), then diagnosed.

The test drives Node: it adds jobs with the reference pusher's options (attempts 3,
exponential backoff, removeOnComplete, job id = row id), runs a worker and kills it
mid-job (SIGKILL: its lock is no longer renewed and expires), and reads what the library
wrote. Outside CI the test skips when Node or the modules are missing; with CI=true it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.helpers import REPO_ROOT, in_process_client

pytestmark = pytest.mark.anyio

JS = REPO_ROOT / "tests" / "js" / "bullmq"
QUEUE = "user-queue"
LOCK_MS = 800


def _need_node() -> str:
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "Node.js is not installed"
    elif not (JS / "node_modules" / "bullmq").is_dir():
        problem = f"the bullmq npm package is not installed: run npm ci in {JS}"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{problem} (CI must run the real-BullMQ tests)")
        pytest.skip(problem)
    assert node is not None
    return node


class Bull:
    def __init__(self, redis_url: str) -> None:
        self.node = _need_node()
        parts = urlsplit(redis_url)
        self.conn = {"host": parts.hostname or "127.0.0.1", "port": parts.port or 6379,
                     "db": int((parts.path or "/0").strip("/") or 0), "prefix": "bull"}
        self.procs: list[subprocess.Popen[str]] = []

    def _args(self, command: str, **opts: object) -> list[str]:
        return [self.node, str(JS / "drive.mjs"), command, json.dumps({**self.conn, **opts})]

    def add(self, job_id: str, name: str, data: dict, delay: int = 0) -> None:
        out = subprocess.run(self._args("add", queue=QUEUE, jobId=job_id, name=name, data=data, delay=delay),
                             capture_output=True, text=True, timeout=60, cwd=JS)
        assert out.returncode == 0 and "ADDED" in out.stdout, out.stderr

    def start(self, command: str, **opts: object) -> subprocess.Popen[str]:
        proc = subprocess.Popen(self._args(command, queue=QUEUE, **opts), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=JS)
        self.procs.append(proc)
        return proc

    @staticmethod
    def wait_for(proc: subprocess.Popen[str], marker: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith(marker):
                return line.strip()
            if not line and proc.poll() is not None:
                raise AssertionError(f"node exited: {proc.stderr.read() if proc.stderr else ''}")
        raise AssertionError(f"no {marker!r} from node within {timeout}s")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def r(request: pytest.FixtureRequest, redis_url: str):
    """Standalone Redis only: the Node driver talks to one server (BullMQ on a cluster needs hash-tag
    prefixes, which the cluster tests of tests/topologies cover)."""
    request.node.mesh_redis = {"url": redis_url}
    return request.getfixturevalue("redis_client")


@pytest.fixture
def bull(redis_url: str) -> Iterator[Bull]:
    b = Bull(redis_url)
    yield b
    b.stop()


def outbox_job(db, job_id: str, *, pushed_ago_s: int, audit: str | None = None, audit_ago_s: int = 0,
               scheduled_in_s: int = 0) -> None:
    """The jobs_outbox row the runner pushed (COMPLETED = pushed) and the worker's job_audit row."""
    db.execute("""INSERT INTO jobs_outbox (id, status, type, emitter, target, payload, scheduled_at, created_at,
                                           updated_at)
                  VALUES (%s, 'COMPLETED', 'users.send_welcome_email', 'ms-user', %s, '{}',
                          now() + make_interval(secs => %s), now() - make_interval(secs => %s),
                          now() - make_interval(secs => %s))""",
               (job_id, QUEUE, scheduled_in_s, pushed_ago_s + 1, pushed_ago_s))
    if audit:
        db.execute("""INSERT INTO job_audit (job_id, job_type, status, worker_id, emitter, current_attempt,
                                             started_at, created_at, updated_at)
                      VALUES (%s, 'users.send_welcome_email', %s, 'worker-1', 'ms-user', 1,
                              now() - make_interval(secs => %s), now() - make_interval(secs => %s),
                              now() - make_interval(secs => %s))""",
                   (job_id, audit, audit_ago_s, audit_ago_s, audit_ago_s))


def hop(result, name):
    return next(h for h in result.structured_content["hops"] if h["name"] == name)


async def test_worker_killed_mid_job_is_stalled(db, r, bull, outbox_settings) -> None:
    job_id = str(uuid.uuid4())
    outbox_job(db, job_id, pushed_ago_s=900, audit="PROCESSING", audit_ago_s=900)  # PROCESSING for 15 minutes
    bull.add(job_id, "users.send_welcome_email", {"userId": 1})
    worker = bull.start("work", lockDuration=LOCK_MS)
    assert bull.wait_for(worker, "STARTED").startswith(f"STARTED {job_id}")
    worker.kill()  # the worker dies mid-job: nobody renews the lock
    worker.wait(10)
    deadline = time.monotonic() + 10
    while r.exists(f"bull:{QUEUE}:{job_id}:lock") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert r.lpos(f"bull:{QUEUE}:active", job_id) is not None  # still active, as BullMQ leaves it
    async with in_process_client(outbox_settings()) as client:
        traced = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id, "service": "user"})
        queue = await client.call_tool("inspect_queue", {"queue": QUEUE})
    verdict = traced.structured_content["verdict"]
    assert (verdict["code"], verdict["severity"]) == ("stalled", "error"), verdict
    assert "lock" in verdict["sentence"] and "no worker of queue 'user-queue' is connected" in verdict["sentence"]
    assert "ran, succeeded" not in traced.content[0].text
    bull_hop = hop(traced, "bullmq_job")
    assert bull_hop["healthy"] is False and bull_hop["bull"]["lock_exists"] is False
    assert bull_hop["bull"]["attempts_started"] == 1  # ats, as BullMQ 5 writes it
    (anomaly,) = queue.structured_content["anomalies"]
    assert anomaly["code"] == "stalled" and anomaly["job_ids"] == [job_id]
    assert queue.structured_content["liveness"]["workers"] == 0

    # a worker of that queue connects: the answer says its stalled checker should move the job
    idle = bull.start("idle")
    bull.wait_for(idle, "READY")
    async with in_process_client(outbox_settings()) as client:
        again = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id, "service": "user"})
    assert again.structured_content["verdict"]["code"] == "stalled"
    assert "worker connection(s) of queue 'user-queue' are live" in again.structured_content["verdict"]["sentence"]


async def test_job_delayed_an_hour_ahead_is_scheduled(db, r, bull, outbox_settings) -> None:
    job_id = str(uuid.uuid4())
    outbox_job(db, job_id, pushed_ago_s=600, scheduled_in_s=3600)  # no worker took it: no job_audit row
    bull.add(job_id, "users.send_welcome_email", {"userId": 2}, delay=3600_000)
    async with in_process_client(outbox_settings()) as client:
        traced = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id, "service": "user"})
        queue = await client.call_tool("inspect_queue", {"queue": QUEUE})
    verdict = traced.structured_content["verdict"]
    assert (verdict["code"], verdict["severity"]) == ("scheduled", "info"), verdict
    assert "until" in verdict["sentence"]
    bull_hop = hop(traced, "bullmq_job")
    assert bull_hop["state"] == "delayed" and bull_hop["healthy"] is True
    due = bull_hop["bull"]["delayed_until_ms"]
    assert 3500_000 < due - bull_hop["bull"]["redis_now_ms"] <= 3600_000
    assert queue.structured_content["anomalies"] == []  # scheduled is no anomaly


async def test_delayed_job_past_due_with_no_worker_is_a_problem(db, r, bull, outbox_settings) -> None:
    job_id = str(uuid.uuid4())
    outbox_job(db, job_id, pushed_ago_s=600)
    bull.add(job_id, "users.send_welcome_email", {"userId": 3}, delay=1500)
    time.sleep(2.0)  # due now; nobody promotes it (no worker)
    async with in_process_client(outbox_settings(limits={"delayed_overdue_ms": 0})) as client:
        traced = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id, "service": "user"})
        queue = await client.call_tool("inspect_queue", {"queue": QUEUE})
    assert traced.structured_content["verdict"]["code"] == "pushed_not_consumed"
    assert "no worker promoted it" in traced.structured_content["verdict"]["sentence"]
    assert [a["code"] for a in queue.structured_content["anomalies"]] == ["delayed_overdue"]


async def test_running_second_attempt_shows_attempts_made(db, r, bull, outbox_settings) -> None:
    job_id = str(uuid.uuid4())
    outbox_job(db, job_id, pushed_ago_s=30, audit="PROCESSING", audit_ago_s=5)
    bull.add(job_id, "users.send_welcome_email", {"userId": 4})
    worker = bull.start("work", lockDuration=30_000, failFirst=True)
    bull.wait_for(worker, "STARTED")  # attempt 1 throws; BullMQ backs off 1 s, then retries
    assert bull.wait_for(worker, "STARTED", timeout=30) == f"STARTED {job_id} 2"
    written = {k.decode(): v.decode() for k, v in r.hgetall(f"bull:{QUEUE}:{job_id}").items()}
    async with in_process_client(outbox_settings()) as client:
        traced = await client.call_tool("trace_job", {"detail": "full", "job_id": job_id, "service": "user"})
    bull_hop = hop(traced, "bullmq_job")
    assert bull_hop["bull"]["attempts_made"] == int(written.get("atm") or written.get("attemptsMade")) == 1
    assert "attempts made 1" in bull_hop["detail"] and "lock held" in bull_hop["detail"]
    assert traced.structured_content["verdict"]["code"] == "running"


def test_the_lockfile_pins_bullmq_5_76() -> None:
    lock = json.loads((JS / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/bullmq"]["version"].startswith("5.76.")
    assert Path(JS / "package.json").is_file()
