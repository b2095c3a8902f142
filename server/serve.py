"""``mesh-mcp serve``: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import copy
import logging
from typing import Any

from mcp.server.mcpserver import MCPServer

from server.app import build_server
from server.cli_support import settings_from_args
from server.errors import InvalidArgument

log = logging.getLogger("mesh.serve")


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6) -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(f"--http expects HOST:PORT such as 127.0.0.1:8765, got {value!r}")
    return host.strip("[]"), int(port)


def _stderr_log_config() -> dict[str, Any]:
    """uvicorn's logging config with every handler on stderr (stdout stays clean)."""
    import uvicorn.config

    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    return config


def run_http(server: MCPServer, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    uvicorn.run(app, host=host, port=port, log_config=_stderr_log_config(), log_level="warning")


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    server = build_server(settings)
    mode = "remediation" if settings.enable_remediation else "read-only"
    if args.http:
        host, port = parse_host_port(args.http)
        log.warning("mesh-mcp serving streamable HTTP on http://%s:%d/mcp (%s)", host, port, mode)
        run_http(server, host, port)
    else:
        server.run("stdio")
    return 0
