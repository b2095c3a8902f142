"""Errors the tools raise on purpose. Each message says what was wrong and what to do.

Core libraries raise these; the MCP adapters turn them into tool errors (``isError``)
and the command line prints them as one line with a non-zero exit status.
"""

from __future__ import annotations


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key and the file.

    Raised by :mod:`server.config` (which re-exports it) and by the trust file reader of
    the approval gate; defined here so the gate does not import the config it feeds.
    """


class MeshError(Exception):
    """An anticipated failure with a message fit for the user."""


class InvalidArgument(MeshError):
    """A tool argument is out of range or malformed."""


class NotFound(MeshError):
    """The named thing (service, stream, plan, ...) does not exist."""


class ServiceUnavailable(MeshError):
    """A database or Redis could not be reached; the message names which."""

    def __init__(self, service: str, detail: str) -> None:
        from server.redaction import redact_text  # a driver's message can quote the DSN it was given

        self.service = redact_text(service)
        self.detail = redact_text(detail)
        super().__init__(f"{self.service} is unavailable: {self.detail}")


class RemediationRefused(MeshError):
    """A remediation plan cannot be applied (token, precondition, mode)."""


class StatementTimeout(MeshError):
    """A SQL read hit the server-side statement timeout: the service answers, slowly."""

    def __init__(self, service: str, timeout_ms: int) -> None:
        self.service = service
        self.timeout_ms = timeout_ms
        super().__init__(
            f"the query on service '{service}' exceeded the statement timeout of {timeout_ms} ms: "
            "narrow the filters or raise [limits] statement_timeout_ms"
        )
