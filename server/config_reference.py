"""Render the settings reference (every key, its default, its meaning) as markdown.

``python -m server.config_reference`` prints the tables that docs/configuration.md
embeds between its ``<!-- reference -->`` markers; a test keeps the two in step.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from server.config import Settings

SECTIONS: tuple[tuple[str, str], ...] = (
    ("redis", "[redis]"),
    ("conventions", "[conventions]"),
    ("limits", "[limits]"),
    ("approval", "[approval]"),
    ("http", "[http]"),
)


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(_rows(annotation, f"{prefix}{name}."))
            continue
        default: Any = field.get_default(call_default_factory=True)
        shown = json.dumps(default, default=str).replace("|", "\\|")
        doc = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | `{shown}` | {doc} |")
    return rows


def render() -> str:
    out: list[str] = []
    for attr, title in SECTIONS:
        model = Settings.model_fields[attr].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        out.append(f"### {title}\n\n| key | default | meaning |\n| --- | --- | --- |")
        out.extend(_rows(model, ""))
        out.append("")
        if attr == "redis":
            out.append(_instances_section())
    return "\n".join(out)


def _instances_section() -> str:
    """``[redis.instances.<name>]``: the keys of ``[redis]`` (but ``instances``) plus the routing globs."""
    from server.redis_settings import RedisConnectionSettings, RedisInstanceSettings

    own = [name for name in RedisInstanceSettings.model_fields if name not in RedisConnectionSettings.model_fields]
    rows = [r for r in _rows(RedisInstanceSettings, "") if any(r.startswith(f"| `{n}`") for n in own)]
    return "\n".join([
        "### [redis.instances.NAME]\n",
        "Every key of `[redis]` except `instances`, plus:\n",
        "| key | default | meaning |\n| --- | --- | --- |",
        *rows,
        "",
    ])


if __name__ == "__main__":
    print(render())
