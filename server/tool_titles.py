"""The human-readable title of every tool (what clients show in their tool lists).

Kept in one table so a new tool cannot ship without one: ``tests/foundation/test_server.py``
fails on a tool missing here.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from server.sdk_tools import registered_tools

TITLES: dict[str, str] = {
    "server_info": "Server info: version, mode, tools, configuration",
    "analyze_impact": "Who produces and consumes a job, event, websocket type, queue or stream",
    "list_catalogue": "Catalogue of every job, event, queue and stream, with orphans",
    "verify_flow": "Check a job or event flow is wired end to end",
    "check_skills": "Check the workspace's own runbooks against the code",
    "query_outbox": "Read rows of an outbox table",
    "outbox_health": "Health of every outbox table",
    "trace_job": "Trace one job through outbox, queue, worker and audit",
    "trace_event": "Trace one event through outbox, streams and consumer groups",
    "trace_request": "Follow one request across every service",
    "inspect_stream": "Inspect a Redis stream and its consumer groups",
    "list_pending": "List a consumer group's pending entries",
    "dlq_list": "List dead letters with their retry state",
    "list_streams": "List Redis streams",
    "inspect_queue": "Inspect a BullMQ queue or one job",
    "list_queues": "List BullMQ queues",
    "flow_map": "Draw a flow as a Mermaid map",
    "lint_flows": "Find flow defects across the workspace",
    "plan_flow": "Plan the edits for a new job or event",
    "visualize_mesh": "Draw the whole mesh",
    "propose_remediation": "Propose a repair plan (read-only; a human approves it)",
    "apply_remediation": "Apply an approved repair plan",
}


def apply_titles(server: MCPServer) -> None:
    """Give each registered tool its title from :data:`TITLES` (a title set at registration wins)."""
    for tool in registered_tools(server):
        if not tool.title and tool.name in TITLES:
            tool.title = TITLES[tool.name]
