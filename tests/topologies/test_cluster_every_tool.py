"""Every MCP tool the server registers, on a three-primary Redis Cluster, through one real MCP session:
each answers without error, finds what lives on other nodes, and no key of any node changes.

The cluster holds the stream/queue scenario (tests/streams/scenario.py) and the three-service
saga of tests/trace_request/saga.py (event and notification databases, their BullMQ job and
stream entries), their keys spread over the three primaries by slot. After each tool call the
``DUMP`` of every key of every primary is compared with the one taken before the first (see
tests/streams/snapshot.py); at the end ``INFO commandstats`` of each node shows that no write
or forbidden command (XREADGROUP, XACK, KEYS, ...) reached it. The list of calls must name every
registered tool, so a new tool cannot escape this test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from server.config import Settings
from tests.flow_map.conftest import copy_workspace
from tests.helpers import in_process_client
from tests.streams import scenario as sc_mod
from tests.streams.conftest import Backend, merged
from tests.streams.scenario import SETTINGS
from tests.streams.snapshot import WRITE_OR_FORBIDDEN, command_calls, differences, snapshot
from tests.streams.test_read_only import calls as stream_and_queue_calls
from tests.trace_request import saga as sg
from tests.trace_request.conftest import dbs, service_dbs  # noqa: F401

__all__ = ["dbs"]

pytestmark = pytest.mark.anyio


def every_call(sc: sc_mod.Scenario, saga: sg.Saga) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("server_info", {}),
        ("list_catalogue", {}),
        ("analyze_impact", {"target": "FALLBACK_CREATE_EVENT", "depth": 2}),
        ("verify_flow", {"target": "events.fallback_create_event"}),
        ("flow_map", {"target": "FALLBACK_CREATE_EVENT", "depth": 2, "live": True}),
        ("visualize_mesh", {"format": "json"}),
        ("lint_flows", {}),
        ("plan_flow", {"kind": "job", "name": "CLUSTER_CHECK_JOB", "domain": "event"}),
        ("check_skills", {}),
        ("query_outbox", {"table": "jobs_outbox", "service": "notification"}),
        ("outbox_health", {}),
        ("trace_job", {"job_id": saga.ids["job"], "service": "notification"}),
        ("trace_event", {"event_id": saga.ids["follow_up"], "service": "notification"}),
        ("trace_event", {"event_id": saga.ids["created"], "service": "event"}),
        ("trace_request", {"correlation_id": saga.correlation}),
        ("trace_request", {"trace_id": saga.trace}),
        *stream_and_queue_calls(sc),
        ("propose_remediation", {"symptom": "dlq_replay", "stream": sc_mod.STREAM, "group": sc_mod.MAIN}),
    ]


async def test_every_tool_on_a_cluster_changes_nothing(
    cluster_backend: Backend, dbs: dict, make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    client = cluster_backend.client
    settings = make_settings(**merged(SETTINGS, {
        "redis": cluster_backend.redis_config,
        "services": {name: {"postgres": url} for name, (url, _) in dbs.items()},
        "workspace": str(copy_workspace("workspace", tmp_path / "ws")),
    }))
    sc = sc_mod.build(client, settings.conventions, age=False)
    saga = sg.build(dbs["event"][1], dbs["notification"][1], client)
    nodes = cluster_backend.node_clients()
    assert len(nodes) == 3 and all(n.dbsize() > 0 for n in nodes)  # keys on every primary
    before = snapshot(client)
    saga_keys = [k for k in before if saga.ids["job"].encode() in k or b"notification-queue" in k
                 or b"ws:notify" in k or b"event:created" in k]
    homes = {client.get_node_from_key(k).name for k in saga_keys}
    assert len(homes) >= 2, homes  # one trace reads keys of several nodes
    for n in nodes:
        n.config_resetstat()
    answers: dict[str, Any] = {}
    try:
        async with in_process_client(settings) as mcp:
            listed = {t.name for t in (await mcp.list_tools()).tools}
            planned = every_call(sc, saga)
            assert {name for name, _ in planned} == listed  # every registered tool is called here
            for name, args in planned:
                result = await mcp.call_tool(name, args)
                assert not result.is_error, (name, args, result.content)
                answers.setdefault(name, result.structured_content)
                assert differences(before, snapshot(client)) == [], (name, args)
        ran = [{k.split("|")[0]: v for k, v in command_calls(n).items() if v} for n in nodes]
    finally:
        for n in nodes:
            n.close()
    for per_node in ran:
        assert [c for c in WRITE_OR_FORBIDDEN if per_node.get(c)] == [], per_node
        assert per_node.get("scan")  # discovery walked every primary
    # what lives on other nodes was found: the job's BullMQ completion (so the next hop, its outcome event, is
    # what waits), and the follow-up entry in ws-service's PEL on the stream's node (pending since the saga
    # was built: in_pel, or dead_consumer once its consumer's idle passed the scenario's 1.5 s)
    assert answers["trace_job"]["verdict"]["code"] == "event_pending", answers["trace_job"]["verdict"]
    verdict = answers["trace_request"]["verdict"]
    assert answers["trace_request"]["unavailable"] == []
    assert verdict["code"] in ("in_pel", "dead_consumer"), verdict
    assert verdict["hop"].startswith(f"notification:event_queue:{saga.ids['follow_up']}"), verdict
