"""The runtime tools' outcome conventions, learnt from the workspace's audit trigger when there is one.

With a workspace, the index's SQL strings give every version of ``[conventions] audit_trigger``
(:mod:`tools.mesh_index.outcome_shape`): the outcome types of each version and the JSON paths of
the job id in their payload. Those replace the defaults of ``job_success_types``,
``job_failure_types`` and ``job_outcome_id_keys`` (every version's, the latest first; a setting
written in mesh.toml is kept as written). No workspace, no definition found, or an index that
cannot be read: the settings are unchanged (their defaults are the real trigger's shape).
"""

from __future__ import annotations

from typing import Any

from server.config import Settings
from server.errors import MeshError


def learnt_settings(settings: Settings, texts: list[tuple[str, int, str]]) -> Settings:
    """``settings`` with the outcome conventions the workspace's trigger versions write (unset ones only)."""
    from tools.mesh_index.outcome_shape import derive

    conv = settings.conventions
    shape = derive(texts, conv.audit_trigger.lower(), conv.tables.event_queue.lower(), conv.columns.job_id)
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
    """The runtime's settings with the learnt outcome conventions (the index is read in a thread)."""
    settings = runtime.settings
    if settings.workspace is None:
        return settings
    import anyio

    from tools.mesh_index.service import get_index_service

    try:
        texts = await anyio.to_thread.run_sync(get_index_service(runtime).sql_texts)
    except (MeshError, OSError):
        return settings
    return learnt_settings(settings, texts)
