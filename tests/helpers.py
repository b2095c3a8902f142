"""Helpers for tests: MCP clients (in-process and stdio), TOML config writing, workspace copies."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from server.app import build_server
from server.config import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"


def copy_workspace(source: Path, target: Path) -> Path:
    """A private copy of a fixture workspace (without its ``.mesh`` state) that a test may edit."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".mesh"))
    return target


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def render_toml(data: dict[str, Any], prefix: str = "") -> str:
    """Enough TOML for test configs: scalars, lists and nested tables."""
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    lines = [f"{k} = {toml_value(v)}" for k, v in scalars]
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, value in tables:
        name = f"{prefix}.{key}" if prefix else key
        out += f"\n[{name}]\n" + render_toml(value, name)
    return out



@asynccontextmanager
async def in_process_client(settings: Settings) -> AsyncIterator[Any]:
    from mcp import Client

    async with Client(build_server(settings), cache=None) as client:
        yield client


@asynccontextmanager
async def stdio_client(config: Path, *extra: str, env: dict[str, str] | None = None) -> AsyncIterator[Any]:
    """A real subprocess ``mesh-mcp serve`` over stdio, through the SDK client."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server.cli", "serve", "--config", str(config), *extra],
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO_ROOT)},
        cwd=str(REPO_ROOT),
    )
    async with Client(params, cache=None, read_timeout_seconds=60) as client:
        yield client
