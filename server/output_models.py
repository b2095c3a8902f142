"""Result models named by path, imported on the first call of the tool that returns them.

A tool declares its result model in its return annotation, ``Annotated[CallToolResult, Model]``
(:func:`server.toolkit.tool_result`). Creating the pydantic classes of every tool's results (and
the libraries their modules import) was most of what ``mesh-mcp serve`` imported of this project
before it could answer ``tools/list``, which needs only their JSON schemas, and those come from
:mod:`server.schema_cache`. A tool module therefore writes::

    async def trace_job(...) -> Annotated[CallToolResult, ResultModel("tools.outbox.model:TraceReport")]:

and the SDK's tool object holds the :class:`ResultModel` as its output model until
:func:`server.sdk_tools.load_output_model` swaps in the class, right before the tool's first
call (``MeshServer.call_tool``): every result is still validated against the class itself. When
the schema is not cached (first start, changed code or settings) the model is imported at
registration and the schema generated from it as the SDK does (:mod:`server.sdk_tools`).

Several paths stand for their ``Union`` in that order (a tool whose result is the full or the
summary shape, :func:`tools.detail.with_summary`).
"""

from __future__ import annotations

import importlib
from typing import Any, Union


class ResultModel:
    """The model at ``"package.module:Name"`` (several paths: their ``Union``), loaded on demand."""

    __slots__ = ("_loaded", "paths")

    def __init__(self, *paths: str) -> None:
        if not paths or not all(isinstance(p, str) and p.count(":") == 1 for p in paths):
            raise ValueError(f"expected 'package.module:Name' paths, got {paths!r}")
        self.paths = paths
        self._loaded: Any = None

    def load(self) -> Any:
        """Import the model(s): the class, or the ``Union`` of the classes."""
        if self._loaded is None:
            models = tuple(_import(path) for path in self.paths)
            self._loaded = models[0] if len(models) == 1 else Union[models]  # noqa: UP007 (a runtime union)
        return self._loaded

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResultModel) and other.paths == self.paths

    def __hash__(self) -> int:
        return hash(self.paths)

    def __repr__(self) -> str:
        return f"ResultModel({', '.join(map(repr, self.paths))})"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        """Refuse loudly: only :class:`server.app.MeshServer` registers such a tool (a plain
        ``MCPServer`` would otherwise wrap the reference in a result model of its own)."""
        raise TypeError(f"{self!r} is read by server.app.MeshServer's add_tool: register this tool on a "
                        "MeshServer (build_server), not on a plain MCPServer")


def _import(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def loaded(model: Any) -> Any:
    """``model`` itself, or what a :class:`ResultModel` stands for (imported now)."""
    return model.load() if isinstance(model, ResultModel) else model
