"""The last nodes of a request's tree: the websocket messages its consumers send, from the static index.

A websocket send leaves no row and no stream entry, so it cannot be observed at run time; the
static index (``mesh_index``) says which post-processor sends which websocket type. For each
event item of the tree and each stream it was written to (``target_services``, the stream the
runtime hops searched), the consumers are the post-processors of the index that read that
stream, run (``started``), whose filter accepts the event's type and, when the runtime observed
consumer groups on the stream, whose group is one of them. Their websocket messages are the
index's follow-ups of the event type of kind ``ws_event`` made by that post-processor (directly
or through a class it names). Each is returned with ``evidence: static`` and
``runtime_seen: false``, with the delivery state of the event in that group when observed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.trace_request.model import RequestItem, WsMessage

if TYPE_CHECKING:
    from tools.mesh_index.impact import ImpactEngine

MAX_WS = 50


def _consumer_class(via: str) -> tuple[str, str] | None:
    """(post-processor class, 'Class' or 'Class via Other') of a follow-up's ``via``; None if not a consumer's."""
    if not via.startswith("post-processor "):
        return None
    shown = via.removeprefix("post-processor ")
    return shown.split(" via ")[0], shown


def ws_messages(engine: ImpactEngine, items: list[RequestItem], stream_prefix: str,
                targets_of: dict[str, list[str]]) -> list[WsMessage]:
    """The websocket messages the consumers of the event items send (see the module docstring);
    ``targets_of``: item key -> the event row's ``target_services``."""
    out: list[WsMessage] = []
    seen: set[tuple[str, str, str, str]] = set()
    for item in items:
        if item.table != "event_queue" or not item.type:
            continue
        observed: dict[str, dict[str, str | None]] = {}  # stream -> group -> state
        for hop in item.hops:
            if hop.name == "group" and hop.delivery is not None:
                observed.setdefault(hop.delivery.stream, {})[hop.delivery.group] = hop.state
        followups = [f for f in engine.followups([("event", item.type)], 1, False) if f.kind == "ws_event"]
        if not followups:
            continue
        for target in targets_of.get(item.key, []):
            stream = target if target.startswith(stream_prefix) else stream_prefix + target
            groups_seen = observed.get(stream, {})
            for pp in engine.stream_consumers.get(stream, ()):
                if not pp.started or (pp.accepts_value(item.type) is None and not (pp.accept_all or pp.filter_unknown)):
                    continue
                groups = [g for g in pp.groups if not groups_seen or g in groups_seen] if pp.groups else [None]
                if not groups:
                    continue  # the runtime saw other groups on this stream: not this consumer
                for f in followups:
                    who = _consumer_class(f.via)
                    if who is None or who[0] != pp.key[1]:
                        continue
                    for group in groups:
                        ident = (item.key, f.value, f"{f.site.file}:{f.site.line}", group or "")
                        if ident in seen or len(out) >= MAX_WS:
                            continue
                        seen.add(ident)
                        sure = f.confidence == "exact" and pp.accepts_value(item.type) == "exact" and group is not None
                        out.append(WsMessage(
                            parent=item.key, value=f.value, name=f.name, consumer=who[1], group=group, stream=stream,
                            group_state=groups_seen.get(group) if group else None,
                            site=f"{f.site.file}:{f.site.line}", confidence="exact" if sure else "heuristic"))
    return out
