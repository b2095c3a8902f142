"""One line of ``mesh-mcp doctor``: the model every check returns.

Here, not in :mod:`server.doctor`, so the capabilities' checks (``tools/*/doctor.py``,
:mod:`server.topology_doctor`, the audit log's) can build them without importing the
command that runs them (:mod:`server.doctor` re-exports it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Check(BaseModel):
    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str
    fix: str | None = None
