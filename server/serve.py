"""``mesh-mcp serve``: the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import logging

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


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    server = build_server(settings)
    mode = "remediation" if settings.enable_remediation else "read-only"
    if args.http:
        host, port = parse_host_port(args.http)
        log.warning("mesh-mcp serving streamable HTTP on http://%s:%d/mcp (%s)", host, port, mode)
        server.run("streamable-http", host=host, port=port, streamable_http_path="/mcp")
    else:
        server.run("stdio")
    return 0
