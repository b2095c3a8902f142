"""Promise: a DSN or URL password never reaches any output, whatever characters it holds.

Each secret below holds the characters that break naive URL parsing (``@ : / % ? #``).
The check is on every fragment of the secret (no 3 characters of it survive), not only
on the whole string, so a half-redacted password fails too.
"""

from __future__ import annotations

import pytest

from server.redaction import redact_dsn, redact_settings

SECRETS = [
    "Zq@Wx",
    "Zq@Wx@9k",
    "Zq:Wx:9k",
    "Zq/Wx",
    "Zq%40Wx%2F9k",
    "Zq@Wx:9k/Vm%Yt",
    "Zq?Wx",
    "Zq#Wx",
    "/ZqWx9k",
    "ZqWx9k@",
    "Zq://Wx",
]


def _fragments(secret: str) -> list[str]:
    return [secret[i : i + 3] for i in range(len(secret) - 2)] or [secret]


def _leaks(secret: str, text: str) -> list[str]:
    # the fragments made only of URL punctuation (":/@") can appear in any URL: ignore those
    return [f for f in _fragments(secret) if f in text and any(ch.isalnum() for ch in f)]


@pytest.mark.parametrize("secret", SECRETS)
def test_postgres_url_password_is_redacted_whole(secret: str) -> None:
    out = redact_dsn(f"postgresql://app:{secret}@db.internal:5432/orders")
    assert not _leaks(secret, out), out
    assert out.startswith("postgresql://app:***@")  # the user and the fact there was a password stay visible
    assert "db.internal:5432/orders" in out


@pytest.mark.parametrize("secret", SECRETS)
def test_redis_url_password_is_redacted_whole(secret: str) -> None:
    out = redact_dsn(f"redis://:{secret}@cache:6379/0")
    assert not _leaks(secret, out), out
    assert "***" in out and "cache:6379" in out


@pytest.mark.parametrize("secret", SECRETS)
def test_password_in_the_query_string_is_redacted(secret: str) -> None:
    out = redact_dsn(f"postgresql://app@db/orders?sslmode=require&password={secret.replace('#', '%23')}")
    assert not _leaks(secret.replace("#", "%23"), out), out


@pytest.mark.parametrize("secret", [s for s in SECRETS if " " not in s])
def test_keyword_dsn_password_is_redacted_whole(secret: str) -> None:
    out = redact_dsn(f"host=db user=app password={secret} dbname=orders")
    assert not _leaks(secret, out), out
    assert out == "host=db user=app password=*** dbname=orders"
    quoted = redact_dsn(f"host=db password='{secret} and more' dbname=orders")
    assert not _leaks(secret, quoted) and "and more" not in quoted, quoted


@pytest.mark.parametrize("keyword", ["PASSWORD", "Password", "password "])
def test_keyword_dsn_password_in_any_case_or_spacing_is_redacted(keyword: str) -> None:
    """A DSN libpq refuses (unknown option ``PASSWORD``) is still printed in the error: still redacted."""
    out = redact_dsn(f"host=db user=app {keyword}= Zq@Wx9 dbname=orders")
    assert "Zq@Wx9" not in out and "Wx9" not in out, out
    assert out == f"host=db user=app {keyword}= *** dbname=orders"


def test_a_url_without_password_is_unchanged() -> None:
    for dsn in ("postgresql://app@db:5432/orders", "redis://cache:6379/0", "postgresql:///orders?host=/tmp"):
        assert redact_dsn(dsn) == dsn


@pytest.mark.parametrize("secret", SECRETS)
def test_settings_tree_redacts_urls_and_secret_values(secret: str) -> None:
    tree = {
        "services": {"a": {"postgres": f"postgresql://u:{secret}@h/db"}, "b": {"dsn": f"host=h password={secret}"}},
        "redis": {"url": f"redis://:{secret}@h:6379/0"},
        "approval": {"passphrase": secret, "secret_file": "/etc/mesh/approval.key", "mode": "local"},
        "extra": [{"password": secret}, {"client_secret": secret}, {"name": "plain", "url": "redis://h/0"}],
    }
    out = redact_settings(tree)
    assert not _leaks(secret, repr(out)), out
    assert out == {
        "services": {"a": {"postgres": "postgresql://u:***@h/db"}, "b": {"dsn": "host=h password=***"}},
        "redis": {"url": "redis://:***@h:6379/0"},
        # a path to a secret is not a secret, and other values stay as they are
        "approval": {"passphrase": "***", "secret_file": "/etc/mesh/approval.key", "mode": "local"},
        "extra": [{"password": "***"}, {"client_secret": "***"}, {"name": "plain", "url": "redis://h/0"}],
    }
