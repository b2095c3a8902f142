"""A long-running index does not grow with each change.

The index service pauses the cyclic garbage collector while it links and then freezes what exists
(``gc.freeze``), so that collections never traverse the index. Anything a relink leaves behind in
reference cycles is therefore never freed: a watched server would grow by the linker's working
state on every edit (about 13 MB per change at 20,000 files, measured). The linker breaks its own
cycles; this test looks at what a relink leaves for the cyclic collector, on a real workspace.
"""

from __future__ import annotations

import gc
from pathlib import Path

from server.config import Conventions
from tests.helpers import FIXTURES, copy_workspace
from tools.mesh_index.service import IndexService

NEW_FILE = """export enum LateJobType {
  LATE_SYNC = 'late.sync',
}
"""


def _left_for_the_collector(run) -> list[str]:
    """Types (of this project's index modules) that only the cyclic collector could free after ``run()``."""
    gc.unfreeze()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.unfreeze()  # the refresh froze what existed, its garbage included: look at all of it
        gc.collect()
        return sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("tools.mesh_index")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def test_a_relink_leaves_nothing_that_only_the_cyclic_collector_frees(tmp_path: Path) -> None:
    ws = copy_workspace(FIXTURES / "workspace", tmp_path / "ws")
    service = IndexService(ws, Conventions(), tmp_path / "state", stale_check_interval_s=0)
    try:
        assert _left_for_the_collector(service.refresh) == []  # the cold build
        new = ws / "late.enum.ts"

        def change() -> None:
            new.write_text(NEW_FILE)
            info = service.refresh()
            assert info.reparsed == 1

        assert _left_for_the_collector(change) == []  # a relink after one new file
        assert service.analyze_impact("late.sync") is not None  # the relinked index answers
    finally:
        service.close()
    restarted = IndexService(ws, Conventions(), tmp_path / "state", stale_check_interval_s=0)
    try:  # a restart: the manifest is checked and the snapshot loaded on the first query
        assert _left_for_the_collector(lambda: restarted.analyze_impact("late.sync")) == []
    finally:
        restarted.close()
