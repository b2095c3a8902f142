"""A workspace's ``mesh.toml`` may name things in ``[conventions]``, never set what remediation does.

Review finding (repro ``/tmp/revA/ws3/mesh.toml``): ``stream_maxlen = 1`` turned the DLQ replay into
``XADD <live stream> MAXLEN ~ 1`` (unread entries trimmed); ``bullmq_lock_suffix = "nolock"`` made every
active job look stalled, so requeue moved running jobs back to wait; ``job_completed_key`` without
``{job_id}`` made every open audit row look guarded, so plan_outbox_close closed rows of jobs that never
ran. Numbers, thresholds and the lock suffix are now the user's only (found by type, so a new numeric
convention is covered); key patterns keep their placeholders wherever they come from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from server.config import ConfigError, load_settings
from server.conventions import KEY_PATTERN_PLACEHOLDERS, user_only_conventions

HOSTILE = [  # the reviewer's three values: (mesh.toml [conventions] line, the key named, what is said)
    ("stream_maxlen = 1", "conventions.stream_maxlen", "MESH_CONVENTIONS__STREAM_MAXLEN"),
    ('bullmq_lock_suffix = "nolock"', "conventions.bullmq_lock_suffix", "MESH_CONVENTIONS__BULLMQ_LOCK_SUFFIX"),
    ('job_completed_key = "bull:event-queue:meta"', "conventions.job_completed_key", "{job_id}"),
]
NUMBERS = [  # every number of [conventions], user-only by type
    ("stream_maxlen", 1), ("claim_interval_ms", 5), ("claim_min_idle_ms", 5), ("max_retries", 0),
    ("idempotency_ttl_s", 1), ("retention_s", 1), ("job_attempts", 1),
]


def _workspace(tmp_path: Path, conventions: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "mesh.toml").write_text(f'[conventions]\nstream_prefix = "s:"\n{conventions}\n', encoding="utf-8")
    return ws


@pytest.mark.parametrize(("line", "key", "said"), HOSTILE, ids=[h[1] for h in HOSTILE])
def test_the_reviewers_hostile_values_are_refused_from_the_workspace(tmp_path: Path, line: str, key: str,
                                                                      said: str) -> None:
    ws = _workspace(tmp_path, line)
    with pytest.raises(ConfigError) as info:
        load_settings(workspace=ws, environ={"HOME": str(tmp_path / "home")})
    message = str(info.value)
    assert message.startswith(f"{ws / 'mesh.toml'}: "), message
    assert key in message and said in message, message


def test_the_repro_file_is_refused_naming_each_key(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 'stream_maxlen = 1\nbullmq_lock_suffix = "nolock"\n'
                              'job_completed_key = "bull:event-queue:meta"')
    with pytest.raises(ConfigError) as info:
        load_settings(workspace=ws, environ={"HOME": str(tmp_path / "home")})
    message = str(info.value)
    assert "conventions.stream_maxlen, conventions.bullmq_lock_suffix refused" in message
    assert "this file is the workspace's own file" in message and "Nothing of this file was applied" in message
    assert str(tmp_path / "home" / ".config" / "mesh-mcp" / "mesh.toml") in message


@pytest.mark.parametrize(("name", "value"), [*NUMBERS, ("lint.near_miss_ratio", 0.1)],
                         ids=[*(n for n, _ in NUMBERS), "lint.near_miss_ratio"])
def test_each_number_is_refused_from_the_workspace_and_taken_from_the_users_config(
        tmp_path: Path, name: str, value: float) -> None:
    section, _, leaf = name.rpartition(".")
    table = f"[conventions.{section}]" if section else "[conventions]"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mesh.toml").write_text(f"{table}\n{leaf} = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"conventions\.{name} refused: .*MESH_CONVENTIONS__"
                                          rf"{name.upper().replace('.', '__')}"):
        load_settings(workspace=ws, environ={})
    (ws / "mesh.toml").unlink()
    mine = tmp_path / "mine.toml"  # the user's own file (outside the workspace): applied
    mine.write_text(f"{table}\n{leaf} = {value}\n", encoding="utf-8")
    settings = load_settings(config_file=mine, workspace=ws, environ={})
    got = settings.conventions.lint if section else settings.conventions
    assert getattr(got, leaf) == value
    env = {f"MESH_CONVENTIONS__{name.upper().replace('.', '__')}": str(value)}
    got = load_settings(workspace=ws, environ=env).conventions
    assert getattr(got.lint if section else got, leaf) == value


def test_the_lock_suffix_is_taken_from_the_users_config(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text('[conventions]\nbullmq_lock_suffix = "lk"\n', encoding="utf-8")
    assert load_settings(config_file=mine, environ={}).conventions.bullmq_lock_suffix == "lk"


def test_a_config_named_inside_the_workspace_may_not_set_numbers(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "")
    inner = ws / "mine.toml"
    inner.write_text("[conventions]\nstream_maxlen = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"conventions\.stream_maxlen refused: this file lies inside the "
                                          r"workspace.*move the file out of the workspace"):
        load_settings(config_file=inner, workspace=ws, environ={})


def test_names_and_whole_patterns_are_still_taken_from_the_workspace(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 'job_completed_key = "done:{job_id}"\nretry_key = "r:{message_id}:{group}"\n'
                              '[conventions.tables]\njobs_outbox = "jo"')
    conv = load_settings(workspace=ws, environ={}).conventions
    assert (conv.stream_prefix, conv.job_completed_key, conv.retry_key, conv.tables.jobs_outbox) == (
        "s:", "done:{job_id}", "r:{message_id}:{group}", "jo")


@pytest.mark.parametrize("key", sorted(KEY_PATTERN_PLACEHOLDERS))
@pytest.mark.parametrize("where", ["workspace", "user"])
def test_a_pattern_without_its_placeholder_is_refused_from_either(tmp_path: Path, key: str, where: str) -> None:
    for missing in KEY_PATTERN_PLACEHOLDERS[key]:
        kept = ":".join(p for p in KEY_PATTERN_PLACEHOLDERS[key] if p != missing)
        line = f'{key} = "k:{kept}"'
        if where == "workspace":
            kwargs = {"workspace": _workspace(tmp_path, line)}
        else:
            mine = tmp_path / "mine.toml"
            mine.write_text(f"[conventions]\n{line}\n", encoding="utf-8")
            kwargs = {"config_file": mine}
        with pytest.raises(ConfigError) as info:
            load_settings(environ={}, **kwargs)
        message = str(info.value)
        assert f"conventions.{key}" in message and f"lacks the placeholder {missing}" in message, message
    env = {f"MESH_CONVENTIONS__{key.upper()}": "k"}
    with pytest.raises(ConfigError, match=rf"conventions\.{key}.*lacks the placeholder"):
        load_settings(environ=env)


def test_the_user_only_conventions_are_found_by_type() -> None:
    """Every convention that is not a string or a list of strings is the user's, nested ones included, and a
    new numeric field would be too; the lock suffix is the one name on the list."""
    found = user_only_conventions()
    assert {name for name, _ in NUMBERS} | {"lint.near_miss_ratio", "bullmq_lock_suffix"} <= found
    assert not found & {"stream_prefix", "job_completed_key", "retry_key", "dlq_suffix", "tables.jobs_outbox"}

    class Inner(BaseModel):
        name: str = "x"
        batch: int = 1

    class Outer(BaseModel):
        inner: Inner = Inner()
        enabled: bool = False
        names: list[str] = []

    assert user_only_conventions(Outer) == {"inner.batch", "enabled"}
