"""Errors the tools raise on purpose. Each message says what was wrong and what to do.

Core libraries raise these; the MCP adapters turn them into tool errors (``isError``)
and the command line prints them as one line with a non-zero exit status.
"""

from __future__ import annotations


class MeshError(Exception):
    """An anticipated failure with a message fit for the user."""


class InvalidArgument(MeshError):
    """A tool argument is out of range or malformed."""


class NotFound(MeshError):
    """The named thing (service, stream, plan, ...) does not exist."""


class ServiceUnavailable(MeshError):
    """A database or Redis could not be reached; the message names which."""

    def __init__(self, service: str, detail: str) -> None:
        self.service = service
        self.detail = detail
        super().__init__(f"{service} is unavailable: {detail}")


class RemediationRefused(MeshError):
    """A remediation plan cannot be applied (token, precondition, mode)."""
