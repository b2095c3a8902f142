"""``detail: "summary" | "full"`` on the large tools: a compact result by default, today's on request.

Claude Code, VS Code and Copilot CLI give the model only ``structuredContent`` when a result has
one, so a trace's every hop with its raw row columns, stack traces and Mermaid text fills a
context for little. A *summary* keeps the verdict and next step, every id the next call needs,
the counts, and the first ``[limits] summary_items`` items of each list; ``omitted`` says what
was left out and how to get it (``detail="full"``). ``full`` is the result exactly as before.

Each capability writes its own summary model and shaping function next to its tool (for
example :mod:`tools.outbox.summary`); this module holds what they share, and
:func:`with_summary` makes the advertised output schema accept either shape (``anyOf`` the full
model and the summary model), so clients that validate ``structuredContent`` accept both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar, Union

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field, TypeAdapter

from server.output_models import ResultModel, loaded
from server.sdk_tools import registered_tool, set_output
from tools.skills.model import RelatedSkill

Detail = Literal["summary", "full"]

DetailArg = Annotated[Detail, Field(
    description="summary: verdict, ids, counts, first items (cuts in `omitted`); full: everything")]
"""The ``detail`` parameter of the large tools (default ``"summary"``)."""

FULL_HINT = 'call again with detail="full" for every item'

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Omitted(BaseModel):
    """What a summary left out."""

    counts: dict[str, int] = Field(description="per field: items (or, for text, characters) left out")
    how: str = Field(default=FULL_HINT, description="how to get them")


class SummaryBase(BaseModel):
    """Fields every summary has: which shape it is, what it left out, the related runbooks (capped)."""

    detail: Literal["summary"] = Field(default="summary", description="this is the summary shape")
    omitted: Omitted | None = Field(default=None, description="what was left out; None when nothing was")
    related_skills: list[RelatedSkill] = Field(default_factory=list, description="runbooks about it (first ones)")
    related_skills_more: int = Field(default=0, description="related runbooks not listed here")
    related_skills_note: str | None = Field(default=None, description="what the links could not look at, if anything")


class Cutter:
    """Caps lists and texts for one summary and counts what it cut (``omitted``)."""

    def __init__(self, items: int, text_chars: int = 300) -> None:
        self.items = items
        self.text_chars = text_chars
        self.counts: dict[str, int] = {}

    def first(self, name: str, values: Sequence[T], n: int | None = None) -> list[T]:
        """The first ``n`` (default ``[limits] summary_items``) of ``values``, counting the rest."""
        cap = self.items if n is None else n
        if len(values) > cap:
            self.counts[name] = self.counts.get(name, 0) + len(values) - cap
        return list(values[:cap])

    def drop(self, name: str, count: int) -> None:
        """Record ``count`` items (or characters) of ``name`` left out entirely."""
        if count:
            self.counts[name] = self.counts.get(name, 0) + count

    def text(self, name: str, value: str | None) -> str | None:
        """``value`` cut at ``text_chars`` with an ellipsis (the cut characters are counted)."""
        if value is None or len(value) <= self.text_chars:
            return value
        self.counts[name] = self.counts.get(name, 0) + len(value) - self.text_chars + 1
        return value[: self.text_chars - 1] + "…"

    def omitted(self) -> Omitted | None:
        return Omitted(counts=dict(sorted(self.counts.items()))) if self.counts else None

    def related(self, related: Sequence[RelatedSkill] | None) -> list[RelatedSkill]:
        """The first two related skills, each ``why`` cut at 100 characters."""
        kept = self.first("related_skills", list(related or []), 2)
        cut = Cutter(self.items, 100)
        shown = [skill.model_copy(update={"why": cut.text("why", skill.why)}) for skill in kept]
        self.drop("related_skills.why", cut.counts.get("why", 0))
        return shown


def shaped(full: M, detail: Detail, summarise: Callable[[M, int], BaseModel], items: int) -> BaseModel:
    """``full`` unchanged for ``detail="full"``, else ``summarise(full, items)``."""
    if detail == "full":
        return full
    summary = summarise(full, items)
    if isinstance(summary, SummaryBase) and hasattr(full, "related_skills"):
        listed = len(getattr(full, "related_skills", None) or [])
        more = getattr(full, "related_skills_more", 0) or 0
        summary.related_skills_more = more + listed - len(summary.related_skills)
        summary.related_skills_note = getattr(full, "related_skills_note", None)
    return summary


def with_summary(server: MCPServer, tool_name: str, summary_model: type[BaseModel] | str) -> None:
    """Make ``tool_name``'s output model and advertised schema accept its summary shape too.

    The schema stays an object at the root (``type: object``) with ``anyOf`` the full and the
    summary model; the SDK validates a result against the same union. The schema is not generated
    again when the server's schema cache (:mod:`server.schema_cache`) gave the tool this very
    schema at registration. When the tool's model is named by path (a
    :class:`server.output_models.ResultModel`), ``summary_model`` is a path too and the union is
    one more ``ResultModel``, loaded on the tool's first call like the model alone.
    """
    full_model = registered_tool(server, tool_name).fn_metadata.output_model
    if full_model is None:
        raise TypeError(f"{tool_name} has no structured output to summarise")
    union: Any
    if isinstance(full_model, ResultModel):
        if not isinstance(summary_model, str):
            raise TypeError(f"{tool_name}: its model is named by path, so name its summary model by path too")
        union = ResultModel(*full_model.paths, summary_model)
    else:
        union = Union[full_model, loaded(ResultModel(summary_model)) if isinstance(summary_model, str)  # noqa: UP007
                      else summary_model]
    cache = getattr(server, "schema_cache", None)
    set_output(server, tool_name, union, lambda: {"type": "object", **TypeAdapter(loaded(union)).json_schema()},
               keep_schema=cache is not None and cache.is_cached(tool_name))
