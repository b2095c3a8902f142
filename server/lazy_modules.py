"""Modules imported on first attribute access, for what only some tool calls need.

``psycopg`` and ``redis`` cost about 0.15 s to import. Tool modules are imported when the
server registers its tools, before ``tools/list`` can be answered, so they name these
libraries through :class:`LazyModule` (``sql = LazyModule("psycopg.sql")``) and the import
happens on the first call that builds a query or catches a Redis error. Annotations are not
evaluated (``from __future__ import annotations``), so ``sql.Composed`` in a signature is free.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``; imports it on the first attribute read."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name!r} ({state})>"
