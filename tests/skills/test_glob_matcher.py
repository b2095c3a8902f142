"""Skill globs are matched without backtracking and within a budget (tools/skills/paths.py)."""

from __future__ import annotations

import random
import re
import time

import pytest

from tools.skills.paths import GlobMatcher, GlobTooComplex, glob_matcher


def _backtracking_regex(pattern: str) -> re.Pattern[str]:
    """The translation the matcher replaced (the reference for what a glob means)."""
    parts, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] in "*?":
            parts.append("[^/]*" if pattern[i] == "*" else "[^/]")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    body = "".join(parts)
    if body.endswith("/.*"):
        body = body[:-3] + "(?:/.*)?"
    return re.compile(f"^{body}$")


def test_the_matcher_means_what_the_regex_meant() -> None:
    rng = random.Random(32)
    pieces = ["a", "b", "/", "*", "**", "**/", "?", "."]
    for _ in range(3000):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        path = "".join(rng.choice("ab/.") for _ in range(rng.randint(0, 8)))
        assert glob_matcher(pattern).match(path) == bool(_backtracking_regex(pattern).match(path)), (pattern, path)


def test_nested_double_stars_over_a_deep_path_cost_microseconds() -> None:
    pattern = "ms-shop/" + "**/" * 25 + "nothing.ts"
    path = "ms-shop/src/" + "/".join(f"d{i}" for i in range(40)) + "/leaf.ts"
    started = time.perf_counter()
    assert not glob_matcher(pattern).match(path)
    assert glob_matcher(pattern.replace("nothing", "leaf")).match(path)
    assert time.perf_counter() - started < 1.0


def test_past_its_budget_a_glob_says_so() -> None:
    with pytest.raises(GlobTooComplex, match="steps"):
        GlobMatcher("*a" * 400, budget=10_000).match("a" * 200 + "b")
    with pytest.raises(GlobTooComplex, match="longer than"):
        glob_matcher("a" * 1001)
