"""The ``mesh-mcp`` command line.

Each subcommand is implemented by a function ``cmd_x(args) -> int`` in the module that
owns the capability; this module only parses arguments and dispatches, so
``mesh-mcp --help`` stays fast and works without any service running.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from server import __version__
from server.cli_support import add_common_flags, add_detail_flag, fail, setup_logging
from server.commands import COMMANDS
from server.errors import MeshError
from server.text_safety import TerminalWriter


def _depth(value: str) -> int:
    """``--depth``: the same bounds as analyze_impact's ``depth`` (0 to 5)."""
    try:
        depth = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 5, got {value!r}") from None
    if not 0 <= depth <= 5:
        raise argparse.ArgumentTypeError(f"must be from 0 to 5, got {depth}")
    return depth


def _quiet_broken_pipe() -> int:
    """The reader of our stdout went away (``mesh-mcp catalogue | head``): exit without a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    add_common_flags(p, json_flag=False)
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP on HOST:PORT (path /mcp)")
    p.add_argument(
        "--enable-remediation",
        action="store_true",
        help="register apply_remediation (still needs a human-minted approval token per plan)",
    )
    p.add_argument("--standalone", action="store_true",
                   help="serve in this process, not through the workspace's shared server (also MESH_STANDALONE=1)")
    p.add_argument("--idle-exit", type=float, default=600.0, metavar="SECONDS",
                   help="a shared server exits after this long without a client (default 600)")
    p.add_argument("--runtime-dir", type=Path, metavar="DIR",
                   help="private folder of the shared servers' sockets (default $XDG_RUNTIME_DIR/mesh-mcp)")
    p.add_argument("--shared-daemon", metavar="SOCKET", help=argparse.SUPPRESS)
    p.add_argument(
        "--allow-unprotected-approvers",
        action="store_true",
        help="signature mode: apply even when the trust file is writable by this OS user (shown on every plan)",
    )


def _add_index(sub: Any) -> None:
    p = sub.add_parser("index", help="build or refresh the static index of the workspace")
    add_common_flags(p)
    p.add_argument("--full", action="store_true", help="ignore the cache and re-parse every file")


LEAN: dict[str, Callable[[Any], None]] = {"serve": _add_serve, "index": _add_index}


def command_named(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names, when it is the first word after the global ``-v``; else None
    (``--help``, ``--version``, nothing, a typo: the whole parser answers those)."""
    for word in argv:
        if word in ("-v", "--verbose"):
            continue
        return None if word.startswith("-") else word
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every subcommand, or with ``only`` one of :data:`LEAN` alone.

    Building every subcommand imports the modules that define their options (about 50 ms);
    ``serve`` (each editor window starts one) and ``index`` (a cold build starts its parse
    workers as soon as it can) parse their arguments with their own subcommand only: the same
    options, help and errors."""
    parser = argparse.ArgumentParser(
        prog="mesh-mcp",
        description="Map, trace and safely repair the asynchronous flows of a microservice system (MCP server).",
    )
    parser.add_argument("--version", action="version", version=f"mesh-mcp {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only in LEAN:
        LEAN[only](sub)
        return parser
    _add_serve(sub)
    p = sub.add_parser("demo", help="zero-setup demo: embedded services, seeded faults, a diagnosis report")
    p.add_argument("--serve", action="store_true", help="keep the server up on the seeded data (stdio)")
    p.add_argument("--http", metavar="HOST:PORT", help="with --serve: serve streamable HTTP instead")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = sub.add_parser("doctor", help="check config, connectivity, schema, indexes and Redis")
    add_common_flags(p)

    _add_index(sub)

    p = sub.add_parser("impact", help="who produces and consumes TARGET, its routes and follow-ups")
    add_common_flags(p)
    p.add_argument("target", help="member name, qualified name, string value, queue or stream; or a class "
                   "(post-processor, worker, handler, controller) or a config key")
    p.add_argument("--depth", type=_depth, default=1, help="follow-up levels to follow, 0 to 5 (default 1)")
    p.add_argument("--include-tests", action="store_true",
                   help="also list producers and consumers that exist only in tests")
    p.add_argument("--direction", choices=["downstream", "upstream", "both"], default="downstream",
                   help="downstream: follow-ups; upstream: who writes what it consumes; both (default downstream)")
    p.add_argument("--limit", type=int, default=None, help="page size of every list (1-500; all when omitted)")
    p.add_argument("--offset", type=int, default=0, help="first item of every list (paging)")
    add_detail_flag(p)

    p = sub.add_parser("catalogue", help="every job/event/queue/stream with producer and consumer counts")
    add_common_flags(p)
    p.add_argument("--orphans", action="store_true",
                   help="only entries with a problem: no producer, no handler, handler not routed, queue without "
                   "worker, event without consumer, ...")
    p.add_argument("--kind", choices=["job", "event", "ws_event", "queue", "stream"], help="only this kind")

    p = sub.add_parser("verify", help="the implementation checklist of a job or event type")
    add_common_flags(p)
    p.add_argument("target", nargs="?", help="job or event type")
    p.add_argument("--all", action="store_true", help="every job and event type (exit 1 on any fail)")

    p = sub.add_parser("approve", help="(human, at a terminal) approve a remediation plan, print a token")
    add_common_flags(p, json_flag=False)
    p.add_argument("plan_id")
    p.add_argument("--approver", help="approver id (signature mode)")
    p.add_argument("--key", type=Path, help="private key file (signature mode)")
    p.add_argument("--plan-file", type=Path, help="approve a copy of the plan file (e.g. on another machine)")

    p = sub.add_parser("approver", help="manage approver keys (signature mode)")
    add_common_flags(p, json_flag=False)
    p.add_argument("action", choices=["init"])
    p.add_argument("--id", dest="approver_id", help="approver id (default: your user name)")
    p.add_argument("--out", type=Path, help="private key path (default ~/.config/mesh-mcp/<id>.key)")
    from tools.skills.commands import add_parser as add_skills_parser

    add_skills_parser(sub)

    from tools.flow_map.commands import add_parser as add_map_parser

    add_map_parser(sub)
    from server.approval.audit_cli import add_parser as add_audit_parser

    add_audit_parser(sub)
    from tools.lint.cli_parser import add_parser as add_lint_parser

    add_lint_parser(sub)
    from tools.trace_request.commands import add_parser as add_trace_request

    add_trace_request(sub)
    from tools.plan_flow.commands import add_parser as add_plan_flow

    add_plan_flow(sub)
    from tools.code_nav.commands import add_parser as add_code_nav

    add_code_nav(sub)
    from server.ide_config import add_parser as add_init

    add_init(sub)
    from tools.pictures.commands import add_parser as add_graph_parser

    add_graph_parser(sub)
    from tools.runtime_cli.parsers import add_parsers as add_runtime_parsers

    add_runtime_parsers(sub)  # trace job|event, health, stream, dlq, queue, rows
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_named(words))
    args = parser.parse_args(words)
    out, err = sys.stdout, sys.stderr
    # text from the workspace never reaches the terminal raw (escape sequences shown, not obeyed);
    # `serve` keeps its stdout: it is the MCP channel
    sys.stderr = TerminalWriter(err)
    if args.command != "serve":
        sys.stdout = TerminalWriter(out)
    try:
        return _run(parser, args)
    finally:
        if isinstance(sys.stdout, TerminalWriter):
            sys.stdout = out
        if isinstance(sys.stderr, TerminalWriter):
            sys.stderr = err


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    module_name, func_name = COMMANDS[args.command].split(":")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
        code = int(func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except MeshError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except Exception as exc:
        if _is_config_error(exc):
            return fail(str(exc))
        raise


def _is_config_error(exc: Exception) -> bool:
    """A ConfigError (only raised once ``server.config`` was imported: the parser does not import it)."""
    config = sys.modules.get("server.config")
    return config is not None and isinstance(exc, config.ConfigError)


if __name__ == "__main__":
    sys.exit(main())
