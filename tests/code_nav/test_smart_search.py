"""smart_search: declared symbols from the index's facts (one parse), ranked, scoped, with skeletons."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import Conventions
from server.errors import InvalidArgument
from tools.code_nav.symbol_search import smart_search


def test_exact_then_prefix_then_substring(nav_service):
    r = smart_search(nav_service, "eventserviceclient")
    assert [(h.name, h.match, h.kind) for h in r.hits][:1] == [("EventServiceClient", "exact", "interface")]
    hit = r.hits[0]
    assert (hit.file, hit.line, hit.exported) == ("npm-packages/packages/contracts-nest/src/clients/event.client.ts",
                                                  14, True)
    assert hit.signature == "export interface EventServiceClient"
    assert hit.skeleton == ["createEvent(request: CreateEventRequest): Observable<EventReply>",
                            "deleteEvent(request: { userId: string; eventId: string; userRole: string }): "
                            "Observable<EventReply>"]
    r = smart_search(nav_service, "GatewayServ")
    assert [h.match for h in r.hits] == ["substring"] * len(r.hits) and r.hits[0].name == "EventsGatewayService"
    order = [h.match for h in smart_search(nav_service, "EventService", limit=200).hits]
    assert order == sorted(order, key=["exact", "prefix", "substring"].index)


def test_kinds_signatures_and_class_skeleton(nav_service):
    kinds = {h.name: h.kind for h in smart_search(nav_service, "EVENT_SERVICE_NAME").hits}
    assert kinds == {"EVENT_SERVICE_NAME": "const"}
    assert smart_search(nav_service, "DigestFrequency").hits[0].kind == "type"
    cls = smart_search(nav_service, "EventsGatewayService", limit=1).hits[0]
    assert cls.kind == "class" and cls.signature == "export class EventsGatewayService implements OnModuleInit"
    assert "private eventService!: EventServiceClient" in cls.skeleton
    assert "async create(dto: { userId: string; title: string })" in cls.skeleton
    assert not any("lastValueFrom" in s for s in cls.skeleton)  # bodies stripped
    method = smart_search(nav_service, "EventsGatewayService.create").hits[0]
    assert (method.kind, method.line, method.end_line) == ("method", 16, 18)


def test_include_body_scope_and_paging(nav_service):
    hit = smart_search(nav_service, "EventsGatewayService.create", include_body=True).hits[0]
    assert hit.body is not None and "this.eventService.createEvent" in hit.body and hit.skeleton == []
    scoped = smart_search(nav_service, "Controller", scope="api-gateway", limit=200)
    assert scoped.hits and all(h.file.startswith("api-gateway/") for h in scoped.hits)
    assert smart_search(nav_service, "Controller", scope="api-gateway/src/events").scope == "api-gateway/src/events"
    for bad in ("../", "/etc", "api-gateway/../../x"):
        with pytest.raises(InvalidArgument, match="scope"):
            smart_search(nav_service, "x", scope=bad)
    first = smart_search(nav_service, "e", limit=3)
    second = smart_search(nav_service, "e", limit=3, offset=3)
    assert first.page.next_offset == 3 and {h.name for h in first.hits}.isdisjoint({h.name for h in second.hits})


def test_fuzzy_falls_back_to_text(nav_service):
    plain = smart_search(nav_service, "sendNothing")
    assert plain.hits == [] and plain.text_hits == [] and "fuzzy=true" in plain.notes[0]
    fuzzy = smart_search(nav_service, "sendNothing", fuzzy=True)
    assert [(t.file, t.line) for t in fuzzy.text_hits] == [
        ("api-gateway/src/notifications/notifications.client.ts", 14)]


def test_warm_start_answers_from_the_cache(nav_root: Path, nav_service, tmp_path: Path):
    from tools.mesh_index.service import IndexService

    before = smart_search(nav_service, "EventReply").hits
    cache = nav_service.cache_dir
    again = IndexService(nav_root, Conventions(), cache_dir=cache)
    try:
        info = again.refresh()
        assert info.reparsed == 0
        assert smart_search(again, "EventReply").hits == before
    finally:
        again.close()


def test_body_of_a_folder_swapped_for_a_symlink_out_is_not_read(tmp_path: Path):
    """The index saw ms-a/src as a folder; it is then a symlink to a place outside: include_body reads nothing
    there (the code-navigation reader goes through the guarded one, which checks every component)."""
    import os
    import shutil

    from tools.code_nav import files
    from tools.mesh_index.service import IndexService

    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "ms-a" / "src").mkdir(parents=True)
    (ws / "ms-a" / "package.json").write_text('{"name": "ms-a"}\n')
    (ws / "ms-a" / "src" / "t.ts").write_text("export function Target() { return 1; }\n")
    outside.mkdir()
    (outside / "t.ts").write_text("export function Target() { return 'SECRET-OUTSIDE'; }\n")
    service = IndexService(ws, Conventions(), cache_dir=tmp_path / "state")
    try:
        service.refresh()
        shutil.rmtree(ws / "ms-a" / "src")
        os.symlink(outside, ws / "ms-a" / "src")
        bodies = [h.body or "" for h in smart_search(service, "Target", include_body=True).hits]
    finally:
        service.close()
    assert not any("SECRET-OUTSIDE" in b for b in bodies)
    assert files.read_text(ws, "ms-a/src/t.ts") is None
    assert files.read_bytes(ws, "ms-a/src/t.ts") is None


def test_body_with_a_fence_in_a_template_literal_opens_no_block(tmp_path: Path):
    import re

    from tools.code_nav.render import search_text
    from tools.mesh_index.service import IndexService

    ws = tmp_path / "ws"
    (ws / "ms-a" / "src").mkdir(parents=True)
    (ws / "ms-a" / "package.json").write_text('{"name": "ms-a"}\n')
    (ws / "ms-a" / "src" / "t.ts").write_text(
        "export function Target() {\n  return `\n```mermaid\nclick A href \"javascript:alert(1)\"\n```\n`;\n}\n")
    service = IndexService(ws, Conventions(), cache_dir=tmp_path / "state")
    try:
        service.refresh()
        text = search_text(smart_search(service, "Target", include_body=True))
    finally:
        service.close()
    assert "click A href" in text
    # the body is indented under a "- " list item, where four spaces still open a fence: none may start a line
    assert not re.search(r"^[ \t]*(`{3,}|~{3,})", text, re.MULTILINE), text
