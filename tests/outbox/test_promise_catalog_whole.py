"""Promise: the outbox tables' schema is read whole, whatever ``[limits] max_rows``.

The data row cap bounds what a tool returns; it must not cut the catalog read the tools decide
with. Cut at a cap of 10, the columns past the tenth looked missing (a false "no correlation_id
column" skipped note, then a confident ``not_found`` for rows that were there).
"""

from __future__ import annotations

import psycopg
import pytest

from server.connections import Connections
from server.errors import MeshError
from tools.outbox.schema_discovery import SchemaCatalog

pytestmark = pytest.mark.anyio


async def _schemas(settings, *, with_indexes: bool = False):
    connections = Connections(settings)
    try:
        return await SchemaCatalog(connections, settings).tables("user", with_indexes=with_indexes)
    finally:
        await connections.aclose()


def _catalog(url: str) -> dict[str, set[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_name = ANY(%s)",
                            (["jobs_outbox", "job_audit", "event_queue"],)).fetchall()
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


@pytest.mark.parametrize("max_rows", [1, 10])
async def test_every_column_and_index_is_seen_under_a_small_row_cap(outbox_settings, outbox_db, max_rows) -> None:
    expected = _catalog(outbox_db)
    assert sum(map(len, expected.values())) > 10  # more columns than the cap: the cap would cut them
    whole = await _schemas(outbox_settings(), with_indexes=True)
    small = await _schemas(outbox_settings(limits={"max_rows": max_rows}), with_indexes=True)
    assert {s.name: set(s.columns) for s in small.values()} == expected
    assert {k: (s.columns, s.indexes, s.statistics) for k, s in small.items()} == {
        k: (s.columns, s.indexes, s.statistics) for k, s in whole.items()}
    assert sum(len(s.indexes) for s in small.values()) > 1  # more than the smallest cap


async def test_a_catalog_larger_than_its_own_cap_is_refused_not_read_in_part(outbox_settings, monkeypatch) -> None:
    """Past ``CATALOG_MAX_ROWS`` (10,000: three tables cannot hold that many columns, so 5 here) the schema is
    refused with the reason; a schema read in part would make present columns look missing."""
    import tools.outbox.schema_discovery as schema_discovery

    monkeypatch.setattr(schema_discovery, "CATALOG_MAX_ROWS", 5)
    with pytest.raises(MeshError) as info:
        await _schemas(outbox_settings(limits={"max_rows": 1}))
    assert str(info.value) == ("service 'user': the catalog of jobs_outbox, event_queue, job_audit has more than 5 "
                               "rows (columns or indexes); its schema cannot be read whole")
