"""list_catalogue carries each job and event type's failing verify_flow check ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import load_settings
from tests.helpers import in_process_client

pytestmark = pytest.mark.anyio


async def test_catalogue_entries_name_their_failing_checks(workspace: Path, tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"workspace": str(workspace), "state_dir": str(tmp_path / "s")})
    async with in_process_client(settings) as client:
        listed = await client.call_tool("list_catalogue", {})
        assert not listed.is_error, listed.content
        entries = {(e["kind"], e["value"]): e for e in listed.structured_content["entries"]}
        restock = entries[("job", "shop.restock_item")]
        assert restock["failing_checks"] == ["reads_envelope"]
        assert entries[("event", "shop.order.cancelled")]["failing_checks"] == ["consumer_accepts_type"]
        # every job/event entry agrees with verify_flow itself
        for (kind, value), entry in entries.items():
            if kind not in ("job", "event"):
                assert entry["failing_checks"] == []
                continue
            verified = await client.call_tool("verify_flow", {"target": value})
            if verified.is_error:
                continue
            assert entry["failing_checks"] == verified.structured_content["failing"], value
        assert "failing verify_flow checks" in listed.content[0].text
