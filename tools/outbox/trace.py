"""``trace_job`` and ``trace_event``: follow one item along its chain and name the broken link.

JOB: jobs_outbox row -> BullMQ job ``<prefix>:<target>:<id>`` -> completion guard
``job:completed:<id>`` -> job_audit row -> job-outcome rows of event_queue (every naming
variant of ``conventions.job_success_types`` / ``job_failure_types``) -> their stream
entries and per-group delivery.

EVENT: event_queue row -> one entry per ``target_services`` stream -> per consumer group:
delivered, pending (and for how long, on which consumer), acknowledged, dead-lettered,
with the retry bookkeeping and idempotency lock.

Every hop records what was observed; *findings* name problems in chain order and the
verdict is the first one of the worst severity (see :mod:`tools.outbox.verdicts`).
With ``service=None`` every service is searched and the first one holding the item is
traced; services that cannot be reached are listed in ``unavailable``. When Redis is
down the SQL hops are still reported and the Redis hops are marked unknown; an event whose
stream could not be read is ``inconclusive`` (naming that Redis), never ``ok``.

:class:`Tracer` is the one class callers make; it is built in layers, one module each:

- :mod:`tools.outbox.trace_search`: the SQL rows of the item in each service (``Found``,
  ``ServiceRows``) and the "not found" answer;
- :mod:`tools.outbox.trace_redis`: each Redis read on its instance, the outages, the clock offset;
- :mod:`tools.outbox.trace_event_chain`: the EVENT chain (``trace_event``, ``event_chain``);
- :mod:`tools.outbox.trace_job_chain`: the JOB chain (``trace_job``, ``finish_job``), whose
  findings are reasoned on plain data by :mod:`tools.outbox.trace_job_logic`.
"""

from __future__ import annotations

from tools.outbox.trace_job_chain import JobChainTracer
from tools.outbox.trace_search import Found, ServiceRows

__all__ = ["Found", "ServiceRows", "Tracer"]


class Tracer(JobChainTracer):
    """Runs traces with one Settings / Connections / SchemaCatalog."""
