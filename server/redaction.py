"""Remove secrets from DSNs, URLs and error texts before they reach any output.

Secret-bearing parameters are found by name, wherever they stand: ``password``,
``sslpassword``, ``sentinel_password``, ``passwd``, ``pwd``, ``token``, ``access_token``,
``secret``, ``client_secret``, ``apikey``/``api_key``, ``passphrase`` (any name *holding*
one of these words), in a libpq ``key=value`` string, in a URL's query string, or in free
text such as a driver's error message. A URL's ``user:password@`` is redacted for every
scheme (``postgresql``, ``redis``, ``rediss``, ``redis+sentinel``, ``unix``, ...).
``passfile`` and ``sslkey`` name files, not secrets: they are kept.
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_WORDS = r"(?:password|passwd|pwd|token|secret|api_?key|passphrase)"
_KV_SECRET = re.compile(
    # an unquoted libpq value runs to the first space not escaped by a backslash (``password=a\\ b``)
    rf"(?<![\w.-])([\w.-]*{_SECRET_WORDS}[\w.-]*\s*=\s*)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|(?:\\.|\S)+)",
    re.IGNORECASE,
)
_QUERY_SECRET = re.compile(rf"([?&;][^=&#;?]*{_SECRET_WORDS}[^=&#;?]*=)[^&#;]*", re.IGNORECASE)
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_NOT_SECRET_FILES = re.compile(r"^(?:passfile|sslpasswordfile|token_file|secret_file)\s*=", re.IGNORECASE)


def _kv(text: str) -> str:
    def hide(match: re.Match[str]) -> str:
        if _NOT_SECRET_FILES.match(match.group(1)):
            return match.group(0)
        return match.group(1) + "***"

    return _KV_SECRET.sub(hide, text)


def redact_dsn(dsn: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db``; ``password=x`` -> ``password=***``.

    In a URL the user information runs up to the *last* ``@``: a password holding ``@``,
    ``/``, ``?``, ``#`` or ``%`` (percent-encoded or not) is redacted whole. When an ``@``
    also appears after the host, more than the password is hidden, never less. Every
    secret-named query parameter (``password``, ``sslpassword``, ``token``, ...) is redacted.
    """
    url = _URL.match(dsn)
    if url is None:  # key=value form (a password holding "://" does not make it a URL)
        return _kv(dsn)
    scheme, rest = url.groups()
    userinfo, at, tail = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.split(':', 1)[0]}:***@{tail}"
    return scheme + "://" + _QUERY_SECRET.sub(r"\1***", rest)


def redact_text(text: str) -> str:
    """Free text (an error message, a log line): every URL in it through :func:`redact_dsn`, then every
    secret-named ``key=value`` parameter."""
    return _kv(_URL_IN_TEXT.sub(lambda m: redact_dsn(m.group(0)), text))


def redact_settings(data: Any) -> Any:
    """Walk a dumped settings tree and redact every DSN/URL and secret-looking value."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            lowered = str(key).lower()
            if lowered in ("postgres", "url", "dsn") and isinstance(value, str):
                out[key] = redact_dsn(value)
            elif re.search(_SECRET_WORDS, lowered) and isinstance(value, str):
                out[key] = "***" if "file" not in lowered else value
            elif isinstance(value, str) and "://" in value:
                out[key] = redact_dsn(value)
            else:
                out[key] = redact_settings(value)
        return out
    if isinstance(data, list):
        return [redact_text(v) if isinstance(v, str) else redact_settings(v) for v in data]
    return data
