"""The cyclic garbage collector paused while ``mesh-mcp serve`` builds its server.

Importing the MCP SDK, pydantic and the tool modules creates several hundred thousand objects
that live as long as the process (classes, validators, functions, schemas) and almost no cyclic
garbage: about 6,000 unreachable objects once the server is built (a 1,500-file workspace). The
collector still runs over them while they are created: about 230 young and one or two full
collections before ``tools/list`` can be answered, 0.1-0.2 s of CPU measured on the bench
machine (docs/benchmarks.md). :func:`collector_paused` disables it for the start-up, then
*freezes* what exists (``gc.freeze``: moved to a permanent generation that later collections do
not traverse) and enables it again, so the server's own allocations are collected as usual.

The price: objects alive at the end of the start-up that later become part of a garbage cycle
are not reclaimed (reference counting still frees everything else). That is a bounded, one-time
amount (at most what the start-up built: the imported modules and the index the warm-up thread
was loading), never a growing one.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the collector inside the block; then freeze the objects it made and enable it again.

    Leaves the collector as it found it when it was already disabled (nothing is frozen then)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
