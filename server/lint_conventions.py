"""``[conventions.lint]``: the names ``lint_flows`` looks for beyond the static index's own.

Defaults follow target-system.md; a deployment that lays its repositories out differently
overrides them in ``mesh.toml`` (``[conventions.lint]``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def _d(default: Any, description: str) -> Any:
    return Field(default=default, description=description)


class LintConventions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    envelope_extra_fields: list[str] = _d(
        ["emitter", "emitterId", "correlationId"], "job envelope fields besides job_envelope_fields (never flagged)"
    )
    migration_path_markers: list[str] = _d(
        ["/migrations/"], "a TypeScript file whose path holds one of these is a migration"
    )
    migration_up_methods: list[str] = _d(["up"], "migration method whose SQL is compared (down() is ignored)")
    register_queue_calls: list[str] = _d(
        ["registerQueue", "registerQueueAsync"], "module calls registering BullMQ queues (BullModule.registerQueue)"
    )
    queue_name_fields: list[str] = _d(["name"], "field of a registerQueue argument naming the queue")
    factory_fields: list[str] = _d(["useFactory"], "provider field whose function returns the provided value")
    provide_fields: list[str] = _d(["provide"], "provider field naming the DI token")
    inject_decorators: list[str] = _d(["Inject"], "constructor parameter decorator naming a DI token")
    config_dirs: list[str] = _d(["config"], "folders (in a package) holding JSON configuration files")
    lock_files: list[str] = _d(["yarn.lock", "package-lock.json"], "lock files pinning package versions")
    changelog_files: list[str] = _d(["CHANGELOG.md"], "changelog of the contracts package (version sections)")
    near_miss_ratio: float = _d(0.8, "similarity (0-1) from which a produced type is a near-miss of an accepted one")
