"""The ``detail="summary"`` shape of trace_request (:mod:`tools.detail`), applied to its result.

Each item keeps its key, row, status, link, parent, verdict and the ids its hops carry
(``ids``, as trace_job's summary hops); broken items come first. The hops themselves, the
Mermaid text and the lists past the cap are counted in ``omitted`` (``detail="full"``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.detail import Cutter, SummaryBase
from tools.outbox.model import ServiceProblem, Verdict
from tools.outbox.summary import hop_ids
from tools.trace_request.model import ContextFinding, LookupNote, RequestItem, RequestReport, WsMessage


class ItemBrief(BaseModel):
    key: str = Field(description="service:table:id")
    type: str | None = None
    status: str | None = None
    written_by: str
    correlation_id: str | None = None
    parent: str | None = None
    link: str
    heuristic: bool = False
    broken: bool = False
    verdict: Verdict
    ids: dict[str, str] = Field(default_factory=dict, description="ids its hops carry (queue, job_id, stream, "
                                "group, entry_id, consumer, dlq_entry_id, ...), for the next call")


class RequestSummary(SummaryBase):
    """trace_request, detail="summary"."""

    way: str
    value: str
    searched_services: list[str]
    verdict: Verdict
    inconclusive: bool
    counts: dict[str, int] = Field(
        description="lengths of items, trace_context, left_out, skipped, unindexed, ws_messages")
    items: list[ItemBrief] = Field(description="broken items first, then the others in tree order")
    trace_context: list[ContextFinding] = Field(default_factory=list)
    left_out: list[str] = Field(default_factory=list)
    skipped: list[LookupNote] = Field(default_factory=list)
    unindexed: list[LookupNote] = Field(default_factory=list)
    truncated: bool = False
    unavailable: list[ServiceProblem] = Field(default_factory=list)
    ws_messages: list[WsMessage] = Field(default_factory=list, description="websocket messages the final "
                                         "consumers send (static evidence; first ones)")
    ws_note: str | None = None


def _brief(item: RequestItem) -> ItemBrief:
    ids: dict[str, str] = {}
    for hop in item.hops:
        for key, value in hop_ids(hop).items():
            ids.setdefault(key, value)
    return ItemBrief(key=item.key, type=item.type, status=item.status, written_by=item.written_by,
                     correlation_id=item.correlation_id, parent=item.parent, link=item.link,
                     heuristic=item.heuristic, broken=item.broken, verdict=item.verdict, ids=ids)


def request_text(report: RequestReport) -> str:
    """The report's text, then the ids each item's hops carry that the text does not show yet."""
    text = report.summary_text()
    extra = []
    for item in report.items:
        ids: list[str] = []
        for hop in item.hops:
            for key, value in hop_ids(hop).items():
                shown = f"{key}={value}"
                if key not in ("service", "table") and value not in text and shown not in ids:
                    ids.append(shown)
        if ids:
            extra.append(f"  ids of {item.key}: {', '.join(ids)}")
    return "\n".join([text, *extra])


def summarise_request(report: RequestReport, items: int) -> RequestSummary:
    cut = Cutter(items)
    ordered = sorted(report.items, key=lambda i: not i.broken)
    shown = cut.first("items", ordered, max(items, 10))
    cut.drop("item_hops", sum(len(i.hops) for i in shown))
    if report.mermaid:
        cut.drop("mermaid_chars", len(report.mermaid))
    return RequestSummary(
        way=report.way, value=report.value, searched_services=report.searched_services, verdict=report.verdict,
        inconclusive=report.inconclusive,
        counts={name: len(getattr(report, name))
                for name in ("items", "trace_context", "left_out", "skipped", "unindexed", "ws_messages")},
        items=[_brief(i) for i in shown], trace_context=cut.first("trace_context", report.trace_context),
        left_out=cut.first("left_out", report.left_out), skipped=cut.first("skipped", report.skipped),
        unindexed=cut.first("unindexed", report.unindexed), truncated=report.truncated,
        unavailable=report.unavailable,
        ws_messages=cut.first("ws_messages", report.ws_messages),
        ws_note=report.ws_note, related_skills=cut.related(getattr(report, "related_skills", None)),
        omitted=cut.omitted(),
    )
