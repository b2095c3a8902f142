"""Settings: mesh.toml, MESH_* overrides, defaults from the target system, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import ConfigError, Settings, load_settings


def test_defaults_match_the_target_system() -> None:
    conv = Settings().conventions
    assert (conv.tables.jobs_outbox, conv.tables.event_queue, conv.tables.job_audit) == (
        "jobs_outbox",
        "event_queue",
        "job_audit",
    )
    assert conv.dlq_suffix == "-dlq"
    assert conv.stream_prefix == "stream:"
    assert conv.retry_key == "retry:post-processor:{group}:{message_id}"
    assert conv.idempotency_key == "idempotency:post-processor:{group}:{message_id}"
    assert conv.bullmq_prefix == "bull"
    assert conv.job_completed_key == "job:completed:{job_id}"
    assert "job.outbox.success" in conv.job_success_types
    assert "{domain}:job:outbox:failure" in conv.job_failure_types
    assert conv.max_retries == 5 and conv.claim_min_idle_ms == 60000
    assert "createJob" in conv.static.create_job_calls
    assert "Processor" in conv.static.processor_decorators


def test_reads_the_users_mesh_toml_and_the_workspaces_conventions(tmp_path: Path) -> None:
    """Connections come from the user's config folder; the workspace's mesh.toml adds naming hints only."""
    user = tmp_path / "home" / "mesh-mcp"
    user.mkdir(parents=True)
    (user / "mesh.toml").write_text(
        '[services.event]\npostgres = "postgresql://app:s3cret@db:5432/event"\n'
        '[redis]\nurl = "redis://cache:6379/2"\n'
        '[conventions.tables]\nevent_queue = "queue_of_events"\n'
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mesh.toml").write_text('[conventions.tables]\njobs_outbox = "outbox_jobs"\nevent_queue = "mine"\n')
    settings = load_settings(workspace=ws, environ={"XDG_CONFIG_HOME": str(tmp_path / "home")})
    assert settings.workspace == ws.resolve()
    assert settings.services["event"].postgres.endswith("/event")
    assert settings.redis.url == "redis://cache:6379/2"
    assert settings.conventions.tables.jobs_outbox == "outbox_jobs"
    assert settings.conventions.tables.event_queue == "queue_of_events"  # the user's file wins
    assert settings.config_file == (user / "mesh.toml").resolve()
    assert settings.workspace_config_file == (ws / "mesh.toml").resolve()


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text('[redis]\nurl = "redis://cache:6379/2"\n[limits]\nmax_rows = 100\n')
    settings = load_settings(
        config_file=config,
        environ={
            "MESH_REDIS_URL": "redis://other:6379/0",
            "MESH_LIMITS__MAX_ROWS": "20",
            "MESH_SERVICES__USER__POSTGRES": "postgresql://u@h/user",
            "MESH_CONVENTIONS__DLQ_SUFFIX": ":dead",
        },
    )
    assert settings.redis.url == "redis://other:6379/0"
    assert settings.limits.max_rows == 20
    assert settings.services["user"].postgres == "postgresql://u@h/user"
    assert settings.conventions.dlq_suffix == ":dead"


def test_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text("[limits]\nmax_rowz = 3\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=config, environ={})
    message = str(err.value)
    assert str(config) in message
    assert "limits.max_rowz" in message
    assert "\n" not in message


def test_bad_dsn_is_one_clear_line(tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text('[services.user]\npostgres = "mysql://root@h/db"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=config, environ={})
    assert "services.user.postgres" in str(err.value)
    assert "mysql" in str(err.value)


def test_out_of_range_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"limits\.max_rows"):
        load_settings(environ={"MESH_LIMITS__MAX_ROWS": "0"})


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    config = tmp_path / "mesh.toml"
    config.write_text("[redis\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(config_file=config, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_settings(config_file=tmp_path / "nope.toml", environ={})


def test_workspace_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    config = tmp_path / "conf" / "mesh.toml"
    config.parent.mkdir()
    config.write_text('workspace = "../ws"\n')
    assert load_settings(config_file=config, environ={}).workspace == (tmp_path / "ws").resolve()
