"""The runtime tools' outcome conventions, learnt from the workspace's audit trigger when there is one.

With a workspace, the index's SQL strings give every version of ``[conventions] audit_trigger``
(:mod:`tools.mesh_index.outcome_shape`): the outcome types of each version and the JSON paths of
the job id in their payload. Those replace the defaults of ``job_success_types``,
``job_failure_types`` and ``job_outcome_id_keys`` (every version's, the latest first; a setting
written in mesh.toml is kept as written). No workspace, no definition found, or an index that
cannot be read in time: the settings are unchanged (their defaults are the real trigger's shape).
"""

from __future__ import annotations

import logging
from typing import Any

from server.config import Settings
from server.errors import MeshError

log = logging.getLogger(__name__)


def learnt_settings(settings: Settings, texts: list[tuple[str, int, str]]) -> Settings:
    """``settings`` with the outcome conventions the workspace's trigger versions write (unset ones only)."""
    from tools.mesh_index.outcome_shape import derive

    conv = settings.conventions
    shape = derive(texts, conv.audit_trigger.lower(), conv.tables.event_queue.lower(), conv.columns.job_id,
                   conv.service_prefix)
    if shape is None:
        return settings
    update: dict[str, Any] = {}
    explicit = conv.model_fields_set
    success = shape.success_types(conv.statuses.completed)
    failure = shape.failure_types(conv.statuses.failed)
    paths = shape.id_paths()
    if success and "job_success_types" not in explicit:
        update["job_success_types"] = success
    if failure and "job_failure_types" not in explicit:
        # the names the failure post-processor accepts stay searched: rows a fixed trigger would write
        update["job_failure_types"] = [*failure, *(t for t in conv.job_failure_accepted_types if t not in failure)]
    if paths and "job_outcome_id_keys" not in explicit:
        update["job_outcome_id_keys"] = paths
    if not update:
        return settings
    return settings.model_copy(update={"conventions": conv.model_copy(update=update)})


async def settings_for_runtime(runtime: Any) -> Settings:
    """The runtime's settings with the learnt outcome conventions. The index is read in a thread for at
    most ``[limits] related_skills_index_wait_s`` (the wait the traces already give the index): a trace is
    never held up by a cold index build; it then uses the defaults (the real shape)."""
    settings = runtime.settings
    wait = settings.limits.related_skills_index_wait_s
    if settings.workspace is None or wait <= 0:
        return settings
    import anyio

    from tools.mesh_index.service import get_index_service

    texts = None
    try:
        with anyio.move_on_after(wait):
            texts = await anyio.to_thread.run_sync(get_index_service(runtime).sql_texts, abandon_on_cancel=True)
    except (MeshError, OSError):
        return settings
    except Exception:  # the learnt shape is an aid: never the reason a trace fails
        log.exception("outcome shape of the workspace")
        return settings
    return settings if texts is None else learnt_settings(settings, texts)
