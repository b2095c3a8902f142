"""The symptoms a remediation plan repairs (``propose_remediation``'s ``symptom`` argument).

Apart from :mod:`tools.remediation.model` so that registering the tool, which reads them into its
argument model, does not import the plan models (imported on the tool's first call).
"""

from __future__ import annotations

from typing import Literal, get_args

Symptom = Literal[
    "dlq_replay",
    "claim_dead_consumer",
    "clear_stale_lock",
    "reconcile_outbox",
    "requeue_stuck_job",
    "retry_failed_job",
]
SYMPTOMS: tuple[str, ...] = get_args(Symptom)
