"""The ``mesh-mcp`` subcommands: name -> ``module:function`` that runs it.

Data only (no import of the modules it names), so that :mod:`server.cli` dispatches on it
and the skills checker (:func:`tools.skills.check.our_commands`) knows which commands a
runbook may tell people to run, without the capabilities importing the command line.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "serve": "server.serve:cmd_serve",
    "demo": "server.demo.command:cmd_demo",
    "doctor": "server.doctor:cmd_doctor",
    "index": "tools.mesh_index.commands:cmd_index",
    "impact": "tools.mesh_index.commands:cmd_impact",
    "catalogue": "tools.mesh_index.commands:cmd_catalogue",
    "verify": "tools.verify.commands:cmd_verify",
    "approve": "server.approval.cli:cmd_approve",
    "approver": "server.approval.cli:cmd_approver",
    "skills": "tools.skills.commands:cmd_skills",
    "map": "tools.flow_map.commands:cmd_map",
    "audit": "server.approval.audit_cli:cmd_audit",
    "lint": "tools.lint.commands:cmd_lint",
    "trace-request": "tools.trace_request.commands:cmd_trace_request",
    "plan-flow": "tools.plan_flow.commands:cmd_plan_flow",
    "graph": "tools.pictures.commands:cmd_graph",
}
