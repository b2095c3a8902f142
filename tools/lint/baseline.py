"""Baselines: today's findings accepted, so CI fails only on new ones.

A baseline file is JSON ``{"version": 1, "tool": "mesh-mcp lint", "findings": [{code, file,
subject, fingerprint, message}]}``; a finding is accepted when its fingerprint (code, file and
subject: never the line) is listed. ``message`` is only there for the reviewer.
"""

from __future__ import annotations

import json
from pathlib import Path

from server.errors import MeshError
from tools.lint.model import Finding

VERSION = 1


class Baseline:
    def __init__(self, fingerprints: set[str]) -> None:
        self.fingerprints = fingerprints

    def accepts(self, finding: Finding) -> bool:
        return finding.fingerprint in self.fingerprints

    @classmethod
    def load(cls, path: Path) -> Baseline:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise MeshError(f"baseline {path} does not exist: create it with --write-baseline {path}") from None
        except (OSError, ValueError) as exc:
            raise MeshError(f"baseline {path} cannot be read as JSON ({exc}); recreate it with --write-baseline") \
                from None
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("findings"), list):
            raise MeshError(f"baseline {path} is not a version {VERSION} mesh-mcp lint baseline; recreate it with "
                            "--write-baseline")
        prints = {str(f.get("fingerprint")) for f in data["findings"] if isinstance(f, dict) and f.get("fingerprint")}
        return cls(prints)


def write(path: Path, findings: list[Finding]) -> None:
    rows = [{"code": f.code, "file": f.file, "subject": f.subject, "fingerprint": f.fingerprint,
             "message": f.message} for f in findings]
    Path(path).write_text(json.dumps({"version": VERSION, "tool": "mesh-mcp lint", "findings": rows},
                                     indent=2, sort_keys=True) + "\n")
