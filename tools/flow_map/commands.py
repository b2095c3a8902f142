"""``mesh-mcp map TARGET [--depth N] [--live] [--json] [--direction D]``: the flow picture on stdout.

Prints the Mermaid text (paste it in a ```mermaid block), then the trouble, folds and
unreadable services on stderr-free lines starting with ``%%`` (Mermaid comments, so the whole
output stays a valid diagram). ``--json`` prints the whole result. Exit status 0, 1 when the
target matches nothing (closest names printed), 2 on errors.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from server.cli_support import add_common_flags, add_detail_flag, fail, print_json, settings_from_args
from server.errors import NotFound

if TYPE_CHECKING:  # the heavy modules load when the command runs, so `mesh-mcp --help` stays fast
    from tools.flow_map.model import FlowMap


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``map`` subcommand's arguments (called from server.cli)."""
    p = sub.add_parser("map", help="the flow of TARGET as a Mermaid flowchart (--live adds runtime state)")
    add_common_flags(p)
    p.add_argument("target", help="job, event or websocket type, queue or stream")
    p.add_argument("--depth", type=int, default=3, help="follow-up levels drawn (default 3, max 5)")
    p.add_argument("--live", action="store_true", help="read each hop once (databases and Redis)")
    p.add_argument("--direction", default="LR", choices=["LR", "TB", "TD", "RL", "BT"], help="layout (default LR)")
    add_detail_flag(p)


def comments(result: FlowMap) -> list[str]:
    lines = []
    for node in result.nodes:
        where = f" ({node.file}:{node.line})" if node.file else ""
        lines.extend(f"%% trouble: {node.label}{where}: {t.sentence}" for t in node.trouble)
        if node.live is not None and node.live.status != "ok":
            lines.append(f"%% live {node.live.status} {','.join(node.live.verdicts)}: {node.label}: "
                         f"{node.live.sentence}")
    lines.extend(f"%% folded: {f.count} {f.what} ({len(f.items)} nodes; --json lists them)" for f in result.folded)
    lines.extend(f"%% unavailable: {p.service}: {p.error}" for p in result.unavailable)
    lines.extend(f"%% note: {n}" for n in result.notes)
    return [" ".join(line.split()) for line in lines]


def cmd_map(args: argparse.Namespace) -> int:
    from server.runtime import Runtime
    from tools.flow_map.service import flow_map
    from tools.mesh_index.commands import ProgressBar
    from tools.mesh_index.service import service_for_settings

    settings = settings_from_args(args)
    if settings.workspace is None:
        raise NotFound("no workspace: pass --workspace DIR (a folder of repositories) or set workspace in mesh.toml")
    service = service_for_settings(settings)

    async def run() -> FlowMap:
        runtime = Runtime(settings)
        try:
            return await flow_map(service, args.target, args.depth, args.live, args.direction, runtime)
        finally:
            await runtime.aclose()

    try:
        service.refresh(ProgressBar())
        try:
            import asyncio  # here, not at parser set-up: every command builds the parser

            result = asyncio.run(run())
        except NotFound as exc:
            if "matches no" not in str(exc):
                raise
            return fail(str(exc))  # an unknown name: exit 2, as impact, verify and the runtime commands
    finally:
        service.close()
    if args.json:
        from tools.detail import shaped
        from tools.flow_map.summary import summarise_flow

        print_json(shaped(result, args.detail, summarise_flow, settings.limits.summary_items))
        return 0
    print(result.mermaid.rstrip("\n"))
    for line in comments(result):
        print(line)
    return 0
