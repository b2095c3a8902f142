"""The result of ``trace_request``: the items of one request, their hops, the verdict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.outbox.model import Hop, ServiceProblem, Verdict
from tools.skills.model import RelatedSkill


class ContextFinding(BaseModel):
    code: Literal["trace_context_broken"] = "trace_context_broken"
    item: str = Field(description="service:table:id of the row")
    parent: str | None = None
    sentence: str


class RequestItem(BaseModel):
    """One row of the request (a jobs_outbox row with its chain, or an event_queue row with its delivery)."""

    key: str = Field(description="service:table:id")
    service: str
    table: str
    id: str
    type: str | None = None
    status: str | None = None
    created_at: str | None = None
    written_by: Literal["code", "trigger"]
    traceparent: str | None = None
    correlation_id: str | None = None
    parent: str | None = Field(default=None, description="key of the causal parent")
    link: str = Field(description="how it was reached: start, correlation_id, trace_id, entity_id, outcome, "
                                  "job_audit")
    heuristic: bool = Field(default=False, description="found by a payload search (entity_id)")
    verdict: Verdict
    hops: list[Hop] = Field(default_factory=list)
    broken: bool = False


class WsMessage(BaseModel):
    """A websocket message the static index says the consumer of an item sends: static evidence, never seen
    at run time (a websocket send leaves no row nor stream entry)."""

    parent: str = Field(description="key of the event item whose consumer sends it")
    value: str = Field(description="websocket type")
    name: str | None = Field(default=None, description="qualified name at its declaration")
    consumer: str = Field(description="post-processor class (and the class it sends through)")
    group: str | None = Field(default=None, description="consumer group of the post-processor")
    stream: str
    group_state: str | None = Field(default=None, description="delivery of the event to that group as observed "
                                                                 "(None: the group was not observed)")
    site: str = Field(description="file:line of the send")
    confidence: Literal["exact", "heuristic"]
    evidence: Literal["static"] = "static"
    runtime_seen: Literal[False] = False


class LookupNote(BaseModel):
    service: str
    lookup: str = Field(description="table.column searched")
    note: str


class RequestReport(BaseModel):
    way: str = Field(description="correlation_id, trace_id, entity_id or start")
    value: str
    searched_services: list[str]
    verdict: Verdict = Field(description="the first broken link of the whole tree (trace verdict codes)")
    inconclusive: bool = Field(description="a service could not be searched, or a found row's chain could not be "
                               "read: the answer may miss rows or links")
    items: list[RequestItem]
    trace_context: list[ContextFinding] = Field(default_factory=list)
    left_out: list[str] = Field(default_factory=list, description="rows of the same correlation in another trace")
    skipped: list[LookupNote] = Field(default_factory=list, description="lookups skipped: the column is missing")
    unindexed: list[LookupNote] = Field(default_factory=list, description="lookups that ran without an index")
    truncated: bool = Field(default=False, description="the row cap stopped the search: more rows may exist")
    unavailable: list[ServiceProblem] = Field(default_factory=list, description=(
        "what could not be read: a service (its name) or Redis (redis, redis:<instance>) not searched, or a row "
        "found whose chain could not be read (its service:table:id)"))
    mermaid: str = ""
    ws_messages: list[WsMessage] = Field(default_factory=list, description="websocket messages the final consumers "
                                         "send, from the static index (evidence: static, not seen at run time)")
    ws_note: str | None = Field(default=None, description="why websocket messages were not joined, when they were not")
    sql_round_trips: int = Field(default=0, description="SQL round trips of the call (lookups of a level go together)")
    related_skills: list[RelatedSkill] = Field(
        default_factory=list, description="runbooks (workspace and bundled) about what was traced: URI and why"
    )
    related_skills_more: int = Field(default=0, description="related skills found beyond related_skills (capped)")
    related_skills_note: str | None = Field(
        default=None, description="what the links could not look at (the static index not ready, ...)"
    )

    def summary_text(self) -> str:
        v = self.verdict
        head = f"request {self.way}={self.value}: {v.code} — {v.sentence}"
        lines = [head + (" [INCONCLUSIVE]" if self.inconclusive else ""), f"next: {v.next_step}"]
        for item in self.items:
            mark = "broken" if item.broken else "ok"
            lines.append(f"  [{mark}] {item.key} {item.type} {item.status} ({item.link}"
                         + (f" of {item.parent}" if item.parent else "") + f"): {item.verdict.code}")
        for ws in self.ws_messages:
            lines.append(f"  [ws] {ws.value} sent by {ws.consumer} (group {ws.group or '?'}, {ws.stream}) at {ws.site} "
                         f"after {ws.parent}: static evidence ({ws.confidence}), not seen at run time"
                         + (f"; the event is {ws.group_state} in that group" if ws.group_state else ""))
        if self.ws_note:
            lines.append(f"websocket messages: {self.ws_note}")
        for f in self.trace_context:
            lines.append(f"trace_context_broken: {f.item}: {f.sentence}")
        for note in self.skipped:
            lines.append(f"skipped {note.service} {note.lookup}: {note.note}")
        for note in self.unindexed:
            lines.append(f"no index: {note.service} {note.lookup}: {note.note}")
        if self.left_out:
            lines.append(f"left out (other trace): {', '.join(self.left_out)}")
        if self.truncated:
            lines.append("row cap reached: more rows may belong to this request")
        for problem in self.unavailable:
            lines.append(f"! {problem.service}: {problem.error}")
        return "\n".join(lines)
