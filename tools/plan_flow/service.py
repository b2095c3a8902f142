"""plan_flow: the edit plan of a new job or event type in this workspace (read-only).

Resolves the domain through the static index, picks the sibling flows to copy (see
:mod:`tools.plan_flow.jobplan`), reads the workspace's release tooling for the publish
stop, and lists the ``verify_flow`` checks that pass once the plan is applied: those every
sibling it follows passes, minus the ones the plan cannot make pass (``not_covered``).
"""

from __future__ import annotations

import re
from typing import Any

from server.errors import InvalidArgument, NotFound
from tools.plan_flow.domain import closest_domain, resolve_domain
from tools.plan_flow.eventplan import plan_event
from tools.plan_flow.model import FlowPlan
from tools.plan_flow.names import MEMBER_RE, ValueConvention, value_convention

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,99}$")
PLACE_RE = re.compile(r"^[A-Za-z0-9@][A-Za-z0-9_.@/-]{0,199}$")  # a repository, package folder or class
KINDS = ("job", "event")


def validate(kind: Any, name: Any, domain: Any, queue: Any, emitter: Any, consumer: Any) -> None:
    if kind not in KINDS:
        raise InvalidArgument(f"kind must be 'job' or 'event' (got {kind!r})")
    if not isinstance(name, str) or not MEMBER_RE.match(name) or len(name) > 100:
        raise InvalidArgument(
            f"name must be the new member in UPPER_SNAKE_CASE, e.g. SYNC_EXTERNAL_CALENDAR (got {name!r})"
        )
    if not isinstance(domain, str) or not NAME_RE.match(domain):
        raise InvalidArgument(f"domain must be a domain name such as 'event' or 'user' (got {domain!r})")
    if queue is not None and (
        kind != "job" or not isinstance(queue, str) or not re.match(r"^[A-Za-z0-9_.:-]{1,100}$", queue)
    ):
        raise InvalidArgument(
            "queue applies to jobs only: a queue member (CALENDAR), a qualified name "
            f"(EventsQueue.CALENDAR) or a queue value (calendar-queue) (got {queue!r})"
        )
    for label, value in (("emitter", emitter), ("consumer", consumer)):
        if value is not None and (not isinstance(value, str) or not PLACE_RE.match(value) or ".." in value):
            raise InvalidArgument(f"{label} must be a repository, package or class name (got {value!r})")


def _clash(linked: Any, kind: str, name: str, value: str, owners: set[str]) -> None:
    for key in linked.by_member.get(name, set()):
        info = linked.declared.get(key)
        if info is not None and key[0] == kind and info.name.split(".")[0] in owners:
            d = info.defined_at
            raise InvalidArgument(
                f"{info.name} already exists ({d.file}:{d.line}, value '{info.value}'): "
                "pick another name, or run `mesh-mcp verify` on it"
            )
    info = linked.declared.get((kind, value))
    if info is not None:
        d = info.defined_at
        where = f" ({d.file}:{d.line})" if d else ""
        raise InvalidArgument(f"the value '{value}' is already used by {info.name}{where}: pick another name")
    for key in linked.by_member.get(name, set()):
        info = linked.declared.get(key)
        if info is not None and key[0] == kind and info.defined_at is not None:
            d = info.defined_at
            raise InvalidArgument(
                f"{info.name} already exists ({d.file}:{d.line}): a member {name} of another "
                f"{kind} enum would clash once spread into the merged object; pick another name"
            )


def plan_flow(
    index: Any,
    kind: str,
    name: str,
    domain: str,
    queue: str | None = None,
    emitter: str | None = None,
    consumer: str | None = None,
) -> FlowPlan:
    validate(kind, name, domain, queue, emitter, consumer)
    linked = index.linked()
    conv = index.conventions
    package = conv.messaging_package.rstrip("/") + "/"
    dom = resolve_domain(linked, kind, domain, package)
    fallback = None
    if not dom.members:
        fb = closest_domain(linked, kind, dom, package)
        if fb is None:
            raise NotFound(f"no {kind} type is declared under {package}: there is no sibling flow to follow")
        fallback, dom_used = fb.name, fb
        if not dom.queues:
            dom.queues = fb.queues
    else:
        dom_used = dom
    conv_value = value_convention([(m.member, m.info.value) for m in dom_used.members])
    if conv_value is None:
        conv_value = ValueConvention("", "", "snake")
    if fallback is not None and conv_value.prefix:
        conv_value = ValueConvention(domain, conv_value.separator, conv_value.form, [])
    value = conv_value.value_for(name)
    _clash(linked, kind, name, value, {m.owner for m in dom_used.members})
    if kind == "event":
        return plan_event(index, dom, dom_used, fallback, name, value, conv_value, emitter, consumer)
    from tools.plan_flow.jobflow import plan_job

    return plan_job(index, dom, dom_used, fallback, name, value, conv_value, queue, emitter, consumer)
