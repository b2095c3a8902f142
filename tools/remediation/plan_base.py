"""What every plan builder of ``propose_remediation`` shares: the request, the builder, checks.

:mod:`tools.remediation.planner` validates a request and picks the builder of its symptom
(:mod:`plan_dlq`, :mod:`plan_streams`, :mod:`plan_outbox`, :mod:`plan_queues`); the builders
import this module, never the planner, so the registry runs one way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from server.config import Settings
from tools.remediation.model import Check, Operation, Step
from tools.remediation.operations import render, render_params

MAX_ID_CHARS = 256
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
STREAM_ID_RE = re.compile(r"^\d{1,20}-\d{1,20}$")


def check(kind: str, **args: Any) -> Check:
    """A precondition of ``kind`` (see :mod:`tools.remediation.preconditions` for each kind's args)."""
    return Check(kind=kind, args=args)  # type: ignore[arg-type]


@dataclass
class PlanBuilder:
    """Collects the steps of a plan and what they touch."""

    settings: Settings
    summary: str = ""
    steps: list[Step] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    messages: int = 0
    rows: int = 0
    keys: int = 0
    streams: set[str] = field(default_factory=set)
    tables: set[str] = field(default_factory=set)
    groups_reached: set[str] = field(default_factory=set)
    candidates_found: int = 0
    truncated: bool = False
    nothing_to_do: str = "nothing matches this symptom"

    def add(
        self,
        *,
        action: str,
        description: str,
        operation: Operation,
        target: str,
        precondition: str,
        checks: list[Check],
        backup: str | None,
        reversible: bool,
    ) -> int:
        """Append a step (its command rendered from ``operation``); returns its number."""
        number = len(self.steps) + 1
        self.steps.append(
            Step(
                number=number,
                action=action,
                description=description,
                command=render(operation, self.settings.conventions),
                params=render_params(operation),
                target=target,
                precondition=precondition,
                checks=checks,
                backup=backup,
                reversible=reversible,
                operation=operation,
            )
        )
        return number


@dataclass(frozen=True)
class Request:
    symptom: str
    stream: str | None
    group: str | None
    service: str | None
    queue: str | None
    ids: list[str] | None
