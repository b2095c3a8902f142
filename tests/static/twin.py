"""A consistently renamed twin of ``tests/fixtures/feedback_workspace``.

Every enum, ``as const`` object, mapping table and lookup function, every member, and every job,
event, websocket, queue and stream string is renamed (the same way in every file, JSON config and
SQL included); classes, methods, files, emitters and the names ``[conventions]`` configure (calls
such as ``createJob``, fields such as ``jobType``, the ``JobRegistry`` interface) stay.
No name of the twin matches a naming hint of the conventions (``*JobType``, ``Ws``, ``*Queue``,
``Streams``, ``JobMessagingType``, ``*_MAPPING``): whatever the index answers on it, it answers by
resolution and use.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "feedback_workspace"

IDENTIFIERS = {
    "OrderJobType": "PlanTaskKind", "BillingJobType": "LedgerTaskKind", "JobMessagingType": "AllTasks",
    "OrderQueue": "PlanLanes", "BillingQueue": "LedgerLanes",
    "OrderEventType": "PlanFacts", "BillingEventType": "LedgerFacts", "EventMessagingType": "AllFacts",
    "OrderWsType": "PlanPings", "BillingWsType": "LedgerPings", "WebsocketMessagingType": "AllPings",
    "JOB_TO_EVENT_MAPPING": "TASK_FOLLOWERS", "EVENT_TO_WS_EVENT_MAPPING": "PING_FOR_FACT",
    "getEventForJob": "followerOfTask", "getWsEventForEvent": "pingForFact", "Streams": "Channels",
    "ExportJobType": "ArchiveTaskKind", "EXPORT_ORDERS": "DUMP_PLANS",
    # members
    "FALLBACK_PLACE_ORDER": "RETRY_BOOKING", "SHIP_ORDER": "SEND_PARCEL", "FALLBACK_CHARGE_CARD": "RETRY_DEBIT",
    "ORDERS": "LANE_A", "FALLBACK_ORDERS": "LANE_B", "FALLBACK_BILLING": "LANE_C",
    "ORDER_PLACED": "BOOKED", "ORDER_SHIPPED": "SENT", "FALLBACK_PLACE_ORDER_FEEDBACK": "BOOKING_RETRIED",
    "PAYMENT_CAPTURED": "DEBIT_TAKEN", "PAYMENTS_AGGREGATED": "DEBITS_SUMMED",
    "PAYMENTS_AGGREGATION_FAILED": "DEBITS_NOT_SUMMED", "FALLBACK_CHARGE_CARD_FEEDBACK": "DEBIT_RETRIED",
    "ORDER_JOB_OUTBOX_SUCCESS": "PLAN_OUTCOME_OK", "BILLING_PAYMENTS": "LEDGER_FEED", "WS_FEEDBACK": "PING_FEED",
}

STRINGS = {
    "orders.fallback_place_order": "p.t1", "orders.ship_order": "p.t2", "billing.fallback_charge_card": "l.t1",
    "orders.export_orders": "p.t3",
    "order-queue": "lane-alpha", "fallback-order-queue": "lane-beta", "fallback-billing-queue": "lane-gamma",
    "order.placed": "p.f1", "order.shipped": "p.f2", "order.fallback_place_order_feedback": "p.f3",
    "billing.payment_captured": "l.f1", "billing.payments_aggregated": "l.f2",
    "billing.payments_aggregation_failed": "l.f3", "billing.fallback_charge_card_feedback": "l.f4",
    "ws.order.placed": "push-1", "ws.order.shipped": "push-2", "ws.order.fallback_place_order": "push-3",
    "ws.billing.payments_aggregated": "push-4", "ws.billing.fallback_charge_card": "push-5",
    # streams ('order:placed' is what the trigger computes from 'order.placed': renamed alike)
    "order:placed": "p:f1", "order:shipped": "chan-2", "billing:payments": "chan-4", "ws:feedback": "chan-5",
}

_IDENT = re.compile(r"\b(" + "|".join(sorted(map(re.escape, IDENTIFIERS), key=len, reverse=True)) + r")\b")
_STRING = re.compile(r"(['\"])(" + "|".join(sorted(map(re.escape, STRINGS), key=len, reverse=True)) + r")\1")


def rename_text(text: str) -> str:
    text = _STRING.sub(lambda m: m.group(1) + STRINGS[m.group(2)] + m.group(1), text)
    return _IDENT.sub(lambda m: IDENTIFIERS[m.group(1)], text)


def rename_value(value: str) -> str:
    """The twin's spelling of a value of the original (stream keys keep their ``stream:`` prefix)."""
    if value.startswith("stream:") and value[7:] in STRINGS:
        return "stream:" + STRINGS[value[7:]]
    return STRINGS.get(value, value)


def make_twin(dest: Path) -> Path:
    """Write the renamed twin under ``dest`` and return its root."""
    root = dest / "feedback_twin"
    shutil.copytree(FIXTURE, root)
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in (".ts", ".json", ".sql"):
            path.write_text(rename_text(path.read_text(encoding="utf-8")), encoding="utf-8")
    return root
