"""Issue 32, attack 9: every secret-bearing URL part and key=value parameter is redacted, everywhere.

``sslpassword`` (the passphrase of the client key) in a PostgreSQL URL's query string reached
server_info, every "unavailable" error and doctor. Checked here by name (``password``,
``sslpassword``, ``sentinel_password``, tokens, secrets, API keys) in URLs, query strings and
``key=value`` DSNs, then end to end: server_info through a real MCP client, the error of a
tool whose database is down, and doctor's checks.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from server.config import Settings
from server.doctor import run_doctor
from server.redaction import redact_dsn, redact_settings, redact_text
from server.runtime import Runtime
from tests.helpers import in_process_client

SSL = "Zq9SslPassX"
PW = "Pw5RedisPwX"
TOK = "Tk7QueryTokX"

CASES = [
    (f"postgresql://app@db:5432/orders?sslmode=require&sslpassword={SSL}", SSL),
    (f"postgresql://app@db:5432/orders?sslpassword={SSL}&sslmode=require", SSL),
    (f"postgresql://app@db/orders?PassWord={SSL}", SSL),
    (f"host=db dbname=orders sslpassword={SSL} sslmode=require", SSL),
    (f"host=db dbname=orders sslpassword = '{SSL} more'", SSL),
    (f"redis://alice:{PW}@cache:6379/0", PW),
    (f"rediss://default:{PW}@cache:6380/0", PW),
    (f"redis+sentinel://alice:{PW}@s1:26379/mymaster", PW),
    (f"unix://:{PW}@/run/redis.sock?db=0", PW),
    (f"redis://cache:6379/0?password={PW}", PW),
    (f"https://api.example/x?access_token={TOK}&a=1", TOK),
    (f"https://api.example/x?api_key={TOK}", TOK),
    (f"host=db client_secret={TOK}", TOK),
]


@pytest.mark.parametrize(("text", "secret"), CASES)
def test_every_secret_parameter_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact_dsn(text), redact_dsn(text)
    assert secret not in redact_text(f"could not connect ({text}): refused"), redact_text(text)
    assert "***" in redact_dsn(text)


def test_what_is_not_a_secret_stays_readable() -> None:
    out = redact_dsn(f"postgresql://app@db:5432/orders?sslmode=require&sslpassword={SSL}&application_name=x")
    assert out == "postgresql://app@db:5432/orders?sslmode=require&sslpassword=***&application_name=x"
    kv = "host=db dbname=orders passfile=/home/u/.pgpass sslkey=/k.pem sslpassword=abc"
    assert redact_dsn(kv) == "host=db dbname=orders passfile=/home/u/.pgpass sslkey=/k.pem sslpassword=***"
    assert redact_settings({"approval": {"secret_file": "/x/approval.key"}, "sentinel_password": "s3"}) == {
        "approval": {"secret_file": "/x/approval.key"}, "sentinel_password": "***"}


@pytest.fixture
def leaky(make_settings: Callable[..., Settings]) -> Settings:
    """Services that are down (port 1), their DSNs holding an sslpassword; Redis with a password."""
    return make_settings(
        services={
            "event": {"postgres": f"postgresql://app@127.0.0.1:1/event?sslpassword={SSL}&connect_timeout=1"},
            "kv": {"postgres": f"host=127.0.0.1 port=1 dbname=event sslpassword={SSL} connect_timeout=1"},
        },
        redis={"url": f"redis://alice:{PW}@127.0.0.1:1/0"},
        limits={"connect_timeout_s": 1},
    )


def _no_secret(text: str) -> None:
    assert SSL not in text and PW not in text, text


@pytest.mark.anyio
async def test_server_info_and_unavailable_errors_hide_sslpassword(leaky: Settings) -> None:
    async with in_process_client(leaky) as client:
        info = await client.call_tool("server_info", {})
        _no_secret(json.dumps(info.structured_content) + json.dumps([c.text for c in info.content]))
        assert "sslpassword=***" in json.dumps(info.structured_content)
        for service in ("event", "kv"):
            result = await client.call_tool("outbox_health", {"service": service})
            text = json.dumps(result.structured_content) + json.dumps([getattr(c, "text", "") for c in result.content])
            assert "unavailable" in text, text
            _no_secret(text)


@pytest.mark.anyio
async def test_doctor_hides_sslpassword(leaky: Settings) -> None:
    runtime = Runtime(leaky)
    try:
        report = await run_doctor(runtime)
    finally:
        await runtime.aclose()
    failed = [c for c in report.checks if c.status == "fail"]
    assert {"postgres:event", "postgres:kv"} <= {c.name for c in failed}
    _no_secret(report.model_dump_json())


def test_an_unquoted_password_with_an_escaped_space_is_redacted_whole() -> None:
    """libpq reads ``password=a\\ b`` as the password ``a b``: none of it may show."""
    from server.redaction import redact_dsn

    assert redact_dsn(r"host=h password=se\ cret dbname=x") == "host=h password=*** dbname=x"
