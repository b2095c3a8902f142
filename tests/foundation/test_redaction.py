"""Secrets never leave the server: DSN passwords are redacted everywhere."""

from __future__ import annotations

from server.redaction import redact_dsn, redact_settings


def test_url_password_is_redacted() -> None:
    assert redact_dsn("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact_dsn("redis://:pw@cache:6379/0") == "redis://:***@cache:6379/0"
    assert redact_dsn("postgresql://app@db/x?password=s3cret&sslmode=require") == (
        "postgresql://app@db/x?password=***&sslmode=require"
    )


def test_keyword_dsn_password_is_redacted() -> None:
    assert "s3cret" not in redact_dsn("host=db user=app password=s3cret dbname=x")
    assert "s3 cret" not in redact_dsn("host=db password='s3 cret' dbname=x")


def test_settings_tree_is_redacted() -> None:
    tree = {"services": {"a": {"postgres": "postgresql://u:p4ss@h/db"}}, "redis": {"url": "redis://:pw@h/0"}}
    text = str(redact_settings(tree))
    assert "p4ss" not in text and ":pw@" not in text
