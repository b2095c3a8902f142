"""Result models named by path (:mod:`server.output_models`): not imported at start-up, imported and
enforced on the tool's first call, and listed exactly as the classes themselves would be.

- a server built from the schema cache imports none of the deferred model modules (fresh interpreter);
- the output schema of every tool declared with a ``ResultModel`` is what the SDK generates for the
  class itself (``Annotated[CallToolResult, Model]``, or the full/summary union), once compacted;
- every tool, called once through a real MCP session on real PostgreSQL and Redis, ends with the
  class as its output model, and its structured result validates against that class;
- a result that does not match its deferred model is refused (so the model really is enforced).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Union

import pytest
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, TypeAdapter

from server.app import MeshServer, build_server
from server.config import Settings
from server.output_models import ResultModel, loaded
from server.sdk_tools import registered_tool, registered_tools
from server.tool_listing import listed_output_schema
from tests.flow_map.conftest import copy_workspace
from tests.helpers import REPO_ROOT
from tests.streams import scenario as sc_mod
from tests.streams.conftest import machine, merged
from tests.streams.scenario import SETTINGS
from tests.topologies.test_cluster_every_tool import every_call
from tests.trace_request import saga as sg
from tests.trace_request.conftest import dbs, service_dbs

__all__ = ["dbs", "machine", "service_dbs"]

pytestmark = pytest.mark.anyio

DEFERRED_MODULES = (
    "tools.outbox.model", "tools.outbox.summary", "tools.streams.inspect_models", "tools.streams.summary",
    "tools.streams.dlq", "tools.streams.pending", "tools.streams.discovery", "tools.queues.bull",
    "tools.queues.discovery", "tools.remediation.model", "tools.remediation.summary", "tools.verify.model",
    "tools.flow_map.model", "tools.flow_map.summary", "tools.lint.model", "tools.plan_flow.model",
    "tools.trace_request.model", "tools.trace_request.summary", "tools.mesh_index.summary",
)
"""Modules of result models that ``mesh-mcp serve`` must not import before a tool's first call."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return copy_workspace("workspace", tmp_path / "ws")


START = r"""
import json, sys
from server.app import build_server
from server.config import load_settings
from server.output_models import ResultModel
from server.sdk_tools import registered_tools

settings = load_settings(environ={}, overrides={"workspace": sys.argv[1], "state_dir": sys.argv[2],
                                                "enable_remediation": True})
build_server(settings)  # writes the schema cache (generating imports the models): the next one reads it
before = set(sys.modules)
server = build_server(settings)
print(json.dumps({
    "cached": sorted(server.schema_cache.used),
    "lazy": sorted(t.name for t in registered_tools(server) if isinstance(t.fn_metadata.output_model, ResultModel)),
    "modules": sorted(m for m in sys.argv[3:] if m in sys.modules),
    "new_modules": sorted(m for m in set(sys.modules) - before),
}))
"""


def test_a_cached_start_imports_no_result_model(workspace: Path, tmp_path: Path) -> None:
    # two processes: the first server (generating) imports the models; only a fresh one shows a cached start
    state = tmp_path / "state"
    out = subprocess.run(
        [sys.executable, "-c", START, str(workspace), str(state), *DEFERRED_MODULES],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(seen["lazy"]) >= 18 and set(seen["lazy"]) <= set(seen["cached"])
    assert seen["new_modules"] == []  # the second build imported nothing new
    fresh = subprocess.run(
        [sys.executable, "-c", START.replace("build_server(settings)  # writes", "pass  # "),
         str(workspace), str(state), *DEFERRED_MODULES],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    cold = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert cold["cached"] == seen["cached"] and cold["lazy"] == seen["lazy"]
    assert cold["modules"] == [], "a cached start must not import result models: " + ", ".join(cold["modules"])


@pytest.mark.parametrize("remediation", [False, True])
def test_deferred_models_list_the_schemas_of_the_classes(
    make_settings: Callable[..., Settings], workspace: Path, remediation: bool
) -> None:
    server = build_server(make_settings(workspace=str(workspace), enable_remediation=remediation),
                          cache_schemas=False)
    checked = 0
    for tool in registered_tools(server):
        model = tool.fn_metadata.output_model
        if not isinstance(model, ResultModel):
            continue
        classes = [ResultModel(p).load() for p in model.paths]
        if len(classes) == 1:  # what the SDK derives for `-> Annotated[CallToolResult, Model]`
            def fn() -> None:
                raise NotImplementedError

            fn.__annotations__["return"] = Annotated[CallToolResult, classes[0]]
            expected = func_metadata(fn).output_schema
        else:  # tools.detail.with_summary: the object whose anyOf is the full and the summary model
            expected = {"type": "object", **TypeAdapter(Union[tuple(classes)]).json_schema()}  # noqa: UP007
        assert tool.fn_metadata.output_schema == listed_output_schema(expected), tool.name
        checked += 1
    assert checked >= (19 if remediation else 18)


async def test_every_deferred_model_validates_a_real_call(
    machine: Any, dbs: dict, make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings(**merged(SETTINGS, {
        "redis": machine.redis_config,
        "services": {name: {"postgres": url} for name, (url, _) in dbs.items()},
        "workspace": str(copy_workspace("workspace", tmp_path / "ws")),
    }))
    sc = sc_mod.build(machine.client, settings.conventions, age=False)
    saga = sg.build(dbs["event"][1], dbs["notification"][1], machine.client)
    build_server(settings)  # write the schema cache: the session's server reads it (the start-up path)
    server = build_server(settings)
    lazy = {t.name: t.fn_metadata.output_model for t in registered_tools(server)
            if isinstance(t.fn_metadata.output_model, ResultModel)}
    assert len(lazy) >= 18
    from mcp import Client

    validated = set()
    async with Client(server, cache=None) as client:
        for name, args in every_call(sc, saga):
            result = await client.call_tool(name, args)
            assert not result.is_error, (name, args, result.content)
            if name not in lazy:
                continue
            model = registered_tool(server, name).fn_metadata.output_model
            assert not isinstance(model, ResultModel) and model == lazy[name].load(), name  # the class(es) now
            TypeAdapter(model).validate_python(result.structured_content)
            validated.add(name)
    assert validated == set(lazy) - {"apply_remediation"}  # not enabled here: listed, never called


class Small(BaseModel):
    n: int


async def test_a_result_that_does_not_match_its_deferred_model_is_refused() -> None:
    server = MeshServer("t")

    async def small(ok: bool) -> Annotated[CallToolResult, ResultModel(f"{__name__}:Small")]:
        """A result of the model's shape, or not."""
        return CallToolResult(content=[TextContent(type="text", text="n")], structured_content={"n": 3 if ok else "x"})

    server.add_tool(small, name="small")
    meta = registered_tool(server, "small").fn_metadata
    assert isinstance(meta.output_model, ResultModel) and meta.output_schema is not None
    assert meta.output_schema["properties"]["n"]["type"] == "integer"
    from mcp import Client

    async with Client(server, cache=None) as client:
        assert not (await client.call_tool("small", {"ok": True})).is_error
        refused = await client.call_tool("small", {"ok": False})
    assert refused.is_error, refused.content
    assert registered_tool(server, "small").fn_metadata.output_model is Small


def test_result_model_paths_and_equality() -> None:
    ref = ResultModel(f"{__name__}:Small")
    assert ref == ResultModel(f"{__name__}:Small") and hash(ref) == hash(ResultModel(f"{__name__}:Small"))
    assert loaded(ref) is Small and loaded(Small) is Small
    assert ResultModel(f"{__name__}:Small", "tests.foundation.test_output_models:Small").load() == Small
    with pytest.raises(ValueError):
        ResultModel("tools.outbox.model.TraceReport")
    with pytest.raises(AttributeError):
        ResultModel(f"{__name__}:NoSuchModel").load()


def test_a_plain_mcp_server_refuses_a_tool_whose_model_is_named_by_path() -> None:
    from mcp.server.mcpserver import MCPServer

    async def small() -> Annotated[CallToolResult, ResultModel(f"{__name__}:Small")]:
        """Never registered."""
        raise NotImplementedError

    with pytest.raises(TypeError, match="MeshServer"):  # not registered with a made-up wrapped schema
        MCPServer("plain").add_tool(small, name="small")
