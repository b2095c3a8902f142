"""Result models of the static index (the public, stable API other capabilities use).

Every site says where it is (``repo``, ``file`` relative to the workspace, ``line``, the
enclosing ``symbol``), what it is (``kind``), how sure the index is (``confidence``:
``exact`` when resolved through code, ``heuristic`` when inferred from names, strings
or SQL built at run time) and whether it only exists in tests (``test_only``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.paging import Page
from tools.skills.model import RelatedSkill


class _Model(BaseModel):
    """Validators are built on first use, not at import: ``mesh-mcp index`` builds only IndexInfo."""

    model_config = ConfigDict(defer_build=True)


TypeKind = Literal["job", "event", "ws_event", "queue", "stream"]
Confidence = Literal["exact", "heuristic"]

SITE_KINDS = (
    "create_job",  # JobsOutboxEntity.createJob({ type, target })
    "fallback",  # this.withFallback(TYPE, ...)
    "create_event",  # EventQueueEntity.createEvent / createFollowUp
    "sql_trigger",  # CREATE TRIGGER ... create_event_queue_record('<type>', ...)
    "sql_insert",  # INSERT INTO event_queue inside a SQL function or string
    "direct_queue",  # queue.add(TYPE, ...) straight into BullMQ
    "repository_create",  # repo.create({ type, targetServices, emitter }): an event row built by a repository
    "ws_send",  # notifyUser / broadcast / gateway.server.to(room).emit(TYPE, ...): a websocket message sent
    "mapping",  # an entry of a mapping table (a follow-up step only, never a producer)
    "handler",  # class with `readonly jobType = ...`
    "worker",  # @Processor(Queue.X) class routing handlers
    "post_processor",  # stream consumer class
    "declaration",  # where a type, queue or stream is declared
)


class Site(_Model):
    """One place in the code: a producer, a consumer, a declaration or an unresolved reference."""

    repo: str = Field(description="repository (git root or top-level folder) holding the file")
    file: str = Field(description="path relative to the workspace, with / separators")
    line: int = Field(description="1-based line")
    symbol: str | None = Field(default=None, description="enclosing Class.method or function")
    kind: str = Field(description="create_job|fallback|create_event|repository_create|sql_trigger|sql_insert|"
                      "direct_queue|ws_send|mapping|handler|worker|post_processor|declaration")
    confidence: Confidence = "exact"
    test_only: bool = Field(default=False, description="spec file, test folder or test-only controller")
    value: str | None = Field(default=None, description="the resolved string value this site is about")
    detail: dict[str, str] = Field(
        default_factory=dict,
        description="queue, stream, group, handler_class, worker_class, via (mapping table), emitter, "
        "raw (unresolved expression), reason, ...",
    )


class Match(_Model):
    """A declared (or observed) job, event, websocket type, queue or stream the target names."""

    kind: TypeKind
    name: str = Field(description="qualified name at its declaration, e.g. EventsJobType.GEOCODE_EVENT")
    value: str = Field(description="the string value everything is matched by")
    defined_at: Site | None = Field(default=None, description="where the value is written; None if only observed")
    aliases: list[str] = Field(default_factory=list, description="other qualified names with this value")


class Route(_Model):
    """A queue or stream the target travels on."""

    kind: Literal["queue", "stream"]
    name: str = Field(description="queue name or full stream key")
    producers: int = Field(description="producer sites that send there")
    consumers: int = Field(description="workers or post-processors listening there")
    via: list[str] = Field(default_factory=list, description="how the route was found")


class FollowUp(_Model):
    """What happens next: a consumer emits another job or event, a trigger writes an outcome, a table maps."""

    depth: int
    from_kind: str
    from_value: str
    kind: str = Field(description="kind of what follows: job|event|ws_event")
    value: str
    name: str | None = Field(default=None, description="qualified name when declared")
    via: str = Field(description="handler / post-processor class, trigger function or mapping table")
    confidence: Confidence
    site: Site


class IndexInfo(_Model):
    """State of the index an answer comes from, so a partial answer is never silent."""

    workspace: str
    files: int = Field(description="files indexed (TypeScript, SQL, JSON config)")
    parse_errors: int = Field(description="files whose syntax tree has errors (still indexed)")
    parse_error_files: list[str] = Field(default_factory=list, description="first 50 files with parse errors")
    indexed_at: str = Field(description="ISO-8601 UTC time of the last refresh")
    stale_files: list[str] = Field(
        default_factory=list, description="files changed, added or removed since the index was built"
    )
    reparsed: int = Field(default=0, description="files parsed during the last refresh (others came from cache)")
    duration_s: float = Field(default=0.0, description="duration of the last refresh")
    cache: str | None = Field(default=None, description="SQLite cache file")
    skipped_files: list[str] = Field(
        default_factory=list, description="first 50 source files over the size cap (2 MB, generated code) not indexed"
    )


class ImpactResult(_Model):
    """Answer of analyze_impact."""

    target: str
    matches: list[Match]
    producers: list[Site]
    consumers: list[Site]
    routes: list[Route]
    followups: list[FollowUp]
    unresolved: list[Site] = Field(
        description="references of the relevant kind the index could not resolve (they might concern the target)"
    )
    index: IndexInfo
    suggestions: list[str] = Field(default_factory=list, description="closest known names for an unknown target")
    notes: list[str] = Field(default_factory=list, description="caveats worth reading before concluding")
    related_skills: list[RelatedSkill] = Field(
        default_factory=list, description="runbooks (workspace and bundled) about this target: URI and why"
    )
    related_skills_more: int = Field(default=0, description="related skills found beyond related_skills (capped)")

    def summary_text(self) -> str:
        from tools.mesh_index.render import impact_text

        return impact_text(self)


class CatalogueEntry(_Model):
    kind: TypeKind
    name: str
    value: str
    producers: int
    consumers: int
    orphan: bool
    reasons: list[str] = Field(default_factory=list, description="why it is an orphan")
    test_producers: int = Field(default=0, description="producers that exist only in tests")
    defined_at: Site | None = None
    failing_checks: list[str] = Field(
        default_factory=list, description="ids of the verify_flow checks this job or event type fails"
    )


class Catalogue(_Model):
    entries: list[CatalogueEntry]
    counts: dict[str, int] = Field(description="entries per kind")
    orphans: int
    index: IndexInfo
    page: Page | None = Field(default=None, description="which entries this answer holds (the MCP tool pages them)")

    def summary_text(self) -> str:
        from tools.mesh_index.render import catalogue_text

        return catalogue_text(self)
