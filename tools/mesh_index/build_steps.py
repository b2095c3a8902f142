"""Small steps of an index build that :mod:`tools.mesh_index.service` uses: the collector paused
while facts are built, and the linker imported on first use (a warm start never links)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools.mesh_index.linked import LinkedIndex


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for the block (facts are millions of small acyclic containers)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def link(*args: Any, **kwargs: Any) -> LinkedIndex:
    """:func:`tools.mesh_index.sites.link`, imported on first use (a warm start never links)."""
    from tools.mesh_index.sites import link as link_facts

    return link_facts(*args, **kwargs)


def import_linker() -> None:
    """Import the linker while the workers parse (its modules take 0.05-0.1 s to load)."""
    import tools.mesh_index.sites  # noqa: F401
