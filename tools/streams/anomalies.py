"""Anomaly codes of ``inspect_stream``: stable names, one rule each.

Every rule reads facts already gathered by :mod:`tools.streams.inspect` (no Redis call
here), so the rules are plain functions. Thresholds come from ``[limits]`` and
``[conventions]``.

- ``dead_consumer`` (error): a consumer holds pending entries and has not read or claimed
  (``XINFO CONSUMERS`` idle) for ``[limits] dead_consumer_idle_ms``. Before Redis 7.2 an
  empty read or claim does not reset idle, so on a stream where nothing arrived since
  the consumer's last read the evidence says ``idle_ambiguous``.
- ``stuck_pending`` (warning): entries idle ``dead_consumer_idle_ms`` or more sit with a
  consumer that is still alive; it re-reads its own pending entries only on restart or claim.
- ``trimmed_pending`` (error): pending ids older than the stream's first entry, and
  ``XINFO STREAM`` proves trimming removed them (:mod:`tools.streams.trim_evidence`); the
  PEL entry can never be processed.
- ``missing_pending`` (error): the same pending ids whose message is gone, without that
  proof (deleted by XDEL, or trimmed on a 6.2 stream under its MAXLEN): gone either way.
- ``no_group`` (warning): a stream holding entries has no consumer group, so nothing reads
  it (not raised for dead-letter streams nor BullMQ's ``<prefix>:<queue>:events``, which
  have no group by design).
- ``lag_growing`` (warning): the group has undelivered entries and the oldest has waited
  ``[limits] lag_max_age_ms`` or more; consumers do not keep up, the lag grows.
- ``dlq_not_empty`` (warning): ``<stream><dlq_suffix>`` holds dead letters; nothing replays them.
- ``stale_idempotency_lock`` (error): the lock ``[conventions] idempotency_key`` exists for a
  message that is not done, i.e. pending for ``claim_interval_ms`` or more, or waiting in the
  group's retry queue; its next read will be acknowledged with no effect.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.streams.trim_evidence import TrimEvidence

Severity = Literal["error", "warning"]

CODES: tuple[str, ...] = (
    "dead_consumer",
    "stuck_pending",
    "trimmed_pending",
    "missing_pending",
    "no_group",
    "lag_growing",
    "dlq_not_empty",
    "stale_idempotency_lock",
)


class Anomaly(BaseModel):
    code: str = Field(description="stable code: " + ", ".join(CODES))
    severity: Severity
    group: str | None = None
    consumer: str | None = None
    message: str = Field(description="one sentence: what is wrong")
    evidence: dict[str, Any] = Field(default_factory=dict, description="the figures the rule used")
    next_step: str = Field(description="what to look at or do next (tool calls)")


def evidence_ids(evidence: Any) -> list[str]:
    """Every id-like value of an anomaly's evidence (keys ``*id``, ``*ids``, ``dlq``), in order, once."""
    out: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and (key.endswith(("id", "ids")) or key == "dlq") and value not in out:
            out.append(value)

    walk(evidence)
    return out


def _minutes(ms: int) -> str:
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def dead_consumer(
    stream: str, group: str, consumer: str, pending: int, idle_ms: int, threshold_ms: int,
    *, idle_ambiguous: bool = False,
) -> Anomaly | None:
    """``idle_ambiguous``: Redis before 7.2 and no entry arrived since the consumer's last read, so
    its idle would have grown the same had it been polling (an empty read or claim does not reset
    it there); the message says to confirm the process is gone."""
    if pending <= 0 or idle_ms < threshold_ms:
        return None
    caveat = (
        "; nothing arrived on the stream since, and before Redis 7.2 an empty read or claim does not reset "
        "idle: confirm the consumer's process is gone before claiming" if idle_ambiguous else ""
    )
    return Anomaly(
        code="dead_consumer",
        severity="error",
        group=group,
        consumer=consumer,
        message=(
            f"consumer '{consumer}' of group '{group}' holds {pending} pending entries and has not read "
            f"or claimed for {_minutes(idle_ms)}{caveat}"
        ),
        evidence={"pending": pending, "idle_ms": idle_ms, "threshold_ms": threshold_ms,
                  "idle_ambiguous": idle_ambiguous},
        next_step=(
            f"list_pending(stream='{stream}', group='{group}', consumer='{consumer}') to see the entries, then "
            f"propose_remediation(symptom='claim_dead_consumer', stream='{stream}', group='{group}')"
        ),
    )


def stuck_pending(
    stream: str, group: str, consumer: str, count: int, oldest_id: str, idle_ms: int, threshold_ms: int, sampled: int
) -> Anomaly:
    return Anomaly(
        code="stuck_pending",
        severity="warning",
        group=group,
        consumer=consumer,
        message=(
            f"{count} entries of group '{group}' have been pending with live consumer '{consumer}' for "
            f"{_minutes(idle_ms)} or more; a consumer re-reads its own pending entries only on restart or claim"
        ),
        evidence={"count_in_sample": count, "sampled": sampled, "oldest_id": oldest_id, "idle_ms": idle_ms,
                  "threshold_ms": threshold_ms},
        next_step=(
            f"list_pending(stream='{stream}', group='{group}', consumer='{consumer}', min_idle_ms={threshold_ms}); "
            "restart that consumer or claim the entries (propose_remediation symptom='claim_dead_consumer')"
        ),
    )


def trimmed_pending(
    stream: str, group: str, count: int, at_least: bool, first_id: str | None, sample: list[str],
    proof: TrimEvidence | None = None,
) -> Anomaly | None:
    """``trimmed_pending`` when ``proof`` shows trimming, else ``missing_pending`` (gone, cause unproven)."""
    if count <= 0:
        return None
    where = f"older than the first entry {first_id}" if first_id else "and the stream is empty"
    amount = f"{count}{'+' if at_least else ''}"
    trimmed = proof is None or proof.trimmed
    cause = "their message was trimmed" if trimmed else "their message is gone, not proven trimmed"
    return Anomaly(
        code="trimmed_pending" if trimmed else "missing_pending",
        severity="error",
        group=group,
        message=(
            f"{amount} pending entries of group '{group}' are {where}: {cause}"
            + (f" ({proof.rule})" if proof is not None else "") + "; they can never be processed"
        ),
        evidence={"count": count, "count_is_lower_bound": at_least, "first_entry_id": first_id, "sample_ids": sample,
                  "trim_rule": proof.rule if proof is not None else None},
        next_step=(
            f"list_pending(stream='{stream}', group='{group}') shows them with message_exists=false; find the "
            "events in event_queue (trace_event) before acknowledging them"
        ),
    )


def no_group(stream: str, length: int) -> Anomaly | None:
    if length <= 0:
        return None
    return Anomaly(
        code="no_group",
        severity="warning",
        message=f"stream '{stream}' holds {length} entries but has no consumer group: nothing reads it",
        evidence={"length": length},
        next_step=(
            f"analyze_impact(target='{stream}') to find the post-processor that should read it and check "
            "that it starts (it creates its group on start)"
        ),
    )


def lag_growing(
    stream: str,
    group: str,
    lag: int | None,
    lag_source: str,
    oldest_id: str | None,
    age_ms: int | None,
    threshold_ms: int,
    consumers: int,
) -> Anomaly | None:
    if age_ms is None or oldest_id is None or age_ms < threshold_ms:
        return None
    who = "it has no consumer" if consumers == 0 else f"its {consumers} consumer(s) do not keep up"
    return Anomaly(
        code="lag_growing",
        severity="warning",
        group=group,
        message=(
            f"group '{group}' has {lag if lag is not None else 'some'} undelivered entries, the oldest waiting "
            f"for {_minutes(age_ms)}: {who}"
        ),
        evidence={"lag": lag, "lag_source": lag_source, "oldest_undelivered_id": oldest_id, "age_ms": age_ms,
                  "threshold_ms": threshold_ms, "consumers": consumers},
        next_step=f"check that the consumers of group '{group}' run and are not failing (inspect_stream again to "
        "see whether last_delivered_id moves)",
    )


def dlq_not_empty(
    stream: str, dlq: str, length: int, newest_id: str | None, newest_age_ms: int | None
) -> Anomaly | None:
    if length <= 0:
        return None
    return Anomaly(
        code="dlq_not_empty",
        severity="warning",
        message=f"dead-letter stream '{dlq}' holds {length} entries; nothing replays them",
        evidence={"dlq": dlq, "length": length, "newest_id": newest_id, "newest_age_ms": newest_age_ms},
        next_step=(
            f"dlq_list(stream='{stream}') to read them; after fixing the cause, "
            f"propose_remediation(symptom='dlq_replay', stream='{stream}')"
        ),
    )


def stale_idempotency_lock(stream: str, group: str, locks: list[dict[str, Any]], checked: int) -> Anomaly | None:
    if not locks:
        return None
    ids = [lock["message_id"] for lock in locks]
    return Anomaly(
        code="stale_idempotency_lock",
        severity="error",
        group=group,
        message=(
            f"{len(locks)} message(s) of group '{group}' are not done but hold an idempotency lock: their next "
            "read will be acknowledged with no effect"
        ),
        evidence={"locks": locks[:20], "checked": checked},
        next_step=(
            f"propose_remediation(symptom='clear_stale_lock', stream='{stream}', group='{group}', "
            f"ids={ids[:20]!r}) then let the consumer re-read them"
        ),
    )
