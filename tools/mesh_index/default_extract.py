"""The extraction names and skipped folders of the default conventions, written out.

:func:`tools.mesh_index.early_parse.start_before_settings` starts the parse before the settings
(and pydantic) are loaded, with these; the settings, once loaded, decide whether that parse is
kept (same names) or cancelled. They are a copy of the defaults of :mod:`server.conventions`,
not settings of their own: ``tests/static/test_early_parse.py`` fails when the two differ.
"""

from __future__ import annotations

from tools.mesh_index.ts_queries import ExtractConfig

DEFAULT_EXTRACT = ExtractConfig(
    call_names=("createJob", "withFallback", "createEvent", "createFollowUp", "add", "addBulk", "query",
                "notifyUser", "notifyUsers", "broadcast", "broadcastExcept", "emit", "sendToUser", "sendToUsers",
                "sendToRoom", "create"),
    processor_decorators=("Processor",),
    handler_type_fields=("jobType",),
    filter_methods=("shouldProcess",),
    stream_fields=("stream", "streamName", "streamKey"),
    group_fields=("group", "groupName", "consumerGroup"),
    sql_tokens=("event_queue", "notify_job_audit_status_change", "create_event_queue_record", "create trigger"),
    fallback_calls=("withFallback",),
    event_table="event_queue",
    repo_create_calls=("create",),
    job_registries=("JobRegistry",),
)

DEFAULT_SKIP_DIRS = ("node_modules", "dist", "build", "coverage", ".git", ".mesh")
