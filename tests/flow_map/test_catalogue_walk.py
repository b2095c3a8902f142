"""Every name list_catalogue returns is mapped without error (issue 33: flow_map crashed in the fold step on
names such as ``event:job:outbox:success`` and ``stream:ws:jobs-outbox-success``), on the gather workspace and
on the fixture workspace."""

from __future__ import annotations

import shutil

import pytest

from server.config import Conventions
from tests.helpers import FIXTURES
from tests.static.gather_fixture import make_gather
from tools.flow_map.service import MAX_BYTES, build_map
from tools.flow_map.summary import summarise_flow
from tools.mesh_index.service import IndexService


@pytest.mark.parametrize("which", ["gather", "workspace"])
def test_every_catalogue_name_is_mapped(which: str, tmp_path) -> None:
    if which == "gather":
        ws = make_gather(tmp_path)
    else:
        ws = tmp_path / "ws"
        shutil.copytree(FIXTURES / "workspace", ws, ignore=shutil.ignore_patterns(".mesh"))
    svc = IndexService(ws, Conventions(), tmp_path / "state")
    try:
        svc.refresh()
        names = sorted({n for e in svc.catalogue(with_checks=False).entries for n in (e.name, e.value)})
        assert len(names) > 40
        assert which != "gather" or {"stream:ws:jobs-outbox-success", "order:job:outbox:success"} <= set(names)
        for name in names:
            result, _graph = build_map(svc, name, 3, "LR")
            assert result.mermaid.startswith("flowchart") and result.mermaid_bytes <= MAX_BYTES, name
            small = summarise_flow(result, 5)
            assert small.mermaid.startswith("flowchart") and len(small.model_dump_json()) <= 4096, name
    finally:
        svc.close()


def test_a_class_is_mapped_as_what_it_consumes_and_emits(tmp_path) -> None:
    svc = IndexService(make_gather(tmp_path), Conventions(), tmp_path / "state")
    try:
        svc.refresh()
        result, _graph = build_map(svc, "FeedFanoutGatherPostProcessor", 2, "LR")
        targets = {(n.file, n.symbol) for n in result.nodes if n.target}
        sub = "ws-service/src/gather/feed-fanout.gather-post-processor.ts"
        assert (sub, "FeedFanoutGatherPostProcessor") in targets
        values = {n.value for n in result.nodes if n.role == "type"}
        assert {"social.feed_shard_done", "social.feed_fanout_successfull", "ws.social.feed_fanout_failed"} <= values
        assert "social.deletion_completed" not in values  # the other subclass's aggregation
    finally:
        svc.close()
