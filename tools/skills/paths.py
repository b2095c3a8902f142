"""Globs and paths as runbooks write them, matched against the files and folders of the workspace.

``**`` spans folders, ``*`` and ``?`` stay inside one; placeholders such as ``<domain>`` or
``{domain}`` count as ``*`` (``ms-<d>/src/migrations`` means any ``ms-*`` repository).
Globs come from the workspace (a skill's ``paths``): they are matched without backtracking and
within a step budget (:class:`GlobMatcher`), never compiled to a regex.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PLACEHOLDER = re.compile(r"<[^<>/]*>|\{[^{}/]*\}")


def normalise(pattern: str) -> str:
    """``pattern`` with placeholders as ``*``, no leading ``./``, no trailing ``/``."""
    out = PLACEHOLDER.sub("*", pattern.strip())
    while out.startswith("./"):
        out = out[2:]
    return out.rstrip("/")


MAX_GLOB_CHARS = 1_000
GLOB_STEP_BUDGET = 2_000_000
"""State steps one glob may spend matching the paths of a workspace (about a second): a glob written to
make a backtracking matcher explode (25 nested ``**/``) costs at most this, then says it stopped."""

_LIT, _ONE, _STAR, _ANY, _DIRS = range(5)


class GlobTooComplex(ValueError):
    """A glob over :data:`MAX_GLOB_CHARS`, or its matching over :data:`GLOB_STEP_BUDGET` steps."""


class GlobMatcher:
    """A normalised glob matched by simulating its automaton (no backtracking): the work is at most the
    glob's length times the path's, and all matches of one matcher share :data:`GLOB_STEP_BUDGET`."""

    def __init__(self, pattern: str, budget: int = GLOB_STEP_BUDGET):
        if len(pattern) > MAX_GLOB_CHARS:
            raise GlobTooComplex(f"glob longer than {MAX_GLOB_CHARS} characters")
        self.pattern = pattern
        self.budget = budget
        self._alts = [self._tokens(pattern)]
        if pattern.endswith("/**"):  # ``a/**`` also matches ``a`` itself
            self._alts.append(self._tokens(pattern[:-3]))

    @staticmethod
    def _tokens(pattern: str) -> list[tuple[int, str]]:
        toks: list[tuple[int, str]] = []
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                if not toks or toks[-1][0] != _DIRS:  # ``**/**/`` is ``**/``
                    toks.append((_DIRS, ""))
                i += 3
            elif pattern.startswith("**", i):
                toks.append((_ANY, ""))
                i += 2
            elif pattern[i] == "*":
                if not toks or toks[-1][0] != _STAR:
                    toks.append((_STAR, ""))
                i += 1
            elif pattern[i] == "?":
                toks.append((_ONE, ""))
                i += 1
            else:
                toks.append((_LIT, pattern[i]))
                i += 1
        return toks

    @staticmethod
    def _closure(toks: list[tuple[int, str]], states: set[int]) -> set[int]:
        """States are ``2 * token``, or ``2 * token + 1`` inside a ``**/`` (which is left only by a "/")."""
        out = set(states)
        stack = list(states)
        while stack:
            s = stack.pop()
            i, inside = divmod(s, 2)
            if inside or i >= len(toks) or toks[i][0] not in (_STAR, _ANY, _DIRS):
                continue
            for t in ((2 * i + 1, 2 * i + 2) if toks[i][0] == _DIRS else (2 * i + 2,)):
                if t not in out:
                    out.add(t)
                    stack.append(t)
        return out

    def match(self, path: str) -> bool:
        """Whether ``path`` matches; :class:`GlobTooComplex` once the budget is spent."""
        return any(self._run(toks, path) for toks in self._alts)

    def _run(self, toks: list[tuple[int, str]], path: str) -> bool:
        end = 2 * len(toks)
        states = self._closure(toks, {0})
        for ch in path:
            self.budget -= len(states)
            if self.budget < 0:
                raise GlobTooComplex(f"matching took over {GLOB_STEP_BUDGET} steps")
            nxt: set[int] = set()
            for s in states:
                if s == end:
                    continue
                i, inside = divmod(s, 2)
                kind, lit = toks[i]
                if inside:  # in a ``**/``: any character, and a "/" may end it
                    nxt.add(s)
                    if ch == "/":
                        nxt.add(2 * i + 2)
                elif kind == _LIT:
                    if ch == lit:
                        nxt.add(2 * i + 2)
                elif kind == _ONE:
                    if ch != "/":
                        nxt.add(2 * i + 2)
                elif kind == _STAR:
                    if ch != "/":
                        nxt.add(s)
                elif kind == _ANY:
                    nxt.add(s)
            if not nxt:
                return False
            states = self._closure(toks, nxt)
        return end in states


def glob_matcher(pattern: str) -> GlobMatcher:
    """The matcher of a normalised glob (``**`` spans folders, ``*`` and ``?`` stay in one)."""
    return GlobMatcher(pattern)


def has_wildcard(segment: str) -> bool:
    return any(c in segment for c in "*?[")


def matches_any(pattern: str, paths: Iterable[str]) -> str | None:
    """The first of ``paths`` matched by ``pattern`` (normalised), else None; :class:`GlobTooComplex` when
    the glob is too long or its matching spends its budget."""
    norm = normalise(pattern)
    if not norm:
        return None
    if not has_wildcard(norm):
        return norm if norm in paths else None  # type: ignore[operator]
    matcher = glob_matcher(norm)
    return next((p for p in paths if matcher.match(p)), None)


def literal_head(pattern: str) -> str | None:
    """The first folder of ``pattern`` when it is literal (a repository name), else None."""
    head = normalise(pattern).split("/", 1)[0]
    return head if head and not has_wildcard(head) else None


def last_literal(pattern: str) -> str | None:
    """The last literal segment (the folder or file a moved path would still be called)."""
    for segment in reversed(normalise(pattern).split("/")):
        if segment and not has_wildcard(segment):
            return segment
    return None
