"""Result model of ``flow_map``: the Mermaid text plus the same picture as data.

Every node carries what it stands for (``kind``: job|event|ws_event|queue|stream, or the
index's site kind such as create_job, fallback, handler, worker, post_processor,
sql_trigger, mapping, ... drawn as-is, so new kinds appear without code naming them), its
stable Mermaid id, where it is in the code (file:line), what is wrong with it statically
(``trouble``) and, with ``live``, what was read at run time (``live``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.mesh_index.model import IndexInfo, Match
from tools.outbox.model import ServiceProblem
from tools.skills.model import RelatedSkill

Role = Literal["type", "route", "code", "folded"]
LiveStatus = Literal["ok", "warning", "error", "unknown"]


class Trouble(BaseModel):
    """A static problem drawn on a node."""

    code: Literal["no_producer", "no_consumer", "dead_end", "handler_not_routed", "queue_no_worker",
                  "stream_no_consumer", "filter_matches_nothing", "not_started", "only_test_producers"]
    sentence: str


class GroupLive(BaseModel):
    """Live state of one consumer group of a stream."""

    group: str
    consumers: int
    lag: int | None = Field(description="entries not yet delivered to the group (None: Redis could not say)")
    lag_estimated: bool = False
    pending: int
    oldest_pending_idle_ms: int | None = None
    dead_consumers: list[str] = Field(default_factory=list)


class LiveState(BaseModel):
    """What one bounded read of this hop saw (``live=true``)."""

    status: LiveStatus = Field(description="ok, warning, error (a trace verdict applies), unknown (not read)")
    verdicts: list[str] = Field(default_factory=list, description="trace verdict codes that apply to this hop")
    sentence: str = Field(description="what was read, in one line")
    counts: dict[str, int] = Field(default_factory=dict, description="numbers read (per status, per state, ...)")
    by_service: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="jobs_outbox / event_queue counts by status, per service database")
    groups: list[GroupLive] = Field(default_factory=list, description="streams: one entry per consumer group")
    unavailable: list[str] = Field(default_factory=list, description="services (or 'redis') that could not be read")
    source: str = Field(description="what was read: table or Redis keys")


class FlowNode(BaseModel):
    id: str = Field(description="stable Mermaid node id (same thing, same id, in every picture)")
    role: Role
    kind: str = Field(description="job|event|ws_event|queue|stream, a site kind of the index, or folded")
    label: str = Field(description="the short label drawn")
    value: str | None = Field(default=None, description="type value, queue name or stream key")
    name: str | None = Field(default=None, description="qualified name of a declared type")
    repo: str | None = None
    service: str | None = Field(default=None, description="the package (service) holding the code: its folder name")
    symbol: str | None = Field(default=None, description="class (or function / table) of a code node")
    file: str | None = None
    line: int | None = None
    lines: list[int] = Field(default_factory=list, description="every line of this class that is a site here")
    kinds: list[str] = Field(default_factory=list, description="every site kind this code node has here")
    confidence: Literal["exact", "heuristic"] = "exact"
    groups: list[str] = Field(default_factory=list, description="consumer groups (streams, post-processors)")
    target: bool = Field(default=False, description="a match of the target")
    trouble: list[Trouble] = Field(default_factory=list)
    live: LiveState | None = None


class FlowEdge(BaseModel):
    source: str
    target: str
    label: str | None = Field(default=None, description="what travels, or how it is written")
    confidence: Literal["exact", "heuristic"] = Field(description="exact: solid line; heuristic: dashed")


class Folded(BaseModel):
    """Fan-out drawn as one '+N more' node."""

    at: str = Field(description="id of the node whose fan-out was folded")
    node: str = Field(description="id of the '+N more' node")
    what: str = Field(description="producers, consumers, ...")
    count: int = Field(description="neighbours folded")
    items: list[str] = Field(description="what was folded: label and file:line of every node folded")


class FlowMap(BaseModel):
    target: str
    depth: int
    direction: str
    live: bool
    matches: list[Match]
    mermaid: str = Field(description="the picture, a Mermaid flowchart")
    mermaid_bytes: int
    nodes: list[FlowNode]
    edges: list[FlowEdge]
    folded: list[Folded] = Field(default_factory=list)
    trouble: int = Field(description="nodes with a static problem")
    unavailable: list[ServiceProblem] = Field(default_factory=list, description="live: what could not be read")
    notes: list[str] = Field(default_factory=list)
    index: IndexInfo
    related_skills: list[RelatedSkill] = Field(
        default_factory=list, description="runbooks (workspace and bundled) about this flow: URI and why"
    )
    related_skills_more: int = Field(default=0, description="related skills found beyond related_skills (capped)")

    def summary_text(self) -> str:
        from tools.flow_map.render import summary_text

        return summary_text(self)

    def data(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
