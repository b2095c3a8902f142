"""visualize_mesh's text on a hostile workspace: a queue value and a service folder name holding a newline and a
Markdown fence stay on their line; the only fence in the text is our own ```mermaid block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import in_process_client

pytestmark = pytest.mark.anyio
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
EVIL = "\n```\n\n```mermaid\nflowchart LR\nA-->B\nclick A href \"javascript:alert(1)\"\n```\n"
IMPORTS = "import { JobMessagingType, EventsQueue } from '@scope/messaging';\n"


def _hostile(ws: Path) -> Path:
    service = ws / "ms-ev\n```\n\n```mermaid\nflowchart LR\nA-->B\nclick A call alert(1)\n```\nx"
    messaging = ws / "npm-packages" / "packages" / "messaging"
    worker = ws / "workers-runners" / "worker-event"
    for d in (service / "src", messaging / "src", worker / "src"):
        d.mkdir(parents=True)
    evil_literal = EVIL.replace("\n", "\\n")
    (messaging / "package.json").write_text('{"name":"@scope/messaging","version":"1.0.0","main":"src/index.ts"}')
    (messaging / "src" / "index.ts").write_text(
        f"export enum EventsQueue {{ EVENTS = 'ev-queue{evil_literal}' }}\n"
        "export enum EventsJobType { GEOCODE_EVENT = 'events.geocode_event' }\n"
        "export const JobMessagingType = { ...EventsJobType } as const;\n")
    deps = '"dependencies":{"@scope/messaging":"1.0.0"}}'
    (service / "package.json").write_text('{"name":"ms-event","version":"1.0.0",' + deps)
    (service / "src" / "repo.ts").write_text(
        IMPORTS + "export class EventRepository {\n  async geo(id: string) {\n"
        "    const job = JobsOutboxEntity.createJob({ type: JobMessagingType.GEOCODE_EVENT, "
        "target: EventsQueue.EVENTS, emitter: 'ms-event', emitterId: id, payload: {}, scheduledAt: new Date() });\n"
        "    await this.repo.create(job);\n  }\n}\n")
    (worker / "package.json").write_text('{"name":"worker-event","version":"1.0.0",' + deps)
    (worker / "src" / "w.ts").write_text(
        IMPORTS + "@Processor(EventsQueue.EVENTS)\nexport class EventWorker extends BaseWorker {\n"
        "  handlerMap = { [JobMessagingType.GEOCODE_EVENT]: this.geo };\n}\n")
    return ws


async def test_names_with_a_fence_never_open_a_block_before_ours(make_settings, tmp_path: Path) -> None:
    ws = _hostile(tmp_path / "ws")
    async with in_process_client(make_settings(workspace=str(ws))) as client:
        mermaid = (await client.call_tool("visualize_mesh", {})).content[0].text
        html = (await client.call_tool("visualize_mesh", {"format": "html"})).content[0].text
    assert "trouble: queue ev-queue" in mermaid and "nodes: " in html  # the hostile names are there, on one line
    fences = [line for line in mermaid.splitlines() if FENCE.match(line)]
    assert fences == ["```mermaid", "```"], fences
    assert mermaid.rstrip().endswith("```") and mermaid.index("\n```mermaid\n") > mermaid.index("look closer:")
    assert not [line for line in html.splitlines() if FENCE.match(line)]
