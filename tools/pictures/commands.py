"""``mesh-mcp graph [--format mermaid|json|html] [--service S] [--max-services N] [--open] [--out FILE]``.

Mermaid (default) or JSON on stdout. ``--format html`` writes the standalone page (no network) to
``--out`` (default: ``mesh.html`` in the state folder) and prints its path; ``--open`` (html
implied) also opens it with :mod:`webbrowser`; without a browser the path is all there is, never
an error. Exit 0, 1 when ``--service`` names no service, 2 on errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from server.cli_support import add_common_flags, print_json, settings_from_args
from server.errors import NotFound


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``graph`` subcommand's arguments (called from server.cli)."""
    p = sub.add_parser("graph", help="the whole mesh: services, queues, streams, websocket outputs")
    add_common_flags(p, json_flag=False)
    p.add_argument("--format", choices=["mermaid", "json", "html"], default="mermaid", help="default mermaid")
    p.add_argument("--service", help="zoom into one service (repository)")
    p.add_argument("--max-services", type=int, default=40, help="services drawn before folding (default 40)")
    p.add_argument("--open", action="store_true", help="write the HTML page and open it in a browser")
    p.add_argument("--out", type=Path, help="HTML file to write (default: mesh.html in the state folder)")


def open_page(path: Path) -> bool:
    """Open ``path`` in a browser; False (never an exception) when there is none."""
    import webbrowser

    try:
        return bool(webbrowser.open(path.resolve().as_uri()))
    except Exception:  # no browser, no display, a broken BROWSER variable: the path is printed anyway
        return False


def cmd_graph(args: argparse.Namespace) -> int:
    from tools.mesh_index.commands import ProgressBar
    from tools.mesh_index.service import service_for_settings
    from tools.pictures.mesh_render import summary_lines
    from tools.pictures.service import visualize

    settings = settings_from_args(args)
    if settings.workspace is None:
        raise NotFound("no workspace: pass --workspace DIR (a folder of repositories) or set workspace in mesh.toml")
    fmt = "html" if args.open else args.format
    index = service_for_settings(settings)
    try:
        index.refresh(ProgressBar())
        try:
            graph = visualize(index, fmt, args.service, args.max_services)
        except NotFound as exc:
            print(str(exc))
            return 1
    finally:
        index.close()
    if fmt == "json":
        print_json(graph)
    elif fmt == "mermaid":
        print((graph.mermaid or "").rstrip("\n"))
        print("\n".join(f"%% {' '.join(line.split())}" for line in summary_lines(graph)))
    else:
        out = args.out or settings.resolved_state_dir / "mesh.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(graph.html or "", encoding="utf-8")
        opened = open_page(out) if args.open else False
        print(f"{out}" + ("" if opened or not args.open else "  (no browser could be opened: open this file)"))
    return 0
