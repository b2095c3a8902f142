"""Remove secrets from DSNs and URLs before they reach any output."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db``; ``password=x`` -> ``password=***``."""
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
        except ValueError:
            return "***"
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                user = userinfo.split(":", 1)[0]
                netloc = f"{user}:***@{host}"
        query = re.sub(r"(password=)[^&]*", r"\1***", parts.query, flags=re.IGNORECASE)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return _KV_PASSWORD.sub(r"\1***", dsn)


def redact_settings(data: Any) -> Any:
    """Walk a dumped settings tree and redact every DSN/URL and secret-looking value."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            lowered = str(key).lower()
            if lowered in ("postgres", "url", "dsn") and isinstance(value, str):
                out[key] = redact_dsn(value)
            elif any(word in lowered for word in ("password", "secret", "passphrase")) and isinstance(
                value, str
            ):
                out[key] = "***" if "file" not in lowered else value
            else:
                out[key] = redact_settings(value)
        return out
    if isinstance(data, list):
        return [redact_settings(v) for v in data]
    return data
