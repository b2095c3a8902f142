"""Make the pictures of docs/flow-pictures.md from real output: a flow (static and live) and a trace.

    .venv/bin/python docs/flow-pictures/make.py WORKSPACE_COPY POSTGRES_ADMIN_URL REDIS_URL

WORKSPACE_COPY: a copy of tests/fixtures/realistic_workspace. A scratch database is created
(and dropped) on the PostgreSQL server, the Redis database given is flushed before and after.
The flow and trace are asked of the server through a real in-process MCP client; the .mmd
files written are its ``mermaid`` fields, unchanged. The SVGs are then rendered with
``mmdc`` (@mermaid-js/mermaid-cli) on a headless Chromium (see the page).
"""

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg
import redis

sys.path.insert(0, ".")
from server.config import load_settings
from tests.helpers import in_process_client
from tests.outbox import sim
from tests.outbox.conftest import apply_schema

out = Path("docs/flow-pictures")
out.mkdir(parents=True, exist_ok=True)
ws = Path(sys.argv[1])
admin = sys.argv[2]
name = f"mesh_docs_{uuid.uuid4().hex[:8]}"
with psycopg.connect(admin, autocommit=True) as c:
    c.execute(f'CREATE DATABASE "{name}"')
url = admin.rsplit("/", 1)[0] + "/" + name
rurl = sys.argv[3]
r = redis.Redis.from_url(rurl)
r.flushdb()
try:
    apply_schema(url)
    with psycopg.connect(url, autocommit=True) as db:
        job = sim.insert_job(db, type="events.fallback_create_event", target="fallback-event-queue",
                             emitter="ms-event", age_s=120)
        sim.runner_push_job(db, r, job)
        sim.worker_take(db, r, job, "fallback-event-queue")
        sim.worker_fail(db, r, job, "fallback-event-queue", "GeocodingError: address not found")
        for _ in range(2):
            sim.insert_job(db, type="events.fallback_create_event", target="fallback-event-queue",
                           emitter="ms-event", age_s=900)
    settings = load_settings(environ={}, overrides={"workspace": str(ws), "state_dir": tempfile.mkdtemp(),
                             "services": {"event": {"postgres": url}}, "redis": {"url": rurl}})

    async def main() -> None:
        async with in_process_client(settings) as client:
            target = "JobMessagingType.FALLBACK_CREATE_EVENT"
            flow = await client.call_tool("flow_map", {"target": target, "depth": 5, "direction": "TB"})
            live = await client.call_tool("flow_map", {"target": target, "depth": 3, "live": True, "direction": "TB"})
            trace = await client.call_tool("trace_job", {"job_id": job})
        for res in (flow, live, trace):
            assert not res.is_error, res.content[0].text
        (out / "flow-fallback-create-event.mmd").write_text(flow.structured_content["mermaid"])
        (out / "flow-fallback-create-event-live.mmd").write_text(live.structured_content["mermaid"])
        (out / "trace-job-handler-failed.mmd").write_text(trace.structured_content["mermaid"])
        print(trace.content[0].text)
        print(live.content[0].text)

    asyncio.run(main())
finally:
    r.flushdb()
    r.close()
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
