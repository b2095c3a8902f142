"""Remove secrets from DSNs and URLs before they reach any output."""

from __future__ import annotations

import re
from typing import Any

_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


def redact_dsn(dsn: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db``; ``password=x`` -> ``password=***``.

    In a URL the user information runs up to the *last* ``@``: a password holding ``@``,
    ``/``, ``?``, ``#`` or ``%`` (percent-encoded or not) is redacted whole. When an ``@``
    also appears after the host, more than the password is hidden, never less.
    """
    url = _URL.match(dsn)
    if url is None:  # key=value form (a password holding "://" does not make it a URL)
        return _KV_PASSWORD.sub(r"\1***", dsn)
    scheme, rest = url.groups()
    userinfo, at, tail = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.split(':', 1)[0]}:***@{tail}"
    return scheme + "://" + _QUERY_PASSWORD.sub(r"\1***", rest)


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
