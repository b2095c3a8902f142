"""Read access to the raw facts, the layout and the package.json files of an index, for other capabilities
(code navigation: :mod:`tools.code_nav`). A mixin of :class:`~tools.mesh_index.service.IndexService`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tools.mesh_index.build_steps import gc_paused

if TYPE_CHECKING:
    from tools.mesh_index.cache import FactCache
    from tools.mesh_index.workspace import Layout, Package, TsConfig


class FactsAccessMixin:
    _lock: threading.RLock
    _facts: dict[str, dict[str, Any]]
    _facts_loaded: bool
    _layout: Layout | None
    _packages: dict[str, tuple[int, Package | TsConfig | None]]
    _ensure: Callable[[], Any]
    _load_facts: Callable[[FactCache | None], None]
    _open_cache: Callable[[], FactCache | None]
    _make_layout: Callable[[], Layout]

    def all_facts(self) -> dict[str, dict[str, Any]]:
        """Every file's raw facts (path -> facts; a shallow copy: do not modify the facts)."""
        with self._lock, gc_paused():
            self._ensure()
            if not self._facts_loaded:
                self._load_facts(self._open_cache())
            return dict(self._facts)

    def layout(self) -> Layout:
        """Repositories, packages and import resolution of the indexed workspace."""
        with self._lock:
            self._ensure()
            if self._layout is None:
                self._layout = self._make_layout()
            return self._layout

    def package_files(self) -> list[str]:
        """Every package.json of the workspace (relative), named or not, copies included."""
        with self._lock:
            self.layout()
            return sorted(rel for rel in self._packages if rel.endswith("package.json"))
