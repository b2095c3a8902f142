"""Render the settings reference (every key, its default, its meaning) as markdown.

``python -m server.config_reference`` prints the tables that docs/configuration.md
embeds between its ``<!-- reference -->`` markers; a test keeps the two in step.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from server.config import Settings
from server.conventions import KEY_PATTERN_PLACEHOLDERS, user_only_conventions

SECTIONS: tuple[tuple[str, str], ...] = (
    ("redis", "[redis]"),
    ("conventions", "[conventions]"),
    ("limits", "[limits]"),
    ("approval", "[approval]"),
    ("http", "[http]"),
)


USER_ONLY_NOTE = "; **your config only** (refused from the workspace's mesh.toml)"
_KEY_PATTERN_NOTE = "; must hold {placeholders}"


def _rows(model: type[BaseModel], prefix: str, user_only: frozenset[str] = frozenset(),
          patterns: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """One row per key; ``user_only`` (paths below ``prefix``) and ``patterns`` mark conventions."""
    rows: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            inner = frozenset(p.removeprefix(f"{name}.") for p in user_only if p.startswith(f"{name}."))
            rows.extend(_rows(annotation, f"{prefix}{name}.", inner))
            continue
        default: Any = field.get_default(call_default_factory=True)
        shown = json.dumps(default, default=str).replace("|", "\\|")
        doc = (field.description or "").replace("|", "\\|")
        if patterns and name in patterns:
            doc += _KEY_PATTERN_NOTE.format(placeholders=" and ".join(f"`{p}`" for p in patterns[name]))
        if name in user_only:
            doc += USER_ONLY_NOTE
        rows.append(f"| `{prefix}{name}` | `{shown}` | {doc} |")
    return rows


def render() -> str:
    out: list[str] = []
    for attr, title in SECTIONS:
        model = Settings.model_fields[attr].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        out.append(f"### {title}\n\n| key | default | meaning |\n| --- | --- | --- |")
        if attr == "conventions":
            out.extend(_rows(model, "", user_only_conventions(), KEY_PATTERN_PLACEHOLDERS))
        else:
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
