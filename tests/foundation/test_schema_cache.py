"""The output schemas read from the state folder's cache give the same server as a fresh generation.

``build_server`` writes ``<state>/tool-schemas.json`` and the next server of the same settings and
code reads it instead of having pydantic generate the schemas (:mod:`server.schema_cache`). Checked
here: ``tools/list`` is byte for byte the same as a server that generated everything; the SDK's
tool objects validate arguments and results with the same models; arguments are still refused
strictly through a real MCP session; a stale, edited or damaged file is not used.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from server.app import build_server
from server.config import Settings, load_settings
from server.output_models import loaded
from server.schema_cache import KEEP, SchemaCache, cache_key, source_digest
from server.sdk_tools import registered_tools
from tests.foundation.test_strict_arguments import _minimal_arguments, _options
from tests.helpers import FIXTURES, in_process_client

pytestmark = pytest.mark.anyio


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(FIXTURES / "workspace", target, ignore=shutil.ignore_patterns(".mesh"))
    return target


async def _listing(server: Any) -> str:
    """``tools/list`` as the wire carries it (the SDK's own serialisation of the result)."""
    tools = await server.list_tools()
    return json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])


def _cache_file(settings: Settings) -> Path:
    path = SchemaCache.for_settings(settings).path
    assert path is not None
    return path


def _cached_tools(settings: Settings) -> set[str]:
    return set(json.loads(_cache_file(settings).read_text())["schemas"])


@pytest.mark.parametrize("remediation", [False, True])
async def test_a_cached_start_lists_byte_identical_schemas(
    make_settings: Callable[..., Settings], workspace: Path, remediation: bool
) -> None:
    settings = make_settings(workspace=str(workspace), enable_remediation=remediation)
    fresh = build_server(settings, cache_schemas=False)
    assert not _cache_file(settings).exists()  # a fresh generation writes nothing
    writer = build_server(settings)
    assert writer.schema_cache.used == set()
    with_output = {t.name for t in registered_tools(fresh) if t.fn_metadata.output_schema is not None}
    assert _cached_tools(settings) == with_output and len(with_output) >= 19
    reader = build_server(settings)
    assert reader.schema_cache.used == with_output  # every output schema came from the file
    assert await _listing(reader) == await _listing(fresh)
    assert await _listing(writer) == await _listing(fresh)

    expected = {t.name: t for t in registered_tools(fresh)}
    for tool in registered_tools(reader):
        want = expected[tool.name]
        got, meta = tool.fn_metadata, want.fn_metadata
        assert got.output_model == meta.output_model, tool.name  # results validated against the same model,
        assert loaded(got.output_model) == loaded(meta.output_model), tool.name  # named by path or not
        assert got.wrap_output == meta.wrap_output, tool.name
        assert got.output_schema == meta.output_schema, tool.name
        assert tool.parameters == want.parameters, tool.name
        assert got.arg_model.model_config == meta.arg_model.model_config, tool.name  # strict, extra forbidden
        assert got.arg_model.model_json_schema() == meta.arg_model.model_json_schema(), tool.name
        assert (tool.context_kwarg, tool.is_async, tool.annotations, tool.title) == (
            want.context_kwarg, want.is_async, want.annotations, want.title), tool.name


async def test_a_cached_server_refuses_unknown_and_coerced_arguments(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(workspace=str(workspace), enable_remediation=True)
    build_server(settings)  # writes the cache
    assert _cached_tools(settings)
    async with in_process_client(settings) as client:  # reads it
        tools = (await client.list_tools()).tools
        checked = 0
        for tool in tools:
            base = _minimal_arguments(tool.input_schema)
            result = await client.call_tool(tool.name, {**base, "no_such_argument": 1})
            assert result.is_error and f"'no_such_argument' is not a parameter of {tool.name}" in \
                result.content[0].text, (tool.name, result.content[0].text)
            for name, prop in tool.input_schema.get("properties", {}).items():
                kinds = {o.get("type") for o in _options(prop)}
                if "integer" in kinds and "string" not in kinds:
                    result = await client.call_tool(tool.name, {**base, name: "1"})
                    assert result.is_error and f"'{name}'" in result.content[0].text, (tool.name, name)
                    checked += 1
        assert checked >= 5


async def test_a_cached_server_validates_and_returns_both_result_shapes(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(workspace=str(workspace))
    build_server(settings)
    async with in_process_client(settings) as client:
        summary = await client.call_tool("analyze_impact", {"target": "FALLBACK_CREATE_EVENT"})
        full = await client.call_tool("analyze_impact", {"target": "FALLBACK_CREATE_EVENT", "detail": "full"})
        info = await client.call_tool("server_info", {})
    assert not summary.is_error and summary.structured_content["detail"] == "summary"
    assert not full.is_error and full.structured_content["matches"]
    assert not info.is_error and "analyze_impact" in info.structured_content["tools"]


async def test_a_stale_edited_or_damaged_cache_is_not_used(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(workspace=str(workspace))
    path = _cache_file(settings)
    build_server(settings)
    good = path.read_text()

    body = json.loads(good)
    body["schemas"]["trace_job"]["description"] = "edited by hand"
    path.write_text(json.dumps(body))
    assert build_server(settings).schema_cache.used == set()  # the content digest no longer matches
    assert path.read_text() == good  # and the file was rewritten from a fresh generation

    body = json.loads(good)
    body["key"] = "0" * 64
    path.write_text(json.dumps(body))
    assert build_server(settings).schema_cache.used == set()

    path.write_text(good[: len(good) // 2])
    assert build_server(settings).schema_cache.used == set()
    assert json.loads(path.read_text()) == json.loads(good)

    other = make_settings(workspace=str(workspace), limits={"summary_items": 7})
    assert cache_key(other) != cache_key(settings)  # settings (bounds, modes) are part of the key
    assert SchemaCache.for_settings(other).schemas == {}


def test_servers_of_different_settings_keep_their_own_cache(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    read_only = make_settings(workspace=str(workspace))
    remediation = make_settings(workspace=str(workspace), enable_remediation=True)
    for settings in (read_only, remediation):
        build_server(settings)
    assert build_server(read_only).schema_cache.used and build_server(remediation).schema_cache.used
    assert "apply_remediation" in _cached_tools(remediation) and "apply_remediation" not in _cached_tools(read_only)
    folder = _cache_file(read_only).parent
    for items in range(3, 3 + KEEP + 2):
        build_server(make_settings(workspace=str(workspace), limits={"summary_items": items}))
    assert len(list(folder.glob("*.json"))) == KEEP  # the oldest are deleted
    assert not _cache_file(read_only).exists()


def test_the_source_digest_follows_every_python_file(tmp_path: Path) -> None:
    for package in ("server", "tools", "resources"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "m.py").write_text("X = 1\n")
    before = source_digest(tmp_path)
    (tmp_path / "tools" / "m.py").write_text("X = 1  # a comment\n")
    changed = source_digest(tmp_path)
    (tmp_path / "tools" / "sub").mkdir()
    (tmp_path / "tools" / "sub" / "n.py").write_text("")
    added = source_digest(tmp_path)
    assert len({before, changed, added}) == 3
    (tmp_path / "tools" / "notes.md").write_text("not code")
    assert source_digest(tmp_path) == added


def test_no_cache_without_a_workspace_or_state_folder() -> None:
    assert SchemaCache.for_settings(load_settings(environ={})).path is None
