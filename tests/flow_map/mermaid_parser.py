"""The real Mermaid parser (npm ``mermaid`` under Node, ``jsdom`` for window/document) for the tests.

:func:`parse` sends every text to ``tests/js/mermaid/parse.mjs`` in one Node process and
returns, per text, whether it parsed and the flowchart's vertices and edges as Mermaid
itself read them. Without Node or the npm packages the test is skipped with the reason,
except under ``CI=true`` where it fails (CI must really parse).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from typing import Any

import pytest

from tests.helpers import REPO_ROOT

PARSER_DIR = REPO_ROOT / "tests" / "js" / "mermaid"


def _unavailable(reason: str) -> None:
    message = f"the Mermaid parser cannot run: {reason} (cd tests/js/mermaid && npm ci)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def parse(texts: list[str]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        _unavailable("node is not installed")
    if not (PARSER_DIR / "node_modules" / "mermaid").is_dir() or not (PARSER_DIR / "node_modules" / "jsdom").is_dir():
        _unavailable("tests/js/mermaid/node_modules has no mermaid or jsdom")
    proc = subprocess.run([node, "parse.mjs"], input=json.dumps(texts), cwd=PARSER_DIR, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"parse.mjs failed: {proc.stderr[-2000:]}"
    results = json.loads(proc.stdout)
    assert len(results) == len(texts)
    return results


def parse_ok(texts: list[str]) -> list[dict[str, Any]]:
    """Parse every text and fail the test on the first that Mermaid refuses (showing it)."""
    results = parse(texts)
    for text, result in zip(texts, results, strict=True):
        assert result["ok"], f"Mermaid refused this diagram: {result['error']}\n{text}"
        assert str(result["type"]).startswith("flowchart"), result["type"]
    return results


def decode(text: str) -> str:
    """A parsed label as shown: entity codes decoded, ``<br>`` as a line break."""
    text = re.sub(r"#(\d+);", r"&#\1;", text)
    text = re.sub(r"#([A-Za-z]+);", r"&\1;", text)
    return html.unescape(text.replace("<br>", "\n").replace("<br/>", "\n"))


def vertices(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["id"]: {**v, "label": decode(v["text"])} for v in result["vertices"]}


def edges(result: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["start"], e["end"]): {**e, "label": decode(e["text"])} for e in result["edges"]}
