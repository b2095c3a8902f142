"""lint's work grows with the sources, not with sources x configuration keys (counted, not timed).

``config-key-unread`` once ran one regular expression per configuration key over every production
source joined into one string: on a real workspace 96% of lint's time, and quadratic when the
workspace grew (its keys and its sources both grow). These tests count the characters its
expressions scan, through a counting stand-in for the module's ``re`` and compiled patterns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import tools.lint.config_keys as config_keys
from tools.lint.engine import lint
from tools.mesh_index.service import IndexService


class _Counting:
    """Wraps a compiled pattern or the ``re`` module; adds up the length of every string scanned."""

    def __init__(self, inner: object, tally: list[int]) -> None:
        self._inner, self._tally = inner, tally

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._inner, name)
        if name not in {"search", "findall", "finditer", "match", "fullmatch", "sub"}:
            return attr

        def counted(*args: object, **kwargs: object) -> object:
            # re.search(pattern, text) and pattern.search(text): the text is the last str argument
            texts = [a for a in args if isinstance(a, str)]
            self._tally[0] += len(texts[-1]) if texts else 0
            return attr(*args, **kwargs)

        return counted


def _scanned(monkeypatch: pytest.MonkeyPatch, service: IndexService) -> int:
    tally = [0]
    monkeypatch.setattr(config_keys, "re", _Counting(re, tally))
    for name, value in vars(config_keys).copy().items():
        if isinstance(value, re.Pattern) and name != "_WORD":  # _WORD: one pass per source, on purpose
            monkeypatch.setattr(config_keys, name, _Counting(value, tally))
    report = lint(service, codes=["config-key-unread"], min_severity="info")
    assert [f for f in report.findings if f.code == "config-key-unread"], "the check must have run and found keys"
    return tally[0]


def _workspace(root: Path, keys: int) -> Path:
    src = root / "svc" / "src"
    src.mkdir(parents=True)
    (root / "svc" / "package.json").write_text(json.dumps({"name": "svc", "version": "1.0.0"}))
    # 40 production sources, one of which reads postProcessor.key0 key by key
    for i in range(40):
        (src / f"f{i}.ts").write_text(f"export const v{i} = {i};\n" + "// filler line of source text\n" * 50)
    (src / "reader.ts").write_text("import config from './config';\nexport const k = config.postProcessor.key0;\n")
    cfg = root / "svc" / "config"
    cfg.mkdir()
    (cfg / "default.json").write_text(json.dumps({"postProcessor": {f"key{i}": i for i in range(keys)}}, indent=2))
    return root


def test_config_key_check_scans_the_sources_once_whatever_the_number_of_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_index: Callable[[Path], IndexService]
) -> None:
    few = _scanned(monkeypatch, make_index(_workspace(tmp_path / "few", keys=5)))
    many = _scanned(monkeypatch, make_index(_workspace(tmp_path / "many", keys=400)))
    assert few > 0
    # the sources are the same size in both: the scanned text must not grow with the 80x more keys
    assert many <= few * 1.05, (few, many)
